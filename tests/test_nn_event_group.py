"""EventFixedProbGroup: several EventFixedProb layers over consecutive slices of one spike
vector, run as one brainevent call, against the same layers called one by one."""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brainevent")

import brainx  # noqa: E402
from brainx import nn  # noqa: E402

needs_numba = pytest.mark.skipif(not nn.event_backend.has_numba(), reason="numba is not installed")
SIZES = (7, 4, 5)                    # presynaptic slices of a 16-neuron spike vector


def layers(backend, weights=(0.5, -2.0, 1.25), posts=(6, 6, 3), conn_num=3):
    return [nn.EventFixedProb(n, m, conn_num, w, seed=k, backend=backend)
            for k, (n, m, w) in enumerate(zip(SIZES, posts, weights))]


def split(x):
    return np.split(x, np.cumsum(SIZES)[:-1], axis=-1)


def spikes(shape, seed=0):
    return jnp.asarray(np.random.RandomState(seed).rand(*shape) < 0.4)


def loss(outs):
    return sum(jnp.sum(jnp.sin(u.get_mantissa(o)) * (k + 1)) for k, o in enumerate(outs))


@pytest.mark.parametrize("backend", ["jax_raw", pytest.param("numba", marks=needs_numba)])
@pytest.mark.parametrize("shape", [(16,), (3, 16), (2, 3, 16)])
def test_outputs_equal_the_layers_called_one_by_one(backend, shape):
    group_layers = layers(backend)
    group = nn.EventFixedProbGroup(*group_layers)
    s = spikes(shape)
    outs = group(s)
    assert len(outs) == len(group_layers)
    for out, layer, part in zip(outs, group_layers, split(s)):
        np.testing.assert_allclose(out, layer(part), rtol=1e-6, atol=1e-6)
    floats = group(s.astype(jnp.float32))                 # 0/1 floats: the same events
    for out, ref in zip(floats, outs):
        np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_units_of_each_layer_are_kept():
    exc = nn.EventFixedProb(7, 6, 3, 0.5 * u.nS, seed=0, backend="jax_raw")
    inh = nn.EventFixedProb(4, 6, 3, 2.0 * u.mS, seed=1, backend="jax_raw")
    s = spikes((11,))
    g_exc, g_inh = nn.EventFixedProbGroup(exc, inh)(s)
    assert u.get_unit(g_exc) == u.nS and u.get_unit(g_inh) == u.mS
    np.testing.assert_allclose(g_inh.to_decimal(u.mS), inh(s[7:]).to_decimal(u.mS), rtol=1e-6)


@pytest.mark.parametrize("backend", ["jax_raw", pytest.param("numba", marks=needs_numba)])
def test_gradients_equal_those_of_the_separate_layers(backend):
    group_layers = layers(backend)
    group = nn.EventFixedProbGroup(*group_layers)
    weights = [layer.weight for layer in group_layers]
    x = spikes((16,), seed=3).astype(jnp.float32)           # float spikes: a surrogate's input

    def separate(x):
        return loss([layer(part) for layer, part in zip(group_layers, jnp.split(
            x, np.cumsum(SIZES)[:-1]))])

    gw, gx = brainx.transform.grad(lambda x: loss(group(x)), grad_states=weights, argnums=0)(x)
    gw_ref, gx_ref = brainx.transform.grad(separate, grad_states=weights, argnums=0)(x)
    np.testing.assert_allclose(gx, gx_ref, rtol=1e-5, atol=1e-6)
    for g, ref in zip(gw, gw_ref):
        np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-6)
        assert float(jnp.abs(ref)) > 0


def test_one_kernel_call_where_the_layers_make_one_each():
    group_layers = layers("jax_raw")
    group = nn.EventFixedProbGroup(*group_layers)
    s = spikes((16,))

    def calls(fn):
        text = str(jax.make_jaxpr(fn)(s))
        return text.count("brainevent.")           # one jitted brainevent kernel per call

    separate = calls(lambda s: [layer(p) for layer, p in zip(group_layers, jnp.split(
        s, np.cumsum(SIZES)[:-1]))])
    assert separate == len(group_layers) * calls(lambda s: group(s)) > 0


def test_the_group_follows_a_change_of_a_layers_weight():
    group_layers = layers("jax_raw")
    group = nn.EventFixedProbGroup(*group_layers)
    step = brainx.transform.jit(lambda s: group(s))
    s = spikes((16,))
    before = step(s)[1]
    group_layers[1].weight.value = group_layers[1].weight.value * 3.0
    np.testing.assert_allclose(step(s)[1], 3.0 * before, rtol=1e-6)


def test_what_cannot_be_grouped_is_refused_with_the_reason():
    exc, inh = nn.EventFixedProb(7, 6, 3, 0.5, seed=0), nn.EventFixedProb(4, 6, 3, 1.0, seed=1)
    per_synapse = nn.EventFixedProb(4, 6, 3, nn.init.Normal(), seed=2)
    with pytest.raises(ValueError, match="layer 1 .*one weight per synapse"):
        nn.EventFixedProbGroup(exc, per_synapse)
    with pytest.raises(ValueError, match="layer 1 reads 4 neurons"):
        nn.EventFixedProbGroup(exc, inh, pre=[(0, 7), (7, 10)])
    with pytest.raises(ValueError, match="2 parts for 1 layers"):
        nn.EventFixedProbGroup(exc, pre=[(0, 7), (0, 7)])
    for bad in (slice(0, 14, 2), (0, 7, 1), 7):               # stepped, three numbers, no pair
        with pytest.raises(ValueError, match="layer 0 reads 7 neurons"):
            nn.EventFixedProbGroup(exc, pre=[bad])
    with pytest.raises(ValueError, match="compressed"):
        nn.EventFixedProbGroup(exc, nn.EventFixedProb(4, 6, 3, 1.0, afferent_ratio=0.5, seed=1))
    with pytest.raises(TypeError, match="not an EventFixedProb"):
        nn.EventFixedProbGroup(exc, nn.FixedNumConn(4, 6, 3, 1.0, seed=1))
    with pytest.raises(ValueError, match="at least one"):
        nn.EventFixedProbGroup()
    group = nn.EventFixedProbGroup(exc, inh)
    with pytest.raises(ValueError, match="11 entries"):
        group(spikes((10,)))


@pytest.mark.parametrize("backend", ["jax_raw", pytest.param("numba", marks=needs_numba)])
def test_four_projections_of_two_populations_share_their_rows(backend):
    """E -> E, E -> I, I -> E, I -> I (different conn_num: short rows are padded), and a
    part of the vector no layer reads: each output is its layer's, with one kernel call."""
    n_e, n_i = 8, 4
    specs = [((0, n_e), 6, 3, 0.5), ((0, n_e), 3, 2, 0.25),
             ((n_e, n_e + n_i), 6, 4, -1.0), ((n_e, n_e + n_i), 3, 1, -2.0),
             ((n_e + n_i + 2, n_e + n_i + 5), 6, 2, 3.0)]      # neurons 12, 13 read by none
    group_layers = [nn.EventFixedProb(b - a, post, c, w, seed=k, backend=backend)
                    for k, ((a, b), post, c, w) in enumerate(specs)]
    group = nn.EventFixedProbGroup(*group_layers, pre=[p for p, *_ in specs])
    s = spikes((3, 17), seed=5)
    outs = group(s)
    for out, layer, ((a, b), *_) in zip(outs, group_layers, specs):
        np.testing.assert_allclose(out, layer(s[:, a:b]), rtol=1e-6, atol=1e-6)
    x = s[1].astype(jnp.float32)
    weights = [layer.weight for layer in group_layers]
    gw, gx = brainx.transform.grad(lambda x: loss(group(x)), grad_states=weights, argnums=0)(x)
    gw_ref, gx_ref = brainx.transform.grad(
        lambda x: loss([layer(x[a:b]) for layer, ((a, b), *_) in zip(group_layers, specs)]),
        grad_states=weights, argnums=0)(x)
    np.testing.assert_allclose(gx, gx_ref, rtol=1e-5, atol=1e-6)
    for g, ref in zip(gw, gw_ref):
        np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-6)


def test_a_single_weight_stored_with_axes_gives_the_layers_shape():
    """One presynaptic neuron and one synapse: an initialiser stores the weight as (1, 1)."""
    one = nn.EventFixedProb(1, 4, 1, nn.init.Constant(2.0), seed=0, backend="jax_raw")
    other = nn.EventFixedProb(2, 4, 1, 0.5, seed=1, backend="jax_raw")
    assert one.weight.value.shape == (1, 1)
    s = jnp.array([True, True, False])
    out_one, out_other = nn.EventFixedProbGroup(one, other)(s)
    assert out_one.shape == one(s[:1]).shape == (4,)
    np.testing.assert_allclose(out_one, one(s[:1]))
