"""The gamma family: gamma, beta, chi-square, Student's t, F, and the noncentral ones.

All are built from gamma variates (a chi-square with ``df`` degrees of freedom
is ``2 * Gamma(df / 2)``; t, F and beta are ratios of them), so shape
parameters may be any positive real number, not only integers. Shape
parameters are dimensionless; only ``gamma``'s ``scale`` may carry a unit.
The noncentral chi-square is a Poisson mixture of central ones,
``chisquare(df + 2 * N)`` with ``N ~ Poisson(nonc / 2)``, which holds for every
``df > 0``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import jax.random as jr

from brainx.random.params import (
    SamplerMixin, Size, check, float_dtype, in_common_unit, out_shape, unitless, with_unit,
)

__all__ = ["GammaFamilySamplers"]


@partial(jax.jit, static_argnums=(3, 4))
def _noncentral_chisquare(key: Any, df: Any, nonc: Any, shape: tuple, dtype: Any) -> Any:
    k_poisson, k_chi2 = jr.split(key)
    n = jr.poisson(k_poisson, jnp.asarray(nonc, dtype) / 2, shape)
    return jr.chisquare(k_chi2, df + 2 * n.astype(dtype), shape, dtype)


class GammaFamilySamplers(SamplerMixin):
    """Distributions built from gamma variates."""

    def gamma(self, shape, scale=None, size: Size = None, key: Any = None, dtype: Any = None):
        """Gamma samples with shape ``shape`` and scale ``scale`` (default 1): mean
        ``shape * scale``, as ``numpy.random.gamma``.

        Examples
        --------
        >>> import brainunit as u, brainx
        >>> tau = brainx.random.RandomState(0).gamma(4.0, 5 * u.ms, size=20000)
        >>> bool(19 * u.ms < tau.mean() < 21 * u.ms)
        True
        """
        shape = unitless("gamma", "shape", shape)
        (scale,), unit = in_common_unit(scale)
        out = out_shape(size, shape, scale)
        r = jr.gamma(self._next_key(key), shape, out, float_dtype(dtype))
        return with_unit(r if scale is None else r * scale, unit)

    def standard_gamma(self, shape, size: Size = None, key: Any = None, dtype: Any = None):
        """Gamma samples with shape ``shape`` and scale 1."""
        shape = unitless("standard_gamma", "shape", shape)
        sample_shape = out_shape(size, shape)
        return jr.gamma(self._next_key(key), shape, sample_shape, float_dtype(dtype))

    def loggamma(self, a, size: Size = None, key: Any = None, dtype: Any = None):
        """Logarithms of gamma samples with shape ``a`` (``scipy.stats.loggamma``), accurate
        also for small ``a``, where the gamma sample itself underflows."""
        a = unitless("loggamma", "a", a)
        sample_shape = out_shape(size, a)
        return jr.loggamma(self._next_key(key), a, sample_shape, float_dtype(dtype))

    def beta(self, a, b, size: Size = None, key: Any = None, dtype: Any = None):
        """Beta samples with parameters ``a`` and ``b``, on ``[0, 1]``."""
        a, b = unitless("beta", "a", a), unitless("beta", "b", b)
        sample_shape = out_shape(size, a, b)
        return jr.beta(self._next_key(key), a, b, sample_shape, float_dtype(dtype))

    def chisquare(self, df, size: Size = None, key: Any = None, dtype: Any = None,
                  check_valid: bool = True):
        """Chi-square samples with ``df`` (> 0, real) degrees of freedom."""
        df = unitless("chisquare", "df", df)
        if check_valid:
            check(~(jnp.asarray(df) > 0), f"chisquare: df must be positive, got {df}.")
        sample_shape = out_shape(size, df)
        return jr.chisquare(self._next_key(key), df, sample_shape, float_dtype(dtype))

    def noncentral_chisquare(self, df, nonc, size: Size = None, key: Any = None,
                             dtype: Any = None):
        """Noncentral chi-square samples: ``df`` degrees of freedom, noncentrality ``nonc``
        (mean ``df + nonc``)."""
        df, nonc = unitless("noncentral_chisquare", "df", df), unitless(
            "noncentral_chisquare", "nonc", nonc)
        check(~(jnp.asarray(df) > 0) | ~(jnp.asarray(nonc) >= 0),
              f"noncentral_chisquare: need df > 0 and nonc >= 0, got {df} and {nonc}.")
        shape = out_shape(size, df, nonc)
        return _noncentral_chisquare(self._next_key(key), df, nonc, shape, float_dtype(dtype))

    def f(self, dfnum, dfden, size: Size = None, key: Any = None, dtype: Any = None):
        """F (Fisher-Snedecor) samples with ``dfnum`` and ``dfden`` degrees of freedom."""
        dfnum, dfden = unitless("f", "dfnum", dfnum), unitless("f", "dfden", dfden)
        check(~(jnp.asarray(dfnum) > 0) | ~(jnp.asarray(dfden) > 0),
              f"f: dfnum and dfden must be positive, got {dfnum} and {dfden}.")
        shape = out_shape(size, dfnum, dfden)
        dfnum, dfden = (jnp.broadcast_to(jnp.asarray(x), shape) for x in (dfnum, dfden))
        return jr.f(self._next_key(key), dfnum, dfden, shape, float_dtype(dtype))

    def noncentral_f(self, dfnum, dfden, nonc, size: Size = None, key: Any = None,
                     dtype: Any = None):
        """Noncentral F samples: ``(X / dfnum) / (Y / dfden)`` with ``X`` noncentral
        chi-square (noncentrality ``nonc``) and ``Y`` central chi-square."""
        dfnum, dfden, nonc = (unitless("noncentral_f", n, x) for n, x in
                              (("dfnum", dfnum), ("dfden", dfden), ("nonc", nonc)))
        check(~(jnp.asarray(dfnum) > 0) | ~(jnp.asarray(dfden) > 0) | ~(jnp.asarray(nonc) >= 0),
              f"noncentral_f: need dfnum > 0, dfden > 0 and nonc >= 0, got {dfnum}, {dfden} "
              f"and {nonc}.")
        shape, dtype = out_shape(size, dfnum, dfden, nonc), float_dtype(dtype)
        k_num, k_den = jr.split(self._next_key(key))
        num = _noncentral_chisquare(k_num, dfnum, nonc, shape, dtype) / dfnum
        return num / (jr.chisquare(k_den, dfden, shape, dtype) / dfden)

    def standard_t(self, df, size: Size = None, key: Any = None, dtype: Any = None):
        """Student's t samples with ``df`` (> 0, real) degrees of freedom."""
        df = unitless("standard_t", "df", df)
        check(~(jnp.asarray(df) > 0), f"standard_t: df must be positive, got {df}.")
        sample_shape = out_shape(size, df)
        return jr.t(self._next_key(key), df, sample_shape, float_dtype(dtype))

    def t(self, df, size: Size = None, key: Any = None, dtype: Any = None):
        """Student's t samples with ``df`` degrees of freedom (``standard_t``)."""
        return self.standard_t(df, size=size, key=key, dtype=dtype)
