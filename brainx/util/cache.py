"""A thread-safe least-recently-used cache with a size limit and hit statistics.

:class:`BoundedCache` is the cache that compiled-function wrappers keep their
compiled variants in (one per input signature): at most ``maxsize`` entries,
the least recently read one dropped first when a new one comes in. Unlike a
plain ``dict`` it refuses to overwrite an entry by accident: ``set`` on an
existing key raises, ``replace`` on a missing key raises.

Examples
--------
>>> from brainx.util import BoundedCache
>>> cache = BoundedCache(maxsize=2)
>>> cache.set("a", 1); cache.set("b", 2)
>>> cache.get("a")            # reading "a" makes "b" the oldest
1
>>> cache.set("c", 3)         # so "b" is dropped
>>> cache.keys()
['a', 'c']
>>> cache.get_stats()["hits"]
1
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Dict, Hashable, List

__all__ = ["BoundedCache"]


class BoundedCache:
    """A least-recently-used cache holding at most ``maxsize`` entries.

    All methods take a lock, so one cache can be shared between threads.

    Parameters
    ----------
    maxsize : int
        The most entries kept (default 128). ``0`` keeps nothing: ``set``
        does nothing and every ``get`` misses.

    Examples
    --------
    >>> from brainx.util import BoundedCache
    >>> cache = BoundedCache(maxsize=1)
    >>> cache.set("k", "v")
    >>> "k" in cache, len(cache), cache.maxsize
    (True, 1, 1)
    """

    def __init__(self, maxsize: int = 128):
        if isinstance(maxsize, bool) or not isinstance(maxsize, int):
            raise TypeError(f"BoundedCache(maxsize=...) must be an integer, got "
                            f"{type(maxsize).__name__} {maxsize!r}.")
        if maxsize < 0:
            raise ValueError(f"BoundedCache(maxsize=...) must be non-negative (0 disables "
                             f"caching), got {maxsize}.")
        self._cache: OrderedDict = OrderedDict()
        self._maxsize = maxsize
        self._lock = threading.RLock()
        self._hits = 0
        self._misses = 0

    @property
    def maxsize(self) -> int:
        """The most entries this cache keeps."""
        return self._maxsize

    def get(self, key: Hashable, default: Any = None, raise_on_miss: bool = False,
            error_context: str = "item") -> Any:
        """The entry for ``key`` (now the most recently used), or ``default``.

        Parameters
        ----------
        key : Hashable
            The key looked up.
        default : object
            Returned on a miss when ``raise_on_miss`` is false.
        raise_on_miss : bool
            Raise a ``ValueError`` listing the cached keys on a miss.
        error_context : str
            What the entries are, for that error (``"Function"`` gives
            "Function not compiled for the requested cache key").

        Raises
        ------
        ValueError
            On a miss with ``raise_on_miss=True``.
        """
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self._hits += 1
                return self._cache[key]
            self._misses += 1
            if not raise_on_miss:
                return default
            keys = list(self._cache)
            lines = [f"{error_context} not compiled for the requested cache key.", "",
                     "Requested key:", f"  {key}", "", f"Available {len(keys)} keys:"]
            lines += [f"  [{i}] {k}" for i, k in enumerate(keys, 1)] or ["  (none - not compiled yet)"]
            lines += ["", "Call make_jaxpr() first with matching arguments (or compile the "
                          "function for this input signature) before reading it."]
            raise ValueError("\n".join(lines))

    def set(self, key: Hashable, value: Any) -> None:
        """Add a new entry, dropping the least recently used one if the cache is full.

        Raises
        ------
        ValueError
            If ``key`` is already cached: call :meth:`replace` to overwrite it,
            or :meth:`pop` / :meth:`clear` first.
        """
        with self._lock:
            if key in self._cache:
                raise ValueError(f"Cache key already exists: {key}. set() never overwrites; "
                                 "use replace() to change the entry, or pop()/clear() first "
                                 "if you need to recompile.")
            if self._maxsize == 0:
                return
            if len(self._cache) >= self._maxsize:
                self._cache.popitem(last=False)
            self._cache[key] = value

    def replace(self, key: Hashable, value: Any) -> None:
        """Overwrite an existing entry (it becomes the most recently used).

        Raises
        ------
        KeyError
            If ``key`` is not cached: use :meth:`set` to add it.
        """
        with self._lock:
            if key not in self._cache:
                raise KeyError(f"Cache key does not exist: {key}. replace() only overwrites; "
                               "use set() to add a new cache entry.")
            self._cache[key] = value
            self._cache.move_to_end(key)

    def pop(self, key: Hashable, default: Any = None) -> Any:
        """Remove and return the entry for ``key``, or return ``default``."""
        with self._lock:
            return self._cache.pop(key, default)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._cache

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    def clear(self) -> None:
        """Remove every entry and reset the hit and miss counts."""
        with self._lock:
            self._cache.clear()
            self._hits = self._misses = 0

    def keys(self) -> List[Hashable]:
        """The cached keys, least recently used first (a copy)."""
        with self._lock:
            return list(self._cache)

    def get_stats(self) -> Dict[str, Any]:
        """``size``, ``maxsize``, ``hits``, ``misses`` and ``hit_rate`` (a percentage).

        Examples
        --------
        >>> from brainx.util import BoundedCache
        >>> c = BoundedCache(); c.set(1, "x"); _ = c.get(1); _ = c.get(2)
        >>> c.get_stats()["hit_rate"]
        50.0
        """
        with self._lock:
            total = self._hits + self._misses
            return {"size": len(self._cache), "maxsize": self._maxsize, "hits": self._hits,
                    "misses": self._misses,
                    "hit_rate": self._hits / total * 100 if total else 0.0}

    def __repr__(self) -> str:
        return f"BoundedCache(maxsize={self._maxsize}, size={len(self)})"
