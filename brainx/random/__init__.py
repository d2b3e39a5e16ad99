"""Random numbers as state.

A :class:`RandomState` holds a JAX PRNG key in a :class:`~brainx.State`; every
sampler splits it (reads and writes it), so random numbers thread through
``jit``, loops, ``checkpoint``, ``grad`` and ``vmap`` like any written state.
The module-level functions draw from the default generator :data:`DEFAULT`.

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
    DEFAULT, SAMPLERS, default_rng, get_key, seed, seed_context, set_key, split_key, split_keys,
)
from brainx.random.default import (  # noqa: F401  (generated in default.py)
    bernoulli, beta, choice, exponential, gamma, normal, permutation, poisson, rand, randint,
    randn, random, shuffle, truncated_normal, uniform,
)
from brainx.random.state import RandomState

__all__ = [
    "RandomState", "DEFAULT", "seed", "split_key", "split_keys", "get_key", "set_key",
    "default_rng", "seed_context", *SAMPLERS,
]
