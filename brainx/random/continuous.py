"""Continuous distributions with a location, a scale or bounds (the gamma family is in
:mod:`brainx.random.gamma_family`).

Parameters follow ``numpy.random`` (``scale`` is a scale, never a rate), so
``numpy``/``scipy.stats`` describe each distribution. Location, scale and bound
parameters may be brainunit Quantities; the sample then carries their unit.
Everything is a transform of one ``jax.random`` draw, except ``vonmises``, which
``jax.random`` lacks (see :mod:`brainx.random.rejection`).
"""

from __future__ import annotations

from typing import Any, Callable

import jax.numpy as jnp
import jax.random as jr

from brainx.random.params import (
    SamplerMixin, Size, check, float_dtype, in_common_unit, out_shape, unitless, with_unit,
)
from brainx.random.rejection import von_mises_centered

__all__ = ["ContinuousSamplers"]


class ContinuousSamplers(SamplerMixin):
    """Location-scale and bounded continuous distributions."""

    def _loc_scale(self, draw: Callable, loc, scale, size: Size, key: Any, dtype: Any):
        """``loc + scale * draw(key, shape, dtype)``, in the unit of ``loc``/``scale``."""
        (loc, scale), unit = in_common_unit(loc, scale)
        sample_shape = out_shape(size, loc, scale)
        r = draw(self._next_key(key), sample_shape, float_dtype(dtype))
        if scale is not None:
            r = r * scale
        if loc is not None:
            r = r + loc
        return with_unit(r, unit)

    def uniform(self, low=0.0, high=1.0, size: Size = None, key: Any = None, dtype: Any = None):
        """Uniform samples in ``[low, high)``.

        Examples
        --------
        >>> import brainunit as u, brainx
        >>> v = brainx.random.RandomState(0).uniform(-70 * u.mV, -50 * u.mV, size=4)
        >>> v.unit == u.mV, bool(((v >= -70 * u.mV) & (v < -50 * u.mV)).all())
        (True, True)
        """
        (low, high), unit = in_common_unit(low, high)
        shape = out_shape(size, low, high)
        r = jr.uniform(self._next_key(key), shape, float_dtype(dtype), minval=low, maxval=high)
        return with_unit(r, unit)

    def normal(self, loc=None, scale=None, size: Size = None, key: Any = None, dtype: Any = None):
        """Normal samples with mean ``loc`` (default 0) and standard deviation ``scale`` (default 1)."""
        return self._loc_scale(jr.normal, loc, scale, size, key, dtype)

    def standard_normal(self, size: Size = None, key: Any = None, dtype: Any = None):
        """Standard normal samples (mean 0, standard deviation 1)."""
        sample_shape = out_shape(size)
        return jr.normal(self._next_key(key), sample_shape, float_dtype(dtype))

    def truncated_normal(self, lower, upper, size: Size = None, loc=0.0, scale=1.0,
                         key: Any = None, dtype: Any = None, check_valid: bool = True):
        """Normal samples with mean ``loc`` and std ``scale``, truncated to ``(lower, upper)``."""
        (lower, upper, loc, scale), unit = in_common_unit(lower, upper, loc, scale)
        if check_valid:
            check(jnp.asarray(lower) >= jnp.asarray(upper),
                  f"truncated_normal: lower must be below upper, got {lower} and {upper}.")
            check(jnp.asarray(scale) <= 0, f"truncated_normal: scale must be positive, got {scale}.")
        shape = out_shape(size, lower, upper, loc, scale)
        z = jr.truncated_normal(self._next_key(key), (lower - loc) / scale,
                                (upper - loc) / scale, shape, float_dtype(dtype))
        return with_unit(z * scale + loc, unit)

    def lognormal(self, mean=None, sigma=None, size: Size = None, key: Any = None,
                  dtype: Any = None):
        """``exp`` of normal samples with mean ``mean`` (default 0) and std ``sigma`` (default 1).

        ``mean`` and ``sigma`` describe the logarithm, so they are dimensionless.
        """
        mean, sigma = unitless("lognormal", "mean", mean), unitless("lognormal", "sigma", sigma)
        return jnp.exp(self._loc_scale(jr.normal, mean, sigma, size, key, dtype))

    def standard_cauchy(self, size: Size = None, key: Any = None, dtype: Any = None):
        """Cauchy samples with location 0 and scale 1."""
        sample_shape = out_shape(size)
        return jr.cauchy(self._next_key(key), sample_shape, float_dtype(dtype))

    def standard_exponential(self, size: Size = None, key: Any = None, dtype: Any = None):
        """Exponential samples with mean 1."""
        sample_shape = out_shape(size)
        return jr.exponential(self._next_key(key), sample_shape, float_dtype(dtype))

    def exponential(self, scale=None, size: Size = None, key: Any = None, dtype: Any = None):
        """Exponential samples with mean ``scale`` (default 1), as ``numpy.random.exponential``.

        Examples
        --------
        >>> import brainunit as u, brainx
        >>> isi = brainx.random.RandomState(0).exponential(10 * u.ms, size=20000)
        >>> bool(9.5 * u.ms < isi.mean() < 10.5 * u.ms)
        True
        """
        return self._loc_scale(jr.exponential, None, scale, size, key, dtype)

    def gumbel(self, loc=None, scale=None, size: Size = None, key: Any = None, dtype: Any = None):
        """Gumbel (extreme value type I) samples with mode ``loc`` and scale ``scale``."""
        return self._loc_scale(jr.gumbel, loc, scale, size, key, dtype)

    def laplace(self, loc=None, scale=None, size: Size = None, key: Any = None, dtype: Any = None):
        """Laplace (double exponential) samples with mean ``loc`` and scale ``scale``."""
        return self._loc_scale(jr.laplace, loc, scale, size, key, dtype)

    def logistic(self, loc=None, scale=None, size: Size = None, key: Any = None,
                 dtype: Any = None):
        """Logistic samples with mean ``loc`` and scale ``scale``."""
        return self._loc_scale(jr.logistic, loc, scale, size, key, dtype)

    def rayleigh(self, scale=1.0, size: Size = None, key: Any = None, dtype: Any = None):
        """Rayleigh samples with scale (mode) ``scale``."""
        return self._loc_scale(_rayleigh, None, scale, size, key, dtype)

    def maxwell(self, size: Size = None, key: Any = None, dtype: Any = None):
        """Maxwell-Boltzmann samples with scale 1: the length of a standard normal 3-vector."""
        sample_shape = out_shape(size)
        return jr.maxwell(self._next_key(key), sample_shape, float_dtype(dtype))

    def pareto(self, a, size: Size = None, key: Any = None, dtype: Any = None):
        """Pareto II (Lomax) samples with shape ``a``, on ``[0, inf)``, as ``numpy.random.pareto``.

        Add 1 and multiply by ``m`` for the classical Pareto distribution with minimum ``m``.
        """
        a = unitless("pareto", "a", a)
        check(jnp.asarray(a) <= 0, f"pareto: a must be positive, got {a}.")
        sample_shape = out_shape(size, a)
        e = jr.exponential(self._next_key(key), sample_shape, float_dtype(dtype))
        return jnp.expm1(e / a)

    def power(self, a, size: Size = None, key: Any = None, dtype: Any = None,
              check_valid: bool = True):
        """Samples in ``[0, 1]`` with density ``a * x ** (a - 1)`` (``numpy.random.power``)."""
        a = unitless("power", "a", a)
        if check_valid:
            check(jnp.asarray(a) <= 0, f"power: a must be positive, got {a}.")
        sample_shape = out_shape(size, a)
        unif = jr.uniform(self._next_key(key), sample_shape, float_dtype(dtype))
        return unif ** (1 / jnp.asarray(a, unif.dtype))

    def weibull(self, a, size: Size = None, key: Any = None, dtype: Any = None):
        """Weibull samples with shape ``a`` and scale 1 (``numpy.random.weibull``)."""
        return self.weibull_min(a, None, size=size, key=key, dtype=dtype)

    def weibull_min(self, a, scale=None, size: Size = None, key: Any = None, dtype: Any = None):
        """Weibull samples with shape ``a`` and scale ``scale`` (``scipy.stats.weibull_min``)."""
        a = unitless("weibull_min", "a", a)
        (scale,), unit = in_common_unit(scale)
        shape = out_shape(size, a, scale)
        r = jr.weibull_min(self._next_key(key), 1.0 if scale is None else scale, a, shape,
                           float_dtype(dtype))
        return with_unit(r, unit)

    def triangular(self, left=0.0, mode=0.5, right=1.0, size: Size = None, key: Any = None,
                   dtype: Any = None):
        """Triangular samples on ``[left, right]`` peaking at ``mode`` (bounds share a unit).

        Examples
        --------
        >>> import brainunit as u, brainx
        >>> x = brainx.random.RandomState(0).triangular(0 * u.ms, 1 * u.ms, 4 * u.ms, size=5)
        >>> x.unit == u.ms, bool(((x >= 0 * u.ms) & (x <= 4 * u.ms)).all())
        (True, True)
        """
        (left, mode, right), unit = in_common_unit(left, mode, right)
        lo, mid, hi = jnp.asarray(left), jnp.asarray(mode), jnp.asarray(right)
        check((lo > mid) | (mid > hi) | (lo >= hi),
              f"triangular: need left <= mode <= right and left < right, got {left}, {mode}, "
              f"{right}.")
        shape = out_shape(size, left, mode, right)
        r = jr.triangular(self._next_key(key), left, mode, right, shape, float_dtype(dtype))
        return with_unit(r, unit)

    def vonmises(self, mu, kappa, size: Size = None, key: Any = None, dtype: Any = None):
        """Von Mises (circular normal) angles in ``[-pi, pi]`` around ``mu`` with concentration
        ``kappa``; ``mu`` may carry an angle unit, which the sample then has."""
        (mu,), unit = in_common_unit(mu)
        kappa = unitless("vonmises", "kappa", kappa)
        check(~(jnp.asarray(kappa) >= 0), f"vonmises: kappa must be non-negative, got {kappa}.")
        dtype = float_dtype(dtype)
        sample_shape = out_shape(size, mu, kappa)
        theta = von_mises_centered(self._next_key(key), kappa, sample_shape, dtype)
        return with_unit(jnp.mod(theta + mu + jnp.pi, 2 * jnp.pi) - jnp.pi, unit)

    def wald(self, mean, scale, size: Size = None, key: Any = None, dtype: Any = None):
        """Wald (inverse Gaussian) samples with mean ``mean`` and shape ``scale``
        (``numpy.random.wald``); ``mean`` and ``scale`` share a unit."""
        (mean, scale), unit = in_common_unit(mean, scale)
        check((jnp.asarray(mean) <= 0) | (jnp.asarray(scale) <= 0),
              f"wald: mean and scale must be positive, got {mean} and {scale}.")
        # IG(mean, scale) is scale * IG(mean / scale, 1), and jax.random.wald is IG(., 1)
        shape = out_shape(size, mean, scale)
        r = jr.wald(self._next_key(key), jnp.asarray(mean) / scale, shape, float_dtype(dtype))
        return with_unit(r * scale, unit)


def _rayleigh(key: Any, shape: tuple, dtype: Any) -> Any:
    return jr.rayleigh(key, 1.0, shape, dtype)
