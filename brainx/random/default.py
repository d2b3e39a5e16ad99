"""The default generator :data:`DEFAULT` and the module-level functions that draw from it."""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Iterator, Optional

from brainx.random.samplers import Samplers

__all__ = [
    "DEFAULT", "seed", "split_key", "split_keys", "get_key", "set_key", "default_rng",
    "seed_context", "SAMPLERS",
]

DEFAULT = None  # set below; RandomState() looks here for its key
from brainx.random.state import RandomState, os_seed  # noqa: E402  (needs DEFAULT defined)

DEFAULT = RandomState(os_seed(), name="DEFAULT")


def seed(seed_or_key: Any = None) -> None:
    """Seed the default generator (fresh OS entropy if omitted).

    Examples
    --------
    >>> import brainx
    >>> brainx.random.seed(42)
    >>> a = brainx.random.rand(3)
    >>> brainx.random.seed(42)
    >>> bool((brainx.random.rand(3) == a).all())
    True
    """
    DEFAULT.seed(seed_or_key)


def split_key(n: Optional[int] = None) -> Any:
    """Advance the default generator's key and return a new key (or ``n`` keys)."""
    return DEFAULT.split_key(n)


def split_keys(n: int) -> Any:
    """``n`` new keys from the default generator."""
    return DEFAULT.split_key(n)


def get_key() -> Any:
    """The default generator's current key."""
    return DEFAULT.value


def set_key(key: Any) -> None:
    """Set the default generator's key."""
    DEFAULT.set_key(key)


def default_rng(seed_or_key: Any = None) -> RandomState:
    """:data:`DEFAULT` without an argument, else a new :class:`RandomState` seeded with it."""
    return DEFAULT if seed_or_key is None else RandomState(seed_or_key)


@contextlib.contextmanager
def seed_context(seed_or_key: Any) -> Iterator[None]:
    """Seed the default generator for the duration of a ``with`` block, then restore its key.

    Examples
    --------
    >>> import brainx
    >>> with brainx.random.seed_context(0):
    ...     a = brainx.random.randn(2)
    >>> with brainx.random.seed_context(0):
    ...     b = brainx.random.randn(2)
    >>> bool((a == b).all())
    True
    """
    old = DEFAULT.value
    DEFAULT.seed(seed_or_key)
    try:
        yield
    finally:
        DEFAULT.value = old


def _forward(name: str) -> Callable:
    method = getattr(Samplers, name)

    def sampler(*args, **kwargs):
        return getattr(DEFAULT, name)(*args, **kwargs)

    sampler.__name__ = sampler.__qualname__ = name
    sampler.__module__ = "brainx.random"
    params = list(inspect.signature(method).parameters.values())[1:]
    sampler.__signature__ = inspect.Signature(params)
    first_line = (method.__doc__ or "").strip().splitlines()[0]
    sampler.__doc__ = f"{first_line}\n\nDraws from :data:`DEFAULT`; see ``RandomState.{name}``."
    return sampler


SAMPLERS = (
    "rand", "randn", "random", "uniform", "normal", "truncated_normal", "bernoulli", "randint",
    "choice", "permutation", "shuffle", "exponential", "gamma", "beta", "poisson",
)
globals().update({name: _forward(name) for name in SAMPLERS})
