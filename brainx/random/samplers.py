"""The sampling methods of :class:`~brainx.random.RandomState` (numpy-like signatures).

Each method takes ``key=``: with it, the given key is used and the generator's
own key is left untouched; without it, the generator's key is split (read and
written, so it threads through the stateful transforms). Sizes follow numpy:
``size=None`` gives the broadcast shape of the parameters. Location and scale
parameters may be brainunit Quantities; the sample then carries their unit
(plain numbers next to a Quantity are taken in its unit).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import brainunit as u
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jax.core import Tracer

__all__ = ["Samplers"]

Size = Optional[Union[int, Sequence[int]]]


def _shape(size: Size) -> tuple:
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)


def _bshape(*xs) -> tuple:
    return tuple(np.broadcast_shapes(*(np.shape(x) for x in xs if x is not None)))


def _in_common_unit(*xs):
    """``(mantissas, unit)``: Quantities converted to the first one's unit."""
    unit = next((x.unit for x in xs if isinstance(x, u.Quantity)), None)
    if unit is None:
        return xs, None
    return tuple(x if x is None else (x.to(unit).mantissa if isinstance(x, u.Quantity) else x)
                 for x in xs), unit


def _with_unit(x, unit):
    return x if unit is None or unit.is_unitless else u.Quantity(x, unit=unit)


def _check_concrete(cond, message: str) -> None:
    """Raise ``ValueError(message)`` when ``cond`` is concretely true (skipped under a trace)."""
    if isinstance(cond, Tracer):
        return
    if bool(np.any(np.asarray(cond))):
        raise ValueError(message)


def _float(dtype):
    return float if dtype is None else dtype


class Samplers:
    """Mixin: samplers drawing with ``self._next_key(key)``."""

    def _next_key(self, key: Any) -> Any:  # pragma: no cover - provided by RandomState
        raise NotImplementedError

    def rand(self, *dn: int, key: Any = None, dtype: Any = None):
        """Uniform samples in ``[0, 1)`` of shape ``dn`` (``numpy.random.rand``)."""
        return jr.uniform(self._next_key(key), dn, _float(dtype))

    def randn(self, *dn: int, key: Any = None, dtype: Any = None):
        """Standard normal samples of shape ``dn`` (``numpy.random.randn``)."""
        return jr.normal(self._next_key(key), dn, _float(dtype))

    def random(self, size: Size = None, key: Any = None, dtype: Any = None):
        """Uniform samples in ``[0, 1)`` of shape ``size``."""
        return jr.uniform(self._next_key(key), _shape(size), _float(dtype))

    def uniform(self, low=0.0, high=1.0, size: Size = None, key: Any = None, dtype: Any = None):
        """Uniform samples in ``[low, high)``.

        Examples
        --------
        >>> import brainunit as u, brainx
        >>> v = brainx.random.RandomState(0).uniform(-70 * u.mV, -50 * u.mV, size=4)
        >>> v.unit == u.mV, bool(((v >= -70 * u.mV) & (v < -50 * u.mV)).all())
        (True, True)
        """
        (low, high), unit = _in_common_unit(low, high)
        shape = _bshape(low, high) if size is None else _shape(size)
        r = jr.uniform(self._next_key(key), shape, _float(dtype), minval=low, maxval=high)
        return _with_unit(r, unit)

    def normal(self, loc=None, scale=None, size: Size = None, key: Any = None, dtype: Any = None):
        """Normal samples with mean ``loc`` (default 0) and standard deviation ``scale`` (default 1)."""
        (loc, scale), unit = _in_common_unit(loc, scale)
        shape = _bshape(loc, scale) if size is None else _shape(size)
        r = jr.normal(self._next_key(key), shape, _float(dtype))
        if scale is not None:
            r = r * scale
        if loc is not None:
            r = r + loc
        return _with_unit(r, unit)

    def truncated_normal(self, lower, upper, size: Size = None, loc=0.0, scale=1.0,
                         key: Any = None, dtype: Any = None, check_valid: bool = True):
        """Normal samples with mean ``loc`` and std ``scale``, truncated to ``(lower, upper)``."""
        (lower, upper, loc, scale), unit = _in_common_unit(lower, upper, loc, scale)
        if check_valid:
            _check_concrete(jnp.asarray(lower) >= jnp.asarray(upper),
                            f"truncated_normal: lower must be below upper, got {lower} and {upper}.")
            _check_concrete(jnp.asarray(scale) <= 0,
                            f"truncated_normal: scale must be positive, got {scale}.")
        shape = _bshape(lower, upper, loc, scale) if size is None else _shape(size)
        z = jr.truncated_normal(self._next_key(key), (lower - loc) / scale,
                                (upper - loc) / scale, shape, _float(dtype))
        return _with_unit(z * scale + loc, unit)

    def bernoulli(self, p=0.5, size: Size = None, key: Any = None):
        """Booleans that are ``True`` with probability ``p``."""
        _check_concrete((jnp.asarray(p) < 0) | (jnp.asarray(p) > 1),
                        f"bernoulli: p must be in [0, 1], got {p}.")
        shape = np.shape(p) if size is None else _shape(size)
        return jr.bernoulli(self._next_key(key), p, shape)

    def randint(self, low, high=None, size: Size = None, dtype: Any = None, key: Any = None):
        """Integers in ``[low, high)`` (``[0, low)`` if ``high`` is omitted)."""
        if high is None:
            low, high = 0, low
        shape = _bshape(low, high) if size is None else _shape(size)
        return jr.randint(self._next_key(key), shape, low, high, int if dtype is None else dtype)

    def choice(self, a, size: Size = None, replace: bool = True, p=None, key: Any = None):
        """Samples from ``a`` (an array, or ``arange(a)`` for an integer)."""
        (a,), unit = _in_common_unit(a)
        r = jr.choice(self._next_key(key), a, _shape(size), replace=replace, p=p)
        return _with_unit(r, unit)

    def permutation(self, x, axis: int = 0, independent: bool = False, key: Any = None):
        """A permuted copy of ``x`` along ``axis`` (or a permutation of ``arange(x)``)."""
        (x,), unit = _in_common_unit(x)
        r = jr.permutation(self._next_key(key), x, axis, independent=independent)
        return _with_unit(r, unit)

    def shuffle(self, x, axis: int = 0, key: Any = None):
        """``x`` shuffled along ``axis``, returned (JAX arrays cannot be shuffled in place)."""
        return self.permutation(x, axis=axis, key=key)

    def exponential(self, scale=None, size: Size = None, key: Any = None, dtype: Any = None):
        """Exponential samples with mean ``scale`` (default 1), as ``numpy.random.exponential``."""
        (scale,), unit = _in_common_unit(scale)
        shape = _bshape(scale) if size is None else _shape(size)
        r = jr.exponential(self._next_key(key), shape, _float(dtype))
        return _with_unit(r if scale is None else r * scale, unit)

    def gamma(self, shape, scale=None, size: Size = None, key: Any = None, dtype: Any = None):
        """Gamma samples with shape ``shape`` and scale ``scale`` (default 1)."""
        (scale,), unit = _in_common_unit(scale)
        out = _bshape(shape, scale) if size is None else _shape(size)
        r = jr.gamma(self._next_key(key), shape, out, _float(dtype))
        return _with_unit(r if scale is None else r * scale, unit)

    def beta(self, a, b, size: Size = None, key: Any = None, dtype: Any = None):
        """Beta samples with parameters ``a`` and ``b``."""
        shape = _bshape(a, b) if size is None else _shape(size)
        return jr.beta(self._next_key(key), a, b, shape, _float(dtype))

    def poisson(self, lam=1.0, size: Size = None, key: Any = None, dtype: Any = None):
        """Poisson counts with rate ``lam``."""
        _check_concrete(jnp.asarray(lam) < 0, f"poisson: lam must be non-negative, got {lam}.")
        shape = np.shape(lam) if size is None else _shape(size)
        return jr.poisson(self._next_key(key), lam, shape, int if dtype is None else dtype)
