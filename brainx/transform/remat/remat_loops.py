"""Checkpointed loops built from ``jax.checkpoint`` and ``lax.scan`` (any JAX transform).

``body(consts, carry, x) -> (carry, y)`` is a pure step; ``consts`` are loop
constants (closed over by every scan, never carried). In nested loops a step
reads its input by index from ``xs`` inside the checkpointed region, so its
residual is its carry and an integer, not a copy of its input slice.
"""

from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp
from jax import lax

from brainx.transform.remat.checkpoint_strategies import SegmentPlan

__all__ = ["remat_scan", "nested_remat_scan", "take"]


def take(xs, i):
    """``xs[i]`` for every leaf of ``xs`` (``None`` stays ``None``)."""
    return jax.tree.map(lambda a: lax.dynamic_index_in_dim(a, i, 0, keepdims=False), xs)


def remat_scan(body: Callable, consts, init, xs, length: int, *, reverse: bool, unroll: int,
               policy: Optional[Callable], prevent_cse: bool,
               monitor: Optional[Callable] = None):
    """``lax.scan`` with ``jax.checkpoint`` on every step."""
    step = jax.checkpoint(lambda c, x: body(consts, c, x), prevent_cse=prevent_cse,
                          policy=policy)
    if monitor is None:
        return lax.scan(step, init, xs, length=length, reverse=reverse, unroll=unroll)

    def counted(carry, x):  # the monitor sits outside the checkpoint: forward pass only
        c, y = step(carry[0], x)
        monitor(carry[1] + 1, c, y)
        return (c, carry[1] + 1), y

    (c, _), ys = lax.scan(counted, (init, jnp.zeros((), jnp.int32)), xs, length=length,
                          reverse=reverse, unroll=unroll)
    return c, ys


def nested_remat_scan(body: Callable, consts, init, xs, plan: SegmentPlan, *, reverse: bool,
                      unroll: int, policy: Optional[Callable],
                      monitor: Optional[Callable] = None):
    """Nested ``lax.scan`` s with ``jax.checkpoint`` on each level, following ``plan``.

    Works in index space: a level covering indices ``[o, o + L)`` runs its
    segments (and its tail, the highest indices) in loop order, so ``ys``
    comes out stacked by index for either direction, as from ``lax.scan``.
    """
    total = plan.length
    if total == 0:  # nothing to index: a plain empty scan gives the output types
        return lax.scan(lambda c, x: body(consts, c, x), init, xs, length=0)
    step = jax.checkpoint(lambda c, i: body(consts, c, take(xs, i)), prevent_cse=False,
                          policy=policy)

    def leaf_step(o):
        def run(c, j):
            c, y = step(c, o + j)
            if monitor is not None:
                monitor(total - (o + j) if reverse else o + j + 1, c, y)
            return c, y
        return run

    def run(node: SegmentPlan, c, o):
        if node.is_leaf:
            return lax.scan(leaf_step(o), c, jnp.arange(node.length), reverse=reverse,
                            unroll=unroll)

        def segment(c, k):
            return run(node.child, c, o + k * node.stride)

        segment = jax.checkpoint(segment, prevent_cse=False)
        tail_o = o + node.count * node.stride
        tail = jax.checkpoint(lambda c: run(node.tail, c, tail_o), prevent_cse=False)
        y_tail = None
        if node.tail is not None and reverse:
            c, y_tail = tail(c)
        c, ys = lax.scan(segment, c, jnp.arange(node.count), reverse=reverse)
        if node.tail is not None and not reverse:
            c, y_tail = tail(c)
        ys = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), ys)
        if y_tail is not None:
            ys = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), ys, y_tail)
        return c, ys

    return run(plan, init, jnp.zeros((), jnp.int32))
