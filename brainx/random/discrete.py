"""Discrete distributions: counts and categories.

Parameters follow ``numpy.random``: ``geometric`` counts trials up to and
including the first success (support 1, 2, ...), ``negative_binomial(n, p)``
counts failures before the ``n``-th success. Samples are integers of the
default integer dtype (``bernoulli``: booleans). Where ``jax.random`` has no
sampler, it is built here:

=================  ==================================================================
sampler            method
=================  ==================================================================
negative_binomial  Poisson with a gamma-distributed rate (a gamma-Poisson mixture)
hypergeometric     the draws without replacement, one per step, over
                   ``min(nsample, total - nsample)`` steps (cost grows with it)
logseries          Kemp's inversion with two uniforms (no loop)
zipf               rejection, see :mod:`brainx.random.rejection`
=================  ==================================================================
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import jax.random as jr
from jax import lax

from brainx.random import rejection
from brainx.random.params import (
    SamplerMixin, Size, check, float_dtype, int_dtype, out_shape, shape_of, unitless,
)

__all__ = ["DiscreteSamplers"]


@partial(jax.jit, static_argnums=(4, 5))
def _hypergeometric(key: Any, ngood: Any, nbad: Any, nsample: Any, shape: tuple,
                    dtype: Any) -> Any:
    good, total, n = (jnp.broadcast_to(jnp.asarray(x, dtype), shape)
                      for x in (ngood, jnp.asarray(ngood) + nbad, nsample))
    # Drawing n of total leaves total - n undrawn, a uniform subset too: draw the smaller.
    flip = 2 * n > total
    steps = jnp.where(flip, total - n, n)
    fdtype = jnp.float32 if dtype != jnp.int64 else jnp.float64

    def draw_one(i, carry):
        good_left, left, drawn = carry
        active = i < steps
        take = active & (jr.uniform(jr.fold_in(key, i), shape, fdtype) * left < good_left)
        return good_left - take, left - active, drawn + take

    zero = jnp.zeros(shape, dtype)
    drawn = lax.fori_loop(0, jnp.max(steps, initial=0), draw_one, (good, total, zero))[2]
    return jnp.where(flip, good - drawn, drawn)


@partial(jax.jit, static_argnums=(2, 3, 4))
def _logseries(key: Any, p: Any, shape: tuple, dtype: Any, fdtype: Any) -> Any:
    # Kemp (1981), algorithm LK: P(k) = -p**k / (k log(1 - p)), k >= 1.
    kv, ku = jr.split(key)
    v = jr.uniform(kv, shape, fdtype, minval=jnp.finfo(fdtype).tiny)
    q = -jnp.expm1(jnp.log1p(-jnp.asarray(p, fdtype)) * jr.uniform(ku, shape, fdtype))
    k = jnp.floor(1 + jnp.log(v) / jnp.log(q))
    k = jnp.where(v >= p, 1, jnp.where(v <= q * q, k, jnp.where(v >= q, 1, 2)))
    return jnp.clip(k, 1, jnp.iinfo(dtype).max).astype(dtype)


class DiscreteSamplers(SamplerMixin):
    """Counts and categories."""

    def bernoulli(self, p=0.5, size: Size = None, key: Any = None, check_valid: bool = True):
        """Booleans that are ``True`` with probability ``p``."""
        p = unitless("bernoulli", "p", p)
        if check_valid:
            check((jnp.asarray(p) < 0) | (jnp.asarray(p) > 1),
                  f"bernoulli: p must be in [0, 1], got {p}.")
        sample_shape = out_shape(size, p)
        return jr.bernoulli(self._next_key(key), p, sample_shape)

    def binomial(self, n, p, size: Size = None, key: Any = None, dtype: Any = None,
                 check_valid: bool = True):
        """Successes in ``n`` trials with success probability ``p``."""
        n, p = unitless("binomial", "n", n), unitless("binomial", "p", p)
        if check_valid:
            check((jnp.asarray(p) < 0) | (jnp.asarray(p) > 1) | (jnp.asarray(n) < 0),
                  f"binomial: need n >= 0 and p in [0, 1], got {n} and {p}.")
        sample_shape = out_shape(size, n, p)
        r = jr.binomial(self._next_key(key), n, p, sample_shape, float_dtype(None))
        return r.astype(int_dtype(dtype))

    def poisson(self, lam=1.0, size: Size = None, key: Any = None, dtype: Any = None):
        """Poisson counts with rate ``lam``."""
        lam = unitless("poisson", "lam", lam)
        check(jnp.asarray(lam) < 0, f"poisson: lam must be non-negative, got {lam}.")
        sample_shape = out_shape(size, lam)
        return jr.poisson(self._next_key(key), lam, sample_shape, int_dtype(dtype))

    def geometric(self, p, size: Size = None, key: Any = None, dtype: Any = None):
        """Trials up to and including the first success (``1, 2, ...``), success probability ``p``."""
        p = unitless("geometric", "p", p)
        check(~((jnp.asarray(p) > 0) & (jnp.asarray(p) <= 1)),
              f"geometric: p must be in (0, 1], got {p}.")
        sample_shape = out_shape(size, p)
        return jr.geometric(self._next_key(key), p, sample_shape, int_dtype(dtype))

    def negative_binomial(self, n, p, size: Size = None, key: Any = None, dtype: Any = None):
        """Failures before the ``n``-th success (``n > 0`` may be real), success probability ``p``."""
        n, p = unitless("negative_binomial", "n", n), unitless("negative_binomial", "p", p)
        check(~(jnp.asarray(n) > 0) | ~((jnp.asarray(p) > 0) & (jnp.asarray(p) <= 1)),
              f"negative_binomial: need n > 0 and p in (0, 1], got {n} and {p}.")
        shape, fdtype = out_shape(size, n, p), float_dtype(None)
        k_rate, k_count = jr.split(self._next_key(key))
        rate = jr.gamma(k_rate, n, shape, fdtype) * ((1 - jnp.asarray(p, fdtype)) / p)
        return jr.poisson(k_count, rate, shape, int_dtype(dtype))

    def hypergeometric(self, ngood, nbad, nsample, size: Size = None, key: Any = None,
                       dtype: Any = None):
        """Good items among ``nsample`` drawn without replacement from ``ngood`` good and
        ``nbad`` bad ones.

        Examples
        --------
        >>> import brainx
        >>> x = brainx.random.RandomState(0).hypergeometric(7, 3, 5, size=20000)
        >>> bool(3.4 < x.mean() < 3.6), int(x.min()) >= 2     # mean 5 * 7 / 10
        (True, True)
        """
        ngood, nbad, nsample = (unitless("hypergeometric", n, x) for n, x in
                                (("ngood", ngood), ("nbad", nbad), ("nsample", nsample)))
        g, b, n = jnp.asarray(ngood), jnp.asarray(nbad), jnp.asarray(nsample)
        check((g < 0) | (b < 0) | (n < 0) | (n > g + b),
              f"hypergeometric: need ngood, nbad >= 0 and 0 <= nsample <= ngood + nbad, got "
              f"{ngood}, {nbad} and {nsample}.")
        shape = out_shape(size, ngood, nbad, nsample)
        return _hypergeometric(self._next_key(key), ngood, nbad, nsample, shape, int_dtype(dtype))

    def logseries(self, p, size: Size = None, key: Any = None, dtype: Any = None):
        """Logarithmic series counts ``k >= 1`` with ``P(k) = -p**k / (k log(1 - p))``; at
        ``p = 0`` (the limit) every count is 1, as in numpy."""
        p = unitless("logseries", "p", p)
        check(~((jnp.asarray(p) >= 0) & (jnp.asarray(p) < 1)),
              f"logseries: p must be in [0, 1), got {p}.")   # p = 0 gives 1, as numpy
        shape = out_shape(size, p)
        return _logseries(self._next_key(key), p, shape, int_dtype(dtype), float_dtype(None))

    def zipf(self, a, size: Size = None, key: Any = None, dtype: Any = None):
        """Zipf counts ``k >= 1`` with ``P(k)`` proportional to ``k ** -a`` (``a > 1``)."""
        a = unitless("zipf", "a", a)
        check(~(jnp.asarray(a) > 1), f"zipf: a must be greater than 1, got {a}.")
        shape = out_shape(size, a)
        return rejection.zipf(self._next_key(key), a, shape, int_dtype(dtype), float_dtype(None))

    def categorical(self, logits, axis: int = -1, size: Size = None, key: Any = None):
        """Category indices drawn with probabilities ``softmax(logits)`` along ``axis``.

        Without ``size``, one index per slice along ``axis``.
        """
        logits = unitless("categorical", "logits", logits)
        shape = None if size is None else shape_of(size)
        return jr.categorical(self._next_key(key), logits, axis=axis, shape=shape)
