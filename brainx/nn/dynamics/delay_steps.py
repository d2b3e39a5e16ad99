"""Delay times as whole steps: the rounding every :class:`~brainx.nn.Delay` uses.

A delay of time ``t`` reaches ``t / dt`` steps back (``t / update_every`` rows
with ``update_every``). A ratio is rarely an exact float: ``0.07 / 0.01`` is
``7.000000000000001`` and a float32 time gives ``9.000001``, so a bare ceiling
would make such delays one step too long. A ratio within ``1e-6 * max(1, n)`` of
a whole number ``n`` is ``n`` here, any other is rounded up (brainstate 0.6's
rule; 0.5.4 took the ceiling). :func:`delay_steps` does both; the delay itself
keeps the snapped fractional ratio when it interpolates.
"""

from __future__ import annotations

import warnings
from typing import Any

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx import environ

__all__ = ["delay_steps", "snap_to_whole"]

#: a step ratio within this distance of a whole number ``n``, relative to ``max(1, n)``, is
#: ``n``: it absorbs float round-off (``0.07 / 0.01 == 7.000000000000001``, a float32 time's
#: ``9.000001``) and nothing a user would mean as a fraction (brainstate 0.6's rule)
_STEP_RTOL = 1e-6


def snap_to_whole(ratio: Any) -> np.ndarray:
    """``ratio`` (steps, as floats) with each ratio that is whole up to float round-off made whole.

    A ratio within ``1e-6 * max(1, n)`` of a whole number ``n`` becomes ``n``; any
    other keeps its fraction (which :func:`delay_steps` then rounds up).

    Examples
    --------
    >>> from brainx.nn.dynamics.delay_steps import snap_to_whole
    >>> snap_to_whole([0.07 / 0.01, 2.5]).tolist()
    [7.0, 2.5]
    """
    ratio = np.asarray(ratio, dtype=np.float64)
    nearest = np.round(ratio)
    whole = np.abs(ratio - nearest) <= _STEP_RTOL * np.maximum(1.0, np.abs(nearest))
    return np.where(whole, nearest, ratio)


def _ratio(time: Any, spacing: Any, owner: str) -> np.ndarray:
    """``time / spacing`` as a NumPy float array (checked: concrete, finite, >= 0)."""
    try:
        ratio = time / spacing
        if isinstance(ratio, u.Quantity):
            ratio = ratio.to_decimal(u.UNITLESS)
        ratio = np.asarray(ratio, dtype=np.float64)
    except u.UnitMismatchError as e:
        raise u.UnitMismatchError(f"{owner}: the delay time {time!r} and the row spacing "
                                  f"{spacing!r} (dt, or update_every) must have "
                                  "the same dimension (give times in units of time when dt has "
                                  "them).") from e
    except jax.errors.TracerArrayConversionError as e:
        raise TypeError(f"{owner}: a registered delay time must be concrete, got a traced value; "
                        "register delays outside the compiled function, or read with "
                        "retrieve_at_step(steps) there.") from e
    if np.any(ratio < 0) or not np.all(np.isfinite(ratio)):
        raise ValueError(f"{owner}: delay times must be finite and non-negative, got {time!r}.")
    return ratio


def delay_steps(time: Any, spacing: Any) -> np.ndarray:
    """The whole number of rows (of ``spacing``, usually ``dt``) a delay of ``time`` reaches back.

    ``time / spacing``, rounded up, except that a ratio whole up to float round-off
    is that whole number (see :func:`snap_to_whole`); an integer array of the
    shape of ``time``. Times and ``spacing`` are numbers or Quantities of one
    dimension; a negative, infinite or traced time is an error.

    Examples
    --------
    >>> import brainunit as u
    >>> from brainx.nn.dynamics.delay_steps import delay_steps
    >>> int(delay_steps(0.07, 0.01)), int(delay_steps(0.25, 0.1))
    (7, 3)
    >>> delay_steps([0.05, 0.1, 0.11] * u.ms, 0.1 * u.ms).tolist()
    [1, 1, 2]
    """
    return np.ceil(snap_to_whole(_ratio(time, spacing, "delay_steps"))).astype(np.int64)


def _steps(delay: Any, time: Any) -> np.ndarray:
    """``time / spacing`` (``dt``, or ``update_every``) as floats, whole ratios snapped."""
    dt = environ.get_dt() if delay.update_every is None else delay.update_every
    return snap_to_whole(_ratio(time, dt, repr(delay)))


def _period_steps(update_every: Any) -> int:
    """``update_every / dt`` as a whole number of steps (at least 1; warns when it is rounded)."""
    dt = environ.get_dt()
    try:
        ratio = update_every / dt
        ratio = float(ratio.to_decimal(u.UNITLESS) if isinstance(ratio, u.Quantity) else ratio)
    except u.UnitMismatchError as e:
        raise u.UnitMismatchError(f"Delay: update_every={update_every!r} and dt = {dt!r} must have "
                                  "the same dimension.") from e
    except (TypeError, jax.errors.ConcretizationTypeError) as e:
        raise TypeError(f"Delay: update_every must be a concrete time (a number or a Quantity), "
                        f"got {update_every!r}.") from e
    if not np.isfinite(ratio) or snap_to_whole(ratio) < 1:
        raise ValueError(f"Delay: update_every must be at least dt = {dt!r}, got {update_every!r}.")
    steps = int(round(ratio))
    if abs(ratio - steps) > _STEP_RTOL * max(1.0, abs(ratio)):
        warnings.warn(f"Delay: update_every={update_every!r} is not a whole number of steps of "
                      f"dt = {dt!r}; the buffer is written every {steps} steps.", UserWarning,
                      stacklevel=4)
    return steps


def snap_traced(steps: Any) -> Any:
    """:func:`snap_to_whole` for a JAX array (also a traced one): the same rule, in ``jnp``."""
    nearest = jnp.round(steps)
    whole = jnp.abs(steps - nearest) <= _STEP_RTOL * jnp.maximum(1.0, jnp.abs(nearest))
    return jnp.where(whole, nearest, steps)
