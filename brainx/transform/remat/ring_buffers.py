"""Ring buffers in checkpointed loops: keep the slot a step overwrote, not the whole buffer.

A checkpointed step (``jax.checkpoint``, so :func:`~brainx.transform.checkpoint`)
keeps its *inputs* for the backward pass and recomputes the rest. In a loop
the inputs are the carry, and a delay's buffer is part of it: a step that
writes one row of a ``(max_delay, N)`` buffer keeps all ``max_delay x N``
values of it, at every step. Yet the buffer before the step is the buffer
after it with that one row put back, so the row (``N`` values) and its index
are enough, if the reverse pass walks the loop backwards and *restores* the
buffer as it goes.

This module finds such states and builds that reverse pass:

* :func:`find_ring_plan` reads the step's jaxpr (the checkpoints and ``jit``
  calls in it inlined) and takes as a ring buffer every carried leaf whose new
  value is its old value with one window written: a ``scatter`` of one row
  along the leading axis (``buffer.at[i].set(row)``, which ``Delay.update``
  does) or a ``dynamic_update_slice`` of fewer rows than the buffer has. The
  rule is exact, not a heuristic: both operations change only the window they
  write (with the same index clamping or dropping when the window is reused),
  so writing the old window back gives the old buffer bit for bit. Any other
  write (an accumulating ``.at[i].add``, a roll, a whole new buffer) is left
  as it was: such a leaf is kept whole, as before.
* :class:`RingPlan` runs the inlined step and, for the reverse pass, records
  per step the carry without its buffers plus each buffer's overwritten window
  and index (``record``), and rebuilds the carry before a step from the carry
  after it (``restore``).

The loops that use it: ``for_loop`` / ``scan`` over a step that calls a
checkpointed function (:func:`checkpointed_step_scan`), and the strategies of
:mod:`~brainx.transform.remat.checkpoint_strategies` (see there). A step whose
checkpoint has a ``policy`` is left to JAX: the policy says what it keeps.
``brainx.environ.set(ring_buffer_remat=False)`` turns the rule off (then a
``for_loop`` of a checkpointed step is again differentiable in forward mode;
with the rule it is reverse mode only, like :class:`~brainx.transform.Nested`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jex_core
from jax.extend import source_info_util

from brainx import environ
from brainx.transform.control.segment_plan import SegmentPlan
from brainx.transform.remat.remat_loops import take

__all__ = ["RingPlan", "find_ring_plan", "inline_checkpoints", "has_checkpoint", "enabled",
           "ring_forward", "ring_backward", "ring_leaf", "wants_ring", "PER_STEP", "ENABLED_KEY"]

#: The ``brainx.environ`` switch (default on).
ENABLED_KEY = "ring_buffer_remat"

_CHECKPOINTS = ("checkpoint", "remat2")
_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "checkpoint": "jaxpr", "remat2": "jaxpr"}


def enabled() -> bool:
    """Whether the rule is on (``brainx.environ``'s ``ring_buffer_remat``, default ``True``)."""
    return bool(environ.get(ENABLED_KEY, True))


def _body_of(eqn) -> Optional[Tuple[Any, list]]:
    """``(jaxpr, consts)`` of a call or checkpoint equation, ``None`` for anything else."""
    key = _CALLS.get(eqn.primitive.name)
    if key is None or key not in eqn.params:
        return None
    inner = eqn.params[key]
    if isinstance(inner, jex_core.ClosedJaxpr):
        return inner.jaxpr, list(inner.consts)
    return inner, []


def _bind(eqn, invals) -> list:
    """The outputs of ``eqn`` applied to ``invals`` (its source line kept for messages)."""
    params = eqn.primitive.get_bind_params(eqn.params)
    subfuns, params = params if isinstance(params, tuple) else ((), params)  # jax < 0.9: a pair
    with source_info_util.user_context(eqn.source_info.traceback), eqn.ctx.manager:
        outs = eqn.primitive.bind(*subfuns, *invals, **params)
    return outs if eqn.primitive.multiple_results else [outs]


def _eval_inlined(jaxpr, consts, args, record=None) -> list:
    """Evaluate ``jaxpr``, running the bodies of its calls and checkpoints in place.

    ``record(eqn, invals)`` is called for each top-level equation (inlined ones
    included), before it runs.
    """
    env = {}

    def read(v):
        return v.val if isinstance(v, jex_core.Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        body = _body_of(eqn)
        if body is not None:
            outs = _eval_inlined(body[0], body[1], invals, record)
        else:
            if record is not None:
                record(eqn, invals)
            outs = _bind(eqn, invals)
        for v, x in zip(eqn.outvars, outs):
            if not isinstance(v, jex_core.DropVar):
                env[v] = x
    return [read(v) for v in jaxpr.outvars]


def inline_checkpoints(fun: Callable) -> Callable:
    """``fun`` with every checkpoint (and ``jit`` call) in it run in place.

    Differentiated, the result keeps what the plain function keeps: a real
    no-remat program even where ``fun`` calls :func:`~brainx.transform.checkpoint`.

    >>> import jax, jax.numpy as jnp
    >>> f = jax.checkpoint(jnp.sin)
    >>> g = inline_checkpoints(f)
    >>> has_checkpoint(jax.make_jaxpr(f)(1.0).jaxpr), has_checkpoint(jax.make_jaxpr(g)(1.0).jaxpr)
    (True, False)
    >>> bool(jnp.allclose(jax.grad(g)(1.0), jnp.cos(1.0)))
    True
    """
    def inlined(*args):
        closed, shape = jax.make_jaxpr(fun, return_shape=True)(*args)
        outs = _eval_inlined(closed.jaxpr, closed.consts, jax.tree.leaves(args))
        return jax.tree.unflatten(jax.tree.structure(shape), outs)

    inlined.__name__ = getattr(fun, "__name__", "step")
    return inlined


def _walk(jaxpr):
    for eqn in jaxpr.eqns:
        yield eqn
        body = _body_of(eqn)
        if body is not None:
            yield from _walk(body[0])


def has_checkpoint(jaxpr, *, without_policy: bool = False) -> bool:
    """Whether ``jaxpr`` (or a call in it) holds a checkpoint (one without a policy)."""
    return any(e.primitive.name in _CHECKPOINTS and
               (not without_policy or e.params.get("policy") is None) for e in _walk(jaxpr))


def _checkpoint_policies(jaxpr) -> bool:
    return any(e.primitive.name in _CHECKPOINTS and e.params.get("policy") is not None
               for e in _walk(jaxpr))


@dataclass(frozen=True)
class _Buffer:
    """A carried leaf written by one window: where, how, and how to write the window back."""

    leaf: int            # position among the carry leaves
    eqn: Any             # the writing equation (scatter or dynamic_update_slice)
    window: Tuple[int, ...]

    def index_vars(self) -> list:
        return [self.eqn.invars[1]] if self.eqn.primitive.name == "scatter" \
            else list(self.eqn.invars[2:])

    def old_window(self, buf, index):
        """The window of ``buf`` the write at ``index`` covers."""
        if self.eqn.primitive.name == "scatter":   # one row at index[0], out of range: clipped
            row = lax.dynamic_index_in_dim(buf, jnp.reshape(index[0], ())[()], 0, keepdims=False)
            return row
        return lax.dynamic_slice(buf, index, self.window)

    def write_back(self, buf, window, index):
        """``buf`` with ``window`` written as the step wrote its row (same mode, same clamping)."""
        if self.eqn.primitive.name == "scatter":
            return _bind(self.eqn, [buf, index[0], window])[0]
        return lax.dynamic_update_slice(buf, window, index)


def _one_window(eqn, operand_aval) -> Optional[Tuple[int, ...]]:
    """The window's shape if ``eqn`` writes one window of a buffer worth restoring."""
    shape = tuple(operand_aval.shape)
    if not shape or shape[0] < 2:
        return None
    name = eqn.primitive.name
    if name == "dynamic_update_slice":
        window = tuple(eqn.invars[1].aval.shape)
        return window if math.prod(window) * 2 <= math.prod(shape) else None
    if name != "scatter" or eqn.params.get("update_jaxpr") is not None:
        return None
    dn = eqn.params["dimension_numbers"]
    idx_shape = tuple(eqn.invars[1].aval.shape)
    upd_shape = tuple(eqn.invars[2].aval.shape)
    if (idx_shape == (1,) and tuple(dn.inserted_window_dims) == (0,)
            and tuple(dn.scatter_dims_to_operand_dims) == (0,)
            and tuple(dn.update_window_dims) == tuple(range(len(shape) - 1))
            and not tuple(dn.operand_batching_dims) and upd_shape == shape[1:]):
        return upd_shape
    return None


class RingPlan:
    """A step ``f(consts, carry, x) -> (carry, y)`` with its ring buffers found.

    Built by :func:`find_ring_plan`. :meth:`step` runs the step with its
    checkpoints inlined; :meth:`record` also returns what the reverse pass
    needs to rebuild the carry before the step (every other carry leaf, and
    each buffer's overwritten window with its index); :meth:`restore` rebuilds it.
    """

    def __init__(self, closed, in_tree, out_tree, n_consts: int, carry_tree,
                 buffers: List[_Buffer]):
        self.closed, self.in_tree, self.out_tree = closed, in_tree, out_tree
        self.n_consts, self.carry_tree, self.buffers = n_consts, carry_tree, buffers
        self._targets = {id(b.eqn): b for b in buffers}
        self.buffer_leaves = {b.leaf for b in buffers}

    def _run(self, consts, carry, x, record=None):
        args = jax.tree.leaves((consts, carry, x))
        outs = _eval_inlined(self.closed.jaxpr, self.closed.consts, args, record)
        return jax.tree.unflatten(self.out_tree, outs)

    def step(self, consts, carry, x):
        """``f(consts, carry, x)``, its checkpoints run in place."""
        return self._run(consts, carry, x)

    def record(self, consts, carry, x):
        """``(new_carry, y), saved``: the step and what :meth:`restore` needs."""
        seen = {}

        def record(eqn, invals):
            if id(eqn) in self._targets:
                b = self._targets[id(eqn)]
                seen[b.leaf] = [invals[1]] if eqn.primitive.name == "scatter" else invals[2:]

        out = self._run(consts, carry, x, record)
        leaves = jax.tree.leaves(carry)
        others = [l for i, l in enumerate(leaves) if i not in self.buffer_leaves]
        windows = [(b.old_window(leaves[b.leaf], seen[b.leaf]), seen[b.leaf])
                   for b in self.buffers]
        return out, (others, windows)

    def restore(self, carry_after, saved):
        """The carry before the step whose :meth:`record` gave ``saved``."""
        others, windows = saved
        leaves = jax.tree.leaves(carry_after)
        it = iter(others)
        out = [None if i in self.buffer_leaves else next(it) for i in range(len(leaves))]
        for b, (window, index) in zip(self.buffers, windows):
            out[b.leaf] = b.write_back(leaves[b.leaf], window, index)
        return jax.tree.unflatten(self.carry_tree, out)

    def names(self) -> List[int]:
        """The positions, among the carry leaves, of the buffers restored."""
        return sorted(self.buffer_leaves)


def find_ring_plan(f: Callable, consts, carry, x, *, need_checkpoint: bool = True
                   ) -> Optional[RingPlan]:
    """The :class:`RingPlan` of ``f(consts, carry, x) -> (carry, y)``, or ``None``.

    ``None`` when the rule is off, no carried leaf is written by one window,
    a checkpoint in the step has a policy, or (``need_checkpoint``) the step
    calls no checkpoint at all (then JAX keeps only what the plain step needs,
    the buffer's write index, and there is nothing to gain).
    """
    if not enabled():
        return None
    closed, shape = jax.make_jaxpr(f, return_shape=True)(consts, carry, x)
    if _checkpoint_policies(closed.jaxpr):
        return None
    if need_checkpoint and not has_checkpoint(closed.jaxpr):
        return None
    in_tree = jax.tree.structure((consts, carry, x))
    n_consts = len(jax.tree.leaves(consts))
    carry_leaves, carry_tree = jax.tree.flatten(carry)
    # the step with its calls inlined, so that a write and the carry are in one jaxpr
    flat = jax.make_jaxpr(lambda *a: _eval_inlined(closed.jaxpr, closed.consts, a))(
        *jax.tree.leaves((consts, carry, x)))
    jaxpr = flat.jaxpr
    producer = {v: e for e in jaxpr.eqns for v in e.outvars}
    out_leaves = jaxpr.outvars[:len(carry_leaves)]    # (carry, y): the carry leaves come first
    buffers = []
    for k, v in enumerate(out_leaves):
        invar = jaxpr.invars[n_consts + k]
        eqn = producer.get(v) if isinstance(v, jex_core.Var) else None
        if eqn is None or eqn.invars[0] is not invar:
            continue
        window = _one_window(eqn, invar.aval)
        if window is not None:
            buffers.append(_Buffer(k, eqn, window))
    if not buffers:
        return None
    return RingPlan(flat, in_tree, jax.tree.structure(shape), n_consts, carry_tree, buffers)


def ring_forward(plan: RingPlan, consts, c0, xs, length: int, *, reverse: bool,
                 monitor: Optional[Callable] = None):
    """The loop run with :meth:`RingPlan.record`: ``((final carry, ys), (final carry, saved))``.

    ``saved`` is stacked by index, as ``ys`` is (``lax.scan``'s order).
    """
    def one(c, i):
        (c2, y), saved = plan.record(consts, c, take(xs, i))
        if monitor is not None:
            monitor(length - i if reverse else i + 1, c2, y)
        return c2, (y, saved)

    c, (ys, saved) = lax.scan(one, c0, jnp.arange(length), reverse=reverse)
    return (c, ys), (c, saved)


def ring_backward(plan: RingPlan, rev, kept, state, steps: Callable, length: int, unroll: int):
    """Reverse ``length`` steps from the carry after the last: restore, then apply each step.

    ``kept`` is ``(carry after the last step, saved)``; ``steps(j)`` is ``(t, row)``: the
    loop step of the ``j``-th step here and its row in ``saved``. ``rev`` reverses one
    step (:class:`~brainx.transform.remat.reverse_loops._Reverser`).
    """
    c_end, saved = kept

    def back(carry, j):
        c_next, state = carry
        t, row = steps(j)
        c = plan.restore(c_next, take(saved, row))
        return (c, rev.reverse_at(state, c, t)), None

    return lax.scan(back, (c_end, state), jnp.arange(length), reverse=True, unroll=unroll)[0][1]


def ring_leaf(plan: RingPlan, rev, c, o, state, length: int, unroll: int):
    """An innermost segment of :class:`~brainx.transform.Nested`, steps ``[o, o + length)``
    from carry ``c``: recorded forward, then reversed with its buffers restored."""
    consts = rev.k_tree.unflatten(rev.k_leaves)

    def one(c, j):
        x = rev.x_tree.unflatten(rev._x(o + j)) if rev.x_leaves else rev.xs
        (c2, _), saved = plan.record(consts, c, x)
        return c2, saved

    kept = lax.scan(one, c, jnp.arange(length))
    return ring_backward(plan, rev, kept, state, lambda j: (o + j, j), length, unroll)


def wants_ring(schedule) -> Optional[str]:
    """``"always"``, ``"checkpointed"`` or ``None``: when ``schedule`` restores ring buffers."""
    if getattr(schedule, "policy", None) is not None:
        return None
    return getattr(schedule, "ring_buffers", None)


class _PerStep:
    """The schedule of a checkpointed step's loop: one leaf, every buffer restored."""

    ring_buffers = "always"
    policy = None

    def plan(self, length: int) -> SegmentPlan:
        return SegmentPlan(length)


#: :func:`~brainx.transform.remat.reverse_loops.vjp_scan`'s schedule for a loop of
#: checkpointed steps: keep each step's carry, buffers as their overwritten windows
PER_STEP = _PerStep()
