"""Equality by value and bits: what a cache may treat as "the same value".

Python's ``==`` says ``0.0 == -0.0``, ``1 == True`` and ``nan != nan``; a
cache that reused a computation on that word would give ``+inf`` for
``1 / -0.0`` or an integer where a bool was traced. :func:`same_value` is the
stricter test brainx's caches use (jaxpr comparison, settings read by a
trace): the same type, and the same bits.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

__all__ = ["same_value"]

_PLAIN = (bool, int, str, bytes, type(None), np.dtype)


def same_value(x: Any, y: Any) -> bool:
    """Whether ``x`` and ``y`` have the same type and bits (arrays: dtype, shape, weak type, bytes).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.util.equality import same_value
    >>> same_value(0.0, -0.0), same_value(1, True), same_value(float("nan"), float("nan"))
    (False, False, True)
    >>> same_value(jnp.ones(2), jnp.ones(2)), same_value(jnp.ones(2), jnp.ones(2, jnp.int32))
    (True, False)
    """
    if x is y:
        return True
    if type(x) is not type(y):
        return False
    if isinstance(x, float):
        return struct.pack("<d", x) == struct.pack("<d", y)
    if isinstance(x, complex):
        return struct.pack("<dd", x.real, x.imag) == struct.pack("<dd", y.real, y.imag)
    if isinstance(x, _PLAIN):
        return x == y
    if isinstance(x, tuple):
        return len(x) == len(y) and all(same_value(a, b) for a, b in zip(x, y))
    if getattr(x, "weak_type", False) != getattr(y, "weak_type", False):
        return False
    try:
        a, b = np.asarray(x), np.asarray(y)
    except Exception:
        return False
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
