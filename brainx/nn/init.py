"""Initialisers for parameters and states, with optional brainunit units.

An initialiser is a callable ``init(shape, key=None) -> array``. Pass one (or a
plain value) wherever a layer asks for ``w_init``, ``V_initializer`` and the
like; :func:`param` turns either into an array of the right shape.

Random initialisers draw their key from ``brainx.random`` (seed it with
``brainx.random.seed`` or :func:`seed`); pass ``key=`` for full control.

Examples
--------
>>> import brainunit as u
>>> from brainx.nn import init
>>> init.param(init.Constant(-65.0 * u.mV), (3,), batch_size=2).shape
(2, 3)
>>> w = init.KaimingNormal(unit=u.mA)((4, 5), key=__import__("jax").random.key(0))
>>> w.shape, str(w.unit)
((4, 5), 'mA')
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence, Tuple

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "Initializer", "Constant", "ZeroInit", "Normal", "Uniform", "KaimingNormal",
    "KaimingUniform", "XavierNormal", "LecunUniform", "Orthogonal", "param", "seed", "to_size",
]

def seed(value: int) -> None:
    """Seed the keys of random initialisers (``brainx.random.seed``)."""
    from brainx import random as brainx_random
    brainx_random.seed(value)


def _next_key() -> jax.Array:
    from brainx import random as brainx_random  # imported late: brainx.random imports states
    return brainx_random.split_key()


def to_size(size: int | Sequence[int] | None) -> Tuple[int, ...]:
    """``3 -> (3,)``, ``(2, 3) -> (2, 3)``, ``None -> ()``."""
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    size = tuple(int(s) for s in size)
    if any(s < 0 for s in size):
        raise ValueError(f"Sizes must be non-negative, got {size}.")
    return size


def _with_unit(x: jax.Array, unit) -> Any:
    return x if unit is None else u.Quantity(x, unit=unit)


class Initializer:
    """Base class: ``init(shape, key=None)`` returns an array (a Quantity if ``unit`` is set)."""

    unit = None

    def __call__(self, shape, key: Optional[jax.Array] = None):  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if v is not None)
        return f"{type(self).__name__}({fields})"


def _full(value, shape, dtype):
    # An explicit dtype: a Python scalar would give a weak-typed array, and the first
    # strongly-typed write to the state would then make every jitted step recompile.
    value = jnp.asarray(value, dtype)
    return jnp.full(shape, value, dtype=value.dtype)


class Constant(Initializer):
    """Every element equal to ``value`` (a number, array or Quantity, broadcast to ``shape``)."""

    def __init__(self, value: Any = 0.0, dtype=None):
        self.value = value
        self.dtype = dtype

    def __call__(self, shape, key=None):
        shape = to_size(shape)
        value = self.value
        if isinstance(value, u.Quantity):
            return u.Quantity(_full(value.mantissa, shape, self.dtype), unit=value.unit)
        return _full(value, shape, self.dtype)


class ZeroInit(Constant):
    """All zeros, in ``unit`` if given."""

    def __init__(self, unit=None, dtype=None):
        super().__init__(0.0 if unit is None else u.Quantity(0.0, unit=unit), dtype)
        self.unit = unit


class Normal(Initializer):
    """``mean + scale * N(0, 1)`` samples, in ``unit`` if given."""

    def __init__(self, mean: float = 0.0, scale: float = 1.0, unit=None, dtype=None):
        self.mean, self.scale, self.unit, self.dtype = mean, scale, unit, dtype

    def __call__(self, shape, key=None):
        key = _next_key() if key is None else key
        x = self.mean + self.scale * jax.random.normal(key, to_size(shape), self.dtype or float)
        return _with_unit(x, self.unit)


class Uniform(Initializer):
    """Samples uniform in ``[min_val, max_val)``, in ``unit`` if given."""

    def __init__(self, min_val: float = 0.0, max_val: float = 1.0, unit=None, dtype=None):
        self.min_val, self.max_val, self.unit, self.dtype = min_val, max_val, unit, dtype

    def __call__(self, shape, key=None):
        key = _next_key() if key is None else key
        x = jax.random.uniform(key, to_size(shape), self.dtype or float, self.min_val,
                               self.max_val)
        return _with_unit(x, self.unit)


def _fans(shape: Tuple[int, ...]) -> Tuple[int, int]:
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return shape[-2] * receptive, shape[-1] * receptive


class _VarianceScaling(Initializer):
    distribution = "normal"

    def __init__(self, scale: float, mode: str, unit=None, dtype=None):
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}.")
        self.scale, self.mode, self.unit, self.dtype = scale, mode, unit, dtype

    def __call__(self, shape, key=None):
        shape = to_size(shape)
        key = _next_key() if key is None else key
        fan_in, fan_out = _fans(shape)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[self.mode]
        var = self.scale / max(1.0, fan)
        if self.distribution == "normal":
            x = math.sqrt(var) * jax.random.normal(key, shape, self.dtype or float)
        else:
            lim = math.sqrt(3 * var)
            x = jax.random.uniform(key, shape, self.dtype or float, -lim, lim)
        return _with_unit(x, self.unit)


class KaimingNormal(_VarianceScaling):
    """He normal: variance ``scale / fan_in`` (``scale=2`` suits ReLU-like layers)."""

    def __init__(self, scale: float = 2.0, mode: str = "fan_in", unit=None, dtype=None):
        super().__init__(scale, mode, unit, dtype)


class KaimingUniform(_VarianceScaling):
    """He uniform: variance ``scale / fan_in``."""

    distribution = "uniform"

    def __init__(self, scale: float = 2.0, mode: str = "fan_in", unit=None, dtype=None):
        super().__init__(scale, mode, unit, dtype)


class XavierNormal(_VarianceScaling):
    """Glorot normal: variance ``scale / fan_avg``."""

    def __init__(self, scale: float = 1.0, mode: str = "fan_avg", unit=None, dtype=None):
        super().__init__(scale, mode, unit, dtype)


class LecunUniform(_VarianceScaling):
    """LeCun uniform: variance ``scale / fan_in`` (brainstate's default for embeddings)."""

    distribution = "uniform"

    def __init__(self, scale: float = 1.0, mode: str = "fan_in", unit=None, dtype=None):
        super().__init__(scale, mode, unit, dtype)


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix times ``scale`` (``jax.nn.initializers.orthogonal``).

    The last axis is the output axis; the others are flattened into rows.
    """

    def __init__(self, scale: float = 1.0, axis: int = -1, unit=None, dtype=None):
        self.scale, self.axis, self.unit, self.dtype = scale, axis, unit, dtype

    def __call__(self, shape, key=None):
        key = _next_key() if key is None else key
        make = jax.nn.initializers.orthogonal(self.scale, self.axis)
        return _with_unit(make(key, to_size(shape), self.dtype or float), self.unit)


def param(init: Callable | Any, sizes: int | Sequence[int], batch_size: Optional[int] = None,
          allow_none: bool = True, key: Optional[jax.Array] = None, broadcast: bool = False):
    """An array for a parameter or a state, from an initialiser or a value.

    Parameters
    ----------
    init : callable or array-like or Quantity
        An initialiser ``init(shape)`` is called with ``(batch_size, *sizes)``
        (or ``sizes``). A value is checked to broadcast to ``sizes`` and, when
        ``batch_size`` is given (or ``broadcast``), broadcast to the full
        shape; otherwise a value is returned unchanged (a scalar ``tau``
        stays a scalar).
    sizes : int or sequence of int
        The shape of one sample.
    batch_size : int, optional
        A leading batch dimension.
    broadcast : bool
        Always give a value the full shape (what a state's initial value needs).
    """
    sizes = to_size(sizes)
    shape = sizes if batch_size is None else (int(batch_size),) + sizes
    if init is None:
        if allow_none:
            return None
        raise ValueError("An initialiser or a value is required, got None.")
    if callable(init) and not isinstance(init, (u.Quantity, jax.Array, np.ndarray)):
        try:
            return init(shape, key=key) if key is not None else init(shape)
        except TypeError:
            if key is None:
                raise
            return init(shape)
    value_shape = np.shape(init.mantissa if isinstance(init, u.Quantity) else init)
    try:
        full = np.broadcast_shapes(value_shape, sizes)
    except ValueError:
        full = None
    if full != sizes:
        raise ValueError(f"A value of shape {value_shape} does not broadcast to the size {sizes}.")
    if batch_size is None and not broadcast:
        return init
    return Constant(init)(shape)
