"""Checkpointed loops built from ``jax.checkpoint`` and ``lax.scan`` (any JAX transform).

``body(consts, carry, x) -> (carry, y)`` is a pure step; ``consts`` are loop
constants (closed over by every scan, never carried).
"""

from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp
from jax import lax

from brainx.transform.remat.policies import checkpoint_with_policy
from brainx.transform.control.segment_plan import SegmentPlan

__all__ = ["remat_scan", "nested_remat_scan", "take"]


def take(xs, i):
    """``xs[i]`` for every leaf of ``xs`` (``None`` stays ``None``)."""
    return jax.tree.map(lambda a: lax.dynamic_index_in_dim(a, i, 0, keepdims=False), xs)


def remat_scan(body: Callable, consts, init, xs, length: int, *, reverse: bool, unroll: int,
               policy: Optional[Callable], prevent_cse: bool,
               monitor: Optional[Callable] = None, remat: bool = True):
    """``lax.scan`` with ``jax.checkpoint`` on every step (none with ``remat=False``)."""
    step = lambda c, x: body(consts, c, x)
    if remat:
        step = checkpoint_with_policy(step, prevent_cse=prevent_cse, policy=policy)
    if monitor is None:
        return lax.scan(step, init, xs, length=length, reverse=reverse, unroll=unroll)

    def counted(carry, x):  # the monitor sits outside the checkpoint: forward pass only
        c, y = step(carry[0], x)
        monitor(carry[1] + 1, c, y)
        return (c, carry[1] + 1), y

    (c, _), ys = lax.scan(counted, (init, jnp.zeros((), jnp.int32)), xs, length=length,
                          reverse=reverse, unroll=unroll)
    return c, ys


def _rows(xs, start, size):
    """Rows ``[start, start + size)`` of every leaf of ``xs`` (``start`` may be traced)."""
    return jax.tree.map(lambda a: lax.dynamic_slice_in_dim(a, start, size, 0), xs)


def _split(xs, count, stride):
    """Every leaf of ``xs`` (``count * stride`` rows) as ``(count, stride, ...)``, free."""
    return jax.tree.map(lambda a: a.reshape((count, stride) + a.shape[1:]), xs)


def nested_remat_scan(body: Callable, consts, init, xs, plan: SegmentPlan, *, reverse: bool,
                      unroll: int, policy: Optional[Callable],
                      monitor: Optional[Callable] = None):
    """Nested ``lax.scan`` s with ``jax.checkpoint`` on each segment, following ``plan``.

    Each level above the innermost is a scan of ``jax.checkpoint`` ed
    segments, so its reverse pass recomputes one segment at a time; the
    innermost scan is differentiated as JAX differentiates a scan (it keeps
    the steps' residuals), unless ``policy`` is given, which puts
    ``jax.checkpoint(policy=policy)`` on each step (one more forward pass).
    Without a policy this is the nested scan one writes by hand: one forward
    pass per level.

    Inputs reach each segment as its own rows of ``xs``, scanned: a level
    without a tail reshapes its rows to ``(count, stride, ...)`` (no copy),
    and JAX then forwards an input that a step's VJP needs instead of
    stacking a copy of it. A level with a tail slices a segment's rows inside
    the checkpointed segment (recomputed on the way back, never stored). With
    a ``policy``, a step reads its row of ``xs`` inside its checkpoint, so no
    row is kept at all.
    Works in index space: a level covering indices ``[o, o + L)`` runs its
    segments (and its tail, the highest indices) in loop order, so ``ys``
    comes out stacked by index for either direction, as from ``lax.scan``.
    """
    total = plan.length
    if total == 0:  # nothing to index: a plain empty scan gives the output types
        return lax.scan(lambda c, x: body(consts, c, x), init, xs, length=0)

    # Offsets o (the index of a segment's first step) are computed only where used: an
    # index scanned but unused would still be stacked for the reverse pass.
    indexed = monitor is not None or policy is not None

    def scan(f, c, rows, length):
        """``lax.scan`` of ``f(c, rows_j, j)`` over ``rows`` (or only ``j``), as needed."""
        if not indexed:
            return lax.scan(lambda c, r: f(c, r, None), c, rows, length=length,
                            reverse=reverse, unroll=unroll)
        return lax.scan(lambda c, rj: f(c, *rj), c, (rows, jnp.arange(length)),
                        reverse=reverse, unroll=unroll)

    def leaf(c, xs, o, length):
        """The steps ``[o, o + length)`` without segments; ``xs`` holds their rows."""
        if policy is None:
            step = lambda c, x, j: body(consts, c, x)
        else:  # the step reads its row of all_xs inside the checkpoint: no row is kept
            step = checkpoint_with_policy(lambda c, x, j: body(consts, c, take(all_xs, o + j)),
                                          prevent_cse=False, policy=policy)

        def one(c, x, j):
            c, y = step(c, x, j)
            if monitor is not None:
                monitor(total - (o + j) if reverse else o + j + 1, c, y)
            return c, y

        return scan(one, c, xs, length)

    def run(node: SegmentPlan, c, xs, o):
        """The steps ``[o, o + node.length)``; ``xs`` holds exactly their rows (or is
        ``None`` when the steps read ``all_xs``)."""
        if node.is_leaf:
            return leaf(c, xs, o, node.length)
        size, stride = node.count * node.stride, node.stride
        if node.tail is None or xs is None:  # the rows split without a copy: scan them
            def segment(c, rows, k):
                return run(node.child, c, rows, None if k is None else o + k * stride)
            rows = None if xs is None else _split(xs, node.count, stride)
        else:  # slicing here would copy all rows: slice one segment's, inside it
            def segment(c, k, _):
                return run(node.child, c, _rows(xs, k * stride, stride),
                           None if o is None else o + k * stride)
            rows = jnp.arange(node.count)

        segment = jax.checkpoint(segment, prevent_cse=False)
        tail_xs = lambda: None if xs is None else _rows(xs, size, node.length - size)
        tail = jax.checkpoint(lambda c: run(node.tail, c, tail_xs(),
                                            None if o is None else o + size), prevent_cse=False)
        y_tail = None
        if node.tail is not None and reverse:
            c, y_tail = tail(c)
        c, ys = scan(segment, c, rows, node.count)
        if node.tail is not None and not reverse:
            c, y_tail = tail(c)
        ys = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), ys)
        if y_tail is not None:
            ys = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), ys, y_tail)
        return c, ys

    all_xs = xs
    return run(plan, init, xs if policy is None else None,
               jnp.zeros((), jnp.int32) if indexed else None)
