"""Random numbers as state.

A :class:`RandomState` holds a JAX PRNG key in a :class:`~brainx.State`; every
sampler splits it (reads and writes it), so random numbers thread through
``jit``, loops, ``checkpoint``, ``grad`` and ``vmap`` like any written state.
The module-level functions draw from the default generator :data:`DEFAULT`.
The samplers follow ``numpy.random``'s parameterisations and brainstate's
signatures; :mod:`brainx.random.samplers` lists them by family.

Examples
--------
>>> import jax.numpy as jnp, brainx
>>> brainx.random.seed(0)
>>> @brainx.transform.jit
... def noisy(x):
...     return x + brainx.random.normal(size=x.shape)
>>> bool((noisy(jnp.zeros(3)) != noisy(jnp.zeros(3))).all())   # the key advanced
True
"""

from brainx.random.default import (
    DEFAULT, SAMPLERS, clone_rng, default_rng, get_key, get_key_data, restore_key, seed,
    seed_context, self_assign_multi_keys, set_key, split_key, split_keys,
)
from brainx.random.default import (  # noqa: F401  (generated in default.py)
    # basic
    rand, randn, random, random_sample, ranf, sample, randint, random_integers, rand_like,
    randn_like, randint_like, choice, permutation, shuffle,
    # continuous
    uniform, normal, standard_normal, truncated_normal, lognormal, standard_cauchy,
    standard_exponential, exponential, gumbel, laplace, logistic, rayleigh, maxwell, pareto,
    power, weibull, weibull_min, triangular, vonmises, wald,
    # gamma family
    gamma, standard_gamma, loggamma, beta, chisquare, noncentral_chisquare, f, noncentral_f,
    standard_t, t,
    # discrete
    bernoulli, binomial, poisson, geometric, negative_binomial, hypergeometric, logseries, zipf,
    categorical,
    # multivariate
    dirichlet, multinomial, multivariate_normal, orthogonal,
)
from brainx.random.state import RandomState

__all__ = [
    "RandomState", "DEFAULT", "seed", "seed_context", "default_rng", "clone_rng", "set_key",
    "get_key", "get_key_data", "restore_key", "split_key", "split_keys",
    "self_assign_multi_keys", *SAMPLERS,
]
