"""What checkpointed loops cost: forward passes, memory, unrolling, the default plan.

Each cost is compared with a reference written in plain JAX (the nested scan
written by hand) or read from the jaxpr / compiled HLO, and every variant's
gradient is compared with the gradient of the plain ``lax.scan``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brainx.transform import Nested, NestedRemat, checkpointed_scan
from brainx.transform.remat.checkpoint_strategies import (
    SEGMENTS_PER_LEVEL, SegmentPlan, default_levels,
)
from brainx.transform.remat.remat_loops import nested_remat_scan

N = 7


def _step(w, c, x):
    c = jnp.sin(c @ w + x)
    return c, (c ** 2).sum()


def _data(length, seed=0):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return jax.random.normal(k1, (N, N)) * 0.4, jax.random.normal(k2, (length, N))


def _loss(w, xs, checkpoint, reverse=False, unroll=1):
    step = lambda c, x: _step(w, c, x)
    c, ys = checkpointed_scan(step, jnp.ones(N), xs, checkpoint=checkpoint, reverse=reverse,
                              unroll=unroll)
    return ys.sum() + c.sum()


def _plain_loss(w, xs, reverse=False):
    c, ys = jax.lax.scan(lambda c, x: _step(w, c, x), jnp.ones(N), xs, reverse=reverse)
    return ys.sum() + c.sum()


def _hand_nested_loss(w, xs, outer, inner):
    """The nested scan one writes by hand: ``jax.checkpoint`` on the outer body."""
    segment = jax.checkpoint(lambda c, xseg: jax.lax.scan(lambda c, x: _step(w, c, x), c, xseg),
                             prevent_cse=False)
    c, ys = jax.lax.scan(segment, jnp.ones(N), xs.reshape(outer, inner, N))
    return ys.sum() + c.sum()


def _forward_passes(loss, *args):
    """How many times the gradient's jaxpr evaluates the step (its one ``sin``)."""
    return str(jax.make_jaxpr(jax.grad(loss))(*args)).count("= sin ")


def _temp_bytes(loss, *args):
    return jax.jit(jax.grad(loss)).lower(*args).compile().memory_analysis().temp_size_in_bytes


def test_nested_remat_recomputes_and_keeps_what_the_hand_written_nested_scan_does():
    w, xs = _data(48)
    hand = lambda w: _hand_nested_loss(w, xs, 8, 6)
    remat = lambda w: _loss(w, xs, NestedRemat(segments=6))
    carries = lambda w: _loss(w, xs, NestedRemat(
        segments=6, policy=jax.checkpoint_policies.nothing_saveable))
    assert _forward_passes(hand, w) == 2                      # the loop, then each segment again
    assert _forward_passes(remat, w) == 2
    assert _forward_passes(carries, w) == 3                   # and each step once more

    def executor(w, policy=None):   # the loop alone, without the states' bookkeeping
        c, ys = nested_remat_scan(_step, w, jnp.ones(N), xs, SegmentPlan.build(48, (6,)),
                                  reverse=False, unroll=1, policy=policy)
        return ys.sum() + c.sum()

    assert _temp_bytes(executor, w) <= _temp_bytes(hand, w)
    assert _temp_bytes(lambda w: executor(w, jax.checkpoint_policies.nothing_saveable),
                       w) < _temp_bytes(executor, w)    # carries, not residuals
    want = jax.grad(_plain_loss)(w, xs)
    for loss in (remat, carries):
        np.testing.assert_allclose(jax.grad(loss)(w), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("strategy, reverse", [(Nested(segments=4), False),
                                               (Nested(segments=(12, 5)), True),
                                               (NestedRemat(segments=4), True)],
                         ids=["nested", "nested3-reverse", "nested_remat-reverse"])
def test_unrolled_loops_give_the_plain_gradient(strategy, reverse):
    w, xs = _data(26)   # segments with a tail at every level
    want = jax.grad(_plain_loss, argnums=(0, 1))(w, xs, reverse)
    got = jax.grad(_loss, argnums=(0, 1))(w, xs, strategy, reverse, 3)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def test_no_step_rewrites_a_buffer_of_kept_carries():
    """Segment starts are outputs of a scan of segments. Written into a buffer at every step
    instead, an unrolled loop made XLA copy that buffer whole per step (superlinear in T)."""
    w, xs = _data(60)
    jaxpr = str(jax.make_jaxpr(jax.grad(_loss), static_argnums=(2, 3, 4))(
        w, xs, Nested(segments=(12, 4)), False, 5))
    assert "dynamic_update_slice" not in jaxpr   # xs is not differentiated: nothing to write


def test_nested_unrolls_its_reverse_sweep_by_default_and_nothing_else():
    w, xs = _data(60)

    def unrolled(unroll):
        jaxpr = str(jax.make_jaxpr(jax.grad(_loss), static_argnums=(2, 3, 4))(
            w, xs, Nested(segments=(12, 4)), False, unroll))
        return jaxpr.count("unroll=5"), jaxpr.count("unroll=1")

    default, rolled = unrolled(None), unrolled(1)
    assert default[0] == 1 and rolled[0] == 0        # one innermost reverse sweep
    assert default[1] == rolled[1] - 1 > 0           # every other loop stays rolled


def test_default_levels_grow_with_the_length():
    assert SEGMENTS_PER_LEVEL == 100
    assert [default_levels(t) for t in (1, 1000, 10_000, 10_001, 10 ** 6, 10 ** 6 + 1)] == [
        2, 2, 2, 3, 3, 4]

    def depth(p: SegmentPlan) -> int:
        return 1 if p.is_leaf else 1 + depth(p.child)

    assert depth(Nested().plan(10_000)) == 2 and depth(Nested().plan(16_000)) == 3
    assert depth(NestedRemat().plan(16_000)) == 2   # its levels each have gradient buffers
    assert depth(Nested(levels=2).plan(16_000)) == 2            # an explicit choice stays
    plan = Nested().plan(16_000)   # 25 segments of 640 = 20 x 32: the shorter innermost
    assert (plan.stride, plan.child.stride) == (640, 20)
    assert plan.peak_carries() < SegmentPlan.balanced(16_000, 2).peak_carries() / 3


def test_equally_near_segment_lengths_prefer_the_shorter():
    assert SegmentPlan.balanced(16_000, 2).stride == 125   # not 128
    assert SegmentPlan.balanced(1000, 2).stride == 25      # not 40


def test_long_default_loop_gives_the_plain_gradient():
    w, xs = _data(10_007)   # three levels, tails at two of them
    w = w * 0.5
    got = jax.jit(jax.grad(lambda w: _loss(w, xs, None)))(w)
    np.testing.assert_allclose(got, jax.jit(jax.grad(_plain_loss))(w, xs), rtol=1e-4, atol=1e-5)
