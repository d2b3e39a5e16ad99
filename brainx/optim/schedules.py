"""Learning-rate schedules under braintools' names, built from optax's schedules.

A schedule is a function ``lr(step)``: pass it as any optimiser's ``lr``. optax
calls it with the number of updates made so far (its own count, kept in the
optimiser's state), so ``step`` counts :meth:`~brainx.optim.OptaxOptimizer.update`
calls, not epochs as braintools' scheduler objects do: for a per-epoch decay,
give sizes in updates (``step_size=30 * steps_per_epoch``). Nothing needs
stepping by hand, and the schedule's position is saved with the optimiser.

========================  ========================================================
schedule                  learning rate at update ``t``
========================  ========================================================
ConstantLR                ``base_lr * factor`` for ``t < total_iters``, then ``base_lr``
StepLR                    ``base_lr * gamma ** (t // step_size)``
MultiStepLR               ``base_lr * gamma ** (number of milestones <= t)``
ExponentialLR             ``base_lr * gamma ** t``
ExponentialDecayLR        ``base_lr * decay_rate ** ((t - transition_begin) / decay_steps)``
CosineAnnealingLR         cosine from ``base_lr`` to ``eta_min`` over ``T_max``, then ``eta_min``
PolynomialLR              ``base_lr * (1 - t / total_iters) ** power``, then 0
LinearLR                  ``base_lr`` times a factor going linearly from start to end
WarmupScheduler           linear from ``warmup_start_lr`` to ``base_lr``, then ``base_lr``
WarmupCosineSchedule      linear warm-up, then cosine down to ``eta_min`` at ``total_steps``
PiecewiseConstantSchedule ``base_lr * values[i]``, ``i`` = number of boundaries ``<= t``
OneCycleLR                cosine one-cycle up to ``max_lr`` and down
SequentialLR              each schedule from its milestone on, restarted at 0
========================  ========================================================

Examples
--------
>>> from brainx.optim import StepLR
>>> lr = StepLR(0.1, step_size=2, gamma=0.5)
>>> [round(float(lr(t)), 4) for t in range(5)]
[0.1, 0.1, 0.05, 0.05, 0.025]
"""

from __future__ import annotations

import collections
from typing import Callable, Sequence

import optax

__all__ = [
    "ConstantLR", "StepLR", "MultiStepLR", "ExponentialLR", "ExponentialDecayLR",
    "CosineAnnealingLR", "PolynomialLR", "LinearLR", "WarmupScheduler", "WarmupCosineSchedule",
    "PiecewiseConstantSchedule", "OneCycleLR", "SequentialLR",
]

Schedule = Callable  # step -> learning rate (optax.Schedule)


def ConstantLR(base_lr: float = 1e-3, factor: float = 1.0 / 3, total_iters: int = 5) -> Schedule:
    """``base_lr * factor`` for the first ``total_iters`` updates, then ``base_lr``."""
    return optax.join_schedules([optax.constant_schedule(base_lr * factor),
                                 optax.constant_schedule(base_lr)], [total_iters])


def StepLR(base_lr: float = 1e-3, step_size: int = 30, gamma: float = 0.1) -> Schedule:
    """Multiply by ``gamma`` every ``step_size`` updates."""
    return optax.exponential_decay(base_lr, step_size, gamma, staircase=True)


def MultiStepLR(base_lr: float = 1e-3, milestones: Sequence[int] = (30, 60, 90),
                gamma: float = 0.1) -> Schedule:
    """Multiply by ``gamma`` at each milestone (a repeated milestone counts again)."""
    counts = collections.Counter(int(m) for m in milestones)
    return optax.piecewise_constant_schedule(base_lr, {m: gamma ** n for m, n in counts.items()})


def ExponentialLR(base_lr: float = 1e-3, gamma: float = 0.95) -> Schedule:
    """Multiply by ``gamma`` at every update."""
    return optax.exponential_decay(base_lr, 1, gamma)


def ExponentialDecayLR(base_lr: float = 1e-3, decay_steps: int = 1000, decay_rate: float = 0.96,
                       transition_begin: int = 0, staircase: bool = False,
                       end_value: float | None = None) -> Schedule:
    """``base_lr * decay_rate ** (t / decay_steps)`` from ``transition_begin`` on (optax's)."""
    return optax.exponential_decay(base_lr, decay_steps, decay_rate, transition_begin,
                                   staircase, end_value)


def CosineAnnealingLR(base_lr: float = 1e-3, T_max: int = 50, eta_min: float = 0.0) -> Schedule:
    """Half a cosine from ``base_lr`` down to ``eta_min`` over ``T_max`` updates, then ``eta_min``."""
    alpha = eta_min / base_lr if base_lr else 0.0
    return optax.cosine_decay_schedule(base_lr, T_max, alpha=alpha)


def PolynomialLR(base_lr: float = 1e-3, total_iters: int = 5, power: float = 1.0) -> Schedule:
    """``base_lr * (1 - t / total_iters) ** power`` down to 0 at ``total_iters``."""
    return optax.polynomial_schedule(base_lr, 0.0, power, total_iters)


def LinearLR(base_lr: float = 1e-3, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
             total_iters: int = 5) -> Schedule:
    """``base_lr`` times a factor going linearly from ``start_factor`` to ``end_factor``."""
    return optax.linear_schedule(base_lr * start_factor, base_lr * end_factor, total_iters)


def WarmupScheduler(base_lr: float = 1e-3, warmup_steps: int = 5,
                    warmup_start_lr: float = 0.0) -> Schedule:
    """Linear warm-up from ``warmup_start_lr`` to ``base_lr`` over ``warmup_steps``, then constant."""
    return optax.linear_schedule(warmup_start_lr, base_lr, warmup_steps)


def WarmupCosineSchedule(base_lr: float = 1e-3, warmup_steps: int = 1000,
                         total_steps: int = 10000, warmup_start_lr: float = 0.0,
                         eta_min: float = 0.0) -> Schedule:
    """Linear warm-up to ``base_lr``, then a cosine down to ``eta_min`` at ``total_steps``."""
    return optax.warmup_cosine_decay_schedule(warmup_start_lr, base_lr, warmup_steps,
                                              total_steps, end_value=eta_min)


def PiecewiseConstantSchedule(base_lr: float = 1.0, boundaries: Sequence[int] = (1000, 2000),
                              values: Sequence[float] = (1.0, 0.1, 0.01)) -> Schedule:
    """``base_lr * values[i]`` where ``i`` is the number of ``boundaries`` already reached."""
    if len(boundaries) != len(values) - 1:
        raise ValueError(f"PiecewiseConstantSchedule: {len(values)} values need "
                         f"{len(values) - 1} boundaries, got {len(boundaries)}.")
    return optax.join_schedules([optax.constant_schedule(base_lr * v) for v in values],
                                list(boundaries))


def OneCycleLR(max_lr: float = 1e-2, total_steps: int = 1000, pct_start: float = 0.3,
               div_factor: float = 25.0, final_div_factor: float = 1e4) -> Schedule:
    """One cycle: cosine up from ``max_lr / div_factor`` to ``max_lr``, then far down."""
    return optax.cosine_onecycle_schedule(total_steps, max_lr, pct_start, div_factor,
                                          final_div_factor)


def SequentialLR(schedules: Sequence[Schedule], milestones: Sequence[int]) -> Schedule:
    """``schedules[i]`` from ``milestones[i-1]`` on, each counting from 0 at its milestone."""
    if len(milestones) != len(schedules) - 1:
        raise ValueError(f"SequentialLR: {len(schedules)} schedules need "
                         f"{len(schedules) - 1} milestones, got {len(milestones)}.")
    return optax.join_schedules(list(schedules), list(milestones))
