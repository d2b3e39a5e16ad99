"""Distributions whose samples are vectors or matrices.

As in ``numpy.random``, ``size`` is the batch shape and the sample shape is
appended: ``dirichlet``, ``multinomial`` and ``multivariate_normal`` add the
length ``k`` of their parameter vector, ``orthogonal(n)`` adds ``(n, n)``.
``size=None`` gives the batch shape of the parameters.
"""

from __future__ import annotations

import functools
from functools import partial
from typing import Any

import brainunit as u
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from brainx.random.params import (
    SamplerMixin, Size, check, float_dtype, int_dtype, shape_of, unitless, with_unit,
)

__all__ = ["MultivariateSamplers"]


def _mean_cov_in_one_unit(mean: Any, cov: Any) -> tuple:
    """``(mean, cov, unit)``: mantissas of ``mean`` in ``unit`` and of ``cov`` in ``unit**2``."""
    if not isinstance(mean, u.Quantity) and not isinstance(cov, u.Quantity):
        return mean, cov, None
    if not isinstance(mean, u.Quantity) or not isinstance(cov, u.Quantity):
        raise u.UnitMismatchError(
            "multivariate_normal: mean and cov must both carry a unit (cov in mean's unit "
            f"squared) or neither; got mean in {u.get_unit(mean)} and cov in {u.get_unit(cov)}.")
    unit = mean.unit
    return mean.mantissa, cov.to(unit ** 2).mantissa, unit


@partial(jax.jit, static_argnums=(3, 4))
def _multinomial(key: Any, n: Any, pvals: Any, batch: tuple, dtype: Any) -> Any:
    # numpy takes the last probability as what the others leave. Compiled once per
    # shape: jax.random.multinomial is not jitted, and eagerly its scan is traced anew
    # on every call.
    last = jnp.clip(1 - jnp.sum(pvals[..., :-1], axis=-1, keepdims=True), 0, 1)
    pvals = jnp.concatenate([pvals[..., :-1], last], axis=-1)
    shape = batch if _shape_excludes_outcomes() else batch + pvals.shape[-1:]
    return jr.multinomial(key, n, pvals, shape=shape).astype(dtype)


@functools.lru_cache(maxsize=None)
def _shape_excludes_outcomes() -> bool:
    """Whether ``jax.random.multinomial``'s ``shape`` is the batch shape only.

    JAX 0.12 made it the prefix before the outcome axis; up to 0.10 it is the whole
    result shape. Asked of JAX once, by the shape of an abstract draw.
    """
    draw = jax.eval_shape(lambda k: jr.multinomial(k, 1, jnp.full(2, 0.5), shape=(3, 2)),
                          jax.random.key(0))
    return draw.shape == (3, 2, 2)


class MultivariateSamplers(SamplerMixin):
    """Vector- and matrix-valued distributions."""

    def dirichlet(self, alpha, size: Size = None, key: Any = None, dtype: Any = None):
        """Probability vectors from a Dirichlet distribution with concentrations ``alpha``.

        Examples
        --------
        >>> import brainx
        >>> x = brainx.random.RandomState(0).dirichlet([1.0, 2.0, 3.0], size=4)
        >>> x.shape, bool(abs(x.sum(-1) - 1).max() < 1e-5)
        ((4, 3), True)
        """
        alpha = unitless("dirichlet", "alpha", alpha)
        check(~(jnp.asarray(alpha) > 0), f"dirichlet: alpha must be positive, got {alpha}.")
        shape = None if size is None else shape_of(size)
        return jr.dirichlet(self._next_key(key), jnp.asarray(alpha), shape, float_dtype(dtype))

    def multinomial(self, n, pvals, size: Size = None, key: Any = None, dtype: Any = None,
                    check_valid: bool = True):
        """Counts of ``k`` outcomes in ``n`` trials with probabilities ``pvals`` (last axis)."""
        n, pvals = unitless("multinomial", "n", n), unitless("multinomial", "pvals", pvals)
        pvals = jnp.asarray(pvals, float_dtype(None))
        if check_valid:
            check(jnp.any(pvals < 0, axis=-1) | (jnp.sum(pvals[..., :-1], axis=-1) > 1 + 1e-6),
                  f"multinomial: pvals must be non-negative with sum(pvals[..., :-1]) <= 1, "
                  f"got {pvals}.")
        batch = (tuple(np.broadcast_shapes(np.shape(n), pvals.shape[:-1])) if size is None
                 else shape_of(size))
        return _multinomial(self._next_key(key), n, pvals, batch, int_dtype(dtype))

    def multivariate_normal(self, mean, cov, size: Size = None, method: str = "cholesky",
                            key: Any = None, dtype: Any = None):
        """Normal vectors with mean ``mean`` (``k``) and covariance ``cov`` (``k x k``).

        ``method`` (``'cholesky'``, ``'eigh'`` or ``'svd'``) factorises ``cov``; the last
        two also accept a singular ``cov``. A Quantity ``mean`` needs ``cov`` in its
        unit squared; the sample has ``mean``'s unit.

        Examples
        --------
        >>> import brainunit as u, jax.numpy as jnp, brainx
        >>> v = brainx.random.RandomState(0).multivariate_normal(
        ...     jnp.zeros(2) * u.mV, jnp.eye(2) * u.mV ** 2, size=3)
        >>> v.shape, v.unit == u.mV
        ((3, 2), True)
        """
        if method not in ("cholesky", "eigh", "svd"):
            raise ValueError(f"multivariate_normal: method must be 'cholesky', 'eigh' or 'svd', "
                             f"got {method!r}.")
        mean, cov, unit = _mean_cov_in_one_unit(mean, cov)
        mean, cov = jnp.asarray(mean), jnp.asarray(cov)
        if mean.ndim < 1 or cov.ndim < 2 or cov.shape[-2:] != mean.shape[-1:] * 2:
            raise ValueError(f"multivariate_normal: need mean of shape (..., k) and cov of shape "
                             f"(..., k, k), got {mean.shape} and {cov.shape}.")
        shape = None if size is None else shape_of(size)
        r = jr.multivariate_normal(self._next_key(key), mean, cov, shape, float_dtype(dtype),
                                   method)
        return with_unit(r, unit)

    def orthogonal(self, n: int, size: Size = None, key: Any = None, dtype: Any = None):
        """Random ``n x n`` orthogonal matrices, uniform over the orthogonal group (Haar).

        Examples
        --------
        >>> import jax.numpy as jnp, brainx
        >>> q = brainx.random.RandomState(0).orthogonal(3)
        >>> bool(jnp.allclose(q @ q.T, jnp.eye(3), atol=1e-5))
        True
        """
        return jr.orthogonal(self._next_key(key), n, shape_of(size), float_dtype(dtype))
