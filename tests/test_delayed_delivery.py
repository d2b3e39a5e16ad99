"""Per-synapse delays: the ring buffer against a step-by-step NumPy reference, native against
plain JAX, BPTT against dense shifted products, vmap over trials, units, bad input."""

from __future__ import annotations

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.nn import DelayedCSR, DelayedEventConn, delay_steps
from brainx.nn.connectivity.native import build
from brainx.nn.connectivity.native.delivery import DelayedRows, deliver

NATIVE = build.load() is not None
PATHS = [pytest.param(True, id="native", marks=pytest.mark.skipif(not NATIVE, reason="no kernel")),
         pytest.param(False, id="fallback")]


def random_conn(rng, n_pre=6, n_post=5, nnz=60, max_delay=7, shared=False, every_delay=True):
    pre = rng.integers(0, n_pre, nnz)
    post = rng.integers(0, n_post, nnz)
    delays = rng.integers(1, max_delay + 1, nnz)
    if every_delay:                         # every delay from 1 to max_delay occurs
        delays[:max_delay] = np.arange(1, max_delay + 1)
    w = np.float32(0.75) if shared else rng.normal(size=nnz).astype(np.float32)
    return DelayedCSR.from_coo(pre, post, delays, w, n_pre, n_post, unit=u.pA)


def reference(conn: DelayedCSR, spikes: np.ndarray) -> np.ndarray:
    """What arrives in each step: a spike of step k over delay d lands in step k + d."""
    steps = spikes.shape[0]
    out = np.zeros((steps + conn.max_delay + 1,) + spikes.shape[1:-1] + (conn.n_post,))
    pre = np.repeat(np.arange(conn.n_pre), np.diff(conn.indptr))
    w = np.broadcast_to(conn.weights, (conn.nnz,)).astype(np.float64)
    for k in range(steps):
        for s in range(conn.nnz):
            fired = spikes[k, ..., pre[s]].astype(np.float64)
            out[k + conn.delays[s], ..., conn.targets[s]] += fired * w[s]
    return out[:steps]


def run(proj: DelayedEventConn, spikes, jit=True):
    """The arrivals of every step, the network's loop under brainx.transform.for_loop."""
    def step(x):
        cur = proj.current()
        proj.update(x)
        return cur.to_decimal(u.pA)
    loop = lambda xs: brainx.transform.for_loop(step, xs)       # noqa: E731
    return np.asarray((brainx.transform.jit(loop) if jit else loop)(jnp.asarray(spikes)))


@pytest.mark.parametrize("native", PATHS)
@pytest.mark.parametrize("shared", [False, True])
def test_ring_buffer_matches_step_by_step_reference(native, shared):
    rng = np.random.default_rng(1)
    conn = random_conn(rng, shared=shared)
    steps = 4 * (conn.max_delay + 1) + 3                         # wraps around the buffer several times
    spikes = rng.random((steps, conn.n_pre)) < 0.3
    spikes[(conn.max_delay + 1) - 1] = True                      # spikes on the last slot before a wrap
    spikes[-1] = True
    proj = DelayedEventConn(conn, native=native)
    proj.init_state()
    np.testing.assert_allclose(run(proj, spikes), reference(conn, spikes), atol=1e-5)


@pytest.mark.skipif(not NATIVE, reason="no native kernel")
@pytest.mark.parametrize("spike_dtype", [jnp.bool_, jnp.float32])
def test_native_equals_fallback_float_and_bool_spikes(spike_dtype):
    rng = np.random.default_rng(2)
    conn = random_conn(rng, n_pre=9, n_post=4, nnz=80)
    rows = DelayedRows.from_csr(conn.indptr, conn.targets, conn.delays, conn.n_post)
    buf = jnp.asarray(rng.normal(size=(rows.slots, conn.n_post)), jnp.float32)
    x = jnp.asarray(rng.random(conn.n_pre) < 0.5).astype(spike_dtype)
    for event in (True, False):
        a = deliver(buf, x, conn.weights, rows, 13, event=event, native=True)
        b = deliver(buf, x, conn.weights, rows, 13, event=event, native=False)
        for p, q in zip(a, b):
            np.testing.assert_allclose(np.asarray(p), np.asarray(q), atol=1e-5)


def test_loop_updates_the_buffer_in_place():
    """The compiled for_loop holds no copy of the (slots, n_post) buffer inside its body."""
    if not NATIVE:
        pytest.skip("no native kernel")
    rng = np.random.default_rng(3)
    conn = random_conn(rng, n_pre=7, n_post=11, nnz=50, max_delay=5)
    proj = DelayedEventConn(conn, native=True)
    proj.init_state()

    def loop(xs):
        return brainx.transform.for_loop(lambda x: proj.update(x).to_decimal(u.pA), xs)
    hlo = jax.jit(lambda xs: brainx.transform.jit(loop)(xs)).lower(
        jnp.zeros((20, 7), bool)).compile().as_text()
    body = [line for line in hlo.splitlines() if "custom-call" in line]
    assert any("brainx_delayed_csr" in line for line in body)
    shape = f"f32[{conn.max_delay + 1},11]"
    copies = [line for line in hlo.splitlines() if f"{shape}" in line and " copy(" in line]
    assert len(copies) <= 1, copies      # at most the one copy of the initial state, outside


def dense_reference_loss(weights, conn, spikes, readout):
    """The same delayed network written as shifted dense products: arrivals[k] =
    sum_d spikes[k - d] @ W_d, with W_d the weights of delay d (jax.grad of this is the
    reference)."""
    pre = np.repeat(np.arange(conn.n_pre), np.diff(conn.indptr))
    steps = spikes.shape[0]
    total = 0.0
    dense = [jnp.zeros((conn.n_pre, conn.n_post)).at[pre[conn.delays == d],
                                                       conn.targets[conn.delays == d]]
             .add(weights[conn.delays == d]) for d in range(conn.max_delay + 1)]
    v = jnp.zeros(spikes.shape[1:-1] + (conn.n_post,))
    for k in range(steps):
        arriving = sum(spikes[k - d] @ dense[d] for d in range(1, conn.max_delay + 1) if k >= d)
        v = 0.9 * v + (arriving if not isinstance(arriving, int) else 0.0)
        total = total + jnp.sum(jnp.tanh(v) * readout)
    return total


@pytest.mark.parametrize("native", PATHS)
def test_bptt_through_per_synapse_delays_equals_dense_reference(native):
    rng = np.random.default_rng(4)
    conn = random_conn(rng, n_pre=5, n_post=4, nnz=30, max_delay=4)
    steps = 14
    spikes = jnp.asarray(rng.random((steps, conn.n_pre)), jnp.float32)   # float spikes: x @ W
    spikes = jnp.where(spikes > 0.5, spikes, 0.0)
    readout = jnp.asarray(rng.normal(size=conn.n_post), jnp.float32)
    proj = DelayedEventConn(conn, event=False, native=native)
    proj.init_state()
    v = brainx.HiddenState(jnp.zeros(conn.n_post))

    def loss():
        def step(x):
            v.value = 0.9 * v.value + proj.current().to_decimal(u.pA)
            proj.update(x)
            return jnp.sum(jnp.tanh(v.value) * readout)
        return brainx.transform.for_loop(step, spikes).sum()

    grads = brainx.transform.grad(loss, grad_states=proj.weight)()
    ref = jax.grad(dense_reference_loss)(jnp.asarray(conn.weights), conn, spikes, readout)
    np.testing.assert_allclose(np.asarray(u.get_mantissa(grads)), np.asarray(ref), rtol=1e-4,
                               atol=1e-5)
    # grad writes the states' new values back: concrete, the loop's end
    assert int(proj.step.value) == steps and not isinstance(proj.buffer.value.mantissa,
                                                             jax.core.Tracer)


@pytest.mark.parametrize("native", PATHS)
def test_gradient_with_respect_to_spikes_event_mode(native):
    rng = np.random.default_rng(5)
    conn = random_conn(rng, n_pre=4, n_post=3, nnz=20, max_delay=3)
    rows = DelayedRows.from_csr(conn.indptr, conn.targets, conn.delays, conn.n_post)
    x = jnp.asarray([1.0, 0.0, 1.0, 1.0])
    buf = jnp.zeros((rows.slots, conn.n_post))
    g = jax.grad(lambda x: deliver(buf, x, conn.weights, rows, 0, native=native)[0].sum())(x)
    per_row = np.add.reduceat(conn.weights, conn.indptr[:-1]) * (np.diff(conn.indptr) > 0)
    np.testing.assert_allclose(np.asarray(g), per_row, rtol=1e-5)


@pytest.mark.parametrize("native", PATHS)
def test_batched_trials_and_vmap(native):
    rng = np.random.default_rng(6)
    conn = random_conn(rng)
    steps, trials = 2 * (conn.max_delay + 1), 3
    spikes = rng.random((steps, trials, conn.n_pre)) < 0.4
    want = reference(conn, spikes)
    proj = DelayedEventConn(conn, native=native)
    proj.init_state(batch_size=trials)                 # leading batch axis in the states
    np.testing.assert_allclose(run(proj, spikes), want, atol=1e-5)
    # jax.vmap of a pure function over trials: the kernel batches by expand_dims
    rows = proj.rows

    def trial(xs):
        def body(c, x):
            buf, k, cur = c
            buf, nxt = deliver(buf, x, conn.weights, rows, k, native=native)
            return (buf, k + 1, nxt), cur
        zero = jnp.zeros((rows.slots, conn.n_post))
        return jax.lax.scan(body, (zero, jnp.int32(0), zero[0]), xs)[1]
    got = jax.jit(jax.vmap(trial, in_axes=1, out_axes=1))(jnp.asarray(spikes))
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


def test_units_of_current_and_float_product():
    conn = DelayedCSR([0, 1], [0], [1], [2.0], n_post=1, unit=u.nS)
    proj = DelayedEventConn(conn, event=False, input_unit=u.mV, native=False)
    proj.init_state()
    proj.update(jnp.array([3.0]) * u.mV)
    assert u.get_unit(proj.current()) == u.nS * u.mV
    assert float(proj.current().to_decimal(u.nS * u.mV)[0]) == 6.0
    with pytest.raises(u.UnitMismatchError, match="input_unit"):
        proj.update(jnp.array([3.0]) * u.ms)


def test_delay_steps_rounds_like_nest():
    got = delay_steps(np.array([0.05, 0.149, 0.15, 0.25, 1.0]) * u.ms, 0.1 * u.ms)
    assert got.tolist() == [1, 1, 2, 3, 10] and got.dtype == np.uint8
    assert delay_steps([300.0], 1.0).dtype == np.uint16


def test_fixed_layout_and_coo_agree():
    rng = np.random.default_rng(7)
    targets = rng.integers(0, 5, (4, 3))
    delays = rng.integers(1, 4, (4, 3))
    w = rng.normal(size=(4, 3))
    a = DelayedCSR.from_fixed(targets, delays, w, n_post=5)
    pre = np.repeat(np.arange(4), 3)
    perm = rng.permutation(12)
    b = DelayedCSR.from_coo(pre[perm], targets.ravel()[perm], delays.ravel()[perm],
                            w.ravel()[perm], 4, 5)
    np.testing.assert_allclose(a.dense(), b.dense(), atol=1e-6)


def test_bad_input_errors_name_the_problem():
    with pytest.raises(ValueError, match="delay of 0 steps"):
        DelayedCSR([0, 1], [0], [0], 1.0, n_post=1)
    with pytest.raises(ValueError, match="outside range"):
        DelayedCSR([0, 1], [3], [1], 1.0, n_post=2)
    with pytest.raises(TypeError, match="delay_steps"):
        DelayedCSR([0, 1], [0], [1.5], 1.0, n_post=1)
    with pytest.raises(ValueError, match="indptr"):
        DelayedCSR([0, 2], [0], [1], 1.0, n_post=1)
    proj = DelayedEventConn(DelayedCSR([0, 1], [0], [1], 1.0, n_post=1))
    with pytest.raises(AttributeError, match="init_state"):
        proj.current()
    proj.init_state()
    with pytest.raises(ValueError, match="presynaptic size"):
        proj.update(jnp.ones(3, bool))
    assert int(proj.step.value) == 0


@pytest.mark.skipif(not NATIVE, reason="no native kernel")
def test_kernel_refuses_out_of_bounds_targets_and_delays():
    """Layout arrays corrupted after the host checks: the kernel skips and reports them."""
    rows = DelayedRows.from_csr([0, 2], [0, 1], np.array([1, 2], np.uint8), n_post=2)
    for post, delay in (([0, 2], [1, 2]), ([0, 1], [0, 2]), ([0, 1], [1, 3])):
        bad = DelayedRows(1, 2, rows.indptr, jnp.asarray(post, jnp.int32),
                          jnp.asarray(delay, jnp.uint8), max_delay=2)
        with pytest.raises(Exception, match="not delivered"):
            jax.block_until_ready(deliver(jnp.zeros((3, 2)), jnp.array([True]), jnp.ones(2), bad,
                                          0, native=True))


def test_rows_own_their_arrays():
    targets = np.array([0, 1], np.int32)
    rows = DelayedRows.from_csr([0, 2], targets, np.array([1, 1], np.uint8), n_post=2)
    targets[:] = 5                              # the caller's buffer changes: the rows do not
    assert np.asarray(rows.post).tolist() == [0, 1]


@pytest.mark.skipif(not NATIVE, reason="no native kernel")
def test_a_large_population_split_between_threads_equals_the_fallback():
    """From 16384 targets the kernel splits the buffer by target between XLA's threads; every
    synapse is written once, wherever its target falls (the split points included), and bad
    synapses are counted once."""
    rng = np.random.default_rng(5)
    n_pre, n_post, nnz = 50, 40_000, 30_000
    pre = rng.integers(0, n_pre, nnz)
    post = rng.integers(0, n_post, nnz)
    post[:4] = [0, n_post // 2 - 1, n_post // 2, n_post - 1]        # at the split points
    conn = DelayedCSR.from_coo(pre, post, rng.integers(1, 9, nnz), rng.normal(size=nnz)
                               .astype(np.float32), n_pre, n_post, unit=u.pA)
    rows = DelayedRows.from_csr(conn.indptr, conn.targets, conn.delays, conn.n_post)
    buf = jnp.asarray(rng.normal(size=(rows.slots, n_post)), jnp.float32)
    step = jax.jit(lambda b, x, native: deliver(b, x, conn.weights, rows, 6, native=native),
                   static_argnums=2)
    x = jnp.asarray(rng.random(n_pre) < 0.6)
    for p, q in zip(step(buf, x, True), step(buf, x, False)):
        np.testing.assert_allclose(np.asarray(p), np.asarray(q), atol=1e-5)
    bad = DelayedRows(n_pre, n_post, rows.indptr, rows.post.at[:3].set(n_post + 7),
                      rows.delay.at[3:5].set(0), max_delay=rows.max_delay)
    with pytest.raises(Exception, match="5 synapse\\(s\\) have a target outside"):
        jax.block_until_ready(deliver(buf, jnp.ones(n_pre, bool), conn.weights, bad, 0,
                                      native=True))
