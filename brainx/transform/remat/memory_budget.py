"""Pick a checkpointing strategy that fits a memory budget: the :class:`Budgeted` strategy.

``checkpointed_for_loop(..., memory_budget=bytes)`` runs the loop with a
:class:`Budgeted` strategy. When the loop is traced it measures the carry
(the loop carry plus the written states) and the residuals one step keeps
(``jax.vjp`` of the step), estimates the memory of each candidate below, and
runs the first that fits, in order of speed (fastest first):

======================  ===============================================
candidate               estimated memory of the reverse pass
======================  ===============================================
``Nested(levels=2)``    segment-start carries of every level + one
then ``PerStepRemat()``  innermost segment's step residuals;
then ``Nested(3)``,     ``PerStepRemat``: T carries + one step's residuals
``Nested(4)``
``Binomial(s)``         s + 1 carries + one step's residuals
(s = 64 ... 2)
======================  ===============================================

plus, for every candidate, the stacked outputs (T rows). The order is the
speed measured at T = 1000, 256 units on CPU (``benchmarks/remat_budget.py``). :attr:`Budgeted.choice` says what was chosen and
why (the estimate of every candidate tried).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

import jax
import numpy as np

from brainx.transform.remat.checkpoint_strategies import (
    Binomial, CheckpointStrategy, Nested, PerStepRemat,
)
from brainx.transform.remat.segment_plan import SegmentPlan

__all__ = ["Budgeted", "BudgetChoice", "estimate_bytes", "candidates"]


def _nbytes(tree: Any) -> int:
    return sum(int(math.prod(np.shape(x))) * np.dtype(jax.numpy.result_type(x)).itemsize
               for x in jax.tree.leaves(tree))


def _step_residual_bytes(body, consts, init, xs) -> int:
    """Bytes one step keeps for its backward pass (the leaves of its VJP)."""
    x0 = None if xs is None else jax.tree.map(lambda a: a[0], xs)
    out = jax.eval_shape(lambda c, x: jax.vjp(lambda c: body(consts, c, x), c)[1], init, x0)
    return _nbytes(out)


def candidates() -> List[CheckpointStrategy]:
    """The strategies :class:`Budgeted` tries, fastest first."""
    return ([Nested(levels=2), PerStepRemat()] + [Nested(levels=L) for L in (3, 4)]
            + [Binomial(s) for s in (64, 32, 16, 8, 4, 2)])


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
    """What :class:`Budgeted` chose: the strategy, its estimate, and every estimate tried."""

    strategy: CheckpointStrategy
    estimate: int
    budget: int
    fixed: int
    tried: List[Tuple[str, int]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"budget {self.budget:,} bytes: chose {self.strategy!r} (estimate "
                 f"{self.estimate:,} bytes incl. {self.fixed:,} for the stacked outputs)"]
        lines += [f"  {name}: {est:,} bytes{' (over)' if est > self.budget else ''}"
                  for name, est in self.tried]
        return "\n".join(lines)


@dataclass(unsafe_hash=True)
class Budgeted(CheckpointStrategy):
    """The fastest strategy whose estimated memory fits ``budget`` bytes.

    If none fits, the one with the smallest estimate runs (and
    :attr:`choice` says so). ``margin`` scales the estimate before it is
    compared, for what XLA adds (temporaries of the step, copies).

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
    margin: float = 1.1
    choice: Optional[BudgetChoice] = field(default=None, compare=False, hash=False)
    default_unroll = None

    def __post_init__(self):
        if not isinstance(self.budget, (int, np.integer)) or self.budget <= 0:
            raise ValueError(f"memory_budget must be a positive number of bytes, got "
                             f"{self.budget!r}.")

    def choose(self, body, consts, init, xs, length: int) -> BudgetChoice:
        carry = _nbytes(init)
        step = _step_residual_bytes(body, consts, init, xs)
        x0 = None if xs is None else jax.tree.map(lambda a: a[0], xs)
        y = _nbytes(jax.eval_shape(lambda c, x: body(consts, c, x)[1], init, x0))
        fixed = length * y
        tried, best = [], None
        for cand in candidates():
            est = int(self.margin * estimate_bytes(cand, length, carry, step)) + fixed
            tried.append((repr(cand), est))
            if best is None or est < best[1]:
                best = (cand, est)
            if est <= self.budget:
                return BudgetChoice(cand, est, int(self.budget), fixed, tried)
        return BudgetChoice(best[0], best[1], int(self.budget), fixed, tried)

    def scan(self, body, consts, init, xs, length, *, reverse, unroll, monitor=None):
        self.choice = self.choose(body, consts, init, xs, length)
        chosen = self.choice.strategy
        unroll = chosen.default_unroll if unroll is None else unroll
        return chosen.scan(body, consts, init, xs, length, reverse=reverse, unroll=unroll,
                           monitor=monitor)
