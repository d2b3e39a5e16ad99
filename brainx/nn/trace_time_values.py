"""Arithmetic with values known when a step is traced: nothing is emitted for ``1 * x`` or ``0 + x``.

A neuron's formulas are written for every parameter (``V_rest + R I``,
``V - (V_th - V_reset) s``); with ``R = 1``, ``V_rest = 0`` the hand-written
step has no multiplication and no addition there, and JAX does not fold them
away itself (``1.0 * tracer`` is an equation). Every equation costs each
trace of the step (discovery, the loop body, the JVP, the transpose, the
lowering), so the neuron and synapse steps use :func:`times` and :func:`plus`,
and the surrogates (:mod:`brainx.nn.surrogate`) keep a known threshold, scale
and parameters as numbers.
A known scalar that is a JAX array is given to JAX as a NumPy scalar
(:func:`as_literal`): a literal of the jaxpr, not one more constant input of
every loop body it is used in. XLA folds either way; the compiled program is
the same.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import brainunit as u
import jax
import numpy as np

__all__ = ["known_value", "times", "plus", "as_literal"]


def known_value(x: Any) -> Optional[Tuple[np.generic, bool]]:
    """``(value, weak)`` if ``x`` is a unitless scalar known now (not traced), else ``None``.

    ``weak``: JAX types it weakly (a Python number, a weakly typed array), so it
    never changes the dtype of an array it meets.
    """
    if isinstance(x, u.Quantity):
        if not x.is_unitless:
            return None
        x = x.mantissa
    if isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, (int, float)):
        return np.asarray(x)[()], True
    if isinstance(x, np.number):
        return x, False
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.ndim == 0:
        return np.asarray(x)[()], x.weak_type
    return None


def times(a: Any, x: Any) -> Any:
    """``a * x``, or ``x`` itself when ``a`` is a known 1 (no unit) that changes nothing."""
    if _is(a, 1, x):
        return x
    return a * x


def plus(a: Any, b: Any) -> Any:
    """``a + b``, or the other one when one is a known 0 (no unit) that changes nothing."""
    if _is(a, 0, b):
        return b
    if _is(b, 0, a):
        return a
    return a + b


def as_literal(x: Any) -> Any:
    """A known scalar JAX array as a NumPy scalar of its dtype (a Python number if weakly typed).

    JAX then puts it in a jaxpr as a literal of the same type; a concrete array
    would be a constant input of the jaxpr (and of every loop body it is used
    in). Anything else (a tracer, a Quantity, a larger array) is returned as it is.
    """
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.ndim == 0:
        value = np.asarray(x)[()]
        return value.item() if x.weak_type else value
    return x


def _is(a: Any, number: int, x: Any) -> bool:
    """Whether ``a`` is the known ``number`` and leaving it out gives what JAX would: ``x``
    must be a float array (or Quantity) whose dtype ``a`` would not widen."""
    known = known_value(a)
    if known is None or known[0] != number:
        return False
    dtype = getattr(u.get_mantissa(x), "dtype", None)
    if dtype is None or not np.issubdtype(dtype, np.floating):
        return False  # a Python number, or an integer array: the operation converts it
    value, weak = known
    return weak or np.result_type(value.dtype, dtype) == dtype
