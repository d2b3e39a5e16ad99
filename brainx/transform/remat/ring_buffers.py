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

from typing import Any, Callable, List, Optional, Tuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jex_core

from brainx import environ
from brainx.transform.control.segment_plan import SegmentPlan
from brainx.transform.remat.remat_loops import take
from brainx.transform.remat.ring_writes import accumulating_axis, bind, write_kind

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
        body = None if accumulating_axis(eqn) is not None else _body_of(eqn)
        if body is not None:
            outs = _eval_inlined(body[0], body[1], invals, record)
        else:
            if record is not None:
                record(eqn, invals)
            outs = bind(eqn, invals)
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


class RingPlan:
    """A step ``f(consts, carry, x) -> (carry, y)`` with its ring buffers found.

    Built by :func:`find_ring_plan`. :meth:`step` runs the step with its
    checkpoints inlined; :meth:`record` also returns what the reverse pass
    needs to rebuild the carry before the step (every other carry leaf, and
    per buffer what its write kind keeps: :mod:`~brainx.transform.remat.ring_writes`);
    :meth:`restore` rebuilds it. A run of steps threads :meth:`start`'s value
    through :meth:`record` (where each slot was last written).
    """

    def __init__(self, closed, in_tree, out_tree, n_consts: int, carry_tree, buffers: list):
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

    def start(self, carry) -> list:
        """What :meth:`record` threads from step to step, at the start of a run from ``carry``."""
        leaves = jax.tree.leaves(carry)
        return [b.start(leaves[b.leaf]) for b in self.buffers]

    def record(self, consts, carry, x, j, aux):
        """``(new_carry, y), saved, aux``: step ``j`` of a run and what :meth:`restore` needs."""
        seen = {}

        def record(eqn, invals):
            if id(eqn) in self._targets:
                seen[self._targets[id(eqn)].leaf] = invals

        out = self._run(consts, carry, x, record)
        leaves = jax.tree.leaves(carry)
        others = [l for i, l in enumerate(leaves) if i not in self.buffer_leaves]
        kept, aux2 = [], []
        for b, a in zip(self.buffers, aux):
            k, a = b.record(seen[b.leaf], j, a, None)
            kept.append(k)
            aux2.append(a)
        return out, (others, kept), aux2

    def restore(self, consts, carry_after, saved, j, carry_start):
        """The carry before step ``j`` of a run from ``carry_start`` whose :meth:`record` s,
        stacked, are ``saved``."""
        others, kept = saved
        leaves, start = jax.tree.leaves(carry_after), jax.tree.leaves(carry_start)
        it = iter(take(others, j))
        out = [None if i in self.buffer_leaves else next(it) for i in range(len(leaves))]
        env = _ConstEnv(self, consts)
        for b, k in zip(self.buffers, kept):
            out[b.leaf] = b.restore(leaves[b.leaf], k, j, start[b.leaf], env)
        return jax.tree.unflatten(self.carry_tree, out)

    def names(self) -> List[int]:
        """The positions, among the carry leaves, of the buffers restored."""
        return sorted(self.buffer_leaves)


class _ConstEnv:
    """The values of the step's variables that depend on loop constants only, on demand."""

    def __init__(self, plan: RingPlan, consts):
        self.jaxpr, self.plan = plan.closed.jaxpr, plan
        self.env = dict(zip(self.jaxpr.constvars, plan.closed.consts))
        self.env.update(zip(self.jaxpr.invars, jax.tree.leaves(consts)))
        self.producer = {v: e for e in self.jaxpr.eqns for v in e.outvars}

    def __call__(self, var):
        if isinstance(var, jex_core.Literal):
            return var.val
        if var not in self.env:
            eqn = self.producer[var]
            outs = bind(eqn, [self(v) for v in eqn.invars])
            self.env.update(zip(eqn.outvars, outs))
        return self.env[var]


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
    varying = jaxpr.invars[n_consts:]                  # the carry and the step's input
    buffers = []
    for k, v in enumerate(out_leaves):
        invar = jaxpr.invars[n_consts + k]
        eqn = producer.get(v) if isinstance(v, jex_core.Var) else None
        if eqn is not None and (accumulating_axis(eqn) is None or eqn.outvars[0] is v):
            kind = write_kind(k, eqn, invar, jaxpr, varying, producer)
            if kind is not None:
                buffers.append(kind)
    if not buffers:
        return None
    return RingPlan(flat, in_tree, jax.tree.structure(shape), n_consts, carry_tree, buffers)


def ring_forward(plan: RingPlan, consts, c0, xs, length: int, *, reverse: bool,
                 monitor: Optional[Callable] = None):
    """The loop run with :meth:`RingPlan.record`: ``((final carry, ys), kept)``, ``kept``
    being ``(final carry, saved, c0)`` with ``saved`` stacked by index, as ``ys`` is
    (``lax.scan``'s order)."""
    def one(carry, i):
        c, aux = carry
        (c2, y), saved, aux = plan.record(consts, c, take(xs, i), i, aux)
        if monitor is not None:
            monitor(length - i if reverse else i + 1, c2, y)
        return (c2, aux), (y, saved)

    (c, _), (ys, saved) = lax.scan(one, (c0, plan.start(c0)), jnp.arange(length),
                                   reverse=reverse)
    return (c, ys), (c, saved, c0)


def ring_backward(plan: RingPlan, rev, kept, state, steps: Callable, length: int, unroll: int):
    """Reverse ``length`` steps from the carry after the last: restore, then apply each step.

    ``kept`` is ``(carry after the last step, saved, carry before the first)``;
    ``steps(j)`` is ``(t, row)``: the loop step of the ``j``-th step here and its row in
    ``saved``. ``rev`` reverses one step
    (:class:`~brainx.transform.remat.reverse_loops._Reverser`).
    """
    c_end, saved, c_start = kept
    consts = rev.k_tree.unflatten(rev.k_leaves)

    def back(carry, j):
        c_next, state = carry
        t, row = steps(j)
        c = plan.restore(consts, c_next, saved, row, c_start)
        return (c, rev.reverse_at(state, c, t)), None

    return lax.scan(back, (c_end, state), jnp.arange(length), reverse=True, unroll=unroll)[0][1]


def ring_leaf(plan: RingPlan, rev, c, o, state, length: int, unroll: int):
    """An innermost segment of :class:`~brainx.transform.Nested`, steps ``[o, o + length)``
    from carry ``c``: recorded forward, then reversed with its buffers restored."""
    consts = rev.k_tree.unflatten(rev.k_leaves)

    def one(carry, j):
        c, aux = carry
        x = rev.x_tree.unflatten(rev._x(o + j)) if rev.x_leaves else rev.xs
        (c2, _), saved, aux = plan.record(consts, c, x, j, aux)
        return (c2, aux), saved

    (c_end, _), saved = lax.scan(one, (c, plan.start(c)), jnp.arange(length))
    return ring_backward(plan, rev, (c_end, saved, c), state, lambda j: (o + j, j), length,
                         unroll)


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
