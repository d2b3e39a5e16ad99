"""Initialisers for parameters and states: ``jax.nn.initializers`` with brainunit units.

An initialiser is a callable ``init(shape, key=None) -> array``. Pass one (or a
plain value) wherever a layer asks for ``w_init``, ``V_initializer`` and the
like; :func:`param` turns either into an array of the right shape.

The random ones are ``jax.nn.initializers`` (``variance_scaling``, ``normal``,
``uniform``, ``orthogonal``) behind a small wrapper that adds what those lack:
a ``unit`` (the result is a ``brainunit.Quantity``), a key drawn from
``brainx.random`` when none is given (seed it with ``brainx.random.seed`` or
:func:`seed`), and fans for 0-d and 1-d shapes (a 1-d shape ``(n,)`` has
``fan_in = fan_out = n``). :class:`JaxInit` wraps any other JAX initialiser
the same way.

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

from typing import Any, Callable, Optional, Sequence, Tuple

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx import random as brainx_random

__all__ = [
    "Initializer", "JaxInit", "Constant", "ZeroInit", "Normal", "Uniform", "VarianceScaling",
    "KaimingNormal", "KaimingUniform", "XavierNormal", "XavierUniform", "LecunNormal",
    "LecunUniform", "Orthogonal", "param", "seed", "to_size",
]


def seed(value: int) -> None:
    """Seed the keys of random initialisers (``brainx.random.seed``)."""
    brainx_random.seed(value)


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


class Initializer:
    """Base class: ``init(shape, key=None)`` returns an array (a Quantity if ``unit`` is set).

    A random subclass only says which JAX initialiser it is (:meth:`jax_init`);
    the key, the dtype and the unit are handled here.
    """

    #: Instances are compared by type and attributes when jitted methods of the modules
    #: holding them are shared between instances (see ``brainx.transform.compiled.instance_sharing``).
    _share_by_attributes = True

    unit = None
    dtype = None

    def jax_init(self, shape: Tuple[int, ...]) -> Callable:  # pragma: no cover - abstract
        """The ``jax.nn.initializers`` function ``f(key, shape, dtype)`` for ``shape``."""
        raise NotImplementedError(f"{type(self).__name__} must implement jax_init or __call__.")

    def __call__(self, shape, key: Optional[jax.Array] = None):
        shape = to_size(shape)
        key = brainx_random.split_key() if key is None else key
        x = self.jax_init(shape)(key, shape, self.dtype or float)
        return x if self.unit is None else u.Quantity(x, unit=self.unit)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if v is not None)
        return f"{type(self).__name__}({fields})"


class JaxInit(Initializer):
    """Any JAX initialiser ``f(key, shape, dtype)``, with a unit and a default key.

    Examples
    --------
    >>> import jax, brainunit as u
    >>> from brainx.nn import init
    >>> w = init.JaxInit(jax.nn.initializers.glorot_normal(), unit=u.nS)((3, 3))
    >>> w.shape, str(w.unit)
    ((3, 3), 'nS')
    """

    def __init__(self, init: Callable, unit=None, dtype=None):
        if not callable(init):
            raise TypeError(f"JaxInit needs a JAX initialiser f(key, shape, dtype), got {init!r}.")
        self.init, self.unit, self.dtype = init, unit, dtype

    def jax_init(self, shape):
        return self.init


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


def _shifted(init: Callable, shift: float) -> Callable:
    return lambda key, shape, dtype: init(key, shape, dtype) + jnp.asarray(shift, dtype)


class Normal(Initializer):
    """``mean + scale * N(0, 1)`` samples (``jax.nn.initializers.normal``), in ``unit`` if given."""

    def __init__(self, mean: float = 0.0, scale: float = 1.0, unit=None, dtype=None):
        self.mean, self.scale, self.unit, self.dtype = mean, scale, unit, dtype

    def jax_init(self, shape):
        return _shifted(jax.nn.initializers.normal(self.scale), self.mean)


class Uniform(Initializer):
    """Samples uniform in ``[min_val, max_val)`` (``jax.nn.initializers.uniform``), in ``unit``."""

    def __init__(self, min_val: float = 0.0, max_val: float = 1.0, unit=None, dtype=None):
        self.min_val, self.max_val, self.unit, self.dtype = min_val, max_val, unit, dtype

    def jax_init(self, shape):
        return _shifted(jax.nn.initializers.uniform(self.max_val - self.min_val), self.min_val)


_MODES = ("fan_in", "fan_out", "fan_avg")
_DISTRIBUTIONS = ("normal", "truncated_normal", "uniform")


class VarianceScaling(Initializer):
    """Variance ``scale / fan`` (``jax.nn.initializers.variance_scaling``), in ``unit``.

    ``fan`` is ``fan_in``, ``fan_out`` or their mean (``mode``); the last two
    axes are (in, out) and any others the receptive field, as in JAX. A 1-d
    shape ``(n,)`` has both fans equal to ``n``, a scalar both equal to 1.

    Parameters
    ----------
    scale : float
        The variance times the fan.
    mode : {'fan_in', 'fan_out', 'fan_avg'}
    distribution : {'normal', 'truncated_normal', 'uniform'}
        ``normal`` is not truncated (as before brainx used JAX here).
    unit, dtype : optional
        The unit of the result, and its dtype (the default float if omitted).
    """

    def __init__(self, scale: float = 1.0, mode: str = "fan_in", distribution: str = "normal",
                 unit=None, dtype=None):
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}.")
        if distribution not in _DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {_DISTRIBUTIONS}, got {distribution!r}.")
        self.scale, self.mode, self.distribution = scale, mode, distribution
        self.unit, self.dtype = unit, dtype

    def jax_init(self, shape):
        # JAX needs two axes for its fans; below that, no axis is in or out and every
        # element counts as receptive field: fan_in = fan_out = size.
        axes = {} if len(shape) >= 2 else {"in_axis": (), "out_axis": ()}
        return jax.nn.initializers.variance_scaling(self.scale, self.mode, self.distribution,
                                                    **axes)


class KaimingNormal(VarianceScaling):
    """He normal: variance ``scale / fan_in`` (``scale=2`` suits ReLU-like layers)."""

    def __init__(self, scale: float = 2.0, mode: str = "fan_in", unit=None, dtype=None):
        super().__init__(scale, mode, "normal", unit, dtype)


class KaimingUniform(VarianceScaling):
    """He uniform: variance ``scale / fan_in``."""

    def __init__(self, scale: float = 2.0, mode: str = "fan_in", unit=None, dtype=None):
        super().__init__(scale, mode, "uniform", unit, dtype)


class XavierNormal(VarianceScaling):
    """Glorot normal: variance ``scale / fan_avg``."""

    def __init__(self, scale: float = 1.0, mode: str = "fan_avg", unit=None, dtype=None):
        super().__init__(scale, mode, "normal", unit, dtype)


class XavierUniform(VarianceScaling):
    """Glorot uniform: variance ``scale / fan_avg``."""

    def __init__(self, scale: float = 1.0, mode: str = "fan_avg", unit=None, dtype=None):
        super().__init__(scale, mode, "uniform", unit, dtype)


class LecunNormal(VarianceScaling):
    """LeCun normal: variance ``scale / fan_in``."""

    def __init__(self, scale: float = 1.0, mode: str = "fan_in", unit=None, dtype=None):
        super().__init__(scale, mode, "normal", unit, dtype)


class LecunUniform(VarianceScaling):
    """LeCun uniform: variance ``scale / fan_in``."""

    def __init__(self, scale: float = 1.0, mode: str = "fan_in", unit=None, dtype=None):
        super().__init__(scale, mode, "uniform", unit, dtype)


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix times ``scale`` (``jax.nn.initializers.orthogonal``)."""

    def __init__(self, scale: float = 1.0, axis: int = -1, unit=None, dtype=None):
        self.scale, self.axis, self.unit, self.dtype = scale, axis, unit, dtype

    def jax_init(self, shape):
        if len(shape) < 2:
            raise ValueError(f"Orthogonal needs a shape with at least 2 axes, got {shape}.")
        return jax.nn.initializers.orthogonal(self.scale, self.axis)


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
