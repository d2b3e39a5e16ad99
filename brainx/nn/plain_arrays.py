"""Arrays and Quantities made without brainunit's backend detection.

``brainunit.math.asarray`` (and ``isscalar``, ``size``, ... on a Quantity
whose mantissa is a Python number) asks which array library its input
belongs to, and to answer imports every one it knows of: PyTorch among them,
5-7 s in an environment that has it, before the first step of a model that
never touches PyTorch. Building a layer needs none of that for what it is
given: Python numbers, NumPy and JAX arrays, and Quantities of those. The
functions here convert such values with ``jax.numpy`` directly and hand
anything else (a list of Quantities, another library's array) to brainunit.
:func:`where`, :func:`maximum` and :func:`reshape` do the same for a model's
step (a neuron's refractory update, a layer's shared weight).

Examples
--------
>>> import brainunit as u, numpy as np
>>> from brainx.nn.plain_arrays import as_array, is_scalar
>>> as_array(0.5).dtype, as_array(np.ones(3), dtype=float).dtype
(dtype('float32'), dtype('float64'))
>>> as_array(2.0 * u.mS).unit == u.mS, is_scalar(3.0 * u.mV), is_scalar(np.ones(2))
(True, True, False)
"""

from __future__ import annotations

from typing import Any

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["as_array", "is_scalar", "is_plain", "where", "maximum", "reshape"]

_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


def is_plain(x: Any) -> bool:
    """Whether ``x`` is a Python number, a NumPy or JAX array (or scalar), or a tracer."""
    return isinstance(x, _NUMBERS + (np.ndarray, jax.Array))


def as_array(x: Any, dtype: Any = None) -> Any:
    """``brainunit.math.asarray(x, dtype=dtype)``, without its backend detection where ``x`` is plain.

    As brainunit converts them, a NumPy value stays a NumPy array and a Python
    number or JAX array becomes a JAX array, in a Quantity of the same unit
    where ``x`` is one; anything else goes to ``brainunit.math.asarray``.
    """
    if is_plain(x):
        return _converted(x, dtype)
    if isinstance(x, u.Quantity) and is_plain(x.mantissa):
        return u.Quantity(_converted(x.mantissa, dtype), unit=x.unit)
    return u.math.asarray(x, dtype=dtype)


def _converted(x: Any, dtype: Any) -> Any:
    # as brainunit does: NumPy stays NumPy (float64 stays float64), the rest becomes JAX's
    if isinstance(x, (np.ndarray, np.number, np.bool_)):
        return np.asarray(x, dtype=dtype)
    return jnp.asarray(x, dtype=dtype)


def is_scalar(x: Any) -> bool:
    """``brainunit.math.isscalar(x)`` (a number, or an array or Quantity of no axes), without
    backend detection where ``x`` or its mantissa is plain."""
    value = x.mantissa if isinstance(x, u.Quantity) else x
    if isinstance(value, _NUMBERS):
        return True
    if isinstance(value, (np.ndarray, jax.Array)):
        return value.ndim == 0
    return bool(u.math.isscalar(x))


def _same_unit_mantissas(*values: Any):
    """``(unit, mantissas)`` when every value is plain or a Quantity of a plain mantissa, all
    in one unit (no conversion needed); else ``None``."""
    units = {u.get_unit(v) for v in values}
    if len(units) != 1:
        return None
    mantissas = [v.mantissa if isinstance(v, u.Quantity) else v for v in values]
    if not all(is_plain(m) for m in mantissas):
        return None
    return units.pop(), mantissas


def where(condition: Any, x: Any, y: Any) -> Any:
    """``brainunit.math.where(condition, x, y)``, without backend detection when ``x`` and
    ``y`` are plain or Quantities of one unit.

    Examples
    --------
    >>> import brainunit as u, jax.numpy as jnp
    >>> from brainx.nn.plain_arrays import where
    >>> where(jnp.array([True, False]), 5.0 * u.ms, jnp.zeros(2) * u.ms)
    Quantity([5. 0.], "ms")
    """
    found = _same_unit_mantissas(x, y)
    if found is None or not is_plain(condition):
        return u.math.where(condition, x, y)
    unit, (a, b) = found
    return u.maybe_decimal(u.Quantity(jnp.where(condition, a, b), unit=unit))


def maximum(x: Any, y: Any) -> Any:
    """``brainunit.math.maximum(x, y)``, without backend detection when both are plain or
    Quantities of one unit."""
    found = _same_unit_mantissas(x, y)
    if found is None:
        return u.math.maximum(x, y)
    unit, (a, b) = found
    return u.maybe_decimal(u.Quantity(jnp.maximum(a, b), unit=unit))


def reshape(x: Any, shape: Any) -> Any:
    """``brainunit.math.reshape(x, shape)``, without backend detection when ``x`` is plain
    or a Quantity of a plain mantissa (a NumPy value stays NumPy, as there)."""
    value = x.mantissa if isinstance(x, u.Quantity) else x
    if not is_plain(value):
        return u.math.reshape(x, shape)
    out = (np.reshape if isinstance(value, (np.ndarray, np.number, np.bool_)) else jnp.reshape)(
        value, shape)
    return u.Quantity(out, unit=x.unit) if isinstance(x, u.Quantity) else out
