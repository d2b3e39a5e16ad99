"""Parameter transforms: the map from a trained, unconstrained value to a constrained one.

A time constant must stay positive, a probability inside ``(0, 1)``. Rather
than clipping after every optimiser step, a :class:`~brainx.nn.Param` trains
an unconstrained number ``x`` (its :class:`~brainx.ParamState`) and the model
reads ``t.forward(x)``, which lies in the allowed set for every ``x``. The
initial value is mapped back once with ``t.inverse``. Bounds may carry
brainunit units; ``x`` never does.

================  ==========================  ===================================
transform         forward ``y = f(x)``         range
================  ==========================  ===================================
``IdentityT``     ``x``                        all reals
``SoftplusT``     ``lower + softplus(x)``      ``(lower, inf)``
``NegSoftplusT``  ``upper - softplus(-x)``     ``(-inf, upper)``
``ExpT``/``LogT`` ``lower + exp(x)``           ``(lower, inf)`` (``x`` clipped at 20)
``SigmoidT``      ``lower + width sigmoid(x)`` ``(lower, upper)``
``TanhT``         ``lower + width (tanh+1)/2`` ``(lower, upper)``
``SoftsignT``     softsign, rescaled           ``(lower, upper)``
``ClipT``         ``clip(x, lower, upper)``    ``[lower, upper]``, zero gradient outside
``AffineT``       ``scale x + shift``          all reals
``ChainT``        ``f_n(... f_1(x))``          the last transform's
``PositiveT``     ``exp(x)``                   ``(0, inf)``
``NegativeT``     ``-exp(x)``                  ``(-inf, 0)``
================  ==========================  ===================================

``log_abs_det_jacobian(x, y)`` is ``log |dy/dx|`` summed over the last axis
(elementwise transforms: the Jacobian is diagonal), for densities on ``y``.
"""

from __future__ import annotations

from typing import Any

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx.pretty_repr.layout import PrettyAttr, PrettyType, pretty_str, render

__all__ = [
    "Transform", "IdentityT", "SoftplusT", "NegSoftplusT", "ExpT", "LogT", "SigmoidT", "TanhT",
    "SoftsignT", "ClipT", "AffineT", "ChainT", "PositiveT", "NegativeT", "save_exp",
]


def save_exp(x, max_value: float = 20.0):
    """``exp(min(x, max_value))``: an exponential that cannot overflow (brainstate's name)."""
    return jnp.exp(jnp.minimum(x, max_value))


def _sum_last(v):
    v = jnp.asarray(v)
    return jnp.sum(v, axis=-1) if v.ndim else v


def _with_unit(mantissa, unit):
    """``mantissa`` in ``unit``, a plain array when ``unit`` is dimensionless."""
    return mantissa if unit.is_unitless else u.Quantity(mantissa, unit=unit)


def _in_unit(y, unit):
    """The mantissa of ``y`` expressed in ``unit`` (``y`` must be compatible with it)."""
    if unit.is_unitless:
        return u.get_mantissa(y) if isinstance(y, u.Quantity) else jnp.asarray(y)
    return u.Quantity(y).to_decimal(unit)


def _any_known(predicate, x) -> bool:
    """Whether ``predicate`` holds for any element of a concrete ``x`` (False for a tracer).

    Checked with NumPy: bounds written as constants inside a jit trace stay constants (jnp
    would trace the test); bounds that are tracers are not checked.
    """
    x = u.get_mantissa(x)
    return not isinstance(x, jax.core.Tracer) and bool(np.any(predicate(np.asarray(x))))


class Transform:
    """A bijection from the reals to a constrained set: ``forward``, ``inverse`` and
    ``log_abs_det_jacobian``. Subclasses implement the first two."""

    def __call__(self, x):
        return self.forward(x)

    def forward(self, x):  # pragma: no cover - abstract
        """``y = f(x)``: unconstrained to constrained."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward().")

    def inverse(self, y):  # pragma: no cover - abstract
        """``x = f^-1(y)``: constrained to unconstrained."""
        raise NotImplementedError(f"{type(self).__name__} must implement inverse().")

    def log_abs_det_jacobian(self, x, y):
        """``sum(log |f'(x)|)`` over the last axis, by autodiff of the elementwise map."""
        d = jax.vmap(jax.grad(lambda s: jnp.sum(u.get_mantissa(self.forward(s)))))(
            jnp.ravel(jnp.asarray(x, dtype=float)))
        return _sum_last(jnp.log(jnp.abs(d)).reshape(jnp.shape(x)))

    def __pretty_repr__(self):
        """The pretty-repr items: the class, then :meth:`_repr_items` (strings quoted)."""
        yield PrettyType(type(self))
        for key, value in self._repr_items():
            yield PrettyAttr(key, repr(value) if isinstance(value, str) else value)

    def _repr_items(self):
        """The ``(name, value)`` pairs the repr shows (``''`` as a name: shown bare).

        By default the attributes, leaving out ``None`` values and a dimensionless
        ``unit``; a subclass returns its constructor's arguments where they differ
        (``SigmoidT``: ``lower`` and ``upper``).

        Examples
        --------
        >>> from brainx.nn import SigmoidT, SoftplusT
        >>> SoftplusT(0.0), SigmoidT(0.0, 2.0)
        (SoftplusT(lower=0.0), SigmoidT(lower=0.0, upper=2.0))
        """
        return [(k, v) for k, v in vars(self).items()
                if v is not None and not (k == "unit" and getattr(v, "is_unitless", False))]

    def __repr__(self) -> str:
        return render(self)

    __repr__._uses_pretty_repr = True  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return pretty_str(self)


class IdentityT(Transform):
    """``y = x``.

    Examples
    --------
    >>> from brainx.nn import IdentityT
    >>> IdentityT().forward(3.0)
    3.0
    """

    def forward(self, x):
        return x

    def inverse(self, y):
        return y

    def log_abs_det_jacobian(self, x, y):
        return jnp.zeros(jnp.shape(x)[:-1])


class SoftplusT(Transform):
    """``y = lower + softplus(x)``, in ``(lower, inf)``; ``lower`` may carry a unit.

    Examples
    --------
    >>> import brainunit as u
    >>> from brainx.nn import SoftplusT
    >>> t = SoftplusT(1.0 * u.ms)
    >>> y = t.forward(t.inverse(5.0 * u.ms))
    >>> round(float(y.to_decimal(u.ms)), 5)
    5.0
    """

    def __init__(self, lower: Any = 0.0):
        self.lower = lower
        self.unit = u.get_unit(lower)

    def forward(self, x):
        return _with_unit(jax.nn.softplus(x), self.unit) + self.lower

    def inverse(self, y):
        z = _in_unit(y - self.lower, self.unit)
        return z + jnp.log(-jnp.expm1(-z))          # softplus^-1, exact for large z

    def log_abs_det_jacobian(self, x, y):
        return _sum_last(jax.nn.log_sigmoid(x))


class NegSoftplusT(SoftplusT):
    """``y = upper - softplus(-x)``, in ``(-inf, upper)``.

    Examples
    --------
    >>> from brainx.nn import NegSoftplusT
    >>> float(NegSoftplusT(0.0).forward(NegSoftplusT(0.0).inverse(-2.0)))
    -2.0
    """

    def __init__(self, upper: Any = 0.0):
        super().__init__(upper)

    def forward(self, x):
        return self.lower - _with_unit(jax.nn.softplus(-x), self.unit)

    def inverse(self, y):
        return -super().inverse(2 * self.lower - y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_last(jax.nn.log_sigmoid(-x))


class ExpT(Transform):
    """``y = lower + exp(x)``, in ``(lower, inf)``. ``x`` is clipped at 20 (no overflow),
    so keep it below that to stay invertible.

    Examples
    --------
    >>> from brainx.nn import ExpT
    >>> round(float(ExpT(1.0).forward(0.0)), 5)
    2.0
    """

    def __init__(self, lower: Any = 0.0):
        self.lower = lower
        self.unit = u.get_unit(lower)

    def forward(self, x):
        return _with_unit(save_exp(x), self.unit) + self.lower

    def inverse(self, y):
        return jnp.log(_in_unit(y - self.lower, self.unit))

    def log_abs_det_jacobian(self, x, y):
        return _sum_last(x)


class LogT(ExpT):
    """The same map as :class:`ExpT` (brainstate's other name for it)."""


class SigmoidT(Transform):
    """``y = lower + (upper - lower) * sigmoid(x)``, in ``(lower, upper)``.

    Examples
    --------
    >>> from brainx.nn import SigmoidT
    >>> t = SigmoidT(-1.0, 3.0)
    >>> float(t.forward(0.0)), round(float(t.forward(t.inverse(2.5))), 5)
    (1.0, 2.5)
    """

    def __init__(self, lower: Any, upper: Any):
        self.lower = lower
        self.width = upper - lower
        if _any_known(lambda w: w <= 0, self.width):
            raise ValueError(f"{type(self).__name__}: lower must be below upper, got "
                             f"lower={lower!r}, upper={upper!r}.")

    def _repr_items(self):
        return [("lower", self.lower), ("upper", self.lower + self.width)]

    def forward(self, x):
        return self.lower + self.width * jax.nn.sigmoid(x)

    def inverse(self, y):
        p = u.get_mantissa((y - self.lower) / self.width)
        return jnp.log(p) - jnp.log1p(-p)

    def log_abs_det_jacobian(self, x, y):
        w = jnp.log(u.get_mantissa(self.width))
        return _sum_last(w + jax.nn.log_sigmoid(x) + jax.nn.log_sigmoid(-x))


class TanhT(SigmoidT):
    """``y = lower + width * (tanh(x) + 1) / 2``, in ``(lower, upper)``."""

    def forward(self, x):
        return self.lower + self.width * (jnp.tanh(x) + 1.0) / 2.0

    def inverse(self, y):
        return jnp.arctanh(2.0 * u.get_mantissa((y - self.lower) / self.width) - 1.0)

    def log_abs_det_jacobian(self, x, y):
        return Transform.log_abs_det_jacobian(self, x, y)


class SoftsignT(SigmoidT):
    """``y = lower + width * (x / (1 + |x|) + 1) / 2``, in ``(lower, upper)``."""

    def forward(self, x):
        return self.lower + self.width * (x / (1.0 + jnp.abs(x)) + 1.0) / 2.0

    def inverse(self, y):
        z = 2.0 * u.get_mantissa((y - self.lower) / self.width) - 1.0
        return z / (1.0 - jnp.abs(z))

    def log_abs_det_jacobian(self, x, y):
        return Transform.log_abs_det_jacobian(self, x, y)


class ClipT(Transform):
    """``y = clip(x, lower, upper)``: not a bijection; ``inverse`` clips too, and the
    gradient is zero outside the bounds (a parameter there stops learning).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import ClipT
    >>> ClipT(0.0, 1.0).forward(jnp.array([-2.0, 0.5, 3.0])).tolist()
    [0.0, 0.5, 1.0]
    """

    def __init__(self, lower: Any, upper: Any):
        self.lower = lower
        self.upper = upper

    def forward(self, x):
        return u.math.clip(x, self.lower, self.upper)

    def inverse(self, y):
        return u.math.clip(y, self.lower, self.upper)


class AffineT(Transform):
    """``y = scale * x + shift`` (``scale`` non-zero; either may carry a unit).

    Examples
    --------
    >>> from brainx.nn import AffineT
    >>> t = AffineT(2.0, 1.0)
    >>> float(t.forward(3.0)), float(t.inverse(7.0))
    (7.0, 3.0)
    """

    def __init__(self, scale: Any, shift: Any):
        if _any_known(lambda s: s == 0, scale):
            raise ValueError(f"AffineT: scale must be non-zero to be invertible, got {scale!r}.")
        self.scale = scale
        self.shift = shift

    def forward(self, x):
        return self.scale * x + self.shift

    def inverse(self, y):
        return (y - self.shift) / self.scale

    def log_abs_det_jacobian(self, x, y):
        log_a = jnp.log(jnp.abs(u.get_mantissa(self.scale)))
        return _sum_last(jnp.broadcast_to(log_a, jnp.shape(x)))


class ChainT(Transform):
    """``forward`` applies ``transforms`` in order, ``inverse`` undoes them in reverse.

    Examples
    --------
    >>> from brainx.nn import AffineT, ChainT, SoftplusT
    >>> t = ChainT(SoftplusT(0.0), AffineT(10.0, 1.0))     # (1, inf), ten times softplus
    >>> round(float(t.forward(t.inverse(4.0))), 5)
    4.0
    """

    def __init__(self, *transforms: Transform):
        bad = [t for t in transforms if not isinstance(t, Transform)]
        if bad:
            raise TypeError(f"ChainT takes Transforms, got {bad!r}.")
        self.transforms = tuple(transforms)

    def forward(self, x):
        for t in self.transforms:
            x = t.forward(x)
        return x

    def inverse(self, y):
        for t in reversed(self.transforms):
            y = t.inverse(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        total = 0.0
        for t in self.transforms:
            y_t = t.forward(x)
            total = total + t.log_abs_det_jacobian(x, y_t)
            x = y_t
        return total


class PositiveT(ExpT):
    """``y = exp(x)``, in ``(0, inf)``."""

    def __init__(self):
        super().__init__(0.0)


class NegativeT(Transform):
    """``y = -exp(x)``, in ``(-inf, 0)``."""

    def forward(self, x):
        return -save_exp(x)

    def inverse(self, y):
        return jnp.log(-jnp.asarray(y))

    def log_abs_det_jacobian(self, x, y):
        return _sum_last(x)
