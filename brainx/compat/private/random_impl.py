"""brainstate's key-first sampling helpers (``brainstate.random._impl``), over brainx's samplers.

brainstate keeps its distributions twice: as methods of ``RandomState`` (public) and as
functions of an explicit key in the private ``_impl`` module, which its tests call
(``_impl.logseries(key, 0.5, shape=3)``). Here each such function is brainx's own
sampler called with that key (``brainx.random.DEFAULT.logseries(0.5, size=3, key=key)``:
a ``key=`` draw leaves every generator as it was), and the small array, dtype and unit
helpers beside them are written for brainx with brainstate's meaning:

=========================  ===================================================================
brainstate name            what it does here
=========================  ===================================================================
``multinomial``            counts of ``n`` trials over ``p``'s last axis (``n_max`` unused:
                           brainx's sampler needs no bound)
``f``, ``noncentral_f``,   the samplers of :class:`brainx.random.RandomState`, with
``logseries``, ``zipf``,   ``size=shape`` and ``key=key``
``power``,
``hypergeometric``
``von_mises_centered``     :func:`brainx.random.rejection.von_mises_centered`; an empty
                           ``shape`` is the concentration's; a float dtype only
``formalize_key``, ...     as :mod:`brainx.compat.private.random` (``_size2shape``,
                           ``_check_py_seq``)
``_reshape``,              reshape (NumPy for NumPy input), left-pad ranks to a common one
``_promote_shapes``
``_dtype``, ``const``,     the dtype of a value or type, a constant of an example's dtype,
``_is_python_scalar``      whether a value is a (weakly typed) scalar
``_check_shape``,          parameter shapes that must broadcast to ``shape``; ``value *
``_loc_scale``             scale + loc`` with either left out
``_remove_unit_param``,    a parameter without its (dimensionless) unit; ``(mantissa,
``_scale_unit``,           unit)``; ``(loc, scale, unit)`` in loc's unit (or scale's)
``_loc_scale_unit``
``_validate_raw_key_data`` a raw key must be ``uint32[2]`` (``TypeError``)
=========================  ===================================================================
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx.compat.private import public_fallback
from brainx.compat.private.random import _check_py_seq, _size2shape, formalize_key
from brainx.random import rejection
from brainx.random.default import DEFAULT

__all__ = ["multinomial", "f", "noncentral_f", "logseries", "zipf", "power", "hypergeometric",
           "von_mises_centered", "formalize_key", "_size2shape", "_check_py_seq", "_reshape",
           "_promote_shapes", "_dtype", "const", "_is_python_scalar", "_check_shape",
           "_loc_scale", "_remove_unit_param", "_scale_unit", "_loc_scale_unit",
           "_validate_raw_key_data"]


def multinomial(key: Any, p: Any, n: Any, *, n_max: Optional[int] = None,
                shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Counts of ``n`` trials over the outcomes of ``p``'s last axis, batched as ``p`` and ``n``."""
    batch = tuple(shape) + tuple(np.broadcast_shapes(np.shape(n), np.shape(p)[:-1]))
    return DEFAULT.multinomial(n, p, size=batch, key=key, dtype=dtype, check_valid=False)


def f(key: Any, dfnum: Any, dfden: Any, shape: Any = None, dtype: Any = None) -> Any:
    """F-distributed samples drawn with ``key``."""
    return DEFAULT.f(dfnum, dfden, size=shape, key=key, dtype=dtype)


def noncentral_f(key: Any, dfnum: Any, dfden: Any, nonc: Any, shape: Any = None,
                 dtype: Any = None) -> Any:
    """Noncentral F-distributed samples drawn with ``key``."""
    return DEFAULT.noncentral_f(dfnum, dfden, nonc, size=shape, key=key, dtype=dtype)


def logseries(key: Any, p: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Logarithmic-series samples drawn with ``key``."""
    return DEFAULT.logseries(p, size=shape, key=key, dtype=dtype)


def zipf(key: Any, a: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Zipf samples drawn with ``key``."""
    return DEFAULT.zipf(a, size=shape, key=key, dtype=dtype)


def power(key: Any, a: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Power-distribution samples drawn with ``key``."""
    return DEFAULT.power(a, size=shape, key=key, dtype=dtype)


def hypergeometric(key: Any, ngood: Any, nbad: Any, nsample: Any, shape: Any = None,
                   dtype: Any = None) -> Any:
    """Hypergeometric samples drawn with ``key``."""
    return DEFAULT.hypergeometric(ngood, nbad, nsample, size=shape, key=key, dtype=dtype)


def von_mises_centered(key: Any, concentration: Any, shape: Sequence[int] = (),
                       dtype: Any = jnp.float64) -> Any:
    """Von Mises angles around 0; an empty ``shape`` is the concentration's."""
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"von_mises_centered: dtype must be a float dtype, got {dtype}.")
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    shape = tuple(shape) or tuple(np.shape(concentration))
    return rejection.von_mises_centered(formalize_key(key), concentration, shape, dtype)


def _reshape(x: Any, shape: Sequence[int]) -> Any:
    """``x`` reshaped: through NumPy for a Python scalar or NumPy array, else ``jnp``."""
    if isinstance(x, (bool, int, float, complex, np.ndarray, np.generic)):
        return np.reshape(x, shape)
    return jnp.reshape(x, shape)


def _promote_shapes(*args: Any, shape: Sequence[int] = ()) -> list:
    """``args`` with leading 1-axes added up to one common rank (with ``shape``'s)."""
    if len(args) < 2 and not shape:
        return list(args)
    shapes = [np.shape(a) for a in args]
    ndim = len(jax.lax.broadcast_shapes(tuple(shape), *shapes))
    return [_reshape(a, (1,) * (ndim - len(s)) + s) for a, s in zip(args, shapes)]


def _dtype(x: Any, *, canonicalize: bool = False) -> Any:
    """The NumPy dtype of a value, a Python scalar type, or anything ``np.result_type`` takes."""
    if x is None:
        raise ValueError(f"cannot find the dtype of {x!r}.")
    if isinstance(x, type) and x in (bool, int, float, complex):
        dtype = np.dtype(x)
    elif type(x) in (bool, int, float, complex):
        dtype = np.dtype(type(x))
    elif hasattr(x, "dtype"):
        dtype = x.dtype
    else:
        dtype = np.result_type(x)
    return jax.dtypes.canonicalize_dtype(dtype) if canonicalize else dtype


def _is_python_scalar(x: Any) -> bool:
    """Whether ``x`` is a scalar (a weakly typed one for a JAX value)."""
    if hasattr(x, "aval"):
        return bool(getattr(x.aval, "weak_type", False))
    return np.ndim(x) == 0 or isinstance(x, (bool, int, float, complex))


def const(example: Any, val: Any) -> Any:
    """``val`` as a NumPy value of ``example``'s dtype (a scalar's canonical one)."""
    if _is_python_scalar(example):
        return np.array(val, jax.dtypes.canonicalize_dtype(_dtype(example)))
    return np.array(val, _dtype(example))


def _check_shape(name: str, shape: Sequence[int], *param_shapes: Sequence[int]) -> None:
    """Every parameter shape must broadcast to ``shape`` (``ValueError`` naming ``name``)."""
    if param_shapes:
        joined = jax.lax.broadcast_shapes(tuple(shape), *map(tuple, param_shapes))
        if joined != tuple(shape):
            raise ValueError(f"{name}: the parameter shapes {param_shapes} broadcast to "
                             f"{joined}, not to the sample shape {tuple(shape)}.")


def _loc_scale(loc: Any, scale: Any, value: Any) -> Any:
    """``value * scale + loc``, either of ``loc`` and ``scale`` may be ``None``."""
    if scale is not None:
        value = value * scale
    return value if loc is None else value + loc


def _remove_unit_param(name: str, x: Any, dtype: Any = None) -> Any:
    """``x`` as a plain value (a dimensionless Quantity's number), cast to ``dtype``."""
    if x is None:
        return None
    if isinstance(x, u.Quantity):
        if not x.dim.is_dimensionless:
            raise ValueError(f"{name} must be dimensionless, got a Quantity in {x.unit}.")
        x = x.to_decimal()
    if isinstance(x, (list, tuple)) or dtype is not None:
        x = jnp.asarray(x, dtype)
    return x


def _scale_unit(x: Any) -> tuple:
    """``(mantissa, unit)`` of ``x`` (``u.UNITLESS`` for a plain value or ``None``)."""
    if isinstance(x, u.Quantity):
        return x.mantissa, x.unit
    return x, u.UNITLESS


def _loc_scale_unit(loc: Any, scale: Any) -> tuple:
    """``(loc, scale, unit)`` as numbers in one unit: ``loc``'s, else ``scale``'s.

    A plain value is read in that unit; a Quantity of another dimension raises
    ``u.UnitMismatchError``.
    """
    unit = next((x.unit for x in (loc, scale) if isinstance(x, u.Quantity)), u.UNITLESS)

    def number(x):
        if isinstance(x, u.Quantity):
            if x.dim != unit.dim:
                raise u.UnitMismatchError(f"loc and scale must share a dimension, got {loc} and "
                                          f"{scale}.")
            return x.to(unit).mantissa
        return x

    return number(loc), number(scale), unit


def _validate_raw_key_data(key: Any) -> None:
    """A raw key must be a ``uint32`` array of two elements (``TypeError`` otherwise)."""
    if not hasattr(key, "dtype") or not hasattr(key, "shape"):
        raise TypeError(f"a raw key must be a uint32 array of size 2, got {key!r}.")
    if key.dtype != np.uint32 or np.size(key) != 2:
        raise TypeError(f"a raw key must be a uint32 array of size 2, got {key.dtype} of "
                        f"shape {np.shape(key)}.")


__getattr__ = public_fallback(__name__, "brainx.random")
