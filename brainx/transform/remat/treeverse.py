"""Binomial checkpointing (treeverse) of a loop whose length is known only at run time.

The reverse pass of ``n`` steps keeps at most ``snapshots + 1`` carries. It is
a small machine run by ``lax.while_loop``: a stack of intervals ``[lo, hi)``
of steps still to reverse, each with the carry before step ``lo`` in its
slot. Each iteration takes the top interval and either

* splits it: advances from ``lo`` to ``mid`` and pushes ``[mid, hi)`` with
  the new carry in the next slot (while slots are free), or
* reverses its last step ``hi - 1``: advances from ``lo`` to ``hi - 1`` (no
  steps when the interval has length 1) and applies that step's VJP.

``mid`` follows the binomial rule: with ``s`` free slots and at most ``r``
recomputations per step one can reverse ``beta(s, r) = binom(s + r + 1, r)``
steps, and ``beta(s, r) = beta(s, r - 1) + beta(s - 1, r)``: the left part
(reversed later with the same slots) gets ``beta(s, r - 1)`` steps, the right
part (one slot fewer) the rest, for the smallest ``r`` that covers the interval.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["treeverse", "binomial_split"]


def binomial_split(length, free):
    """Steps to advance before the split point of an interval of ``length`` >= 2 steps.

    ``free`` >= 1 slots are available. Returns a value in ``[1, length - 1]``.
    """
    length = jnp.asarray(length, jnp.int32)
    free = jnp.asarray(free, jnp.int32)

    def more(v):
        return v[1] < length

    def grow(v):
        r, m, _, q = v
        r = r + 1
        return r, m * (free + r + 1) // r, m, q * (free + r) // r

    one = jnp.ones((), jnp.int32)
    _, _, m_prev, q = lax.while_loop(more, grow, (jnp.zeros((), jnp.int32), one, one, one))
    low = jnp.maximum(1, length - q)
    return jnp.clip(m_prev, low, length - 1)


def treeverse(advance: Callable, reverse_at: Callable, c0, n, snapshots: int, state):
    """Reverse ``n`` steps starting from carry ``c0``, with ``snapshots`` extra carries.

    ``advance(c, t)`` is the carry after step ``t``; ``reverse_at(state, c, t)``
    folds step ``t`` (with input carry ``c``) into the backward ``state``.
    """
    size = snapshots + 1
    # slot 0 is c0 itself (the loop keeps it anyway): only the other snapshots are stacked
    slots = jax.tree.map(lambda a: jnp.zeros((snapshots,) + jnp.shape(a), jnp.result_type(a)), c0)

    def carry_at(slots, d):
        return jax.tree.map(lambda s, a: jnp.where(d == 0, a, s[jnp.maximum(d - 1, 0)]),
                            slots, c0)
    n = jnp.asarray(n, jnp.int32)
    lo = jnp.zeros((size,), jnp.int32)
    hi = jnp.zeros((size,), jnp.int32).at[0].set(n)
    depth = jnp.where(n > 0, 0, -1).astype(jnp.int32)

    def forward(c, start, count):
        return lax.fori_loop(0, count, lambda i, c: advance(c, start + i), c)

    # Two nested loops rather than one loop with a `cond`: the backward state
    # (gradient accumulators) is then only ever updated in place, never passed
    # through a conditional, which would make XLA copy it.
    def splittable(v):
        d, lo, hi, _ = v
        return jnp.logical_and(hi[d] - lo[d] > 1, d < snapshots)

    def split(v):
        d, lo, hi, slots = v
        a, b = lo[d], hi[d]
        left = binomial_split(b - a, snapshots - d)
        c = forward(carry_at(slots, d), a, left)
        slots = jax.tree.map(lambda s, v: s.at[d].set(v), slots, c)
        return d + 1, lo.at[d + 1].set(a + left), hi.at[d].set(a + left).at[d + 1].set(b), slots

    def reverse_one(v):
        d, lo, hi, slots, state = v
        d, lo, hi, slots = lax.while_loop(splittable, split, (d, lo, hi, slots))
        a, b = lo[d], hi[d]
        c = forward(carry_at(slots, d), a, b - 1 - a)
        state = reverse_at(state, c, b - 1)
        return jnp.where(b - 1 == a, d - 1, d), lo, hi.at[d].set(b - 1), slots, state

    return lax.while_loop(lambda v: v[0] >= 0, reverse_one, (depth, lo, hi, slots, state))[-1]
