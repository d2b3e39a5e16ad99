"""Initialisers for parameters and states, drawing as brainstate's ``nn.init`` does.

An initialiser is a callable ``init(shape, **kwargs) -> array``. Pass one (or a
plain value) wherever a layer asks for ``w_init``, ``V_initializer`` and the
like; :func:`param` turns either into an array of the right shape.

A random initialiser draws from a :class:`brainx.random.RandomState`: its own,
made from ``seed=`` when it is built (each call then advances it), else the
default generator at the time of the call (seed it with ``brainx.random.seed``
or :func:`seed`). Each call makes the same draw, with the same key and the same
arithmetic, as brainstate's initialiser of that name, so a seeded brainstate
program gets bit-identical weights on brainx (``KaimingNormal``, ``XavierNormal``
and ``LecunNormal`` are truncated normals, as there). A call takes the keywords
``dtype=`` (default :func:`brainx.environ.dftype`), ``rng=`` (another
generator) and ``key=`` (a JAX key used as is, leaving every generator
untouched). ``unit=`` makes the result a ``brainunit.Quantity``.

What brainx adds: fans for 0-d and 1-d shapes (a vector ``(n,)`` has
``fan_in = fan_out = n``, where brainstate fails), a ``dtype=`` kept by the
initialiser, :class:`JaxInit` for any ``jax.nn.initializers`` function, and
:func:`param`'s ``broadcast=`` and ``key=``.

Examples
--------
>>> import brainunit as u, brainx
>>> from brainx.nn import init
>>> init.param(init.Constant(-65.0 * u.mV), (3,), batch_size=2).shape
(2, 3)
>>> brainx.random.seed(0)
>>> w = init.KaimingNormal(unit=u.mA)((4, 5))
>>> w.shape, str(w.unit)
((4, 5), 'mA')
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Optional, Sequence, Tuple

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx import environ
from brainx import random as brainx_random
from brainx.nn.init_shapes import (  # noqa: F401  (brainstate's private helpers, reached here)
    _expand_params_to_match_sizes, _format_shape, _is_scalar, are_broadcastable_shapes,
    calculate_init_gain, to_size,
)
from brainx.state.state import State

__all__ = [
    "Initializer", "JaxInit", "Constant", "ZeroInit", "Identity", "Normal", "TruncatedNormal",
    "Uniform", "Gamma", "Exponential", "VarianceScaling", "KaimingNormal", "KaimingUniform",
    "XavierNormal", "XavierUniform", "LecunNormal", "LecunUniform", "Orthogonal",
    "DeltaOrthogonal", "InitializerArgumentError", "calculate_init_gain", "param", "seed",
    "to_size",
]


class InitializerArgumentError(ValueError, AssertionError):
    """A bad argument to an initialiser (brainstate asserts there, so it is an AssertionError too)."""


def seed(value: int) -> None:
    """Seed the default generator that unseeded initialisers draw from (``brainx.random.seed``)."""
    brainx_random.seed(value)


class Initializer:
    """Base class: ``init(shape, **kwargs)`` returns an array (a Quantity if ``unit`` is set).

    A subclass implements ``__call__``, or :meth:`jax_init` to be a JAX
    initialiser with brainx's key, dtype and unit.
    """

    #: Instances are compared by type and attributes when jitted methods of the modules
    #: holding them are shared between instances (see ``brainx.transform.compiled.instance_sharing``).
    _share_by_attributes = True

    unit = dtype = rng = None    # a unit, a dtype, an own generator: none unless given

    def jax_init(self, shape: Tuple[int, ...]) -> Callable:
        """The ``jax.nn.initializers`` function ``f(key, shape, dtype)`` for ``shape``."""
        raise NotImplementedError(f"{type(self).__name__} must implement __call__ or jax_init.")

    def __call__(self, shape, **kwargs):
        shape, dtype, _, key = self._draw_args(shape, kwargs)
        init = self.jax_init(shape)
        x = init(brainx_random.split_key() if key is None else key, shape, dtype)
        return self._with_unit(x)

    # -- what every draw shares --------------------------------------------------
    def _draw_args(self, shape, kwargs):
        """(shape, dtype, generator, key) of one call."""
        unknown = set(kwargs) - {"dtype", "rng", "key"}
        if unknown:  # brainstate ignores them silently; a client may forward its own
            warnings.warn(f"{type(self).__name__}() ignores the keywords {sorted(unknown)}; an "
                          f"initialiser takes dtype=, rng= and key=.", UserWarning, stacklevel=3)
        dtype, rng = kwargs.get("dtype"), kwargs.get("rng")
        dtype = (self.dtype or environ.dftype()) if dtype is None else dtype
        if rng is None:
            rng = brainx_random.default_rng() if self.rng is None else self.rng
        return to_size(shape), dtype, rng, kwargs.get("key")

    def _with_unit(self, x):
        return x if self.unit is None else u.maybe_decimal(u.Quantity(x, unit=self.unit))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items()
                           if v is not None and not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


def _own_rng(seed):
    """The generator an initialiser keeps: its own when seeded, else None (the default's, at call)."""
    return None if seed is None else brainx_random.RandomState(seed)


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
    """Every element equal to ``value`` (a number, array or Quantity, broadcast to ``shape``).

    Examples
    --------
    >>> from brainx.nn import init
    >>> init.Constant(2.0)((2,)).tolist()
    [2.0, 2.0]
    """

    def __init__(self, value: Any = 1.0, dtype=None):
        self.value = value
        self.dtype = dtype

    def __call__(self, shape, **kwargs):
        shape = to_size(shape)
        dtype = kwargs.get("dtype") or self.dtype
        value = self.value
        if isinstance(value, u.Quantity):
            return u.Quantity(_full(value.mantissa, shape, dtype), unit=value.unit)
        if dtype is None and isinstance(value, (int, float)) and not isinstance(value, bool):
            dtype = environ.dftype()   # a number gives floats (brainstate); an array keeps its dtype
        return _full(value, shape, dtype)


class ZeroInit(Constant):
    """All zeros, in ``unit`` if given.

    Examples
    --------
    >>> import brainunit as u
    >>> from brainx.nn import init
    >>> str(init.ZeroInit(unit=u.mV)((3,)).unit)
    'mV'
    """

    def __init__(self, unit=None, dtype=None):
        super().__init__(0.0 if unit is None else u.Quantity(0.0, unit=unit), dtype)
        self.unit = unit

    def __call__(self, shape, **kwargs):
        return u.maybe_decimal(super().__call__(shape, **kwargs))


class Identity(Initializer):
    """An identity matrix with ``value`` on its diagonal; a shape ``(n,)`` gives ``n x n``.

    Examples
    --------
    >>> from brainx.nn import init
    >>> init.Identity(2.0)((2,)).tolist()
    [[2.0, 0.0], [0.0, 2.0]]
    """

    def __init__(self, value: Any = 1.0, unit=None, dtype=None):
        self.value, self.unit, self.dtype = value, unit, dtype

    def __call__(self, shape, **kwargs):
        shape, dtype, _, _ = self._draw_args(shape, kwargs)
        if len(shape) > 2:
            raise ValueError(f"Identity makes 1-d or 2-d weights, got the shape {shape}.")
        eye = jnp.eye(*shape, dtype=dtype)
        return self._with_unit(jnp.where(eye > 0, jnp.asarray(self.value, dtype), eye))


class Normal(Initializer):
    """Samples of a normal of mean ``mean`` and standard deviation ``scale``.

    Examples
    --------
    >>> from brainx.nn import init
    >>> init.Normal(0.0, 0.1, seed=0)((3,)).shape
    (3,)
    """

    def __init__(self, mean: Any = 0.0, scale: Any = 1.0, unit=None, seed: Any = None,
                 dtype=None):
        self.mean, self.scale, self.unit, self.dtype = mean, scale, unit, dtype
        self.rng = _own_rng(seed)

    def __call__(self, shape, **kwargs):
        shape, dtype, rng, key = self._draw_args(shape, kwargs)
        return self._with_unit(rng.normal(self.mean, self.scale, shape, key=key, dtype=dtype))


class TruncatedNormal(Initializer):
    """Samples of a normal of mean ``loc`` and std ``scale``, kept inside ``(lower, upper)``.

    ``lower`` and ``upper`` are bounds on the samples, as brainstate draws them.

    Examples
    --------
    >>> from brainx.nn import init
    >>> w = init.TruncatedNormal(scale=1.0, lower=-1.0, upper=1.0, seed=0)((100,))
    >>> bool((abs(w) <= 1.0).all())
    True
    """

    def __init__(self, loc: Any = 0.0, scale: Any = 1.0, unit=None, lower: Any = -2.0,
                 upper: Any = 2.0, seed: Any = None, dtype=None):
        if not np.all(np.asarray(scale) > 0):
            raise InitializerArgumentError(f"TruncatedNormal: scale must be positive, got {scale}.")
        self.loc, self.scale, self.lower, self.upper = loc, scale, lower, upper
        self.unit, self.dtype, self.rng = unit, dtype, _own_rng(seed)

    def __call__(self, shape, **kwargs):
        shape, dtype, rng, key = self._draw_args(shape, kwargs)
        x = _truncated_normal(rng, self.lower, self.upper, shape, dtype, key, self.loc, self.scale)
        return self._with_unit(x)


class Gamma(Initializer):
    """Samples of a gamma distribution of shape ``shape`` and scale ``scale`` (default 1).

    Examples
    --------
    >>> from brainx.nn import init
    >>> bool((init.Gamma(2.0, seed=0)((5,)) > 0).all())
    True
    """

    def __init__(self, shape: Any, unit=None, scale: Any = None, seed: Any = None, dtype=None):
        self.shape, self.scale, self.unit, self.dtype = shape, scale, unit, dtype
        self.rng = _own_rng(seed)

    def __call__(self, shape, **kwargs):
        shape, dtype, rng, key = self._draw_args(shape, kwargs)
        return self._with_unit(rng.gamma(self.shape, self.scale, shape, key=key, dtype=dtype))


class Exponential(Initializer):
    """Samples of an exponential distribution of mean ``scale`` (default 1).

    Examples
    --------
    >>> from brainx.nn import init
    >>> bool((init.Exponential(2.0, seed=0)((5,)) > 0).all())
    True
    """

    def __init__(self, scale: Any = None, seed: Any = None, unit=None, dtype=None):
        self.scale, self.unit, self.dtype, self.rng = scale, unit, dtype, _own_rng(seed)

    def __call__(self, shape, **kwargs):
        shape, dtype, rng, key = self._draw_args(shape, kwargs)
        return self._with_unit(rng.exponential(self.scale, shape, key=key, dtype=dtype))


class Uniform(Initializer):
    """Samples uniform in ``[min_val, max_val)``.

    Examples
    --------
    >>> from brainx.nn import init
    >>> w = init.Uniform(-1.0, 1.0, seed=0)((100,))
    >>> bool(((w >= -1) & (w < 1)).all())
    True
    """

    def __init__(self, min_val: Any = 0.0, max_val: Any = 1.0, seed: Any = None, unit=None,
                 dtype=None):
        self.min_val, self.max_val, self.unit, self.dtype = min_val, max_val, unit, dtype
        self.rng = _own_rng(seed)

    def __call__(self, shape, **kwargs):
        shape, dtype, rng, key = self._draw_args(shape, kwargs)
        x = rng.uniform(self.min_val, self.max_val, shape, key=key, dtype=dtype)
        return self._with_unit(x)


_MODES = ("fan_in", "fan_out", "fan_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")
#: The standard deviation of a standard normal truncated to [-2, 2].
_TRUNCATED_STD = 0.87962566103423978


def _truncated_normal(rng, lower, upper, shape, dtype, key=None, loc=0.0, scale=1.0):
    """Normal samples of mean ``loc`` and std ``scale`` inside the bounds ``(lower, upper)``.

    Inverse-CDF sampling, brainstate's way (a uniform between the bounds' CDF values,
    mapped to ``[-1, 1]``, through ``erf_inv``, then clipped just inside the bounds), so the
    draw is bit-identical to ``brainstate.random.truncated_normal``; ``jax.random``'s
    differs from it in the last bit.
    """
    lower, upper, loc, scale = (jnp.asarray(v, dtype) for v in (lower, upper, loc, scale))
    sqrt2 = np.array(np.sqrt(2), dtype=dtype)
    one, two = np.asarray(1.0, dtype), np.asarray(2.0, dtype)
    lo_cdf = (one + jax.lax.erf((lower - loc) / scale / sqrt2)) / two
    hi_cdf = (one + jax.lax.erf((upper - loc) / scale / sqrt2)) / two
    up, down = np.array(np.inf, dtype=dtype), np.array(-np.inf, dtype=dtype)
    z = jax.random.uniform(rng.split_key() if key is None else key, shape, dtype,
                           minval=jax.lax.nextafter(2 * lo_cdf - 1, up),
                           maxval=jax.lax.nextafter(2 * hi_cdf - 1, down))
    x = jax.lax.erf_inv(z) * scale * sqrt2 + loc
    return jnp.clip(x, jax.lax.nextafter(lower, up), jax.lax.nextafter(upper, down))


def _fans(shape: Tuple[int, ...], in_axis: int, out_axis: int) -> Tuple[float, float]:
    if len(shape) < 2:  # no in or out axis: every element is receptive field
        size = float(np.prod(shape))
        return size, size
    receptive = np.prod(shape) / shape[in_axis] / shape[out_axis]
    return shape[in_axis] * receptive, shape[out_axis] * receptive


class VarianceScaling(Initializer):
    """Variance ``scale / fan``, the scheme behind Kaiming, Xavier and LeCun.

    ``fan`` is ``fan_in``, ``fan_out`` or their mean (``mode``), counted along
    ``in_axis`` and ``out_axis`` with the other axes as receptive field. A 1-d
    shape ``(n,)`` has both fans equal to ``n``, a scalar both equal to 1.

    Parameters
    ----------
    scale : float
        The variance times the fan.
    mode : {'fan_in', 'fan_out', 'fan_avg'}
    distribution : {'truncated_normal', 'normal', 'uniform'}
        ``truncated_normal``: a standard normal cut at +-2, scaled so that the
        samples have the variance; ``normal``: not truncated; ``uniform``: on
        ``+-sqrt(3 * variance)``.
    in_axis, out_axis : int
        The input and output axes (default the last two).
    seed : int or key, optional
        The initialiser's own generator; without one it draws from the default.
    unit, dtype : optional
        The unit of the result, and its dtype (default :func:`brainx.environ.dftype`).

    Examples
    --------
    >>> from brainx.nn import init
    >>> init.VarianceScaling(1.0, "fan_avg", "uniform", seed=0)((4, 3)).shape
    (4, 3)
    """

    def __init__(self, scale: float = 1.0, mode: str = "fan_in",
                 distribution: str = "truncated_normal", in_axis: int = -2, out_axis: int = -1,
                 seed: Any = None, unit=None, dtype=None):
        if mode not in _MODES:
            raise InitializerArgumentError(f"mode must be one of {_MODES}, got {mode!r}.")
        if distribution not in _DISTRIBUTIONS:
            raise InitializerArgumentError(
                f"distribution must be one of {_DISTRIBUTIONS}, got {distribution!r}.")
        self.scale, self.mode, self.distribution = scale, mode, distribution
        self.in_axis, self.out_axis = in_axis, out_axis
        self.unit, self.dtype, self.rng = unit, dtype, _own_rng(seed)

    def __call__(self, shape, **kwargs):
        shape, dtype, rng, key = self._draw_args(shape, kwargs)
        fan_in, fan_out = _fans(shape, self.in_axis, self.out_axis)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[self.mode]
        # the arithmetic in brainstate's order and precisions, for bit-identical weights:
        # the variance in float64, rounded to dtype, then square-rooted in dtype
        variance = np.asarray(self.scale / fan).astype(dtype)
        if self.distribution == "truncated_normal":
            std = (jnp.sqrt(variance) / _TRUNCATED_STD).astype(dtype)
            x = _truncated_normal(rng, -2, 2, shape, dtype, key) * std
        elif self.distribution == "normal":
            x = rng.randn(*shape, key=key, dtype=dtype) * jnp.sqrt(variance).astype(dtype)
        else:
            bound = jnp.sqrt(np.asarray(3 * variance).astype(dtype)).astype(dtype)
            x = rng.uniform(-1, 1, shape, key=key, dtype=dtype) * bound
        return self._with_unit(x)


def _variance_scaling(name: str, what: str, scale: float, mode: str, distribution: str,
                      note: str = ""):
    """A :class:`VarianceScaling` with brainstate's defaults for one named scheme."""
    def __init__(self, scale: float = scale, mode: str = mode, distribution: str = distribution,
                 in_axis: int = -2, out_axis: int = -1, seed: Any = None, unit=None, dtype=None):
        VarianceScaling.__init__(self, scale, mode, distribution, in_axis, out_axis, seed, unit,
                                 dtype)

    fan = {"fan_in": "fan_in", "fan_avg": "((fan_in + fan_out) / 2)"}[mode]
    doc = (f"""{what}: variance ``{scale} / {fan}`` from a {distribution.replace('_', ' ')}{note}.

    :class:`VarianceScaling`'s arguments, with ``scale={scale}, mode={mode!r},
    distribution={distribution!r}`` as defaults.

    Examples
    --------
    >>> from brainx.nn import init
    >>> init.{name}(seed=0)((3, 3, 8, 16)).shape
    (3, 3, 8, 16)
    """)
    return type(name, (VarianceScaling,), {"__init__": __init__, "__doc__": doc,
                                           "__module__": __name__, "__qualname__": name})


KaimingNormal = _variance_scaling("KaimingNormal", "He normal", 2.0, "fan_in", "truncated_normal",
                                  " (``nn.Linear``'s default)")
KaimingUniform = _variance_scaling("KaimingUniform", "He uniform", 2.0, "fan_in", "uniform")
XavierNormal = _variance_scaling("XavierNormal", "Glorot normal", 1.0, "fan_avg",
                                 "truncated_normal", " (``nn.Conv*``'s default)")
XavierUniform = _variance_scaling("XavierUniform", "Glorot uniform", 1.0, "fan_avg", "uniform")
LecunNormal = _variance_scaling("LecunNormal", "LeCun normal", 1.0, "fan_in", "truncated_normal")
LecunUniform = _variance_scaling("LecunUniform", "LeCun uniform", 1.0, "fan_in", "uniform")


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix times ``scale``, orthonormal along the smaller side.

    ``axis`` is the one kept apart; the others are flattened into the second
    side. The matrix is the Q of the QR decomposition of a normal draw, its
    signs fixed so that Q is uniformly distributed.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import init
    >>> w = init.Orthogonal(seed=0)((8, 4))
    >>> bool(jnp.allclose(w.T @ w, jnp.eye(4), atol=1e-5))
    True
    """

    def __init__(self, scale: Any = 1.0, axis: int = -1, seed: Any = None, unit=None, dtype=None):
        self.scale, self.axis, self.unit, self.dtype = scale, axis, unit, dtype
        self.rng = _own_rng(seed)

    def __call__(self, shape, **kwargs):
        shape, dtype, rng, key = self._draw_args(shape, kwargs)
        if len(shape) == 0:
            raise ValueError("Orthogonal needs a shape with at least one axis, got ().")
        rows = shape[self.axis]
        cols = int(np.prod(shape)) // rows
        tall = (rows, cols) if rows > cols else (cols, rows)
        q, r = jnp.linalg.qr(rng.normal(size=tall, key=key, dtype=dtype))
        q = q * jnp.sign(jnp.diag(r))
        if rows < cols:
            q = q.T
        rest = tuple(np.delete(shape, self.axis))
        q = jnp.moveaxis(jnp.reshape(q, (rows,) + rest), 0, self.axis)
        return self._with_unit(jnp.asarray(self.scale, dtype=dtype) * q)


class DeltaOrthogonal(Initializer):
    """A convolution kernel zero but at its centre, which is an orthogonal matrix (arXiv:1806.05393).

    The shape is ``(*kernel, in, out)`` with 1 to 3 kernel axes and ``in <= out``.

    Examples
    --------
    >>> from brainx.nn import init
    >>> w = init.DeltaOrthogonal(seed=0)((3, 4, 5))
    >>> w.shape, float(abs(w[0]).sum()), float(abs(w[2]).sum())
    ((3, 4, 5), 0.0, 0.0)
    """

    def __init__(self, scale: Any = 1.0, axis: int = -1, seed: Any = None, unit=None, dtype=None):
        self.scale, self.axis, self.unit, self.dtype = scale, axis, unit, dtype
        self._orthogonal = Orthogonal(scale, axis, seed)

    def __call__(self, shape, **kwargs):
        shape, dtype, rng, key = self._draw_args(shape, kwargs)
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"DeltaOrthogonal needs a 3-d, 4-d or 5-d kernel shape, got {shape}.")
        if shape[-1] < shape[-2]:
            raise ValueError(f"DeltaOrthogonal needs in <= out (the last two axes), got {shape}.")
        # brainstate draws the centre in the default dtype, whatever dtype the kernel has
        centre_kwargs = {"key": key} if key is not None else {}
        if "rng" in kwargs:
            centre_kwargs["rng"] = kwargs["rng"]
        centre = self._orthogonal(shape[-2:], **centre_kwargs)
        middle = tuple((k - 1) // 2 for k in shape[:-2])
        return self._with_unit(jnp.zeros(shape, dtype=dtype).at[middle].set(centre))


def _as_value(init):
    """The array of a value given to :func:`param` (a State's value), or a clear error."""
    if isinstance(init, State):
        return init.value
    if isinstance(init, (np.ndarray, jax.Array, u.Quantity, np.generic, int, float, complex,
                         bool, list, tuple)):
        return init
    raise ValueError(f"param: expected None, a number, an array, a Quantity, a State or an "
                     f"initialiser, got {type(init).__name__} ({init!r}).")


def param(init: Callable | Any, sizes: int | Sequence[int], batch_size: Optional[int] = None,
          allow_none: bool = True, allow_scalar: bool = True, key: Optional[jax.Array] = None,
          broadcast: bool = False):
    """An array for a parameter or a state, from an initialiser or a value.

    Parameters
    ----------
    init : callable or array-like or Quantity or State
        An initialiser ``init(shape)`` is called with ``(batch_size, *sizes)``
        (or ``sizes``). A value is checked to broadcast to ``sizes`` and, when
        ``batch_size`` is given (or ``broadcast``), broadcast to the full
        shape (a value that already has the batch axis is kept); otherwise a
        value is returned unchanged (a scalar ``tau`` stays a scalar). A State
        gives a State of its type holding that array.
    sizes : int or sequence of int
        The shape of one sample.
    batch_size : int, optional
        A leading batch dimension.
    allow_none : bool
        Whether ``None`` is returned as is (else a ValueError).
    allow_scalar : bool
        Whether a scalar without ``batch_size`` and ``broadcast`` is returned as is.
    key : jax key, optional
        Passed to the initialiser.
    broadcast : bool
        Always give a value the full shape (what a state's initial value needs).

    Examples
    --------
    >>> import brainunit as u
    >>> from brainx.nn import init
    >>> init.param(init.ZeroInit(), (3,), batch_size=2).shape
    (2, 3)
    >>> tau = 5.0 * u.ms
    >>> init.param(tau, (3,)) is tau                 # a scalar stays as it is
    True
    """
    if init is None:
        if allow_none:
            return None
        raise ValueError("param: an initialiser or a value is required, got None "
                         "(allow_none=False).")
    sizes = to_size(sizes) or ()
    shape = sizes if batch_size is None else (int(batch_size),) + sizes
    if callable(init) and not isinstance(init, (u.Quantity, jax.Array, np.ndarray, State)):
        if key is None:
            return init(shape)
        try:
            return init(shape, key=key)
        except TypeError:
            return init(shape)
    value = _as_value(init)
    if allow_scalar and _is_scalar(value) and batch_size is None and not broadcast:
        return init
    value_shape = np.shape(value.mantissa if isinstance(value, u.Quantity) else value)
    if batch_size is not None and len(value_shape) == len(shape) and \
            value_shape[0] == shape[0] and are_broadcastable_shapes(value_shape, shape):
        full = _broadcast(value, shape)                    # already batched
    else:
        try:
            ok = np.broadcast_shapes(value_shape, sizes) == sizes
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"param: a value of shape {value_shape} does not broadcast to the "
                             f"size {sizes}.")
        full = _broadcast(value, shape) if batch_size is not None or broadcast else value
    return type(init)(full) if isinstance(init, State) else full


def _broadcast(value, shape):
    return Constant(value)(shape) if not isinstance(value, (jax.Array, np.ndarray)) or \
        value.shape != shape else value
