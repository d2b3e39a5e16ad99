"""Activation functions, as brainstate.nn names them.

Each is a thin call to ``jax.nn`` (or to ``brainunit.math`` where a unit can
pass through, as in ``relu`` of a current). The layer versions
(:class:`~brainx.nn.ReLU`, :class:`~brainx.nn.Softmax`...) are in
:mod:`brainx.nn.layers.elementwise`. ``rrelu`` draws its slopes from
:mod:`brainx.random`, so it advances the default generator.

Examples
--------
>>> import jax.numpy as jnp
>>> from brainx import nn
>>> x = jnp.array([-2.0, 0.5, 3.0])
>>> nn.relu(x).tolist(), nn.hard_tanh(x).tolist()
([0.0, 0.5, 3.0], [-1.0, 0.5, 1.0])
>>> nn.soft_shrink(x, 1.0).tolist()
[-1.0, 0.0, 2.0]
>>> float(nn.softmax(x).sum())
1.0
"""

from __future__ import annotations

from typing import Any, Sequence, Union

import brainunit as u
import jax
import jax.numpy as jnp

from brainx import random

__all__ = [
    "tanh", "relu", "squareplus", "softplus", "soft_sign", "sigmoid", "silu", "swish",
    "log_sigmoid", "elu", "leaky_relu", "hard_tanh", "celu", "selu", "gelu", "glu", "logsumexp",
    "log_softmax", "softmax", "standardize", "one_hot", "relu6", "hard_sigmoid", "hard_silu",
    "hard_swish", "hard_shrink", "rrelu", "mish", "soft_shrink", "prelu", "tanh_shrink",
    "softmin", "sparse_plus", "sparse_sigmoid",
]

Axis = Union[int, Sequence[int], None]


def tanh(x: Any) -> Any:
    """Hyperbolic tangent."""
    return jnp.tanh(x)


def relu(x: Any) -> Any:
    """``max(x, 0)``; keeps the unit of a quantity."""
    return u.math.relu(x)


def squareplus(x: Any, b: Any = 4) -> Any:
    """``(x + sqrt(x**2 + b)) / 2``, a smooth ReLU."""
    return jax.nn.squareplus(x, b)


def softplus(x: Any) -> Any:
    """``log(1 + exp(x))``."""
    return jax.nn.softplus(x)


def soft_sign(x: Any) -> Any:
    """``x / (1 + |x|)``."""
    return jax.nn.soft_sign(x)


def sigmoid(x: Any) -> Any:
    """``1 / (1 + exp(-x))``."""
    return jax.nn.sigmoid(x)


def silu(x: Any) -> Any:
    """``x * sigmoid(x)`` (also called swish)."""
    return jax.nn.silu(x)


swish = silu


def log_sigmoid(x: Any) -> Any:
    """``-softplus(-x)``."""
    return jax.nn.log_sigmoid(x)


def elu(x: Any, alpha: Any = 1.0) -> Any:
    """``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``."""
    return jax.nn.elu(x, alpha)


def leaky_relu(x: Any, negative_slope: Any = 1e-2) -> Any:
    """``x`` if ``x >= 0`` else ``negative_slope * x``; keeps the unit of a quantity."""
    return u.math.leaky_relu(x, negative_slope)


def hard_tanh(x: Any, min_val: float = -1.0, max_val: float = 1.0) -> Any:
    """``x`` clipped to ``[min_val, max_val]``."""
    return u.math.clip(x, min_val, max_val)


def celu(x: Any, alpha: Any = 1.0) -> Any:
    """Continuously differentiable ELU: ``max(x, 0) + alpha * min(exp(x / alpha) - 1, 0)``."""
    return jax.nn.celu(x, alpha)


def selu(x: Any) -> Any:
    """Scaled ELU with the self-normalising constants."""
    return jax.nn.selu(x)


def gelu(x: Any, approximate: bool = True) -> Any:
    """Gaussian error linear unit (``approximate``: the tanh formula)."""
    return jax.nn.gelu(x, approximate=approximate)


def glu(x: Any, axis: int = -1) -> Any:
    """Gated linear unit: the first half of ``axis`` times the sigmoid of the second half."""
    return jax.nn.glu(x, axis=axis)


def logsumexp(x: Any, axis: Axis = None, b: Any = None, keepdims: bool = False,
              return_sign: bool = False, where: Any = None) -> Any:
    """``log(sum(b * exp(x)))`` along ``axis``, computed stably."""
    return jax.nn.logsumexp(x, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign,
                            where=where)


def log_softmax(x: Any, axis: Axis = -1, where: Any = None) -> Any:
    """``x - logsumexp(x, axis)``."""
    return jax.nn.log_softmax(x, axis=axis, where=where)


def softmax(x: Any, axis: Axis = -1, where: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` along ``axis``."""
    return jax.nn.softmax(x, axis=axis, where=where)


def softmin(x: Any, axis: Axis = -1) -> Any:
    """``softmax(-x)``."""
    return jax.nn.softmax(-x, axis=axis)


def standardize(x: Any, axis: Axis = -1, variance: Any = None, epsilon: Any = 1e-5,
                where: Any = None) -> Any:
    """``(x - mean) / sqrt(variance + epsilon)`` along ``axis``."""
    return jax.nn.standardize(x, axis=axis, variance=variance, epsilon=epsilon, where=where)


def one_hot(x: Any, num_classes: int, *, dtype: Any = None, axis: Union[int, Sequence[int]] = -1
            ) -> jax.Array:
    """Integer labels as one-hot vectors of length ``num_classes`` (default float dtype)."""
    return jax.nn.one_hot(x, num_classes, dtype=dtype, axis=axis)


def relu6(x: Any) -> Any:
    """``min(max(x, 0), 6)``."""
    return jax.nn.relu6(x)


def hard_sigmoid(x: Any) -> Any:
    """``relu6(x + 3) / 6``."""
    return jax.nn.hard_sigmoid(x)


def hard_silu(x: Any) -> Any:
    """``x * hard_sigmoid(x)`` (also called hard swish)."""
    return jax.nn.hard_silu(x)


hard_swish = hard_silu


def hard_shrink(x: Any, lambd: float = 0.5) -> Any:
    """``x`` where ``|x| > lambd``, else 0."""
    return u.math.where(u.math.abs(x) > lambd, x, u.math.zeros_like(x))


def soft_shrink(x: Any, lambd: float = 0.5) -> Any:
    """``x`` moved towards 0 by ``lambd`` (0 inside ``[-lambd, lambd]``)."""
    return x - u.math.clip(x, -lambd, lambd)


def tanh_shrink(x: Any) -> Any:
    """``x - tanh(x)``."""
    return x - jnp.tanh(x)


def prelu(x: Any, a: Any = 0.25) -> Any:
    """``x`` if ``x >= 0`` else ``a * x`` (``a`` is learnt in :class:`~brainx.nn.PReLU`)."""
    return u.math.where(x >= 0, x, a * x)


def rrelu(x: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3) -> Any:
    """Leaky ReLU whose slopes are drawn uniformly in ``[lower, upper)`` from ``brainx.random``."""
    dtype = jnp.result_type(x, float)
    a = random.uniform(lower, upper, size=jnp.shape(x), dtype=dtype)
    return u.math.where(x >= 0, x, a * x)


def mish(x: Any) -> Any:
    """``x * tanh(softplus(x))``."""
    return jax.nn.mish(x)


def sparse_plus(x: Any) -> Any:
    """0 below -1, ``(x + 1)**2 / 4`` on ``[-1, 1]``, ``x`` above 1."""
    return jax.nn.sparse_plus(x)


def sparse_sigmoid(x: Any) -> Any:
    """The derivative of :func:`sparse_plus`: 0, ``(x + 1) / 2``, 1."""
    return jax.nn.sparse_sigmoid(x)
