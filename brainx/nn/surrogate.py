r"""Spike functions with surrogate gradients.

Each function here returns the Heaviside step of its input on the forward
pass, ``1.0 where x >= 0 else 0.0`` (in ``x``'s float dtype), and replaces its
derivative (zero almost everywhere) by a smooth *surrogate* :math:`g'(x)` on
the backward pass, so a spiking network can be trained by backpropagation.
The input is the distance to threshold, scaled to be dimensionless (for a
neuron, ``(V - V_th) / (V_th - V_reset)``). The steepness parameter (``alpha``
for most) sets how wide the surrogate is.

Every surrogate exists as a function (``sigmoid(x, alpha=4.)``) and as a small
class whose instances are hashable and comparable, so they can be stored on a
model or passed as a static argument (``Sigmoid(alpha=4.)(x)``). A neuron calls
``spike_at(V, V_th, scale)`` instead of ``self((V - V_th) / scale)``: the same
spikes and gradients, but the forward pass is the comparison ``V >= V_th``. Gradients are
defined with ``jax.custom_jvp``, so they work under ``grad``, ``jvp``, ``vmap``,
``jit``, ``checkpoint`` and inside loops. The parameters get no gradient.

Examples
--------
>>> import jax, jax.numpy as jnp
>>> from brainx.nn import surrogate
>>> x = jnp.array([-1.0, 0.0, 0.5])
>>> surrogate.sigmoid(x).tolist()
[0.0, 1.0, 1.0]
>>> g = jax.grad(lambda x: surrogate.sigmoid(x, alpha=4.0).sum())(x)
>>> bool(jnp.allclose(g, 4.0 * jax.nn.sigmoid(4 * x) * (1 - jax.nn.sigmoid(4 * x))))
True
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from brainx.nn.trace_time_values import known_value

__all__ = [
    "Surrogate", "heaviside",
    "Sigmoid", "sigmoid", "Arctan", "arctan", "PiecewiseQuadratic", "piecewise_quadratic",
    "PiecewiseExp", "piecewise_exp", "SoftSign", "soft_sign", "ERF", "erf",
    "ReluGrad", "relu_grad", "GaussianGrad", "gaussian_grad", "InvSquareGrad", "inv_square_grad",
    "SlayerGrad", "slayer_grad",
]


def _as_float_array(x: Any, who: str) -> jax.Array:
    if isinstance(x, u.Quantity):
        if not x.is_unitless:
            raise TypeError(
                f"{who} expects a dimensionless input (the scaled distance to threshold), got a "
                f"quantity in {x.unit}. Divide by a voltage first, e.g. "
                "(V - V_th) / (V_th - V_reset).")
        x = x.mantissa
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def _same_unit(v: Any, threshold: Any, scale: Any, who: str):
    """The mantissas of ``v``, ``threshold`` and ``scale`` in the unit of ``v`` (floats)."""
    if not any(isinstance(q, u.Quantity) for q in (v, threshold, scale)):
        values = [v, threshold, scale]      # no unit anywhere: nothing to check or convert
    else:
        values = _in_unit_of_v(v, threshold, scale, who)
    v = _as_float_array(values[0], who)
    # a number known now stays a Python number: a literal of the step, not a traced constant
    return v, *(_number_or_array(x, v.dtype) for x in values[1:])


def _in_unit_of_v(v: Any, threshold: Any, scale: Any, who: str) -> list:
    unit = u.get_unit(v)
    values = []
    for name, q in (("v", v), ("threshold", threshold), ("scale", scale)):
        if not u.have_same_dim(q, v):
            raise u.UnitMismatchError(
                f"{who}.spike_at: {name} has unit {u.get_unit(q)} but v has unit {unit}; give "
                "v, threshold and scale in units of one dimension (e.g. all voltages).")
        values.append(u.get_mantissa(q.to(unit) if isinstance(q, u.Quantity) and
                                     not unit.is_unitless else q))
    return values


def _number_or_array(x: Any, dtype: Any) -> Any:
    number = _known_number(x)
    return jnp.asarray(x, dtype) if number is None else number


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _spike(grad_fn: Callable, x: jax.Array, params: Tuple[Any, ...]) -> jax.Array:
    return (x >= 0).astype(x.dtype)


@_spike.defjvp
def _spike_jvp(grad_fn, primals, tangents):
    x, params = primals
    tx, _ = tangents  # the parameters get no gradient
    return _spike(grad_fn, x, params), (grad_fn(x, *params) * tx).astype(x.dtype)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _threshold_spike(grad_fn: Callable, v, threshold, scale, params) -> jax.Array:
    return (v >= threshold).astype(v.dtype)


def _threshold_spike_jvp(grad_fn, primals, tangents):
    v, threshold, scale, params = primals
    tv, tth, tscale, _ = (None if type(t) is SymbolicZero else t for t in tangents)
    out = _threshold_spike(grad_fn, v, threshold, scale, params)
    tangent = _threshold_tangent(grad_fn, v, threshold, scale, params, tv, tth, tscale)
    return out, jnp.broadcast_to(tangent, out.shape).astype(out.dtype)


def _threshold_tangent(grad_fn, v, threshold, scale, params, tv, tth, tscale):
    """The tangent of ``H(x)``, ``x = (v - threshold) / scale``, with ``H' = grad_fn``."""
    if scale is None:  # known when traced: numbers, so nothing is divided by 1
        grad_fn, scale, params = grad_fn.grad_fn, grad_fn.scale, grad_fn.params
    unit_scale = isinstance(scale, (int, float)) and scale == 1
    x = v - threshold if unit_scale else (v - threshold) / scale
    dx = jnp.zeros((), x.dtype) if tv is None else tv
    if tth is not None:
        dx = dx - tth
    if not unit_scale:
        dx = dx / scale
    if tscale is not None:
        dx = dx - x * tscale / scale
    return grad_fn(x, *params) * dx


class _KnownRule(NamedTuple):
    """A surrogate gradient whose scale and parameters are known when the step is traced.

    Given to :func:`_threshold_spike` as its static argument, they enter the
    gradient's jaxpr as literals, not as inputs (and a scale of 1 as no
    division at all).
    """

    grad_fn: Callable
    scale: float
    params: Tuple[Any, ...]

    @classmethod
    def of(cls, grad_fn: Callable, scale: Any, params: Tuple[Any, ...]) -> Optional["_KnownRule"]:
        numbers = [_known_number(x) for x in (scale, *params)]
        if any(n is None for n in numbers):
            return None
        return cls(grad_fn, numbers[0], tuple(numbers[1:]))


def _known_number(x: Any) -> Any:
    """``x`` as a Python number if it is a scalar known now (not traced), else ``None``."""
    known = known_value(x)
    return None if known is None else known[0].item()


_threshold_spike.defjvp(_threshold_spike_jvp, symbolic_zeros=True)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _spike_above(rule: _KnownRule, threshold: float, v) -> jax.Array:
    """:func:`_threshold_spike` for a threshold known when traced: ``v`` is the only operand.

    The tangent is the surrogate's at ``(v - threshold) / scale`` times ``v``'s,
    what a hand-written ``custom_jvp`` spike computes: no symbolic zeros to
    handle, no threshold input to convert, fewer equations for every
    derivative of a loop body to trace.
    """
    return (v >= threshold).astype(v.dtype)


@_spike_above.defjvp
def _spike_above_jvp(rule, threshold, primals, tangents):
    (v,), (tv,) = primals, tangents
    x = v if threshold == 0 else jax.lax.sub(v, np.asarray(threshold, v.dtype))
    if rule.scale != 1:  # d/dv of H((v - threshold) / scale)
        scale = np.asarray(rule.scale, v.dtype)
        x, tv = jax.lax.div(x, scale), jax.lax.div(tv, scale)
    tangent = rule.grad_fn(x, *rule.params) * tv
    if tangent.dtype != v.dtype:
        tangent = tangent.astype(v.dtype)
    return _spike_above(rule, threshold, v), tangent


def heaviside(x: Any) -> jax.Array:
    """The step function ``x >= 0`` as floats, with a zero gradient."""
    x = _as_float_array(x, "heaviside")
    return jax.lax.stop_gradient((x >= 0).astype(x.dtype))


class Surrogate:
    """Base class: a spike function whose gradient is :meth:`surrogate_grad`.

    A subclass lists its parameters and their defaults in ``_params`` (the
    constructor takes them, positionally or by name) and implements
    ``_grad(x, *params)`` (and optionally ``_fun(x, *params)``, the smooth
    function whose derivative the surrogate is), both as static methods so the
    same compiled rule serves every parameter value.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.nn.surrogate import Surrogate
    >>> class Triangle(Surrogate):
    ...     _params = {"alpha": 1.0}
    ...     @staticmethod
    ...     def _grad(x, alpha):
    ...         return jnp.maximum(alpha - alpha ** 2 * jnp.abs(x), 0.0)
    >>> jax.grad(lambda x: Triangle(2.0)(x))(0.25).item(), Triangle()
    (1.0, Triangle(alpha=1.0))
    """

    #: Instances are compared by type and attributes when jitted methods of the modules
    #: holding them are shared between instances (see ``brainx.transform.compiled.instance_sharing``).
    _share_by_attributes = True

    _params: Dict[str, Any] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not isinstance(cls._params, dict):  # names only: no defaults
            cls._params = {name: inspect.Parameter.empty for name in cls._params}
        cls.__signature__ = inspect.Signature([
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
            for name, default in cls._params.items()])

    def __init__(self, *args, **kwargs):
        try:
            bound = type(self).__signature__.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{type(self).__name__}{type(self).__signature__}: {e}") from None
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            setattr(self, name, value)

    def __call__(self, x: Any) -> jax.Array:
        x = _as_float_array(x, type(self).__name__)
        return _spike(type(self)._grad, x, self._values())

    def _values(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._params)

    def spike_at(self, v: Any, threshold: Any, scale: Any) -> jax.Array:
        """The spikes of ``v`` against ``threshold``: ``self((v - threshold) / scale)``, cheaper.

        The forward pass is the comparison ``v >= threshold`` (no subtraction, no
        division); the gradient is the surrogate's at ``(v - threshold) / scale``,
        with respect to all three. What a neuron uses for its spikes.

        Arguments
        ---------
        v, threshold : array or Quantity
            Potentials (quantities of one dimension).
        scale : array or Quantity
            The width of the surrogate in units of ``v``; it must be positive
            (then ``(v - threshold) / scale >= 0`` is ``v >= threshold``).

        Returns
        -------
        ``1.0`` where ``v >= threshold`` and ``0.0`` elsewhere, in ``v``'s float dtype.

        Example
        -------
        >>> import jax, jax.numpy as jnp
        >>> from brainx.nn.surrogate import ReluGrad
        >>> v = jnp.array([0.5, 1.0, 1.5])
        >>> ReluGrad().spike_at(v, 1.0, 2.0).tolist()
        [0.0, 1.0, 1.0]
        >>> g = jax.grad(lambda v: ReluGrad().spike_at(v, 1.0, 2.0).sum())(v)
        >>> bool(jnp.allclose(g, jax.grad(lambda v: ReluGrad()((v - 1.0) / 2.0).sum())(v)))
        True
        """
        v, threshold, scale = _same_unit(v, threshold, scale, type(self).__name__)
        known = _KnownRule.of(type(self)._grad, scale, self._values())
        if known is not None and isinstance(threshold, (int, float)):
            return _spike_above(known, threshold, v)
        if known is not None:
            return _threshold_spike(known, v, threshold, None, ())
        return _threshold_spike(type(self)._grad, v, threshold, scale, self._values())

    def surrogate_grad(self, x: Any) -> jax.Array:
        """The surrogate derivative at ``x``."""
        return type(self)._grad(_as_float_array(x, type(self).__name__), *self._values())

    def surrogate_fun(self, x: Any) -> jax.Array:
        """The smooth function whose derivative is :meth:`surrogate_grad` (where defined)."""
        fun = getattr(type(self), "_fun", None)
        if fun is None:
            raise NotImplementedError(f"{type(self).__name__} defines only a gradient.")
        return fun(_as_float_array(x, type(self).__name__), *self._values())

    @staticmethod
    def _grad(x, *params):  # pragma: no cover - abstract
        raise NotImplementedError

    def _key(self):
        values = []
        for v in self._values():
            try:
                hash(v)
                values.append(v)
            except TypeError:  # an array parameter: compare by identity
                values.append(id(v))
        return (type(self), tuple(values))

    def __eq__(self, other) -> bool:
        return isinstance(other, Surrogate) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        args = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._params)
        return f"{type(self).__name__}({args})"


def _expit(x):
    return jax.nn.sigmoid(x)


class Sigmoid(Surrogate):
    r"""Sigmoid surrogate: :math:`g'(x) = \alpha\,\sigma(\alpha x)(1 - \sigma(\alpha x))`."""

    _params = {"alpha": 4.0}

    @staticmethod
    def _fun(x, alpha):
        return _expit(alpha * x)

    @staticmethod
    def _grad(x, alpha):
        s = _expit(alpha * x)
        return alpha * s * (1.0 - s)


class Arctan(Surrogate):
    r"""Arctan surrogate: :math:`g'(x) = \frac{\alpha}{2\,(1 + (\frac{\pi}{2}\alpha x)^2)}`."""

    _params = {"alpha": 1.0}

    @staticmethod
    def _fun(x, alpha):
        return jnp.arctan(math.pi / 2 * alpha * x) / math.pi + 0.5

    @staticmethod
    def _grad(x, alpha):
        return alpha / 2 / (1 + (math.pi / 2 * alpha * x) ** 2)


class PiecewiseQuadratic(Surrogate):
    r"""Triangle surrogate: :math:`g'(x) = \max(\alpha - \alpha^2 |x|, 0)`."""

    _params = {"alpha": 1.0}

    @staticmethod
    def _fun(x, alpha):
        inner = (-alpha * jnp.abs(x) / 2 + 1) * alpha * x + 0.5
        return jnp.where(x < -1 / alpha, 0.0, jnp.where(x > 1 / alpha, 1.0, inner))

    @staticmethod
    def _grad(x, alpha):
        return jnp.maximum(alpha - alpha ** 2 * jnp.abs(x), 0.0)


class PiecewiseExp(Surrogate):
    r"""Laplace surrogate: :math:`g'(x) = \frac{\alpha}{2} e^{-\alpha |x|}`."""

    _params = {"alpha": 1.0}

    @staticmethod
    def _fun(x, alpha):
        return jnp.where(x < 0, jnp.exp(alpha * x) / 2, 1 - jnp.exp(-alpha * x) / 2)

    @staticmethod
    def _grad(x, alpha):
        return alpha / 2 * jnp.exp(-alpha * jnp.abs(x))


class SoftSign(Surrogate):
    r"""Soft-sign surrogate: :math:`g'(x) = \frac{\alpha}{2 (1 + |\alpha x|)^2}`."""

    _params = {"alpha": 1.0}

    @staticmethod
    def _fun(x, alpha):
        return 0.5 * alpha * x / (1 + jnp.abs(alpha * x)) + 0.5

    @staticmethod
    def _grad(x, alpha):
        return alpha / 2 / (1 + jnp.abs(alpha * x)) ** 2


class ERF(Surrogate):
    r"""Error-function surrogate: :math:`g'(x) = \frac{\alpha}{\sqrt{\pi}} e^{-\alpha^2 x^2}`."""

    _params = {"alpha": 1.0}

    @staticmethod
    def _fun(x, alpha):
        return 0.5 * (1 + jax.scipy.special.erf(alpha * x))

    @staticmethod
    def _grad(x, alpha):
        return alpha / math.sqrt(math.pi) * jnp.exp(-(alpha * x) ** 2)


class ReluGrad(Surrogate):
    r"""Triangular (ReLU-shaped) surrogate: :math:`g'(x) = \max(\alpha(\mathrm{width} - |x|), 0)`."""

    _params = {"alpha": 0.3, "width": 1.0}

    @staticmethod
    def _grad(x, alpha, width):
        return jnp.maximum(alpha * (width - jnp.abs(x)), 0.0)


class GaussianGrad(Surrogate):
    r"""Gaussian surrogate: :math:`g'(x) = \alpha\,\mathcal{N}(x; 0, \sigma^2)`.

    brainstate's ``GaussianGrad`` multiplies by :math:`\sigma^2` in the
    exponent instead of dividing; this one is the normal density.
    """

    _params = {"sigma": 0.5, "alpha": 0.5}

    @staticmethod
    def _fun(x, sigma, alpha):
        return alpha * 0.5 * (1 + jax.scipy.special.erf(x / (sigma * math.sqrt(2))))

    @staticmethod
    def _grad(x, sigma, alpha):
        return alpha * jnp.exp(-x ** 2 / (2 * sigma ** 2)) / (math.sqrt(2 * math.pi) * sigma)


class InvSquareGrad(Surrogate):
    r"""Inverse-square surrogate: :math:`g'(x) = \frac{1}{(\alpha |x| + 1)^2}`."""

    _params = {"alpha": 100.0}

    @staticmethod
    def _grad(x, alpha):
        return 1.0 / (alpha * jnp.abs(x) + 1.0) ** 2


class SlayerGrad(Surrogate):
    r"""SLAYER surrogate: :math:`g'(x) = e^{-\alpha |x|}`."""

    _params = {"alpha": 1.0}

    @staticmethod
    def _grad(x, alpha):
        return jnp.exp(-alpha * jnp.abs(x))


def _function(cls: type, name: str) -> Callable:
    """``name(x, *params)``: the functional form of surrogate class ``cls``."""
    defaults: Dict[str, Any] = dict(cls._params)

    def fun(x, *args, **kwargs):
        return cls(*args, **kwargs)(x)

    params = ", ".join(f"{k}={v!r}" for k, v in defaults.items())
    fun.__name__ = fun.__qualname__ = name
    fun.__doc__ = (f"``{name}(x, {params})``: the Heaviside step of ``x`` with the "
                   f"surrogate gradient of :class:`{cls.__name__}`.\n\n"
                   f"{cls.__doc__ or ''}")
    return fun


sigmoid = _function(Sigmoid, "sigmoid")
arctan = _function(Arctan, "arctan")
piecewise_quadratic = _function(PiecewiseQuadratic, "piecewise_quadratic")
piecewise_exp = _function(PiecewiseExp, "piecewise_exp")
soft_sign = _function(SoftSign, "soft_sign")
erf = _function(ERF, "erf")
relu_grad = _function(ReluGrad, "relu_grad")
gaussian_grad = _function(GaussianGrad, "gaussian_grad")
inv_square_grad = _function(InvSquareGrad, "inv_square_grad")
slayer_grad = _function(SlayerGrad, "slayer_grad")
