"""Event-driven connectivity (FixedNumConn, EventFixedProb) against the dense matmul.

The dense reference matrix is rebuilt here with ``numpy.add.at`` from the
layer's stored targets and weights (repeated pairs add), never from
brainevent, and every product and gradient is compared with plain JAX on it.
The file runs on the pure-JAX backend; the numba tests repeat the main cases
on numba (each numba kernel variant compiles for seconds, so they are few).
"""

import os
import subprocess
import sys
import textwrap

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brainevent")

import brainx  # noqa: E402
from brainx import nn  # noqa: E402
from brainx.nn.connectivity.event_conn import fixed_num_indices  # noqa: E402
from event_support import dense_of, spikes  # noqa: E402 - shared with the other event tests

needs_numba = pytest.mark.skipif(not nn.event_backend.has_numba(), reason="numba is not installed")


@pytest.fixture(scope="module", autouse=True)
def backend():
    """The pure-JAX kernels for the whole file (numba compiles each kernel variant, slowly);
    the numba tests at the end switch to numba for the main cases."""
    with nn.use_event_backend("jax_raw"):
        yield "jax_raw"


def synapse_grad(layer, dense_grad):
    """The gradient of each stored weight given the gradient of the dense matrix."""
    idx = np.asarray(layer.indices)
    rows = np.broadcast_to(np.flatnonzero(layer.row_selected)[:, None], idx.shape)
    g = dense_grad[rows, idx] if layer.efferent_target == "post" else dense_grad[idx, rows]
    return g.sum() if np.size(layer.weight.value) == 1 else g


# -- connectivity ------------------------------------------------------------------

def test_fixed_num_indices_draws_are_reproducible_and_distinct_per_row():
    a = fixed_num_indices(30, 12, 5, allow_multi_conn=False, seed=3)
    assert a.dtype == np.int32 and a.shape == (30, 5)
    assert a.min() >= 0 and a.max() < 12
    assert all(len(set(row)) == 5 for row in a.tolist())
    np.testing.assert_array_equal(a, fixed_num_indices(30, 12, 5, allow_multi_conn=False, seed=3))
    assert not np.array_equal(a, fixed_num_indices(30, 12, 5, allow_multi_conn=False, seed=4))
    # every target is reachable: the draw without replacement is uniform enough to hit all
    many = fixed_num_indices(200, 12, 5, allow_multi_conn=False, seed=0)
    assert set(many.ravel()) == set(range(12))


def test_unseeded_connectivity_follows_brainx_random_seed():
    brainx.random.seed(7)
    a = nn.EventFixedProb(20, 10, 4, 1.0).indices
    brainx.random.seed(7)
    b = nn.EventFixedProb(20, 10, 4, 1.0).indices
    np.testing.assert_array_equal(a, b)


def test_probability_gives_the_connection_count_and_too_many_distinct_is_an_error():
    assert nn.FixedNumConn(10, 50, 0.1, 1.0, seed=0).conn_num == 5
    assert nn.FixedNumConn(50, 10, 0.5, 1.0, efferent_target="pre", seed=0).conn_num == 25
    with pytest.raises(ValueError, match="distinct targets"):
        nn.FixedNumConn(4, 3, 5, 1.0, allow_multi_conn=False)
    with pytest.raises(ValueError, match="efferent_target"):
        nn.FixedNumConn(4, 3, 2, 1.0, efferent_target="both")
    with pytest.raises(ValueError, match="probability"):
        nn.FixedNumConn(4, 3, 1.5, 1.0)


# -- forward values ----------------------------------------------------------------

# the three stored formats: fixed-number rows (post, 1.0), CSR (post, < 1), CSC (pre)
LAYOUTS = [("post", 1.0), ("post", 0.6), ("pre", 1.0), ("pre", 0.6)]


@pytest.mark.parametrize("target,ratio", LAYOUTS)
def test_event_and_float_products_equal_the_dense_matmul(backend, target, ratio):
    # 8 synapses into 6 targets with replacement: repeated pairs must add up
    layer = nn.EventFixedProb(20, 6, 8, nn.init.Normal(), efferent_target=target,
                              afferent_ratio=ratio, seed=1, backend=backend)
    flt = nn.FixedNumConn(20, 6, 8, nn.init.Normal(), efferent_target=target,
                          afferent_ratio=ratio, seed=1, backend=backend)
    D = dense_of(layer)
    if target == "post" and ratio == 1.0:
        assert (np.asarray(layer.indices)[:, :, None] == np.asarray(layer.indices)[:, None, :]
                ).sum() > layer.indices.size   # there are repeated pairs
    s = spikes((20,))
    np.testing.assert_allclose(layer(s), np.asarray(s, float) @ D, rtol=1e-5, atol=1e-5)
    sb = spikes((3, 20), seed=1).astype(jnp.float32)      # 0/1 floats, batched
    np.testing.assert_allclose(layer(sb), np.asarray(sb, float) @ D, rtol=1e-5, atol=1e-5)
    x = np.random.RandomState(2).randn(4, 20).astype(np.float32)
    np.testing.assert_allclose(flt(jnp.asarray(x)), x @ dense_of(flt), rtol=1e-5, atol=1e-5)


def test_units_on_the_weights_give_a_quantity_output(backend):
    layer = nn.EventFixedProb(15, 7, 3, nn.init.Uniform(0.1, 1.0, unit=u.mS), seed=0,
                              backend=backend)
    s = spikes((15,))
    y = layer(s)
    assert isinstance(y, u.Quantity) and y.unit == u.mS
    np.testing.assert_allclose(y.to_decimal(u.mS), np.asarray(s, float) @ dense_of(layer),
                               rtol=1e-5)
    shared = nn.EventFixedProb(15, 7, 3, 0.5 * u.nS, seed=0, backend=backend)
    assert shared.weight.value.shape == ()
    np.testing.assert_allclose(shared(s).to_decimal(u.nS), np.asarray(s, float) @ dense_of(shared),
                               rtol=1e-6)


def test_no_connection_gives_zeros_of_the_weight_unit():
    layer = nn.EventFixedProb(5, 4, 0.1, 2.0 * u.mV)
    assert layer.conn_num == 0
    y = layer(jnp.ones((2, 5), bool))
    assert y.shape == (2, 4) and y.unit == u.mV and float(u.get_mantissa(y).sum()) == 0.0


def test_the_input_size_is_checked_with_a_clear_message():
    layer = nn.EventFixedProb(5, 4, 2, 1.0, seed=0)
    with pytest.raises(ValueError, match="last axis must have 5 entries"):
        layer(jnp.ones(6, bool))


# -- gradients -----------------------------------------------------------------------

def loss_through(y):
    return jnp.sum(jnp.sin(y) * jnp.arange(1.0, y.shape[-1] + 1))


@pytest.mark.parametrize("kind,target,ratio", [("event", "post", 1.0), ("float", "post", 1.0),
                                               ("event", "post", 0.6), ("float", "pre", 1.0)])
def test_gradients_match_the_dense_layer(backend, kind, target, ratio):
    cls = nn.EventFixedProb if kind == "event" else nn.FixedNumConn
    layer = cls(12, 9, 4, nn.init.Normal(), efferent_target=target, afferent_ratio=ratio, seed=2,
                backend=backend)
    x = (spikes((12,), 0.5).astype(jnp.float32) if kind == "event"
         else jnp.asarray(np.random.RandomState(3).randn(12), jnp.float32))
    D = jnp.asarray(dense_of(layer), jnp.float32)
    gw, gx = brainx.transform.grad(lambda x: loss_through(layer(x)), grad_states=layer.weight,
                                   argnums=0)(x)
    gD, gx_ref = jax.grad(lambda D, x: loss_through(x @ D), argnums=(0, 1))(D, x)
    np.testing.assert_allclose(gw, synapse_grad(layer, np.asarray(gD)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gx, gx_ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target,ratio", [("post", 1.0), ("pre", 0.5)])
def test_gradient_of_a_shared_weight_is_the_sum_over_synapses(backend, target, ratio):
    layer = nn.EventFixedProb(12, 9, 4, 0.3, efferent_target=target, afferent_ratio=ratio,
                              seed=4, backend=backend)
    assert layer.weight.value.shape == ()
    s = spikes((12,), 0.5)
    g = brainx.transform.grad(lambda: loss_through(layer(s)), grad_states=layer.weight)()
    gD = jax.grad(lambda D: loss_through(jnp.asarray(s, jnp.float32) @ D))(
        jnp.asarray(dense_of(layer), jnp.float32))
    np.testing.assert_allclose(g, synapse_grad(layer, np.asarray(gD)), rtol=1e-4)


@pytest.mark.parametrize("backend_name", ["jax_raw", pytest.param("numba", marks=needs_numba)])
@pytest.mark.parametrize("batch", [3, 4, 5])
def test_a_batch_as_large_as_the_postsynaptic_size_is_right(backend_name, batch):
    """brainevent 0.2.1 gets ``spikes @ FixedNumPerPre`` wrong when the batch has as many
    rows as the matrix has columns (4 here); the layer must not."""
    layer = nn.EventFixedProb(6, 4, 3, 1.25, seed=2, backend=backend_name)
    s = spikes((batch, 6), 0.5, seed=batch)
    D = dense_of(layer)
    np.testing.assert_allclose(layer(s), np.asarray(s, float) @ D, rtol=1e-6)
    np.testing.assert_allclose(layer(s.astype(jnp.float32)), np.asarray(s, float) @ D, rtol=1e-6)
    g = brainx.transform.grad(lambda: loss_through(layer(s.astype(jnp.float32))),
                              grad_states=layer.weight)()
    gD = jax.grad(lambda D: loss_through(jnp.asarray(s, jnp.float32) @ D))(
        jnp.asarray(D, jnp.float32))
    np.testing.assert_allclose(g, synapse_grad(layer, np.asarray(gD)), rtol=1e-4)


# -- inside brainx transforms -----------------------------------------------------------

def test_jit_for_loop_and_vmap_of_batched_spikes(backend):
    layer = nn.EventFixedProb(30, 10, 5, nn.init.Normal(), seed=5, backend=backend)
    D = dense_of(layer)
    train = spikes((8, 30), 0.2, seed=6)          # 8 time steps
    total = brainx.ShortTermState(jnp.zeros(10))

    @brainx.transform.jit
    def run():
        def step(s):
            total.value = 0.9 * total.value + layer(s)
            return total.value
        return brainx.transform.for_loop(step, train)

    got = run()
    want, acc = [], np.zeros(10)
    for s in np.asarray(train, float):
        acc = 0.9 * acc + s @ D
        want.append(acc)
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(total.value, want[-1], rtol=1e-4, atol=1e-5)

    batched = brainx.transform.vmap(layer)(train)
    np.testing.assert_allclose(batched, np.asarray(train, float) @ D, rtol=1e-5, atol=1e-5)

    # a training step: jit(grad) through for_loop moves the weights the dense way
    def loss():
        return jnp.sum(brainx.transform.for_loop(lambda s: loss_through(layer(s)), train))
    g = brainx.transform.jit(brainx.transform.grad(loss, grad_states=layer.weight))()
    gD = jax.grad(lambda D: jnp.sum(jax.vmap(lambda s: loss_through(s @ D))(
        jnp.asarray(train, jnp.float32))))(jnp.asarray(D, jnp.float32))
    np.testing.assert_allclose(g, synapse_grad(layer, np.asarray(gD)), rtol=1e-4, atol=1e-5)


def test_bptt_through_a_recurrent_spiking_network_matches_the_dense_network():
    """LIF spikes (0/1 floats with a surrogate gradient) drive a recurrent EventFixedProb;
    the BPTT gradient w.r.t. the synapses equals that of the same network with nn.Linear."""
    n, T = 40, 15
    rec = nn.EventFixedProb(n, n, 6, nn.init.Normal(0.5, 0.2, unit=u.mA), seed=11)
    dense = nn.Linear(n, n, w_init=dense_of(rec).astype(np.float32) * u.mA, b_init=None)
    drive = jnp.asarray(np.random.RandomState(12).rand(T, n) * 3.0, jnp.float32) * u.mA

    def run(synapses, weight_state):
        lif = nn.init_all_states(nn.LIF(n, tau=5.0 * u.ms, V_th=1.0 * u.mV))

        def loss():
            def step(x):
                return lif(x + synapses(lif.get_spike()))
            spikes = brainx.transform.for_loop(step, drive)
            return jnp.mean((jnp.mean(spikes, axis=0) - 0.2) ** 2), spikes

        with brainx.environ.context(dt=1.0 * u.ms):
            g, _, spikes = brainx.transform.grad(loss, grad_states=weight_state,
                                                 has_aux=True, return_value=True)()
        return g, spikes

    g_event, s_event = run(rec, rec.weight)
    g_dense, s_dense = run(dense, dense.weight)
    np.testing.assert_array_equal(s_event, s_dense)
    assert 0 < float(jnp.mean(s_event)) < 0.9          # the network does spike
    g_event = u.get_mantissa(g_event)
    g_dense = np.asarray(u.get_mantissa(g_dense["weight"]))
    assert np.abs(g_dense).max() > 0
    np.testing.assert_allclose(g_event, synapse_grad(rec, g_dense), rtol=1e-4, atol=1e-6)


@needs_numba
def test_per_layer_backend_choice_coexists():
    kinds = ["jax_raw", "numba"]
    s = spikes((25,), 0.3)
    w = np.random.RandomState(0).randn(25, 4).astype(np.float32)
    outs = [nn.EventFixedProb(25, 8, 4, w, seed=9, backend=b)(s) for b in kinds]
    for y in outs[1:]:
        np.testing.assert_allclose(y, outs[0], rtol=1e-5, atol=1e-6)


# -- the numba backend -------------------------------------------------------------------

@needs_numba
def test_numba_backend_matches_the_dense_layer():
    with nn.use_event_backend("numba"):
        for target, ratio in [("post", 1.0)]:   # the fixed-number rows of EventFixedProb
            layer = nn.EventFixedProb(20, 6, 8, nn.init.Normal(), efferent_target=target,
                                      afferent_ratio=ratio, seed=1)
            D = dense_of(layer)
            train = spikes((5, 20), 0.3, seed=2)
            np.testing.assert_allclose(layer(train), np.asarray(train, float) @ D, rtol=1e-5,
                                       atol=1e-5)

            def loss():
                return jnp.sum(brainx.transform.for_loop(
                    lambda s: loss_through(layer(s.astype(jnp.float32))), train))
            g = brainx.transform.jit(brainx.transform.grad(loss, grad_states=layer.weight))()
            gD = jax.grad(lambda D: jnp.sum(jax.vmap(lambda s: loss_through(s @ D))(
                jnp.asarray(train, jnp.float32))))(jnp.asarray(D, jnp.float32))
            np.testing.assert_allclose(g, synapse_grad(layer, np.asarray(gD)), rtol=1e-4,
                                       atol=1e-5)
        x = train[0].astype(jnp.float32)
        gx = jax.grad(lambda x: loss_through(layer(x)))(x)
        gx_ref = jax.grad(lambda x: loss_through(x @ jnp.asarray(D, jnp.float32)))(x)
        np.testing.assert_allclose(gx, gx_ref, rtol=1e-4, atol=1e-5)


# -- optional dependency ---------------------------------------------------------------

def test_a_missing_brainevent_names_the_extra(monkeypatch):
    from brainx.nn.connectivity import event_backend
    monkeypatch.setattr(event_backend, "_MODULE", None)
    monkeypatch.setitem(sys.modules, "brainevent", None)
    with pytest.raises(ImportError, match=r"brainx-jax\[event\]") as info:
        nn.EventFixedProb(5, 4, 2, 1.0)
    assert "EventFixedNumConn" in str(info.value)


def test_without_numba_or_native_kernels_the_pure_jax_backend_is_chosen():
    code = textwrap.dedent("""
        import sys; sys.modules["numba"] = None
        import warnings; warnings.simplefilter("ignore")
        import jax, jax.numpy as jnp, brainx
        layer = brainx.nn.EventFixedProb(10, 4, 3, 1.0, seed=0)
        s = jnp.arange(10) % 2 == 0
        y = layer(s)
        g = jax.grad(lambda x: layer(x).sum())(s.astype(float))
        print(brainx.nn.get_event_backend(), float(y.sum()), float(g.sum()))
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={**os.environ, "JAX_PLATFORMS": "cpu", "BRAINX_NATIVE": "0"},
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    backend, total, grad = out.stdout.split()
    assert backend == "jax_raw" and float(total) == 15.0 and float(grad) == 30.0
