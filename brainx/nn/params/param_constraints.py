"""More parameter transforms: sharpened and rectified bounds, power maps, masks, and
constraints on a whole vector (a simplex, a unit vector, an increasing sequence).

The elementwise ones extend :mod:`brainx.nn.params.param_transforms`; the vector ones
act on the last axis, so one parameter vector is one constrained object.

====================  ==============================================  ===============================
transform             ``forward(x)``                                  range (last axis for vectors)
====================  ==============================================  ===============================
``ReluT(lower)``      ``relu(x) + lower`` (not invertible below)       ``[lower, inf)``
``ScaledSigmoidT``    ``lower + width * sigmoid(beta * x)``           ``(lower, upper)``
``PowerT(lmbda)``     Box-Cox: ``(x^lmbda - 1) / lmbda`` (``log x``   all reals, from ``x > 0``
                      at ``lmbda = 0``)
``MaskedT(m, t)``     ``t.forward(x)`` where ``m``, else ``x``        per entry
``SimplexT()``        stick-breaking: ``n - 1`` reals to ``n``         ``y >= 0``, ``sum y = 1``
                      probabilities
``UnitVectorT()``     ``x / |x|``                                     ``|y| = 1``
``OrderedT()``        ``y_1 = x_1``, ``y_i = y_(i-1) + softplus(x_i)``  ``y_1 < y_2 < ...``
====================  ==============================================  ===============================

``SimplexT`` changes the length of the last axis (``n - 1`` unconstrained
numbers for ``n`` probabilities), as in brainstate: a ``Param`` of ``n``
probabilities trains ``n - 1`` numbers.
"""

from __future__ import annotations

from typing import Any

import brainunit as u
import jax
import jax.numpy as jnp

from brainx.nn.params.param_transforms import Transform, _any_known, _sum_last

__all__ = ["ReluT", "ScaledSigmoidT", "PowerT", "MaskedT", "SimplexT", "UnitVectorT", "OrderedT"]


class ReluT(Transform):
    """``y = relu(x) + lower_bound``: at least ``lower_bound``; ``inverse(y) = relu(y - lower_bound)``.

    Not a bijection: every ``x <= 0`` maps to the bound, where the gradient is zero.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import ReluT
    >>> ReluT(1.0).forward(jnp.array([-2.0, 0.5])).tolist()
    [1.0, 1.5]
    """

    def __init__(self, lower_bound: Any = 0.0):
        self.lower_bound = lower_bound

    def forward(self, x):
        return jax.nn.relu(x) + self.lower_bound

    def inverse(self, y):
        return jax.nn.relu(y - self.lower_bound)


class ScaledSigmoidT(Transform):
    """``y = lower + (upper - lower) * sigmoid(beta * x)``: a sigmoid with sharpness ``beta``.

    Examples
    --------
    >>> from brainx.nn import ScaledSigmoidT
    >>> t = ScaledSigmoidT(0.0, 2.0, beta=4.0)
    >>> float(t.forward(0.0)), round(float(t.forward(t.inverse(1.5))), 5)
    (1.0, 1.5)
    """

    def __init__(self, lower: Any, upper: Any, beta: float = 1.0):
        self.lower = lower
        self.width = upper - lower
        self.beta = beta
        if _any_known(lambda w: w <= 0, self.width):
            raise ValueError(f"ScaledSigmoidT: lower must be below upper, got lower={lower!r}, "
                             f"upper={upper!r}.")
        if beta <= 0:
            raise ValueError(f"ScaledSigmoidT: beta must be positive, got {beta}.")

    def forward(self, x):
        return self.lower + self.width * jax.nn.sigmoid(self.beta * x)

    def inverse(self, y):
        p = u.get_mantissa((y - self.lower) / self.width)
        return (jnp.log(p) - jnp.log1p(-p)) / self.beta


class PowerT(Transform):
    """The Box-Cox map ``y = (x ** lmbda - 1) / lmbda`` (``log x`` at ``lmbda = 0``), for ``x > 0``.

    Examples
    --------
    >>> from brainx.nn import PowerT
    >>> t = PowerT(0.5)
    >>> float(t.forward(4.0)), float(t.inverse(2.0))
    (2.0, 4.0)
    """

    def __init__(self, lmbda: float = 0.5):
        self.lmbda = lmbda

    def forward(self, x):
        if abs(self.lmbda) < 1e-10:
            return jnp.log(x)
        return (jnp.power(x, self.lmbda) - 1.0) / self.lmbda

    def inverse(self, y):
        if abs(self.lmbda) < 1e-10:
            return jnp.exp(y)
        return jnp.power(y * self.lmbda + 1.0, 1.0 / self.lmbda)


class MaskedT(Transform):
    """``transform`` on the entries where ``mask`` is true, the identity elsewhere.

    The masked-out entries go through ``transform`` at ``safe_value`` (then
    are discarded), so a transform that is undefined there (a log of a
    negative number) cannot put a NaN into the gradient.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import MaskedT, SoftplusT
    >>> t = MaskedT(jnp.array([True, False]), SoftplusT(0.0))
    >>> [round(v, 4) for v in t.forward(t.inverse(jnp.array([0.5, -2.0]))).tolist()]
    [0.5, -2.0]
    """

    def __init__(self, mask: Any, transform: Transform, safe_value: Any = 1.0):
        if not isinstance(transform, Transform):
            raise TypeError(f"MaskedT: transform must be a brainx.nn Transform, got "
                            f"{type(transform).__name__}.")
        self.mask = jnp.asarray(mask).astype(bool)
        self.transform = transform
        self.safe_value = safe_value

    def forward(self, x):
        safe = jnp.where(self.mask, x, self.safe_value)
        return jnp.where(self.mask, self.transform.forward(safe), x)

    def inverse(self, y):
        safe = jnp.where(self.mask, y, self.safe_value)
        return jnp.where(self.mask, self.transform.inverse(safe), y)

    def _repr_items(self):
        return [("mask", self.mask.tolist()), ("transform", self.transform)]


class SimplexT(Transform):
    """Stick-breaking: ``n - 1`` reals (last axis) to ``n`` non-negative numbers summing to 1.

    Break ``z_k = sigmoid(x_k)`` of what is left of the stick at each step;
    the last probability is what remains.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import SimplexT
    >>> t = SimplexT()
    >>> t.forward(jnp.zeros(2)).tolist()           # half, half of the rest, the rest
    [0.5, 0.25, 0.25]
    >>> [round(v, 4) for v in t.forward(t.inverse(jnp.array([0.2, 0.3, 0.5]))).tolist()]
    [0.2, 0.3, 0.5]
    """

    def forward(self, x):
        x = jnp.asarray(x)
        z = jax.nn.sigmoid(x)
        left = jnp.cumprod(1.0 - z, axis=-1)                        # stick left after each break
        before = jnp.concatenate([jnp.ones_like(z[..., :1]), left[..., :-1]], axis=-1)
        return jnp.concatenate([z * before, left[..., -1:]], axis=-1)

    def inverse(self, y):
        y = jnp.asarray(y, dtype=float)
        head = y[..., :-1]
        remaining = 1.0 - jnp.cumsum(head, axis=-1) + head           # stick left before each break
        eps = jnp.finfo(y.dtype).eps
        z = jnp.clip(head / (remaining + eps), eps, 1.0 - eps)
        return jnp.log(z) - jnp.log1p(-z)


class UnitVectorT(Transform):
    """``y = x / |x|`` over the last axis; ``inverse`` is the identity (any unit vector
    is its own preimage). Not a bijection: every positive multiple of ``x`` maps to ``y``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import UnitVectorT
    >>> [round(v, 4) for v in UnitVectorT().forward(jnp.array([3.0, 4.0])).tolist()]
    [0.6, 0.8]
    """

    def forward(self, x):
        return x / jnp.sqrt(jnp.sum(x ** 2, axis=-1, keepdims=True) + 1e-8)

    def inverse(self, y):
        return y


class OrderedT(Transform):
    """An increasing vector: ``y_1 = x_1``, ``y_i = y_(i-1) + softplus(x_i)`` over the last axis.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import OrderedT
    >>> t = OrderedT()
    >>> [round(v, 4) for v in t.forward(t.inverse(jnp.array([-1.0, 0.5, 2.0]))).tolist()]
    [-1.0, 0.5, 2.0]
    """

    def forward(self, x):
        x = jnp.asarray(x)
        steps = jnp.concatenate([x[..., :1], jax.nn.softplus(x[..., 1:])], axis=-1)
        return jnp.cumsum(steps, axis=-1)

    def inverse(self, y):
        y = jnp.asarray(y)
        gaps = jnp.diff(y, axis=-1)
        return jnp.concatenate([y[..., :1], gaps + jnp.log(-jnp.expm1(-gaps))], axis=-1)

    def log_abs_det_jacobian(self, x, y):
        return _sum_last(jax.nn.log_sigmoid(jnp.asarray(x)[..., 1:]))
