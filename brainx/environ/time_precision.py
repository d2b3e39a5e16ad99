"""How a per-step time reaches a compiled function, and the warning when float32 cannot hold it.

A per-step setting (``t``: :mod:`brainx.environ.step_values`) is an input of the
compiled program, of the dtype JAX gives its value:

* with x64 on (``environ.set(precision=64)``), a Python float ``t`` is a float64
  input: a step of 0.1 ms stays 0.1 ms apart after 10^9 ms of model time;
* with x64 off (the default, 32 bits), JAX has no float64, and ``t`` arrives as
  float32, whose spacing is 2^-23 of the value: 0.0625 at ``t = 10^6`` (17
  minutes of model time in ms), so ``t % 10`` gives 3.3125 where the eager
  (float64) run gives 3.3, and steps 0.1 apart arrive 0.125 or 0.0625 apart.

brainx's representation of time that keeps every step at 32 bits is the **step
index**: ``environ.get("i")`` is an integer input (int32: exact for 2^31 steps,
59 hours of model time at 0.1 ms), and a duration or a phase computed from it in
integers before one multiplication by ``dt`` (``(i - i_spike) * dt``,
``(i % n) * dt``) is exact up to float32's rounding of the *result*, not of ``t``.
``t = i * dt`` itself is float32 again.

:func:`check_float32_time` warns, once per key, when a per-step value reaches a
compiled function as float32 rounded by more than a hundredth of ``dt`` (an
absolute 10^-3 where ``dt`` is not set), saying so and naming the two ways out.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, Hashable

import jax
import numpy as np

from .env_state import GLOBAL_ENV, UNSET, lookup
from .keys import DT

__all__ = ["StepTimePrecisionWarning", "check_float32_time", "float32_error"]

_WARNED: set = set()
_SMALL = 1024.0  # below it, float32 rounds a float by less than 2^-15
_LOCK = threading.Lock()


class StepTimePrecisionWarning(UserWarning):
    """A per-step setting reaches a compiled function as float32, rounded by a visible part of ``dt``."""


def float32_error(value: Any) -> float:
    """How far float32 is from ``value`` (a Python float or a float64 NumPy value; else 0).

    Examples
    --------
    >>> from brainx.environ.time_precision import float32_error
    >>> round(float32_error(1000003.3), 4), float32_error(0.5)
    (0.0125, 0.0)
    """
    if type(value) is float or isinstance(value, np.float64):
        return abs(float(np.float32(value)) - float(value))
    if isinstance(value, np.ndarray) and value.dtype == np.float64 and value.size:
        return float(np.max(np.abs(value.astype(np.float32).astype(np.float64) - value)))
    return 0.0


def _tolerance(value: Any) -> float:
    """A hundredth of ``dt`` in ``value``'s unit (10^-3 where it is not set or not comparable)."""
    dt = lookup(GLOBAL_ENV, DT)
    try:
        unit = getattr(value, "unit", None)
        if unit is not None:
            dt = dt.to_decimal(unit)
        elif hasattr(dt, "mantissa"):
            return 1e-3
        return abs(float(dt)) / 100 if dt is not UNSET else 1e-3
    except Exception:  # a dt of another kind (a unit that does not convert)
        return 1e-3


def check_float32_time(key: Hashable, value: Any) -> None:
    """Warn (once per key) if ``value`` of the per-step setting ``key`` loses part of a step in float32.

    On every compiled call that reads the setting, so cheap for most values: nothing is
    computed for an integer, an array of another dtype, or a float under :data:`_SMALL`
    (float32 rounds it by less than 2^-15, a hundredth of any ``dt`` over 0.003).
    """
    if key in _WARNED:
        return
    mantissa = getattr(value, "mantissa", value)
    if type(mantissa) is float:
        if -_SMALL < mantissa < _SMALL:
            return
    elif not isinstance(mantissa, (np.float64, np.ndarray)):
        return
    if jax.config.jax_enable_x64:
        return
    error = float32_error(mantissa)
    if not error or error <= _tolerance(value):
        return
    with _LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    warnings.warn(
        f"brainx.environ: the per-step setting {key!r} = {value!r} reaches the compiled function "
        f"as float32 (x64 is off), {error:.3g} away from its value: more than a hundredth of dt, "
        f"so steps lose their spacing (float32 keeps 24 bits). Compute durations and phases "
        f"from the step index, an exact integer input: `with environ.context(i=i, t=i * dt)`, "
        f"then (environ.get('i') - i_spike) * dt or (environ.get('i') % n) * dt; or compute "
        f"in float64 with environ.set(precision=64). See docs/environ.md, 'Time and precision'. "
        f"(Warned once per setting.)", StepTimePrecisionWarning, stacklevel=4)
