"""Regularisers: a penalty on a parameter's value, added to the training loss.

A :class:`~brainx.nn.Param` built with ``reg=`` reports ``reg.loss(value())``
from :meth:`~brainx.nn.Param.reg_loss`, and a module's
:meth:`~brainx.nn.Module.reg_loss` sums that over every ``Param`` in its
tree, so a training loss reads ``data_loss + model.reg_loss()``. Each
regulariser is also a prior: :meth:`~Regularization.reset_value` is its mode
(what :meth:`~brainx.nn.Param.reset_to_prior` sets) and
:meth:`~Regularization.sample_init` draws from it.

=================  ================================================  ==================
regulariser        ``loss(x)``                                       prior (reset value)
=================  ================================================  ==================
``L1Reg(w)``       ``w * sum |x|``                                   Laplace (0)
``L2Reg(w)``       ``relu(w) * sum x^2``                             Gaussian (0)
``ElasticNetReg``  ``a * w1 * sum |x| + (1 - a) * w2 * sum x^2``      (0)
``GaussianReg``    ``w * (sum p (x - mean)^2 - sum log p)``,         Gaussian (mean)
                   ``p = 1 / std^2``
``HuberReg``       ``w * sum huber_d(x)``: ``x^2 / 2`` for           (0)
                   ``|x| <= d``, else ``d * (|x| - d / 2)``
=================  ================================================  ==================

The penalty is computed on the *constrained* value (``value()``, with its
unit), as in brainstate; ``fit_hyper`` is accepted for brainstate's
signature, and the hyperparameters here are always constants.
"""

from __future__ import annotations

from typing import Any, Sequence, Union

import brainunit as u
import jax.numpy as jnp

from brainx import random as brainx_random
from brainx.nn.init import to_size
from brainx.pretty_repr.layout import PrettyAttr, PrettyType, pretty_str, render

__all__ = ["Regularization", "L1Reg", "L2Reg", "ElasticNetReg", "GaussianReg", "HuberReg"]


def _shape(shape: Union[int, Sequence[int]]) -> tuple:
    return tuple(to_size(shape))


class Regularization:
    """A penalty ``loss(value)`` with the prior it stands for.

    Subclasses implement :meth:`loss`, :meth:`sample_init` and :meth:`reset_value`.

    Parameters
    ----------
    fit_hyper : bool
        Accepted for brainstate's signature; brainx keeps the hyperparameters fixed.
    """

    def __init__(self, fit_hyper: bool = False):
        self.fit_hyper = fit_hyper

    def loss(self, value: Any) -> Any:  # pragma: no cover - abstract
        """The penalty for ``value`` (a scalar)."""
        raise NotImplementedError(f"{type(self).__name__} must implement loss(value).")

    def sample_init(self, shape: Union[int, Sequence[int]]) -> Any:  # pragma: no cover
        """A draw of ``shape`` from the prior."""
        raise NotImplementedError(f"{type(self).__name__} must implement sample_init(shape).")

    def reset_value(self) -> Any:  # pragma: no cover - abstract
        """The prior's mode: what :meth:`Param.reset_to_prior` sets."""
        raise NotImplementedError(f"{type(self).__name__} must implement reset_value().")

    def __pretty_repr__(self):
        """The pretty-repr items: the class, then its attributes (``fit_hyper`` first)."""
        yield PrettyType(type(self))
        for key, value in vars(self).items():
            yield PrettyAttr(key, repr(value) if isinstance(value, str) else value)

    def __repr__(self) -> str:
        return render(self)

    __repr__._uses_pretty_repr = True  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return pretty_str(self)


class L1Reg(Regularization):
    """Lasso: ``weight * sum(|x|)``; its prior is a Laplace distribution at 0.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import L1Reg
    >>> round(float(L1Reg(weight=0.1).loss(jnp.array([3.0, -4.0]))), 6)        # 0.1 * (3 + 4)
    0.7
    """

    def __init__(self, weight: float = 1.0, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight = weight

    def loss(self, value: Any) -> Any:
        return self.weight * u.math.sum(u.math.abs(value))

    def sample_init(self, shape: Union[int, Sequence[int]]) -> Any:
        """Laplace(0, 1 / weight) draws."""
        return brainx_random.laplace(0.0, 1.0 / (self.weight + 1e-8), _shape(shape))

    def reset_value(self) -> Any:
        return 0.0


class L2Reg(Regularization):
    """Ridge: ``relu(weight) * sum(x ** 2)``; its prior is a Gaussian at 0.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import L2Reg
    >>> float(L2Reg(weight=0.1).loss(jnp.array([3.0, -4.0])))      # 0.1 * 25
    2.5
    """

    def __init__(self, weight: float = 1.0, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight = weight

    def loss(self, value: Any) -> Any:
        return jnp.maximum(self.weight, 0.0) * u.math.sum(value ** 2)

    def sample_init(self, shape: Union[int, Sequence[int]]) -> Any:
        """Normal(0, 1 / weight) draws."""
        std = 1.0 / jnp.sqrt(jnp.maximum(self.weight, 0.0) + 1e-8)
        return std * brainx_random.randn(*_shape(shape))

    def reset_value(self) -> Any:
        return 0.0


class ElasticNetReg(Regularization):
    """``alpha * l1_weight * sum|x| + (1 - alpha) * l2_weight * sum x^2`` (alpha: the L1 share).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import ElasticNetReg
    >>> float(ElasticNetReg(l1_weight=1.0, l2_weight=1.0, alpha=0.5).loss(jnp.array([2.0])))
    3.0
    """

    def __init__(self, l1_weight: float = 1.0, l2_weight: float = 1.0, alpha: float = 0.5,
                 fit_hyper: bool = False):
        super().__init__(fit_hyper)
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"ElasticNetReg: alpha (the L1 share) must be in [0, 1], got {alpha}.")
        self.l1_weight, self.l2_weight, self.alpha = l1_weight, l2_weight, alpha

    def loss(self, value: Any) -> Any:
        l1 = self.l1_weight * u.math.sum(u.math.abs(value))
        l2 = self.l2_weight * u.math.sum(value ** 2)
        return self.alpha * l1 + (1.0 - self.alpha) * l2

    def sample_init(self, shape: Union[int, Sequence[int]]) -> Any:
        """Normal draws with the L2 part's variance (0.01 when there is none)."""
        w = (1.0 - self.alpha) * self.l2_weight
        std = 1.0 / jnp.sqrt(w + 1e-8) if w > 0 else 0.1
        return std * brainx_random.randn(*_shape(shape))

    def reset_value(self) -> Any:
        return 0.0


class GaussianReg(Regularization):
    """The negative log-density of ``N(mean, std^2)`` (up to a constant), times ``weight``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import GaussianReg
    >>> reg = GaussianReg(mean=1.0, std=0.5, weight=0.1)
    >>> round(float(reg.loss(jnp.array([2.0]))), 3)       # 0.1 * (4 * 1 - log 4)
    0.261
    >>> reg.reset_value()
    1.0
    """

    def __init__(self, mean: Any, std: Any, weight: float = 1.0, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.mean = mean
        self.precision = 1.0 / (jnp.asarray(std, float) ** 2 + 1e-8)
        self.weight = weight

    def loss(self, value: Any) -> Any:
        prec = jnp.maximum(self.precision, 0.0) + 1e-6
        # the log term sums over the precision's own shape (one term for a scalar std)
        return self.weight * (u.math.sum(prec * (value - self.mean) ** 2) - jnp.sum(jnp.log(prec)))

    def sample_init(self, shape: Union[int, Sequence[int]]) -> Any:
        """``mean + std * Normal`` draws."""
        std = 1.0 / jnp.sqrt(jnp.maximum(self.precision, 0.0) + 1e-8)
        return self.mean + std * brainx_random.randn(*_shape(shape))

    def reset_value(self) -> Any:
        return self.mean


class HuberReg(Regularization):
    """Huber's robust penalty, ``weight * sum huber(x)``: quadratic near 0, linear beyond ``delta``.

    ``huber(x) = x ** 2 / 2`` where ``|x| <= delta``, else ``delta * (|x| - delta / 2)``
    (the two pieces meet with the same slope), so large entries are pulled
    in less hard than by :class:`L2Reg`. ``delta`` is clipped at 0 (plus
    ``1e-8``), as in brainstate.

    Parameters
    ----------
    weight : float
        The factor of the penalty.
    delta : float
        Where the quadratic part gives way to the linear one.
    fit_hyper : bool
        Accepted for brainstate's signature; the hyperparameters stay fixed.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import HuberReg
    >>> round(float(HuberReg(weight=0.1, delta=1.0).loss(jnp.array([0.5, -3.0]))), 6)  # 0.1 * 2.625
    0.2625
    """

    def __init__(self, weight: float = 1.0, delta: float = 1.0, fit_hyper: bool = False):
        super().__init__(fit_hyper)
        self.weight, self.delta = weight, delta

    def loss(self, value: Any) -> Any:
        delta = jnp.maximum(jnp.asarray(self.delta, float), 0.0) + 1e-8
        size = u.math.abs(value)
        huber = u.math.where(size <= delta, 0.5 * value ** 2, delta * (size - 0.5 * delta))
        return self.weight * u.math.sum(huber)

    def sample_init(self, shape: Union[int, Sequence[int]]) -> Any:
        """Normal(0, 1 / weight) draws (a Gaussian stand-in for the Huber prior, as brainstate)."""
        std = 1.0 / jnp.sqrt(jnp.maximum(self.weight, 0.0) + 1e-8)
        return std * brainx_random.randn(*_shape(shape))

    def reset_value(self) -> Any:
        return 0.0
