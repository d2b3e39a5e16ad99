"""Checkpointed loops built from ``jax.checkpoint`` and ``lax.scan`` (any JAX transform).

``body(consts, carry, x) -> (carry, y)`` is a pure step; ``consts`` are loop
constants (closed over by every scan, never carried). Steps read their input
by index from ``xs`` inside the checkpointed region, so a step's residual is
its carry and an integer, not a copy of its input slice.
"""

from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp
from jax import lax

from brainx.transform.checkpoint_strategies import SegmentPlan

__all__ = ["remat_scan", "nested_remat_scan", "take"]


def take(xs, i):
    """``xs[i]`` for every leaf of ``xs`` (``None`` stays ``None``)."""
    return jax.tree.map(lambda a: lax.dynamic_index_in_dim(a, i, 0, keepdims=False), xs)


def remat_scan(body: Callable, consts, init, xs, length: int, *, reverse: bool, unroll: int,
               policy: Optional[Callable], prevent_cse: bool):
    """``lax.scan`` with ``jax.checkpoint`` on every step."""
    step = jax.checkpoint(lambda c, x: body(consts, c, x), prevent_cse=prevent_cse,
                          policy=policy)
    return lax.scan(step, init, xs, length=length, reverse=reverse, unroll=unroll)


def nested_remat_scan(body: Callable, consts, init, xs, plan: SegmentPlan, *, reverse: bool,
                      unroll: int, policy: Optional[Callable]):
    """Nested ``lax.scan`` s with ``jax.checkpoint`` on each level, following ``plan``.

    Works in index space: a level covering indices ``[o, o + L)`` runs its
    segments (and its tail, the highest indices) in loop order, so ``ys``
    comes out stacked by index for either direction, as from ``lax.scan``.
    """
    step = jax.checkpoint(lambda c, i: body(consts, c, take(xs, i)), prevent_cse=False,
                          policy=policy)

    def run(node: SegmentPlan, c, o):
        if node.is_leaf:
            return lax.scan(lambda c, j: step(c, o + j), c, jnp.arange(node.length),
                            reverse=reverse, unroll=unroll)

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
