"""Loops with a hand-written reverse pass (``jax.custom_vjp``).

JAX differentiates a ``lax.scan`` by stacking residuals, and a nest of
checkpointed scans gives every level its own accumulator for the gradient of
a loop constant. Here the reverse pass is ours: a *schedule*
(:class:`~brainx.transform.remat.checkpoint_strategies.Nested` or
:class:`~brainx.transform.remat.checkpoint_strategies.Binomial`) decides which
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
from jax.extend import core as jex_core
from jax.core import Tracer
from jax.custom_derivatives import SymbolicZero, custom_vjp_primal_tree_values

from brainx.transform.remat.policies import checkpoint_with_policy
from brainx.transform.control.segment_plan import SegmentPlan
from brainx.transform.remat.remat_loops import take
from brainx.transform.remat.ring_buffers import (
    RingPlan, find_ring_plan, ring_backward, ring_forward, ring_leaf, wants_ring,
)
from brainx.transform.remat.treeverse import treeverse

__all__ = ["vjp_scan", "vjp_while_loop"]


def _inexact(x) -> bool:
    return jnp.issubdtype(jnp.result_type(x), jnp.inexact)


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
    differentiated input leaves. A step's VJP can be taken at once
    (:meth:`reverse_at`) or split into its residuals, kept on a forward sweep
    (:meth:`linearize`), and their later use (:meth:`apply`).
    """

    def __init__(self, f, consts, init, xs, ct_ys, masks, length, reverse, policy=None):
        self.f, self.xs, self.length, self.reverse = f, xs, length, reverse
        self.policy = policy
        self.c_leaves, self.c_tree = jax.tree.flatten(init)
        self.c_mask = [_inexact(l) for l in self.c_leaves]
        self.k_leaves, self.k_tree = jax.tree.flatten(consts)
        self.k_mask = [m is not None for m in masks[0]]
        self.x_leaves, self.x_tree = jax.tree.flatten(xs)
        self.x_mask = [m is not None for m in masks[2]]
        self.ct_ys = jax.tree.leaves(ct_ys, is_leaf=_is_symbolic)
        self._static = None  # (vjp treedef, y mask, y avals), the same on every trace

    def index(self, t):
        """The position in ``xs`` / ``ys`` of step ``t``."""
        return self.length - 1 - t if self.reverse else t

    def _x(self, t):
        i = self.index(t)
        return [lax.dynamic_index_in_dim(a, i, 0, keepdims=False) for a in self.x_leaves]

    def advance(self, c, t):
        """The carry after step ``t``, from the carry before it."""
        x = self.x_tree.unflatten(self._x(t)) if self.x_leaves else self.xs
        return self.f(self.k_tree.unflatten(self.k_leaves), c, x)[0]

    def initial_state(self, ct_carry):
        cts = jax.tree.leaves(ct_carry, is_leaf=_is_symbolic)
        ct_c = [jnp.zeros_like(l) if _is_zero(ct) else ct
                for l, ct, m in zip(self.c_leaves, cts, self.c_mask) if m]
        acc = [jnp.zeros_like(l) for l, m in zip(self.k_leaves, self.k_mask) if m]
        ct_xs = [jnp.zeros_like(l) for l, m in zip(self.x_leaves, self.x_mask) if m]
        return ct_c, acc, ct_xs

    def _linearize(self, k_leaves, c, x_leaves):
        """``(carry after the step, residual leaves of its VJP)``."""
        c_leaves = jax.tree.leaves(c)
        f, k_mask, c_mask, x_mask = self.f, self.k_mask, self.c_mask, self.x_mask
        k_tree, c_tree, x_tree = self.k_tree, self.c_tree, self.x_tree
        info = []

        def fill(leaves, mask, diff):
            it = iter(diff)
            return [next(it) if m else l for l, m in zip(leaves, mask)]

        def g(dk, dc, dx):
            c2, y = f(k_tree.unflatten(fill(k_leaves, k_mask, dk)),
                      c_tree.unflatten(fill(c_leaves, c_mask, dc)),
                      x_tree.unflatten(fill(x_leaves, x_mask, dx)))
            y_leaves = jax.tree.leaves(y)
            y_mask = [_inexact(l) for l in y_leaves]
            info.append((y_mask, [jax.ShapeDtypeStruct(jnp.shape(l), jnp.result_type(l))
                                  for l, m in zip(y_leaves, y_mask) if m]))
            out = ([l for l, m in zip(jax.tree.leaves(c2), c_mask) if m]
                   + [l for l, m in zip(y_leaves, y_mask) if m])
            return out, c2

        if self.policy is not None:
            g = checkpoint_with_policy(g, prevent_cse=False, policy=self.policy)
        pick = lambda leaves, mask: [l for l, m in zip(leaves, mask) if m]
        _, vjp, c2 = jax.vjp(g, pick(k_leaves, k_mask), pick(c_leaves, c_mask),
                             pick(x_leaves, x_mask), has_aux=True)
        leaves, tree = jax.tree.flatten(vjp)
        self._static = (tree,) + info[-1]
        return c2, leaves

    def linearize(self, c, t):
        return self._linearize(self.k_leaves, c, self._x(t))

    def apply(self, state, residuals, t):
        """Fold step ``t`` into the backward state, from its VJP residuals."""
        ct_c, acc, ct_xs = state
        tree, y_mask, y_avals = self._static
        i = self.index(t)
        cts = [ct for ct, m in zip(self.ct_ys, y_mask) if m]
        ct_y = [jnp.zeros(a.shape, a.dtype) if _is_zero(ct)
                else lax.dynamic_index_in_dim(ct, i, 0, keepdims=False)
                for ct, a in zip(cts, y_avals)]
        g_k, g_c, g_x = tree.unflatten(residuals)(list(ct_c) + ct_y)
        acc = [a + b for a, b in zip(acc, g_k)]
        ct_xs = [lax.dynamic_update_index_in_dim(b, v, i, 0) for b, v in zip(ct_xs, g_x)]
        return list(g_c), acc, ct_xs

    def reverse_at(self, state, c, t):
        """Reverse step ``t`` from its input carry ``c``: the state before step ``t``."""
        return self.apply(state, self.linearize(c, t)[1], t)

    def split_residuals(self, c0):
        """``(varying, invariant)``: which residuals change from step to step, and the
        values of the others (computed once: they depend on loop constants only)."""
        x0 = [jnp.zeros(jnp.shape(a)[1:], jnp.result_type(a)) for a in self.x_leaves]
        jaxpr = jax.make_jaxpr(lambda c, x: self._linearize(self.k_leaves, c, x)[1])(c0, x0)
        varying = _depends_on_inputs(jaxpr.jaxpr)
        values = self._linearize(self.k_leaves, c0, x0)[1]
        return varying, [v for v, m in zip(values, varying) if not m]

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


def _depends_on_inputs(jaxpr) -> List[bool]:
    """Per output of ``jaxpr``: may it depend on an input (not only on consts)?"""
    dep = set(jaxpr.invars)
    for eqn in jaxpr.eqns:
        if any(isinstance(v, jex_core.Var) and v in dep for v in eqn.invars):
            dep.update(eqn.outvars)
    return [isinstance(v, jex_core.Var) and v in dep for v in jaxpr.outvars]


def _record(step, c0, length: int, stride: int, *, reverse: bool,
            monitor: Optional[Callable] = None):
    """Run ``step(c, i) -> (c, y)`` over the indices ``[0, length)`` in loop order, keeping
    the carry before every segment of ``stride`` steps.

    The steps are cut as a :class:`SegmentPlan` cuts them: ``count`` segments
    of ``stride`` steps, then a tail of the remaining steps (in loop order: with
    ``reverse`` the tail holds the lowest indices). Each segment is a scan inside
    a scan whose outputs stack the segment-start carries, so no step rewrites
    a buffer of kept carries (XLA copied such a buffer whole at every step of an
    unrolled loop).

    Returns ``((final carry, ys), kept)``: ``ys`` stacked by index as from
    ``lax.scan``; ``kept`` is ``None`` with ``stride=0``, else ``(starts,
    tail_start)``, the segment-start carries stacked in index order (with
    ``reverse`` the first segment run is the last row) and the carry before the tail.
    """
    def steps(c, start, size):
        def one(carry, _):  # the index is counted in the carry: a scanned arange is a buffer
            c, i = carry
            c, y = step(c, i)
            if monitor is not None:
                monitor(length - i if reverse else i + 1, c, y)
            return (c, i - 1 if reverse else i + 1), y

        first_i = start + size - 1 if reverse else start
        (c, _), ys = lax.scan(one, (c, jnp.asarray(first_i, jnp.int32)), None, length=size,
                              reverse=reverse)
        return c, ys

    if not stride:
        return steps(c0, 0, length), None
    count, left = divmod(length, stride)
    first = left if reverse else 0

    def segment(c, k):
        c_end, ys = steps(c, first + k * stride, stride)
        return c_end, (ys, c)

    c, (ys, starts) = lax.scan(segment, c0, jnp.arange(count), reverse=reverse)
    ys = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), ys)
    tail_start = c
    if left:
        c, y_tail = steps(c, 0 if reverse else count * stride, left)
        ys = jax.tree.map(lambda a, b: jnp.concatenate([b, a] if reverse else [a, b]),
                          ys, y_tail)
    return (c, ys), (starts, tail_start)


def _segments_backward(rev: _Reverser, plan: SegmentPlan, c0, kept, state, unroll: int,
                       ring: Optional[RingPlan] = None):
    """The reverse pass of :class:`Nested`: recurse through the segment plan.

    A leaf segment runs forward once keeping each step's VJP residuals (those
    that vary from step to step; the others are computed once), then applies
    them in reverse. ``unroll`` unrolls that last loop only: there XLA can merge
    the gradient updates of consecutive steps into one pass over each
    accumulator; unrolled forward loops ran slower on CPU and cost compile time.
    With a ``ring`` plan (a checkpointed step with ring buffers) a leaf keeps each
    step's carry instead, its buffers as overwritten windows, and recomputes the
    step (:func:`~brainx.transform.remat.ring_buffers.ring_leaf`); a plan that is
    one leaf was recorded on the forward pass (``kept``).
    """
    if ring is not None and plan.is_leaf:
        return ring_backward(ring, rev, kept, state, lambda j: (j, rev.index(j)), plan.length,
                             unroll)
    varying, invariant = (None, None) if ring is not None else rev.split_residuals(c0)
    # A residual that is the step's input slice itself is read again from xs, not stored.
    refetch: List[Optional[int]] = []

    def forward(c, t):
        x = rev._x(t)
        c2, res = rev._linearize(rev.k_leaves, c, x)
        refetch[:] = [next((i for i, xi in enumerate(x) if r is xi), None) for r in res]
        return c2, [r for r, m, f in zip(res, varying, refetch) if m and f is None]

    def merge(stacked, t):
        x = rev._x(t) if any(f is not None for f in refetch) else []
        it_v, it_i = iter(stacked), iter(invariant)
        return [x[f] if f is not None else next(it_v) if m else next(it_i)
                for m, f in zip(varying, refetch)]

    def node(p: SegmentPlan, c, o, state, kept=None, flip=False):
        if p.is_leaf and ring is not None:
            return ring_leaf(ring, rev, c, o, state, p.length, unroll)
        if p.is_leaf:
            _, stacked = lax.scan(lambda c, j: forward(c, o + j), c, jnp.arange(p.length))

            def back(state, j):
                return rev.apply(state, merge(take(stacked, j), o + j), o + j), None

            return lax.scan(back, state, jnp.arange(p.length), reverse=True, unroll=unroll)[0]
        if kept is None:  # in step order: step t reads its input at rev.index(t)
            step = lambda c, t: (rev.advance(c, o + t), None)
            _, kept = _record(step, c, p.length, p.stride, reverse=False)
        starts, tail_start = kept
        if p.tail is not None:
            state = node(p.tail, tail_start, o + p.count * p.stride, state)

        def segment(state, k):
            start = take(starts, p.count - 1 - k if flip else k)
            return node(p.child, start, o + k * p.stride, state), None

        return lax.scan(segment, state, jnp.arange(p.count), reverse=True)[0]

    # The loop's own record is in index order: reversed, segment k is row count - 1 - k.
    return node(plan, c0, jnp.zeros((), jnp.int32), state, kept, flip=rev.reverse)


def _convert(f, consts, *example):
    """``(g, hoisted)``: ``f(consts, *args)`` traced once, its closed-over tracers made inputs.

    ``g((consts, hoisted), *args)`` computes ``f(consts, *args)``; ``hoisted``
    are the tracers ``f`` closes over, which a ``custom_vjp`` must receive as
    arguments to differentiate them. (``jax.closure_convert`` does the same
    but keeps every function and tracer it saw in a global cache.)
    """
    closed, out_shape = jax.make_jaxpr(f, return_shape=True)(consts, *example)
    hoist = [isinstance(c, Tracer) for c in closed.consts]
    hoisted = [c for c, h in zip(closed.consts, hoist) if h]
    fixed = [c for c, h in zip(closed.consts, hoist) if not h]
    jaxpr, out_tree = closed.jaxpr, jax.tree.structure(out_shape)

    def g(cs, *args):
        it_h, it_f = iter(cs[1]), iter(fixed)
        values = [next(it_h) if h else next(it_f) for h in hoist]
        run = jex_core.jaxpr_as_fun(jex_core.ClosedJaxpr(jaxpr, values))
        return jax.tree.unflatten(out_tree, run(*jax.tree.leaves((cs[0],) + args)))

    return g, hoisted


def _strong(x):
    """``x`` as an array without weak type (a loop carry's type must not change)."""
    return jnp.asarray(x, dtype=jnp.result_type(x))


def vjp_scan(body: Callable, consts, init, xs, length: int, *, reverse: bool, unroll: int,
             schedule, monitor: Optional[Callable] = None):
    """``lax.scan`` of ``body(consts, carry, x) -> (carry, y)``, reversed by ``schedule``.

    ``unroll`` unrolls the loops that apply the step VJPs of a :class:`Nested`
    schedule; the forward loops stay rolled (``Binomial`` unrolls nothing). A step that
    writes a ring buffer (:mod:`~brainx.transform.remat.ring_buffers`) is not unrolled:
    XLA would keep a copy of the buffer's cotangent for every step of an unrolled iteration.
    """
    if length == 0:
        return lax.scan(lambda c, x: body(consts, c, x), init, xs, length=0)
    init = jax.tree.map(_strong, init)
    x0 = None if xs is None else take(xs, 0)
    f, hoisted = _convert(body, consts, init, x0)
    plan = schedule.plan(length) if hasattr(schedule, "plan") else None  # Nested's
    mode = wants_ring(schedule)
    ring = None if mode is None else find_ring_plan(f, (consts, hoisted), init, x0,
                                                    need_checkpoint=mode != "always")
    if ring is not None:  # the step's checkpoints inlined: each step is recomputed once
        f = ring.step
    if unroll > 1 and (ring is not None or find_ring_plan(
            f, (consts, hoisted), init, x0, need_checkpoint=False) is not None):
        # unrolled, XLA kept one copy of a ring buffer's cotangent per unrolled step (the
        # E/I network of issue 44, unroll 5: 4 buffers more than the 12 carries kept)
        unroll = 1

    stride = 0 if plan is None else plan.stride

    def forward(cs, c0, xs, keep=stride):
        if keep == 0 and ring is not None and plan is not None and plan.is_leaf:
            return ring_forward(ring, cs, c0, xs, length, reverse=reverse, monitor=monitor)
        return _record(lambda c, i: f(cs, c, take(xs, i)), c0, length, keep, reverse=reverse,
                       monitor=monitor)

    @jax.custom_vjp
    def loop(cs, c0, xs):  # not differentiated: keep nothing
        return _record(lambda c, i: f(cs, c, take(xs, i)), c0, length, 0, reverse=reverse,
                       monitor=monitor)[0]

    def loop_fwd(cs, c0, xs):
        masks = (_perturbed(cs), _perturbed(c0), _perturbed(xs))
        cs, c0, xs = custom_vjp_primal_tree_values((cs, c0, xs))
        out, kept = forward(cs, c0, xs)
        return out, (cs, c0, xs, kept, masks)

    def loop_bwd(res, ct):
        cs, c0, xs, kept, masks = res
        ct_carry, ct_ys = ct
        policy = getattr(schedule, "policy", None)
        rev = _Reverser(f, cs, c0, xs, ct_ys, masks, length, reverse, policy)
        state = rev.initial_state(ct_carry)
        if plan is not None:
            state = _segments_backward(rev, plan, c0, kept, state, unroll, ring)
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
    init = jax.tree.map(_strong, init)
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
