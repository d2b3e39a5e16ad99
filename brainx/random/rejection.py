"""Vectorised rejection sampling, for distributions ``jax.random`` does not have.

A rejection sampler proposes a candidate and accepts it with some probability.
Here the whole array is proposed at once; accepted entries are kept and the rest
proposed again with a fresh key (``fold_in(key, round)``), in a
``lax.while_loop`` that ends when every entry has been accepted. Each round
accepts a fixed fraction of what is left, so the number of rounds grows only
with the logarithm of the sample size. It runs under ``jit`` and ``vmap`` (a
batched loop runs until every lane is done).

The proposals: von Mises by Best and Fisher's wrapped-Cauchy envelope, Zipf by
Devroye's Pareto envelope (*Non-Uniform Random Variate Generation*, 1986, X.6).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Tuple

import jax
import jax.numpy as jnp
import jax.random as jr
from jax import lax

__all__ = ["rejection_sample", "von_mises_centered", "zipf"]


def rejection_sample(key: Any, shape: tuple, dtype: Any,
                     propose: Callable[[Any], Tuple[Any, Any]]) -> Any:
    """An array of ``shape``: ``propose(key)`` gives ``(candidates, accepted)`` of that
    shape; rejected entries are proposed again until all are accepted."""

    def unfinished(carry):
        return ~jnp.all(carry[2])

    def another_round(carry):
        i, x, done = carry
        candidate, ok = propose(jr.fold_in(key, i))
        return i + 1, jnp.where(done, x, candidate), done | ok

    start = (jnp.uint32(0), jnp.zeros(shape, dtype), jnp.zeros(shape, bool))
    return lax.while_loop(unfinished, another_round, start)[1]


@partial(jax.jit, static_argnums=(2, 3))
def von_mises_centered(key: Any, kappa: Any, shape: tuple, dtype: Any) -> Any:
    """Von Mises angles in ``[-pi, pi]`` around 0 with concentration ``kappa``."""
    kappa = jnp.broadcast_to(jnp.asarray(kappa, dtype), shape)
    flat = ~(kappa >= 1e-8)         # (also catches NaN) uniform on the circle
    k = jnp.where(flat, 1.0, kappa)
    # Best and Fisher's envelope parameter rho, and 1 - rho, s - 1 and the proposal's
    # scale c written without the cancellations that break float32 for large kappa.
    q = jnp.sqrt(1 + 4 * k * k)
    r = 1 + q
    root = jnp.sqrt(2 * r)
    rho = 2 * k / (r + root)
    one_minus_rho = (1 + 1 / (q + 2 * k) + root) / (r + root)
    s_minus_1 = one_minus_rho ** 2 / (2 * rho)
    c = one_minus_rho / (1 + rho)

    def propose(round_key):
        ku, kv = jr.split(round_key)
        # the wrapped Cauchy proposal: arccos((1 + s cos(pi u)) / (s + cos(pi u)))
        theta = 2 * jnp.arctan(c * jnp.tan(jnp.pi / 2 * jr.uniform(ku, shape, dtype)))
        v = jr.uniform(kv, shape, dtype, minval=jnp.finfo(dtype).tiny)
        y = k * (s_minus_1 + 2 * jnp.sin(theta / 2) ** 2)
        ok = (y * (2 - y) - v >= 0) | (jnp.log(y / v) + 1 - y >= 0)
        return theta, ok | flat

    key_theta, key_sign, key_flat = jr.split(key, 3)
    theta = rejection_sample(key_theta, shape, dtype, propose)
    theta = jnp.where(jr.bernoulli(key_sign, 0.5, shape), theta, -theta)
    return jnp.where(flat, jr.uniform(key_flat, shape, dtype, -jnp.pi, jnp.pi), theta)


@partial(jax.jit, static_argnums=(2, 3, 4))
def zipf(key: Any, a: Any, shape: tuple, dtype: Any, float_dtype: Any) -> Any:
    """Zipf integers ``k >= 1`` with ``P(k)`` proportional to ``k ** -a`` (``a > 1``)."""
    a = jnp.broadcast_to(jnp.asarray(a, float_dtype), shape)
    am1 = a - 1
    b = jnp.exp2(am1)
    largest = jnp.iinfo(dtype).max

    def propose(round_key):
        ku, kv = jr.split(round_key)
        unif = 1 - jr.uniform(ku, shape, float_dtype)           # (0, 1]
        v = jr.uniform(kv, shape, float_dtype)
        x = jnp.floor(unif ** (-1 / am1))
        t = (1 + 1 / x) ** am1
        ok = (x >= 1) & (x < largest) & (v * x * (t - 1) / (b - 1) <= t / b)
        return jnp.where(ok, x, 1).astype(dtype), ok

    return rejection_sample(key, shape, dtype, propose)
