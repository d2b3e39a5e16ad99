"""A checkpointed step with an accumulating ring buffer (per-synapse delays, issue 44).

``DelayedEventConn`` declares its write accumulating
(:func:`brainx.transform.remat.ring_writes.accumulating`): a step clears the slot it
consumed and adds its spikes' weights at their delays. A checkpointed loop then keeps per
step the consumed slot and the spikes, not the ``(slots, n_post)`` buffer: gradients equal
the no-remat program's, and the memory kept per step is O(N), not O(max_delay x N).

On its own the projection's buffer costs a checkpointed step nothing even without the rule:
it feeds only the linear delivery (the neurons read ``arriving``, a state of its own), so
JAX's checkpoint does not keep it. The rule matters beside a buffer the step reads (a
``Delay``): the loop then keeps every other carry per step, and without the declaration
that would be the projection's whole buffer.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn, transform as bt
from brainx.nn.connectivity.native import build
from brainx.transform.remat.ring_buffers import find_ring_plan
from brainx.transform.remat.ring_writes import Accumulate

N, K, SLOTS, T = 48, 6, 16, 40


def _net(native):
    rng = np.random.RandomState(0)
    conn = nn.DelayedCSR.from_fixed(rng.randint(0, N, (N, K)), rng.randint(1, SLOTS, (N, K)),
                                    rng.rand(N * K).astype(np.float32) * 0.4, n_post=N)
    proj = nn.DelayedEventConn(conn, native=native)
    proj.init_state()
    w_in = brainx.ParamState(jnp.asarray(rng.randn(8, N).astype(np.float32)) * 0.8, name="w_in")
    v = brainx.HiddenState(jnp.zeros(N), name="v")
    spike = nn.surrogate.Arctan(alpha=2.0)
    delay = nn.Delay(jnp.zeros(N), name="spikes")      # a buffer the step reads: a Delay
    delay.max_length = SLOTS
    nn.init_all_states(delay)

    def step(x):
        late = delay.retrieve_at_step(SLOTS - 1)
        v.value = 0.9 * v.value + x @ w_in.value + proj.current() + 0.3 * jnp.tanh(late)
        s = spike(v.value - 1.0)
        v.value = v.value - s
        proj.update(s)
        delay.update(s)
        return s

    def grad_of(f, loop):
        def loss(xs):
            nn.reset_all_states(proj)
            v.value = jnp.zeros(N)
            delay.history.value = jnp.zeros((SLOTS, N))
            delay.write_ptr.value = jnp.int32(0)
            return jnp.sum(loop(f, xs) * jnp.linspace(0.5, 1.5, N))
        return bt.jit(bt.grad(loss, grad_states=(w_in, proj.weight)))

    return proj, step, grad_of


def _natives():
    return [False] + ([True] if build.load() is not None else [])


def _temp(g, xs):
    return g.lower(xs).compile().memory_analysis().temp_size_in_bytes


def _long(request):
    if not request.config.getoption("--long"):
        pytest.skip("several compiled gradients (10-20 CPU s): run with --long (make test-long)")


@pytest.mark.parametrize("native", _natives())
def test_accumulating_buffer_is_rebuilt_not_kept(native, request):
    _long(request)
    proj, step, grad_of = _net(native)
    xs = jnp.asarray((np.random.RandomState(1).rand(T, 8) < 0.3).astype(np.float32))
    ck = bt.checkpoint(step)
    plain = grad_of(step, bt.for_loop)
    ring = grad_of(ck, bt.for_loop)
    nested = grad_of(ck, lambda f, xs: bt.checkpointed_for_loop(f, xs, checkpoint="nested"))
    ref = plain(xs)
    for g in (ring, nested):
        for a, b in zip(jax.tree.leaves(g(xs)), jax.tree.leaves(ref)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    with brainx.environ.context(ring_buffer_remat=False):    # JAX's own: the buffer per step
        whole = _temp(grad_of(ck, bt.for_loop), xs)
    kept = _temp(ring, xs)
    buffer = SLOTS * N * 4
    assert whole - kept >= 0.8 * (T - 2) * buffer, (whole, kept)   # the Delay's, per step
    assert kept <= 0.5 * T * buffer, kept          # and not the projection's either
    assert kept <= _temp(plain, xs) + 4 * buffer, kept


def test_the_rule_finds_the_declared_write_only():
    proj, step, _ = _net(False)
    pure = lambda k, c, x: bt.checkpoint(lambda c: (c, 0.0))(c)
    assert find_ring_plan(pure, (), jnp.zeros((4, 3)), None) is None

    def declared(k, c, x):
        return jax.checkpoint(lambda c: (proj._deliver(c, 0, x, proj.weight.value, 0,
                                                        proj.indptr.value, proj.targets.value,
                                                        proj.delays.value)[0], 0.0))(c)

    def marked(k, c, x):   # the same write, declared
        from brainx.transform.remat.ring_writes import accumulating
        out = jax.checkpoint(lambda c: accumulating(
            proj._deliver, c, jnp.int32(0), x, proj.weight.value, jnp.int32(0),
            proj.indptr.value, proj.targets.value, proj.delays.value, axis=0)[0])(c)
        return out, 0.0

    buf, x = jnp.zeros((SLOTS, N)), jnp.zeros(N)
    assert find_ring_plan(declared, (), buf, x) is None       # undeclared: kept whole
    plan = find_ring_plan(marked, (), buf, x)
    assert [type(b) for b in plan.buffers] == [Accumulate]


def test_a_declared_buffer_the_step_reads_is_rebuilt(request):
    """A user's accumulating buffer, read nonlinearly each step (JAX's checkpoint keeps it
    whole per step), declared with ``accumulating``: rebuilt, gradients unchanged."""
    _long(request)
    from brainx.transform.remat.ring_writes import accumulating
    w = brainx.ParamState(jnp.asarray(np.random.RandomState(2).randn(N, N), jnp.float32) * 0.3)
    buf = brainx.HiddenState(jnp.zeros((SLOTS, N)))
    k = brainx.HiddenState(jnp.int32(0))

    def write(b, slot, now):
        return b.at[slot].set(0.0).at[(slot + 5) % SLOTS].add(now)

    def step(x):
        slot = k.value % SLOTS
        now = jnp.tanh(buf.value[slot] @ w.value + x)
        buf.value = accumulating(write, buf.value, slot, now)
        k.value = k.value + 1
        return now

    def grad_of(f):
        def loss(xs):
            buf.value, k.value = jnp.zeros((SLOTS, N)), jnp.int32(0)
            return jnp.sum(bt.for_loop(f, xs) ** 2)
        return bt.jit(bt.grad(loss, grad_states=w))

    xs = jnp.asarray(np.random.RandomState(3).randn(T, N), jnp.float32)
    ck = grad_of(bt.checkpoint(step))
    np.testing.assert_allclose(np.asarray(ck(xs)), np.asarray(grad_of(step)(xs)),
                               rtol=1e-5, atol=1e-6)
    with brainx.environ.context(ring_buffer_remat=False):
        whole = _temp(grad_of(bt.checkpoint(step)), xs)
    assert whole - _temp(ck, xs) >= 0.8 * (T - 2) * SLOTS * N * 4
