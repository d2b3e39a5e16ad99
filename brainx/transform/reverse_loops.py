"""Loops with a hand-written reverse pass (``jax.custom_vjp``).

JAX differentiates a ``lax.scan`` by stacking residuals, and a nest of
checkpointed scans gives every level its own accumulator for the gradient of
a loop constant. Here the reverse pass is ours: a *schedule*
(:class:`~brainx.transform.checkpoint_strategies.Nested` or
:class:`~brainx.transform.checkpoint_strategies.Binomial`) decides which
carries to keep and when to recompute, and every step is reversed by the VJP
of that one step, accumulating into a single set of buffers:

* the cotangent of the carry,
* the gradient of each differentiated loop constant (one buffer each),
* the cotangent of each differentiated input sequence (``(T, ...)``, written in place).

Only inputs JAX marks as perturbed are differentiated (``symbolic_zeros``).
Values the step closes over are hoisted by ``jax.closure_convert`` so that
their gradients flow too.
"""

from __future__ import annotations

import math
from typing import Callable, List, Optional

import jax
import jax.numpy as jnp
from jax import lax
from jax.custom_derivatives import SymbolicZero, custom_vjp_primal_tree_values

from brainx.transform.checkpoint_strategies import Binomial, Nested, SegmentPlan
from brainx.transform.remat_loops import take
from brainx.transform.treeverse import treeverse

__all__ = ["vjp_scan", "vjp_while_loop"]


def _inexact(x) -> bool:
    return jnp.issubdtype(jnp.result_type(x), jnp.inexact)


def _put(buf, i, value):
    return jax.tree.map(lambda b, v: lax.dynamic_update_index_in_dim(b, v, i, 0), buf, value)


def _perturbed(tree) -> tuple:
    """Per leaf of a ``CustomVJPPrimal`` tree: ``()`` if perturbed and inexact, else ``None``.

    Kept in the residuals: as pytree *structure* it survives to the reverse pass statically.
    """
    return tuple(() if p.perturbed and _inexact(p.value) else None
                 for p in jax.tree.leaves(tree))


def _is_symbolic(ct) -> bool:
    return isinstance(ct, SymbolicZero)


def _is_zero(ct) -> bool:
    return isinstance(ct, SymbolicZero) or getattr(ct, "dtype", None) == jax.dtypes.float0


class _Reverser:
    """Reverses single steps of ``f(consts, carry, x) -> (carry, y)``.

    The backward state is ``(ct_carry, grad_consts, ct_xs)``: lists over the
    inexact carry leaves, the differentiated const leaves and the
    differentiated input leaves.
    """

    def __init__(self, f, consts, init, xs, ct_ys, masks, length: int, reverse):
        self.f, self.consts, self.xs, self.length, self.reverse = f, consts, xs, length, reverse
        self.c_leaves, self.c_tree = jax.tree.flatten(init)
        self.c_mask = [_inexact(l) for l in self.c_leaves]
        self.k_leaves, self.k_tree = jax.tree.flatten(consts)
        self.k_mask = [m is not None for m in masks[0]]
        self.x_leaves, self.x_tree = jax.tree.flatten(xs)
        self.x_mask = [m is not None for m in masks[2]]
        self.ct_ys = ct_ys

    def index(self, t):
        """The position in ``xs`` / ``ys`` of step ``t``."""
        return self.length - 1 - t if self.reverse else t

    def advance(self, c, t):
        """The carry after step ``t``, from the carry before it."""
        x = take(self.xs, self.index(t)) if self.x_leaves else self.xs
        return self.f(self.consts, c, x)[0]

    def initial_state(self, ct_carry):
        cts = jax.tree.leaves(ct_carry, is_leaf=_is_symbolic)
        ct_c = [jnp.zeros_like(l) if _is_zero(ct) else ct
                for l, ct, m in zip(self.c_leaves, cts, self.c_mask) if m]
        acc = [jnp.zeros_like(l) for l, m in zip(self.k_leaves, self.k_mask) if m]
        ct_xs = [jnp.zeros_like(l) for l, m in zip(self.x_leaves, self.x_mask) if m]
        return ct_c, acc, ct_xs

    def reverse_at(self, state, c, t):
        """Reverse step ``t`` from its input carry ``c``: the state before step ``t``."""
        ct_c, acc, ct_xs = state
        i = self.index(t)
        x_leaves = [lax.dynamic_index_in_dim(a, i, 0, keepdims=False) for a in self.x_leaves]
        c_leaves = jax.tree.leaves(c)
        f, k_leaves = self.f, self.k_leaves
        k_mask, c_mask, x_mask = self.k_mask, self.c_mask, self.x_mask
        y_mask: List[bool] = []

        def fill(leaves, mask, diff):
            it = iter(diff)
            return [next(it) if m else l for l, m in zip(leaves, mask)]

        def g(dk, dc, dx):
            consts = self.k_tree.unflatten(fill(k_leaves, k_mask, dk))
            carry = self.c_tree.unflatten(fill(c_leaves, c_mask, dc))
            x = self.x_tree.unflatten(fill(x_leaves, x_mask, dx))
            c2, y = f(consts, carry, x)
            y_leaves = jax.tree.leaves(y)
            y_mask[:] = [_inexact(l) for l in y_leaves]
            return ([l for l, m in zip(jax.tree.leaves(c2), c_mask) if m]
                    + [l for l, m in zip(y_leaves, y_mask) if m])

        pick = lambda leaves, mask: [l for l, m in zip(leaves, mask) if m]
        out, vjp = jax.vjp(g, pick(k_leaves, k_mask), pick(c_leaves, c_mask),
                           pick(x_leaves, x_mask))
        ct_y = [jnp.zeros_like(o) if _is_zero(ct) else lax.dynamic_index_in_dim(ct, i, 0, False)
                for ct, o in zip(pick(jax.tree.leaves(self.ct_ys, is_leaf=_is_symbolic), y_mask),
                                 out[len(ct_c):])]
        g_k, g_c, g_x = vjp(list(ct_c) + ct_y)
        acc = [a + b for a, b in zip(acc, g_k)]
        ct_xs = [lax.dynamic_update_index_in_dim(b, v, i, 0) for b, v in zip(ct_xs, g_x)]
        return list(g_c), acc, ct_xs

    def cotangents(self, state, masks, consts, init, xs):
        """The custom VJP's result: cotangents of ``(consts, init, xs)``, ``None`` where zero."""
        ct_c, acc, ct_xs = state

        def out(tree, mask, values):
            it = iter(values)
            return jax.tree.unflatten(jax.tree.structure(tree),
                                      [next(it) if m else None for m in mask])

        c_out = iter(ct_c)
        c_cts = [next(c_out) if m else None for m in self.c_mask]
        c_cts = [ct if p is not None else None for ct, p in zip(c_cts, masks[1])]
        return (out(consts, self.k_mask, acc),
                jax.tree.unflatten(jax.tree.structure(init), c_cts),
                out(xs, self.x_mask, ct_xs))


def _record(step, c0, xs, length: int, stride: int, *, reverse: bool, unroll: int):
    """Run ``step(c, x, t) -> (c, y)`` for ``length`` steps, keeping the carry every ``stride`` steps.

    Returns ``((final carry, ys), kept)`` with ``kept[k]`` the carry before step ``k * stride``.
    Only one kept slot is rewritten per step, so the cost is linear in ``length``.
    """
    nkeep = -(-length // stride)
    kept = jax.tree.map(lambda a: jnp.zeros((nkeep,) + jnp.shape(a), jnp.result_type(a)), c0)

    def body(carry, x):
        c, kept, t = carry
        k = t // stride
        new = jax.tree.map(lambda b, v: jnp.where(t % stride == 0, v,
                                                  lax.dynamic_index_in_dim(b, k, 0, False)),
                           kept, c)
        kept = _put(kept, k, new)
        c, y = step(c, x, t)
        return (c, kept, t + 1), y

    (c, kept, _), ys = lax.scan(body, (c0, kept, jnp.zeros((), jnp.int32)), xs, length=length,
                                reverse=reverse, unroll=unroll)
    return (c, ys), kept


def _segments_backward(rev: _Reverser, plan: SegmentPlan, c0, kept, state, unroll: int):
    """The reverse pass of :class:`Nested`: recurse through the segment plan."""

    def node(p: SegmentPlan, c, o, state, kept=None):
        if p.is_leaf:
            def forward(c, j):
                return rev.advance(c, o + j), c

            _, carries = lax.scan(forward, c, jnp.arange(p.length), unroll=unroll)

            def back(state, j):
                return rev.reverse_at(state, take(carries, j), o + j), None

            return lax.scan(back, state, jnp.arange(p.length), reverse=True)[0]
        if kept is None:
            step = lambda c, _, t: (rev.advance(c, o + t), None)
            _, kept = _record(step, c, None, p.length, p.stride, reverse=False, unroll=unroll)
        if p.tail is not None:
            state = node(p.tail, take(kept, p.count), o + p.count * p.stride, state)

        def segment(state, k):
            return node(p.child, take(kept, k), o + k * p.stride, state), None

        return lax.scan(segment, state, jnp.arange(p.count), reverse=True)[0]

    return node(plan, c0, jnp.zeros((), jnp.int32), state, kept)


def _convert(f, *example):
    """``(g, hoisted)``: ``f`` with its closed-over tracers as an extra argument."""
    f_cc, hoisted = jax.closure_convert(f, *example)
    return (lambda consts, *args: f_cc(consts[0], *args, *consts[1])), hoisted


def vjp_scan(body: Callable, consts, init, xs, length: int, *, reverse: bool, unroll: int,
             schedule):
    """``lax.scan`` of ``body(consts, carry, x) -> (carry, y)`` with ``schedule`` 's reverse pass."""
    if length == 0:
        return lax.scan(lambda c, x: body(consts, c, x), init, xs, length=0)
    x0 = None if xs is None else take(xs, 0)
    f, hoisted = _convert(body, consts, init, x0)
    plan = schedule.plan(length) if isinstance(schedule, Nested) else None

    def step(cs, c, x, t):
        return f(cs, c, x)

    def forward(cs, c0, xs):
        if plan is None or plan.is_leaf:
            return lax.scan(lambda c, x: f(cs, c, x), c0, xs, length=length, reverse=reverse,
                            unroll=unroll), None
        return _record(lambda c, x, t: f(cs, c, x), c0, xs, length, plan.stride,
                       reverse=reverse, unroll=unroll)

    @jax.custom_vjp
    def loop(cs, c0, xs):
        return forward(cs, c0, xs)[0]

    def loop_fwd(cs, c0, xs):
        masks = (_perturbed(cs), _perturbed(c0), _perturbed(xs))
        cs, c0, xs = custom_vjp_primal_tree_values((cs, c0, xs))
        out, kept = forward(cs, c0, xs)
        return out, (cs, c0, xs, kept, masks)

    def loop_bwd(res, ct):
        cs, c0, xs, kept, masks = res
        ct_carry, ct_ys = ct
        rev = _Reverser(f, cs, c0, xs, ct_ys, masks, length, reverse)
        state = rev.initial_state(ct_carry)
        if plan is not None:
            state = _segments_backward(rev, plan, c0, kept, state, unroll)
        else:
            state = treeverse(rev.advance, rev.reverse_at, c0, jnp.int32(length),
                              schedule.snapshots, state)
        return rev.cotangents(state, masks, cs, c0, xs)

    loop.defvjp(loop_fwd, loop_bwd, symbolic_zeros=True)
    return loop((consts, hoisted), init, xs)


def vjp_while_loop(cond: Callable, body: Callable, consts, init, *, max_steps: Optional[int],
                   snapshots: int):
    """``lax.while_loop`` of ``body(consts, carry) -> carry`` while ``cond(consts, carry)``,
    reverse-differentiable by binomial checkpointing (at most ``max_steps`` steps if given)."""
    f_body, h_body = _convert(lambda k, c, x: (body(k, c), ()), consts, init, None)
    f_cond, h_cond = _convert(cond, consts, init)
    limit = math.inf if max_steps is None else int(max_steps)

    def forward(cs, c0):
        def keep_going(carry):
            c, n = carry
            go = f_cond((cs[0], cs[2]), c)
            return go if limit == math.inf else jnp.logical_and(go, n < limit)

        def step(carry):
            c, n = carry
            return f_body((cs[0], cs[1]), c, None)[0], n + 1

        return lax.while_loop(keep_going, step, (c0, jnp.zeros((), jnp.int32)))

    @jax.custom_vjp
    def loop(cs, c0):
        return forward(cs, c0)[0]

    def loop_fwd(cs, c0):
        masks = (_perturbed(cs), _perturbed(c0), ())
        cs, c0 = custom_vjp_primal_tree_values((cs, c0))
        c, n = forward(cs, c0)
        return c, (cs, c0, n, masks)

    def loop_bwd(res, ct_carry):
        cs, c0, n, masks = res
        # The cond's hoisted values get no gradient: mask them out of the reverse pass.
        k_masks = (masks[0][:len(jax.tree.leaves((cs[0], cs[1])))]
                   + (None,) * len(jax.tree.leaves(cs[2])))
        f = lambda k, c, x: f_body((k[0], k[1]), c, x)
        rev = _Reverser(f, cs, c0, None, (), (k_masks, masks[1], ()), 0, False)
        state = rev.initial_state(ct_carry)
        state = treeverse(rev.advance, rev.reverse_at, c0, n, snapshots, state)
        return rev.cotangents(state, (k_masks, masks[1], ()), cs, c0, None)[:2]

    loop.defvjp(loop_fwd, loop_bwd, symbolic_zeros=True)
    return loop((consts, h_body, h_cond), init)
