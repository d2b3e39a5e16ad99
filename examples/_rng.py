"""The random numbers the examples draw inside compiled steps.

``brainx.random`` (a PRNG key held in a State, split by every sampler) when
this checkout has it; otherwise the same idea in a few lines, so the examples
run on any brainx. Either way the key is a written state: it threads through
``jit``, loops and ``checkpoint``, and a checkpointed step recomputes the same
noise on the backward pass.
"""

import jax

import brainx


class KeyRNG:
    """A key in a State; ``normal`` and ``bernoulli`` split it (read + write)."""

    def __init__(self, seed: int = 0):
        self.key = brainx.State(jax.random.PRNGKey(seed), name="rng_key")

    def seed(self, seed: int) -> None:
        self.key.value = jax.random.PRNGKey(seed)

    def get_key(self):
        return self.key.value

    def set_key(self, key) -> None:
        self.key.value = key

    def _next(self):
        self.key.value, sub = jax.random.split(self.key.value)
        return sub

    def normal(self, loc=0.0, scale=1.0, size=()):
        return loc + scale * jax.random.normal(self._next(), size)

    def bernoulli(self, p=0.5, size=()):
        return jax.random.bernoulli(self._next(), p, size)


def get_rng(seed: int = 0):
    """``brainx.random`` seeded with ``seed`` if available, else a :class:`KeyRNG`."""
    rng = getattr(brainx, "random", None)
    if rng is None:
        return KeyRNG(seed)
    rng.seed(seed)
    return rng


def uses_brainx_random() -> bool:
    return getattr(brainx, "random", None) is not None


__all__ = ["KeyRNG", "get_rng", "uses_brainx_random"]
