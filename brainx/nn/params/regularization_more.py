"""More regularisers: structural penalties, heavy-tailed and bounded priors, and a chain of them.

brainstate's names and arguments. As in :mod:`brainx.nn.params.regularization`,
``loss`` is the penalty on a parameter's (constrained) value, ``reset_value``
the prior's mode and ``sample_init`` a draw from it; ``fit_hyper`` is accepted
and the hyperparameters stay constants.

=======================  =====================================================  ==============
regulariser              ``loss(x)`` (``w`` the weight, ``N`` the size of x)    reset value
=======================  =====================================================  ==============
``GroupLassoReg``        ``w * sum_g ||x_g||_2`` over groups of ``group_size``  0
                         consecutive entries (the last padded with zeros)
``TotalVariationReg``    ``w * sum |diff(x)|`` (``order=2``: second difference)  0
``MaxNormReg``           ``w * relu(||x||_2 - max_value)^2``                    0
``OrthogonalReg``        ``w * ||W^T W - I||_F^2``                              0
``SpectralNormReg``      ``w * relu(sigma_max(W) - max_value)^2``               0
``StudentTReg``          ``w * [sum (df+1)/2 log(1 + (x/s)^2/df) + N log-norm]``  0
``CauchyReg``            ``w * [sum log(1 + (x/s)^2) + N log s]``               0
``HorseshoeReg``         ``w * [sum log(1 + (x/tau)^2) + N log tau]``           0
``UniformReg``           ``w * sum relu(lower - x)^2 + relu(x - upper)^2``      the midpoint
``SpikeAndSlabReg``      ``-w * sum log(pi N(x; spike) + (1-pi) N(x; slab))``   0
``DirichletReg``         ``-w * sum (alpha - 1) log softmax(x)``                0
``ChainedReg(*regs)``    ``w * sum of the regs' losses``                        the first's
=======================  =====================================================  ==============

``SpectralNormReg`` takes the exact largest singular value (brainstate
estimates it by ``n_power_iterations`` of the power method; the argument is
accepted).
"""

from __future__ import annotations

import math
from typing import Any, Sequence, Union

import brainunit as u
import jax
import jax.numpy as jnp

from brainx import random as brainx_random
from brainx.nn.params.regularization import Regularization, _shape

__all__ = ["ChainedReg", "GroupLassoReg", "TotalVariationReg", "MaxNormReg", "OrthogonalReg",
           "SpectralNormReg", "StudentTReg", "CauchyReg", "UniformReg", "HorseshoeReg",
           "SpikeAndSlabReg", "DirichletReg"]

Shape = Union[int, Sequence[int]]


def _positive(x: Any) -> jax.Array:
    """``relu(x) + 1e-8``: a hyperparameter that must stay positive."""
    return jnp.maximum(jnp.asarray(x, float), 0.0) + 1e-8


def _normal(weight: Any, shape: Shape) -> jax.Array:
    return brainx_random.randn(*_shape(shape)) / jnp.sqrt(_positive(weight))


def _matrix(value: Any) -> Any:
    """A parameter seen as a matrix: 2-D as is, more dims flattened after the first,
    a 1-D vector of square length as that square, another vector as a column."""
    if value.ndim == 1:
        n = math.isqrt(value.shape[0])
        return value.reshape(n, n) if n * n == value.shape[0] else value.reshape(-1, 1)
    return value if value.ndim == 2 else value.reshape(value.shape[0], -1)


class ChainedReg(Regularization):
    """The sum of several regularisers' losses, times ``weight``; the prior is the first one's.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import ChainedReg, L1Reg, L2Reg
    >>> round(float(ChainedReg(L1Reg(1.0), L2Reg(1.0), weight=0.5).loss(jnp.array([2.0]))), 6)
    3.0
    """

    def __init__(self, *regularizations: Regularization, weight: float = 1.0,
                 fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.regularizations = tuple(regularizations)
        self.weight = weight

    def loss(self, value: Any) -> Any:
        if not self.regularizations:
            return 0.0
        return self.weight * sum(reg.loss(value) for reg in self.regularizations)

    def sample_init(self, shape: Shape) -> Any:
        if not self.regularizations:
            return jnp.zeros(_shape(shape))
        return self.regularizations[0].sample_init(shape)

    def reset_value(self) -> Any:
        return self.regularizations[0].reset_value() if self.regularizations else 0.0


class GroupLassoReg(Regularization):
    """``weight * sum`` of the L2 norms of groups of ``group_size`` consecutive entries.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import GroupLassoReg
    >>> round(float(GroupLassoReg(group_size=2).loss(jnp.array([3.0, 4.0, 0.0, 0.0]))), 3)
    5.0
    """

    def __init__(self, weight: float = 1.0, group_size: int = 1, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        if not isinstance(group_size, int):
            raise TypeError(f"GroupLassoReg: group_size must be an int, got {group_size!r}.")
        if group_size <= 0:
            raise ValueError(f"GroupLassoReg: group_size must be positive, got {group_size}.")
        self.weight, self.group_size = weight, group_size

    def loss(self, value: Any) -> Any:
        flat = u.math.reshape(value, (-1,))
        missing = -flat.shape[0] % self.group_size
        if missing:
            flat = u.math.concatenate([flat, u.math.zeros_like(flat[:1]).repeat(missing)])
        squares = u.math.sum(u.math.reshape(flat, (-1, self.group_size)) ** 2, axis=1)
        tiny = 1e-8 * u.get_unit(squares)
        return self.weight * u.math.sum(u.math.sqrt(squares + tiny))

    def sample_init(self, shape: Shape) -> Any:
        return _normal(self.weight, shape)

    def reset_value(self) -> Any:
        return 0.0


class TotalVariationReg(Regularization):
    """``weight * sum |x[i+1] - x[i]|`` over the flattened value (``order=2``: second differences).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import TotalVariationReg
    >>> float(TotalVariationReg().loss(jnp.array([1.0, 3.0, 2.0])))
    3.0
    """

    def __init__(self, weight: float = 1.0, order: int = 1, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        if order not in (1, 2):
            raise ValueError(f"TotalVariationReg: order must be 1 or 2, got {order}.")
        self.weight, self.order = weight, order

    def loss(self, value: Any) -> Any:
        flat = u.math.reshape(value, (-1,))
        step = flat[1:] - flat[:-1]
        if self.order == 2:
            step = step[1:] - step[:-1]
        return self.weight * u.math.sum(u.math.abs(step))

    def sample_init(self, shape: Shape) -> Any:
        """A random walk (cumulative Normal(0, 1 / weight) steps), scaled by ``1 / sqrt(size)``."""
        size = _shape(shape)
        walk = jnp.cumsum(_normal(self.weight, size).reshape(-1))
        return walk.reshape(size) / math.sqrt(max(1, math.prod(size)))

    def reset_value(self) -> Any:
        return 0.0


class MaxNormReg(Regularization):
    """``weight * relu(||x||_2 - max_value) ** 2``: no penalty inside the ball.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import MaxNormReg
    >>> round(float(MaxNormReg(max_value=1.0).loss(jnp.array([3.0, 4.0]))), 4)      # (5 - 1)^2
    16.0
    """

    def __init__(self, weight: float = 1.0, max_value: float = 1.0, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight, self.max_value = weight, max_value

    def loss(self, value: Any) -> Any:
        norm = jnp.sqrt(jnp.sum(jnp.asarray(value) ** 2) + 1e-8)
        return self.weight * jnp.maximum(norm - _positive(self.max_value), 0.0) ** 2

    def sample_init(self, shape: Shape) -> Any:
        """A Normal draw rescaled to half of ``max_value`` in norm."""
        draw = brainx_random.randn(*_shape(shape))
        return draw * (0.5 * _positive(self.max_value) / (jnp.sqrt(jnp.sum(draw ** 2)) + 1e-8))

    def reset_value(self) -> Any:
        return 0.0


class OrthogonalReg(Regularization):
    """``weight * ||W^T W - I||_F ** 2`` (a scalar: ``(|x| - 1) ** 2``).

    A vector of square length is read as that square matrix, another vector
    as a column; more than two dimensions are flattened after the first.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import OrthogonalReg
    >>> float(OrthogonalReg().loss(jnp.eye(3))), float(OrthogonalReg().loss(2 * jnp.eye(2)))
    (0.0, 18.0)
    """

    def __init__(self, weight: float = 1.0, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight = weight

    def loss(self, value: Any) -> Any:
        value = jnp.asarray(value)
        if value.ndim == 0:
            return self.weight * (jnp.abs(value) - 1.0) ** 2
        w = _matrix(value)
        gram = w.T @ w
        return self.weight * jnp.sum((gram - jnp.eye(gram.shape[0], dtype=gram.dtype)) ** 2)

    def sample_init(self, shape: Shape) -> Any:
        """Orthonormal columns (QR of a Normal matrix); a vector is cut from a square one."""
        size = _shape(shape)
        if len(size) == 1:
            side = math.ceil(math.sqrt(size[0]))
            return jnp.linalg.qr(brainx_random.randn(side, side))[0].reshape(-1)[:size[0]]
        if len(size) == 2:
            return jnp.linalg.qr(brainx_random.randn(*size))[0][:size[0], :size[1]]
        return 0.1 * brainx_random.randn(*size)

    def reset_value(self) -> Any:
        return 0.0


class SpectralNormReg(Regularization):
    """``weight * relu(sigma_max(W) - max_value) ** 2``, ``sigma_max`` the largest singular value.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import SpectralNormReg
    >>> round(float(SpectralNormReg(max_value=1.0).loss(jnp.diag(jnp.array([3.0, 1.0])))), 4)
    4.0
    """

    def __init__(self, weight: float = 1.0, max_value: float = 1.0, n_power_iterations: int = 1,
                 fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight, self.max_value = weight, max_value
        self.n_power_iterations = n_power_iterations

    @staticmethod
    def _sigma(value: Any) -> jax.Array:
        value = jnp.asarray(value)
        if value.ndim < 2:
            return jnp.sqrt(jnp.sum(value ** 2) + 1e-8)
        return jnp.linalg.svd(_matrix(value), compute_uv=False)[0]

    def loss(self, value: Any) -> Any:
        return self.weight * jnp.maximum(self._sigma(value) - _positive(self.max_value), 0.0) ** 2

    def sample_init(self, shape: Shape) -> Any:
        """A Normal draw rescaled so that its largest singular value is ``max_value``."""
        draw = brainx_random.randn(*_shape(shape))
        return draw * (_positive(self.max_value) / (self._sigma(draw) + 1e-8))

    def reset_value(self) -> Any:
        return 0.0


class _ScaledTail(Regularization):
    """``weight * [sum log(1 + (x / s) ** 2) + N log s]``, ``s`` the attribute ``_scale_name``."""

    _scale_name = "scale"

    def _scale(self) -> jax.Array:
        return _positive(getattr(self, self._scale_name))

    def loss(self, value: Any) -> Any:
        s = self._scale()
        value = jnp.asarray(value)
        return self.weight * (jnp.sum(jnp.log1p((value / s) ** 2)) + value.size * jnp.log(s))

    def reset_value(self) -> Any:
        return 0.0


class CauchyReg(_ScaledTail):
    """The Cauchy prior's negative log-density (up to a constant), times ``weight``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import CauchyReg
    >>> round(float(CauchyReg(scale=1.0).loss(jnp.array([1.0]))), 4)      # log 2
    0.6931
    """

    def __init__(self, weight: float = 1.0, scale: float = 1.0, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight, self.scale = weight, scale

    def sample_init(self, shape: Shape) -> Any:
        """Cauchy(0, scale) draws."""
        return self._scale() * jnp.tan(jnp.pi * (brainx_random.rand(*_shape(shape)) - 0.5))


class HorseshoeReg(_ScaledTail):
    """A horseshoe-like sparsity prior: ``weight * [sum log(1 + (x / tau) ** 2) + N log tau]``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import HorseshoeReg
    >>> round(float(HorseshoeReg(tau=1.0).loss(jnp.array([1.0]))), 4)
    0.6931
    """

    _scale_name = "tau"

    def __init__(self, weight: float = 1.0, tau: float = 1.0, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight, self.tau = weight, tau

    def sample_init(self, shape: Shape) -> Any:
        """``tau * |Cauchy| * Normal`` draws (half-Cauchy local scales)."""
        size = _shape(shape)
        local = jnp.abs(jnp.tan(jnp.pi * (brainx_random.rand(*size) - 0.5)))
        return self._scale() * local * brainx_random.randn(*size)


class StudentTReg(Regularization):
    """Student's t prior's negative log-density, its scale/df normaliser included, times ``weight``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import StudentTReg
    >>> bool(StudentTReg(df=3.0).loss(jnp.array([3.0])) > StudentTReg(df=3.0).loss(jnp.array([0.0])))
    True
    """

    def __init__(self, weight: float = 1.0, df: float = 3.0, scale: float = 1.0,
                 fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight, self.df, self.scale = weight, df, scale

    def loss(self, value: Any) -> Any:
        nu, s = _positive(self.df), _positive(self.scale)
        value = jnp.asarray(value)
        data = jnp.sum(0.5 * (nu + 1.0) * jnp.log1p((value / s) ** 2 / nu))
        norm = (jnp.log(s) + jax.scipy.special.gammaln(nu / 2) + 0.5 * jnp.log(nu * jnp.pi)
                - jax.scipy.special.gammaln((nu + 1) / 2))
        return self.weight * (data + value.size * norm)

    def sample_init(self, shape: Shape) -> Any:
        """Normal(0, scale) draws (a Gaussian stand-in, as brainstate)."""
        return _positive(self.scale) * brainx_random.randn(*_shape(shape))

    def reset_value(self) -> Any:
        return 0.0


class UniformReg(Regularization):
    """``weight * sum (relu(lower - x) ** 2 + relu(x - upper) ** 2)``: free inside ``[lower, upper]``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import UniformReg
    >>> float(UniformReg(lower=0.0, upper=1.0).loss(jnp.array([-1.0, 0.5, 3.0])))
    5.0
    """

    def __init__(self, weight: float = 1.0, lower: float = -1.0, upper: float = 1.0,
                 fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight, self.lower, self.upper = weight, lower, upper

    def loss(self, value: Any) -> Any:
        below = jnp.maximum(self.lower - jnp.asarray(value), 0.0)
        above = jnp.maximum(jnp.asarray(value) - self.upper, 0.0)
        return self.weight * jnp.sum(below ** 2 + above ** 2)

    def sample_init(self, shape: Shape) -> Any:
        return self.lower + (self.upper - self.lower) * brainx_random.rand(*_shape(shape))

    def reset_value(self) -> Any:
        return (self.lower + self.upper) / 2.0


class SpikeAndSlabReg(Regularization):
    """A two-Gaussian mixture prior: a narrow spike at 0 (share ``pi``) and a wide slab.

    ``loss = -weight * sum log(pi N(x; 0, spike_scale) + (1 - pi) N(x; 0, slab_scale))``
    (densities without their ``sqrt(2 pi)``).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import SpikeAndSlabReg
    >>> reg = SpikeAndSlabReg()
    >>> bool(reg.loss(jnp.array([0.0])) < reg.loss(jnp.array([0.5])))
    True
    """

    def __init__(self, weight: float = 1.0, spike_scale: float = 0.01, slab_scale: float = 1.0,
                 pi: float = 0.5, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight, self.spike_scale, self.slab_scale, self.pi = weight, spike_scale, slab_scale, pi

    def _parts(self):
        return (_positive(self.spike_scale), _positive(self.slab_scale),
                jnp.clip(jnp.asarray(self.pi, float), 1e-8, 1 - 1e-8))

    def loss(self, value: Any) -> Any:
        spike, slab, pi = self._parts()
        value = jnp.asarray(value)
        density = (pi * jnp.exp(-0.5 * (value / spike) ** 2) / spike
                   + (1 - pi) * jnp.exp(-0.5 * (value / slab) ** 2) / slab)
        return -self.weight * jnp.sum(jnp.log(density + 1e-8))

    def sample_init(self, shape: Shape) -> Any:
        spike, slab, pi = self._parts()
        size = _shape(shape)
        from_spike = brainx_random.rand(*size) < pi
        return jnp.where(from_spike, spike, slab) * brainx_random.randn(*size)

    def reset_value(self) -> Any:
        return 0.0


class DirichletReg(Regularization):
    """``-weight * sum (alpha - 1) log softmax(x)``: a Dirichlet prior on the softmax of the value.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import DirichletReg
    >>> float(DirichletReg(alpha=1.0).loss(jnp.array([0.1, 2.0])))     # alpha = 1: flat
    0.0
    """

    def __init__(self, weight: float = 1.0, alpha: Any = 1.0, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight, self.alpha = weight, alpha

    def loss(self, value: Any) -> Any:
        log_p = jax.nn.log_softmax(jnp.asarray(value).reshape(-1))
        return self.weight * jnp.sum(-(_positive(self.alpha) - 1.0) * log_p)

    def sample_init(self, shape: Shape) -> Any:
        """Logits of a Dirichlet(alpha) draw (normalised Gamma draws)."""
        draws = brainx_random.gamma(_positive(self.alpha), size=_shape(shape))
        return jnp.log(draws / (jnp.sum(draws) + 1e-8) + 1e-8)

    def reset_value(self) -> Any:
        return 0.0
