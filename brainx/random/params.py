"""What the samplers share: output shapes, units, parameter checks, dtypes and keys.

Sizes follow numpy: ``size=None`` gives the broadcast shape of the parameters
and an integer ``n`` gives ``(n,)`` (:func:`out_shape`). A parameter given as a
list or tuple is an array, as in numpy (:func:`as_param`).

Location and scale parameters may be brainunit Quantities: :func:`in_common_unit`
takes their mantissas in one unit (plain numbers next to a Quantity are read in
its unit) and :func:`with_unit` gives the sample that unit back. Shape
parameters (probabilities, degrees of freedom, counts) must be dimensionless:
:func:`unitless` strips a dimensionless Quantity and refuses any other.

Parameter values are checked with :func:`check`, and the sample shape is found
with :func:`out_shape`, before the key is split, so an invalid call raises and
leaves the generator as it was. Under a trace the values
are unknown and the check is skipped, as numpy cannot check them either.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import brainunit as u
import numpy as np
from jax.core import Tracer

from brainx import environ

__all__ = [
    "Size", "SamplerMixin", "shape_of", "out_shape", "as_param", "in_common_unit", "with_unit",
    "unitless", "check", "float_dtype", "int_dtype",
]

Size = Optional[Union[int, Sequence[int]]]


def shape_of(size: Size) -> tuple:
    """``size`` as a shape tuple (``None`` is ``()``)."""
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)


def out_shape(size: Size, *params: Any) -> tuple:
    """The sample shape: ``size``, or the broadcast shape of ``params`` if it is ``None``.

    As in numpy, every parameter must broadcast to ``size``; else a ``ValueError``.

    Examples
    --------
    >>> from brainx.random.params import out_shape
    >>> out_shape(None, [1.0, 2.0], 3.0), out_shape((4, 2), [1.0, 2.0])
    ((2,), (4, 2))
    """
    shapes = [np.shape(p) for p in params if p is not None]
    if size is None:
        return tuple(np.broadcast_shapes(*shapes))
    shape = shape_of(size)
    try:
        fits = np.broadcast_shapes(shape, *shapes) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"size {shape} does not fit the parameters, of shapes {', '.join(map(str, shapes))}: "
            "each parameter must broadcast to size, as in numpy. Give a size that ends with "
            "the parameters' broadcast shape, or size=None for that shape.")
    return shape


def as_param(x: Any) -> Any:
    """A list or tuple parameter as an array (a Quantity if its entries carry one unit);
    anything else unchanged.

    Examples
    --------
    >>> import brainunit as u
    >>> from brainx.random.params import as_param
    >>> as_param([1.0, 2.0]).shape, as_param([1 * u.mV, 2 * u.mV]).unit == u.mV, as_param(3.0)
    ((2,), True, 3.0)
    """
    if isinstance(x, (list, tuple)):
        return u.math.asarray(x)
    return x


def in_common_unit(*xs: Any) -> tuple:
    """``(mantissas, unit)``: Quantities converted to the first one's unit (``unit`` is
    ``None`` when no argument is a Quantity); list and tuple arguments become arrays."""
    xs = tuple(as_param(x) for x in xs)
    unit = next((x.unit for x in xs if isinstance(x, u.Quantity)), None)
    if unit is None:
        return xs, None
    return tuple(x.to(unit).mantissa if isinstance(x, u.Quantity) else x for x in xs), unit


def with_unit(x: Any, unit: Any) -> Any:
    """``x`` as a Quantity in ``unit`` (``x`` itself when ``unit`` is ``None`` or unitless)."""
    return x if unit is None or unit.is_unitless else u.Quantity(x, unit=unit)


def unitless(sampler: str, name: str, x: Any) -> Any:
    """``x`` without its unit if it is dimensionless; a dimensional Quantity is an error.
    A list or tuple becomes an array."""
    x = as_param(x)
    if not isinstance(x, u.Quantity):
        return x
    if not x.dim.is_dimensionless:
        raise ValueError(f"{sampler}: {name} must be dimensionless, got a Quantity in {x.unit}. "
                         "Only location and scale parameters may carry a unit.")
    return x.to_decimal()


def check(cond: Any, message: str) -> None:
    """Raise ``ValueError(message)`` when ``cond`` is concretely true anywhere (skipped
    under a trace, where the values are unknown)."""
    if isinstance(cond, Tracer):
        return
    if bool(np.any(np.asarray(cond))):
        raise ValueError(message)


def float_dtype(dtype: Any) -> Any:
    """``dtype``, or the default float dtype of :mod:`brainx.environ`."""
    return environ.dftype() if dtype is None else dtype


def int_dtype(dtype: Any) -> Any:
    """``dtype``, or the default integer dtype of :mod:`brainx.environ`."""
    return environ.ditype() if dtype is None else dtype


class SamplerMixin:
    """The key a sampler draws with: ``self._next_key(key)``, provided by the generator."""

    def _next_key(self, key: Any) -> Any:  # pragma: no cover - provided by RandomState
        raise NotImplementedError
