"""The default generator :data:`DEFAULT` and the module-level functions that draw from it."""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Iterator, Optional

import jax.random as jr

from brainx.random.samplers import SAMPLERS, Samplers

__all__ = [
    "DEFAULT", "seed", "split_key", "split_keys", "get_key", "get_key_data", "set_key",
    "restore_key", "self_assign_multi_keys", "default_rng", "clone_rng", "seed_context",
    "SAMPLERS",
]

from brainx.random.per_thread import PerThreadRandomState
from brainx.random.state import DEFAULT_SOURCE, RandomState, os_seed

#: The default generator: one key per thread (see :mod:`brainx.random.per_thread`).
DEFAULT = PerThreadRandomState(os_seed(), name="DEFAULT")
DEFAULT_SOURCE[0] = DEFAULT


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


def split_key(n: Optional[int] = None, backup: bool = False) -> Any:
    """Advance the default generator's key and return a new key (or ``n`` keys); with
    ``backup=True`` the key before the split is saved for :func:`restore_key`."""
    return DEFAULT.split_key(n, backup=backup)


def split_keys(n: int, backup: bool = False) -> Any:
    """``n`` new keys from the default generator."""
    return DEFAULT.split_keys(n, backup=backup)


def self_assign_multi_keys(n: int, backup: bool = True) -> None:
    """Replace the default generator's key by ``n`` keys split from it (one per lane);
    see ``RandomState.self_assign_multi_keys``."""
    DEFAULT.self_assign_multi_keys(n, backup=backup)


def restore_key() -> None:
    """Set the default generator's key back to the one saved by ``backup=True``.

    Examples
    --------
    >>> import brainx
    >>> brainx.random.seed(0)
    >>> before = brainx.random.get_key()
    >>> _ = brainx.random.split_key(backup=True)
    >>> brainx.random.restore_key()
    >>> bool((brainx.random.get_key() == before).all())
    True
    """
    DEFAULT.restore_key()


def get_key() -> Any:
    """The default generator's current key."""
    return DEFAULT.value


def get_key_data() -> Any:
    """The default generator's key as raw ``uint32`` data (``jax.random.key_data``; shape ``(2,)``)."""
    return jr.key_data(DEFAULT.value)


def set_key(seed_or_key: Any) -> None:
    """Set the default generator's key (an integer seed is also accepted)."""
    DEFAULT.set_key(seed_or_key)


def default_rng(seed_or_key: Any = None) -> RandomState:
    """:data:`DEFAULT` without an argument, else a new :class:`RandomState` seeded with it."""
    return DEFAULT if seed_or_key is None else RandomState(seed_or_key)


def clone_rng(seed_or_key: Any = None, clone: bool = True) -> RandomState:
    """A new :class:`RandomState`: seeded with ``seed_or_key``, else split from :data:`DEFAULT`
    (which advances). ``clone=False`` without a seed returns :data:`DEFAULT` itself.

    Examples
    --------
    >>> import brainx
    >>> rng = brainx.random.clone_rng()
    >>> rng is brainx.random.DEFAULT, brainx.random.clone_rng(clone=False) is brainx.random.DEFAULT
    (False, True)
    """
    if seed_or_key is not None:
        return RandomState(seed_or_key)
    return DEFAULT.clone() if clone else DEFAULT


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
    summary = inspect.cleandoc(method.__doc__ or "").split("\n\n")[0]
    sampler.__doc__ = f"{summary}\n\nDraws from :data:`DEFAULT`; see ``RandomState.{name}``."
    return sampler


globals().update({name: _forward(name) for name in SAMPLERS})
