"""Weak references brainx itself holds to states, told apart from a program's own.

brainx's caches hold states weakly (a compiled function's states, residual
names, mapped axes) so that a model that is deleted does not stay alive
through them. Those references are :class:`StateRef` s. Any other reference
to a state, weak or strong, is the program's: a registry, a global, an
optimiser. Sharing one trace between instances
(:mod:`brainx.transform.compiled.instance_sharing`) needs the difference: a state the program
can reach from outside an instance may not be that instance's own.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, Generic, Iterator, Optional, Tuple, TypeVar

__all__ = ["StateRef", "StateTable", "only_brainx_refs"]

V = TypeVar("V")


class StateRef(weakref.ref):
    """A weak reference to a state held by brainx's own machinery (not a way to reach it)."""

    __slots__ = ()


def only_brainx_refs(state: Any) -> bool:
    """Whether every weak reference to ``state`` is a :class:`StateRef`.

    Examples
    --------
    >>> import weakref, jax.numpy as jnp, brainx
    >>> s = brainx.State(jnp.zeros(2))
    >>> mine = StateRef(s)
    >>> only_brainx_refs(s)
    True
    >>> theirs = weakref.WeakValueDictionary({"s": s})
    >>> only_brainx_refs(s)
    False
    """
    return all(type(r) is StateRef for r in weakref.getweakrefs(state))


class StateTable(Generic[V]):
    """A mapping from states to values that holds the states weakly, through :class:`StateRef` s.

    Like a ``weakref.WeakKeyDictionary`` keyed by states (an entry goes when
    its state is garbage collected), without a weak reference of another kind.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> s = brainx.State(jnp.zeros(2))
    >>> table = StateTable()
    >>> table[s] = 3
    >>> table.get(s), len(table)
    (3, 1)
    >>> del s
    >>> len(table)
    0
    """

    def __init__(self):
        self._items: Dict[int, Tuple[StateRef, V]] = {}

    def _forget(self, key: int) -> Callable[[Any], None]:
        items = self._items

        def forget(ref: Any) -> None:
            entry = items.get(key)
            if entry is not None and entry[0] is ref:
                del items[key]

        return forget

    def __setitem__(self, state: Any, value: V) -> None:
        key = id(state)
        entry = self._items.get(key)
        ref = entry[0] if entry is not None and entry[0]() is state else StateRef(
            state, self._forget(key))
        self._items[key] = (ref, value)

    def get(self, state: Any, default: Optional[V] = None) -> Optional[V]:
        entry = self._items.get(id(state))
        if entry is None or entry[0]() is not state:
            return default
        return entry[1]

    def __getitem__(self, state: Any) -> V:
        entry = self._items.get(id(state))
        if entry is None or entry[0]() is not state:
            raise KeyError(state)
        return entry[1]

    def __contains__(self, state: Any) -> bool:
        entry = self._items.get(id(state))
        return entry is not None and entry[0]() is state

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        for ref, _ in list(self._items.values()):
            state = ref()
            if state is not None:
                yield state
