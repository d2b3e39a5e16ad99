"""`RefMap`: a dict keyed by object identity, for objects that are unhashable or compare by value."""

from __future__ import annotations

from typing import Any, Dict, Iterator, MutableMapping, Tuple

__all__ = ["RefMap"]


class RefMap(MutableMapping):
    """A mapping whose keys are compared by identity (``is``), in insertion order.

    States and arrays cannot be dict keys by value; a ``RefMap`` numbers the
    states of a graph split (:func:`~brainx.graph.split_context`) so that one
    state reached from two places gets one index.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> a, b = brainx.State(jnp.zeros(2)), brainx.State(jnp.zeros(2))
    >>> index = brainx.graph.RefMap()
    >>> index[a] = 0
    >>> a in index, b in index, len(index)
    (True, False, 1)
    """

    def __init__(self, items=()):
        self._items: Dict[int, Tuple[Any, Any]] = {}
        self.update(items)

    def __getitem__(self, key: Any) -> Any:
        return self._items[id(key)][1]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._items[id(key)] = (key, value)

    def __delitem__(self, key: Any) -> None:
        del self._items[id(key)]

    def __contains__(self, key: Any) -> bool:
        return id(key) in self._items

    def __iter__(self) -> Iterator[Any]:
        return (key for key, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"RefMap({[(k, v) for k, v in self._items.values()]!r})"
