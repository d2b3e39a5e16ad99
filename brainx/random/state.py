"""`RandomState`: a state holding a JAX PRNG key.

The key is a *typed* key (``jax.random.key``: shape ``()``, dtype
``key<fry>``), as JAX recommends and as brainstate 0.5.4 keeps it. Raw
``uint32[2]`` keys (``jax.random.PRNGKey``) are accepted wherever a key is and
wrapped without changing their bits, so a raw key and its typed form draw the
same numbers; ``jax.random.key_data(rng.value)`` gives the raw bits back.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator, Optional

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jax.core import Tracer

from brainx.errors import BatchAxisError
from brainx._jax.traces import foreign_batch_traces
from brainx.pretty_repr.layout import PrettyAttr
from brainx.random.samplers import Samplers
from brainx.state.state import State
from brainx.state.state_repr import state_pretty_items
from brainx.state.trace import inside_transform

__all__ = ["RandomState", "as_key", "os_seed", "DEFAULT_SOURCE"]

#: The generator a RandomState created without a seed splits its key from
#: (``brainx.random.default`` puts DEFAULT here).
DEFAULT_SOURCE: list = [None]


#: Held across a generator's read-split-write of its key, so that threads splitting one
#: shared generator eagerly never receive the same key.
_KEY_LOCK = threading.RLock()


class _NotACount(TypeError, ValueError):
    """A key count that is not a positive integer: a ``TypeError`` for a non-integer (as
    ``operator.index``) and a ``ValueError`` (what brainstate's ``split_keys`` raises)."""


def _check_count(owner: Any, method: str, n: Any) -> None:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise _NotACount(f"{owner!r}.{method}: n must be a positive integer, got {n!r} "
                         f"(of type {type(n).__name__}).")
    if n < 1:
        raise ValueError(f"{owner!r}.{method}: n must be a positive integer, got {n!r}.")


def os_seed() -> int:
    """A fresh seed from the operating system's entropy (no global RNG is touched)."""
    return int(np.random.SeedSequence().entropy % (2 ** 32))


def as_key(seed_or_key: Any, what: str = "seed_or_key") -> Any:
    """A typed PRNG key (``jax.random.key``) from an integer seed, a typed key or a raw key.

    An integer seed (or a 0-d integer array) gives ``jax.random.key(seed)``; a
    typed key is kept as it is (whatever its implementation and shape); a raw
    ``uint32`` key (``jax.random.PRNGKey``, shape ``(..., 2)``) is wrapped without
    changing its bits (``jax.random.wrap_key_data``), so it draws the same numbers.
    Anything else (a float, a string, an array of another dtype or shape) is a
    ``TypeError``, as in brainstate, numpy and ``jax.random.key``.

    Examples
    --------
    >>> import jax
    >>> from brainx.random.state import as_key
    >>> as_key(0).dtype, as_key(jax.random.PRNGKey(0)).shape
    (key<fry>, ())
    """
    if isinstance(seed_or_key, State):
        raise TypeError(f"{what} must be an integer seed or a JAX PRNG key, got {seed_or_key!r}; "
                        "pass its .value.")
    if isinstance(seed_or_key, (bool, np.bool_)):
        raise TypeError(f"{what} must be an integer seed or a JAX PRNG key, got {seed_or_key!r}.")
    if isinstance(seed_or_key, (int, np.integer)):
        # a constant seed gives a constant key, also while a raw jax.jit traces
        with jax.ensure_compile_time_eval():
            return jr.key(seed_or_key)
    dtype = getattr(seed_or_key, "dtype", None)
    shape = np.shape(seed_or_key)
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key):
        return seed_or_key
    if dtype is not None and jnp.issubdtype(dtype, jnp.integer):
        if shape == ():
            return jr.key(seed_or_key)
        if len(shape) >= 1 and shape[-1] == 2 and dtype == jnp.uint32:
            return jr.wrap_key_data(jnp.asarray(seed_or_key))
    raise TypeError(
        f"{what} must be an integer seed, a typed key (jax.random.key) or a raw key (uint32 "
        f"array of shape (2,), from jax.random.PRNGKey); got {_describe(seed_or_key)}.")


#: the most keys whose raw bits a generator's ``repr`` shows
_REPR_KEYS = 16


def _key_bits(key: Any) -> Optional[list]:
    """The raw bits of a concrete, live typed key of at most ``_REPR_KEYS`` keys, as nested
    lists (``[0, 42]``); ``None`` for anything else (a tracer, a deleted buffer, a batch),
    and inside a transform (where the key in force is traced)."""
    if (inside_transform() or not isinstance(key, jax.Array) or isinstance(key, Tracer)
            or not jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
            or key.size > _REPR_KEYS or key.is_deleted()):
        return None
    with jax.ensure_compile_time_eval():   # (a repr inside a trace reads the bits eagerly)
        return np.asarray(jr.key_data(key)).tolist()


def _describe(x: Any) -> str:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return repr(x)
    return f"an array of shape {tuple(np.shape(x))} and dtype {dtype}"


class RandomState(State, Samplers):
    """A random number generator whose key is a :class:`~brainx.State`.

    Every sampler reads the key and writes back its successor, so the key
    threads through the stateful transforms like any other written state:
    successive ``jit`` calls and loop steps draw new numbers, ``checkpoint``
    recomputation reuses the numbers of the forward pass, and
    ``transform.vmap`` gives every lane its own stream.

    Parameters
    ----------
    seed_or_key : int or key, optional
        An integer seed, a typed key (``jax.random.key``) or a raw key
        (``jax.random.PRNGKey``, wrapped into a typed key). Without it, the key is drawn from the default
        generator :data:`brainx.random.DEFAULT`, so seeding that one makes
        every generator created afterwards reproducible.
    name : str, optional
        Shown in ``repr`` and error messages.

    Examples
    --------
    >>> import brainx
    >>> rng = brainx.random.RandomState(0)
    >>> a = rng.normal(size=3)
    >>> b = rng.normal(size=3)          # the key advanced: new numbers
    >>> rng.seed(0)
    >>> bool((rng.normal(size=3) == a).all())
    True
    """

    def __init__(self, seed_or_key: Any = None, name: Optional[str] = None):
        if seed_or_key is None:
            default = DEFAULT_SOURCE[0]
            key = default.split_key() if default is not None else jr.key(os_seed())
        else:
            key = as_key(seed_or_key)
        super().__init__(key, name=name)

    # -- the key --------------------------------------------------------------
    _backup = None   # the key saved by backup_key (see restore_key)
    _bookkeeping_attrs = ("_backup",)  # not copied into snapshots (TreefyState)

    def seed(self, seed_or_key: Any = None) -> None:
        """Set the key from an integer seed or a key (fresh OS entropy if omitted)."""
        self.value = as_key(os_seed() if seed_or_key is None else seed_or_key)

    def set_key(self, key: Any) -> None:
        """Set the key (an integer seed is also accepted)."""
        self.value = as_key(key, "key")

    def get_key(self) -> Any:
        """The current key (reading it does not advance it)."""
        return self.value

    def split_key(self, n: Optional[int] = None, backup: bool = False) -> Any:
        """Advance the key and return a new independent key (or ``n`` of them).

        Parameters
        ----------
        n : int, optional
            Return an array of ``n`` keys instead of one key.
        backup : bool
            Save the key before the split, for :meth:`restore_key`.

        The read, split and write hold a lock, so threads splitting one shared
        generator eagerly never receive the same key (calls of a compiled function
        are not covered: see :doc:`/random`). A non-integer ``n`` raises a
        ``TypeError`` (which is also a ``ValueError``); ``n < 1`` a ``ValueError``.

        Examples
        --------
        >>> import brainx
        >>> rng = brainx.random.RandomState(1)
        >>> rng.split_key().shape, rng.split_key(4).shape     # typed keys
        ((), (4,))
        """
        if n is not None:
            _check_count(self, "split_key", n)
        with _KEY_LOCK:
            key = as_key(self.value, "the key")   # (a raw key assigned to .value: typed here)
            self._check_lanes(key)
            keys = jr.split(key, 2 if n is None else n + 1)
            if backup:
                self.backup_key()
            self.value = keys[0]
        return keys[1] if n is None else keys[1:]

    def split_keys(self, n: int, backup: bool = False) -> Any:
        """``split_key(n)``: ``n`` new keys (``n`` is required)."""
        _check_count(self, "split_keys", n)
        return self.split_key(n, backup=backup)

    def self_assign_multi_keys(self, n: int, backup: bool = True) -> None:
        """Replace the key by ``n`` keys split from it: a batch of generators, one per lane.

        Declare the generator in ``in_states`` of :func:`brainx.transform.vmap` to
        give lane ``i`` key ``i``; :meth:`restore_key` brings the single key back.

        Examples
        --------
        >>> import brainx
        >>> rng = brainx.random.RandomState(0)
        >>> rng.self_assign_multi_keys(3)
        >>> x = brainx.transform.vmap(lambda: rng.normal(), in_states=rng)()
        >>> x.shape, len(set(x.tolist()))
        ((3,), 3)
        >>> rng.restore_key()
        >>> rng.value.shape
        ()
        """
        _check_count(self, "self_assign_multi_keys", n)
        with _KEY_LOCK:
            keys = jr.split(as_key(self.value, "the key"), n)
            if backup:
                self.backup_key()
            self.value = keys

    def backup_key(self) -> None:
        """Save the current key, for :meth:`restore_key` (outside the transforms)."""
        if self._backup is not None:
            raise ValueError(f"{self!r}.backup_key: a key is backed up already and was not "
                             "restored; call restore_key() first.")
        key = self.value
        if inside_transform() or isinstance(key, Tracer):
            raise ValueError(f"{self!r}.backup_key: called inside a transform, where the key is "
                             "traced and the backup could not outlive the trace. Back up the key "
                             "outside the transform.")
        self._backup = key

    def restore_key(self) -> None:
        """Set the key back to the one saved by ``backup=True`` (or :meth:`backup_key`)."""
        if self._backup is None:
            raise ValueError(f"{self!r}.restore_key: no key is backed up; pass backup=True to "
                             "split_key or self_assign_multi_keys, or call backup_key(), first.")
        self.value, self._backup = self._backup, None

    def check_if_deleted(self) -> None:
        """Raise if the key's device buffer was deleted (donated to a compiled call).

        brainstate 0.5.4 silently re-seeds such a generator from OS entropy, which
        makes the run irreproducible without a word; brainx says what happened
        instead, and :meth:`seed` is the way on.

        Examples
        --------
        >>> import jax, brainx
        >>> rng = brainx.random.RandomState(0)
        >>> rng.check_if_deleted()                 # a live key: nothing happens
        >>> _ = jax.jit(lambda k: k, donate_argnums=0)(rng.value)
        >>> try:
        ...     rng.check_if_deleted()
        ... except RuntimeError as e:
        ...     print("deleted" in str(e))
        True
        """
        key = self.value
        if isinstance(key, jax.Array) and not isinstance(key, Tracer) and key.is_deleted():
            raise RuntimeError(
                f"{self!r}: its key buffer was deleted (donated to a compiled function with "
                "donate_argnums?), so it cannot draw numbers. Call seed(...) or set_key(...) "
                "to give it a new key, and do not donate a generator's key.")

    def __pretty_repr__(self) -> Iterator[Any]:
        """As any state's (the key's type, then the metadata), with the key's raw bits as
        ``data=`` after the type when they are at hand: a concrete key of at most
        ``_REPR_KEYS`` keys, as brainstate 0.6 prints it.

        Examples
        --------
        >>> import brainx
        >>> brainx.random.RandomState(42)
        RandomState(key<fry>[], data=[0, 42])
        """
        items = list(state_pretty_items(self))
        data = _key_bits(self._value)
        if data is not None and len(items) >= 2:
            items.insert(2, PrettyAttr("data", data))
        return iter(items)

    def clone(self) -> "RandomState":
        """A new generator whose key is split from this one's (this one advances)."""
        return type(self)(self.split_key())

    def _check_lanes(self, key: Any) -> None:
        # A raw jax.vmap leaves an unbatched key unbatched: every lane would
        # split the same key and draw the same numbers.
        if foreign_batch_traces(key):
            raise BatchAxisError(
                f"{self!r} was asked for random numbers inside a raw jax.vmap (or another "
                "batching transform brainx did not apply). Its key is not batched, so every "
                "lane would draw the same numbers. Use brainx.transform.vmap, which gives "
                "each lane its own key, or pass per-lane keys explicitly with key=... . "
                "The key is unchanged.")

    def _next_key(self, key: Any) -> Any:
        """The key a sampler uses: ``key`` if given (the state is untouched), else a split."""
        return self.split_key() if key is None else as_key(key, "key")
