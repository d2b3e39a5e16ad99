"""Pick a checkpointing strategy that fits a memory budget: the :class:`Budgeted` strategy.

``checkpointed_for_loop(..., memory_budget=bytes)`` runs the loop with a
:class:`Budgeted` strategy. When the loop is traced, it tries the candidates
below in order of speed (fastest first) and runs the first whose reverse pass
fits: it compiles the gradient of the loop alone (of the mean of its outputs,
with respect to its constants and initial carry) and reads XLA's temporary memory
(``memory_analysis()``), the number the budget is about, times a small
margin, plus one carry, for the program around the loop (on the benchmark the
whole gradient's temp memory was the loop's alone plus one carry). A candidate
whose kept carries alone exceed the budget is not compiled; when the loop
cannot be compiled alone (its step closes over a value traced outside it),
the estimates decide, times a margin.

======================  ===============================================
candidate               estimated memory of the reverse pass
======================  ===============================================
``Nested(levels=2)``    segment-start carries of every level + one
then ``Nested(3)``,     innermost segment's step residuals
``Nested(4)``
``PerStepRemat()``      T carries + one step's residuals
``Binomial(s)``         s + 1 carries + one step's residuals
(s = 64 ... 2)
======================  ===============================================

A budget that no candidate meets raises :class:`MemoryBudgetError` (a
``ValueError``) when the loop is traced, saying the smallest budget that fits
and the strategy that needs it.

The order is the speed measured at T = 1000 and 16 000, 256 units on CPU
(``benchmarks/remat_budget.py``; docs/checkpoint.md has the tables).
:attr:`Budgeted.choice` says what was chosen and why (the bytes of every
candidate tried, and whether they were measured or estimated).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

import jax
import numpy as np

from brainx.errors import BrainxError
from brainx.transform.remat.checkpoint_strategies import (
    Binomial, CheckpointStrategy, Nested, PerStepRemat,
)
from brainx.transform.control.segment_plan import SegmentPlan

__all__ = ["Budgeted", "BudgetChoice", "MemoryBudgetError", "estimate_bytes", "candidates"]


def _nbytes(tree: Any) -> int:
    # ``.itemsize`` of the dtype itself: ``numpy.dtype`` cannot read a typed key's
    return sum(int(math.prod(np.shape(x))) * jax.numpy.result_type(x).itemsize
               for x in jax.tree.leaves(tree))


def _step_residual_bytes(body, consts, init, xs) -> int:
    """Bytes one step keeps for its backward pass (the leaves of its VJP)."""
    x0 = None if xs is None else jax.tree.map(lambda a: a[0], xs)
    out = jax.eval_shape(lambda c, x: jax.vjp(lambda c: body(consts, c, x), c)[1], init, x0)
    return _nbytes(out)


def candidates() -> List[CheckpointStrategy]:
    """The strategies :class:`Budgeted` tries, fastest first."""
    return ([Nested(levels=L) for L in (2, 3, 4)] + [PerStepRemat()]
            + [Binomial(s) for s in (64, 32, 16, 8, 4, 2)])


def measure_bytes(strategy: CheckpointStrategy, body, consts, init, xs, length: int, *,
                  reverse: bool) -> int:
    """XLA's temporary memory (bytes) of the loop's gradient under ``strategy``, compiled alone.

    The gradient of a loss that is the sum of the means of the loop's inexact
    outputs (as a training loss uses them), with respect to the loop
    constants and the initial carry (not ``xs``). Raises when the loop cannot
    be compiled alone (its step closes over a tracer of an enclosing trace).
    """
    def loss(consts, init, xs):
        leaves = jax.tree.leaves(strategy.scan(body, consts, init, xs, length, reverse=reverse,
                                               unroll=strategy.default_unroll))
        return sum(a.mean() for a in leaves if jax.numpy.issubdtype(a.dtype, jax.numpy.inexact))

    spec = lambda tree: jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a),
                                                                    jax.numpy.result_type(a)),
                                     tree)
    gradient = jax.grad(loss, argnums=(0, 1), allow_int=True)
    compiled = jax.jit(gradient).lower(*spec((consts, init, xs))).compile()
    return int(compiled.memory_analysis().temp_size_in_bytes)


#: measured bytes by (strategy, the step's jaxpr, types, length, direction); shapes decide them
_MEASURED: "OrderedDict[tuple, int]" = OrderedDict()
_MAX_MEASURED = 256


def _measured(strategy, body, consts, init, xs, length: int, reverse: bool) -> int:
    """:func:`measure_bytes`, remembered for the same step and types (one compile each)."""
    x0 = None if xs is None else jax.tree.map(lambda a: a[0], xs)
    step = jax.make_jaxpr(body)(consts, init, x0)
    types = tuple((np.shape(a), str(jax.numpy.result_type(a)))
                  for a in jax.tree.leaves((consts, init, xs)))
    key = (repr(strategy), str(step), types, length, reverse)
    if key not in _MEASURED:
        _MEASURED[key] = measure_bytes(strategy, body, consts, init, xs, length, reverse=reverse)
        while len(_MEASURED) > _MAX_MEASURED:
            _MEASURED.popitem(last=False)
    return _MEASURED[key]


def carries_bytes(strategy: CheckpointStrategy, length: int, carry: int) -> int:
    """The bytes of the carries ``strategy`` keeps: a lower bound of its reverse pass."""
    return estimate_bytes(strategy, length, carry, 0)


def estimate_bytes(strategy: CheckpointStrategy, length: int, carry: int, step: int) -> int:
    """Estimated bytes the reverse pass of ``strategy`` keeps (carries and step residuals)."""
    if isinstance(strategy, PerStepRemat):
        return length * carry + step
    if isinstance(strategy, Nested):
        plan = SegmentPlan.balanced(length, strategy.levels)
        leaf = plan
        while not leaf.is_leaf:
            leaf = leaf.child
        return (plan.peak_carries() - leaf.length) * carry + leaf.length * step
    if isinstance(strategy, Binomial):
        return (strategy.snapshots + 1) * carry + step
    raise TypeError(f"No memory estimate for {strategy!r}.")


@dataclass
class BudgetChoice:
    """What :class:`Budgeted` chose: the strategy, its bytes, and the bytes of every one tried.

    ``tried`` holds ``(strategy, bytes, how)``, ``how`` being ``"measured"``
    (compiled alone), ``"estimated"`` or ``"skipped"`` (its carries alone over
    the budget).
    """

    strategy: CheckpointStrategy
    estimate: int
    budget: int
    fixed: int
    tried: List[Tuple[str, int, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"budget {self.budget:,} bytes: chose {self.strategy!r} ({self.estimate:,} "
                 f"bytes)"]
        lines += [f"  {name}: {est:,} bytes {how}{' (over)' if est > self.budget else ''}"
                  for name, est, how in self.tried]
        return "\n".join(lines)


class MemoryBudgetError(BrainxError, ValueError):
    """No checkpointing strategy fits a ``memory_budget``; says the smallest budget that does.

    ``choice`` is the :class:`BudgetChoice` of the strategy needing the fewest
    bytes (``choice.estimate``, the smallest budget that fits) with every
    candidate tried.
    """

    def __init__(self, message: str, choice: "BudgetChoice"):
        super().__init__(message)
        self.choice = choice


@dataclass(unsafe_hash=True)
class Budgeted(CheckpointStrategy):
    """The fastest strategy whose reverse pass fits ``budget`` bytes of XLA temp memory.

    Candidates are measured by compiling the loop's VJP alone (see the
    module docstring). If none fits, tracing the loop raises
    :class:`MemoryBudgetError`, naming the smallest budget that fits and the
    strategy that needs it (:attr:`choice` is then that strategy). ``margin`` scales the measured bytes before they are compared,
    for what the program around the loop adds; ``estimate_margin`` scales the
    estimates used when the loop cannot be compiled alone, for what XLA adds
    (temporaries of the step, copies). ``candidates`` replaces the list of
    :func:`candidates` (tried in the order given).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.transform.remat.memory_budget import Budgeted
    >>> w = brainx.ParamState(jnp.ones(8))
    >>> v = brainx.HiddenState(jnp.zeros(8))
    >>> def step(x):
    ...     v.value = jnp.tanh(v.value * w.value + x)
    ...     return v.value.sum()
    >>> strategy = Budgeted(4_000)
    >>> loss = lambda xs: brainx.transform.checkpointed_for_loop(step, xs, checkpoint=strategy).sum()
    >>> _ = brainx.transform.grad(loss, grad_states=w)(jnp.ones((100, 8)))
    >>> type(strategy.choice.strategy).__name__
    'Nested'
    """

    budget: int
    margin: float = 1.03
    estimate_margin: float = 1.1
    candidates: Optional[Tuple[CheckpointStrategy, ...]] = None
    choice: Optional[BudgetChoice] = field(default=None, compare=False, hash=False)
    default_unroll = None

    def __post_init__(self):
        if not isinstance(self.budget, (int, np.integer)) or self.budget <= 0:
            raise ValueError(f"memory_budget must be a positive number of bytes, got "
                             f"{self.budget!r}.")
        if self.candidates is not None:
            self.candidates = tuple(self.candidates)
            if not self.candidates or any(isinstance(c, Budgeted) or not isinstance(
                    c, CheckpointStrategy) for c in self.candidates):
                raise ValueError(f"Budgeted: candidates must be checkpoint strategies "
                                 f"(Nested(...), Binomial(...), ...), got {self.candidates!r}.")

    def choose(self, body, consts, init, xs, length: int, reverse: bool = False) -> BudgetChoice:
        carry = _nbytes(init)
        step = _step_residual_bytes(body, consts, init, xs)
        x0 = None if xs is None else jax.tree.map(lambda a: a[0], xs)
        y = _nbytes(jax.eval_shape(lambda c, x: body(consts, c, x)[1], init, x0))
        fixed = length * y
        measurable = True
        tried, best = [], None
        tries = candidates() if self.candidates is None else list(self.candidates)
        for cand in tries:
            lower = carries_bytes(cand, length, carry)
            if measurable and lower > self.budget:
                tried.append((repr(cand), lower, "skipped"))
                continue  # its carries alone are over the budget
            est, how = self._bytes(cand, body, consts, init, xs, length, reverse, carry, step,
                                   fixed, measurable)
            measurable = how == "measured"  # once one cannot be compiled alone, none can
            tried.append((repr(cand), est, how))
            if best is None or est < best[1]:
                best = (cand, est)
            if est <= self.budget:
                return BudgetChoice(cand, est, int(self.budget), fixed, tried)
        # None fits. A skipped candidate may need less than the best one tried (its carries are
        # only a lower bound): try those whose carries are under the best, fewest carries first.
        for i in sorted(range(len(tried)), key=lambda i: tried[i][1]):
            name, lower, how = tried[i]
            if how != "skipped" or (best is not None and lower >= best[1]):
                continue
            est, how = self._bytes(tries[i], body, consts, init, xs, length, reverse, carry,
                                   step, fixed, measurable)
            tried[i] = (name, est, how)
            if best is None or est < best[1]:
                best = (tries[i], est)
        choice = BudgetChoice(best[0], best[1], int(self.budget), fixed, tried)
        raise MemoryBudgetError(
            f"memory_budget={int(self.budget):,} bytes: no checkpointing strategy fits it. The "
            f"smallest budget that fits this loop is {best[1]:,} bytes, with {best[0]!r}. Pass "
            f"memory_budget={best[1]} or more, or shorten the loop or its carry. Bytes of "
            "each candidate (XLA temp memory of the loop's gradient, measured or estimated):\n"
            + "\n".join(str(choice).splitlines()[1:]), choice)

    def _bytes(self, cand, body, consts, init, xs, length, reverse, carry, step, fixed,
               measurable) -> Tuple[int, str]:
        """``(bytes, how)`` of one candidate, compared with the budget as :meth:`choose` does."""
        if measurable:
            try:  # + a copy of the carry around the loop
                est = _measured(cand, body, consts, init, xs, length, reverse)
                return int(self.margin * est) + carry, "measured"
            except Exception:  # a step closing over an outer tracer: estimates only
                pass
        return int(self.estimate_margin * estimate_bytes(cand, length, carry, step)) + fixed, \
            "estimated"

    def scan(self, body, consts, init, xs, length, *, reverse, unroll, monitor=None):
        try:
            self.choice = self.choose(body, consts, init, xs, length, reverse)
        except MemoryBudgetError as e:
            self.choice = e.choice
            raise
        chosen = self.choice.strategy
        unroll = chosen.default_unroll if unroll is None else unroll
        return chosen.scan(body, consts, init, xs, length, reverse=reverse, unroll=unroll,
                           monitor=monitor)
