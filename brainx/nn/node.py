"""`Node`: an object whose attributes hold states and other nodes (brainstate's ``graph.Node``).

:class:`~brainx.nn.Module` is a ``Node`` with a model's methods
(``update``, ``init_state``, ...). A plain ``Node`` is for the other objects
of a model tree that own states: a buffer, a connectivity table, a parameter
group. ``graph.states``, ``graph.treefy_split``, ``Module.states`` and every
transform find the states of a ``Node`` the way they find a module's: through
its attributes and the lists, tuples and dicts among them, in definition
order, skipping the names in ``graph_invisible_attrs``.

Rebinding or deleting an attribute that holds states tells the compiled
functions that reached them to look again (see ``transform.jit``).
"""

from __future__ import annotations

import copy
from typing import Any, Iterator, Tuple

from brainx.state.state import State, structure_changed

__all__ = ["Node", "node_children"]

_ABSENT = object()


def _holds_states(value: Any) -> bool:
    """A State, a Node, or a list/tuple/dict with one among its items (not deeper)."""
    if isinstance(value, (State, Node)):
        return True
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple)):
        return False
    return any(isinstance(v, (State, Node)) for v in value)


class Node:
    """Base class of the objects in a model tree that own states.

    Attributes named in ``graph_invisible_attrs`` (a class attribute) are not
    walked: states kept there are not the node's.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> class Buffer(brainx.graph.Node):
    ...     def __init__(self, n):
    ...         self.data = brainx.ShortTermState(jnp.zeros(n))
    ...         self.cache = brainx.State(jnp.ones(n))
    ...     graph_invisible_attrs = ("cache",)
    >>> list(brainx.graph.states(Buffer(3)))
    ['data']
    """

    graph_invisible_attrs: Tuple[str, ...] = ()

    def __setattr__(self, name: str, value: Any) -> None:
        # Rebinding an attribute that holds states changes which states a compiled
        # function reaches: tell `transform.jit` to look again.
        old = self.__dict__.get(name, _ABSENT)
        if old is not _ABSENT and old is not value and (_holds_states(old)
                                                        or _holds_states(value)):
            structure_changed()
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if _holds_states(self.__dict__.get(name)):
            structure_changed()
        object.__delattr__(self, name)

    def __deepcopy__(self, memo=None) -> "Node":
        """A copy with new states holding the same values (shared states stay shared)."""
        from brainx.graph.operations import clone  # graph builds on nn: import when used
        return clone(self)

    def __copy__(self) -> "Node":
        new = object.__new__(type(self))
        new.__dict__.update(copy.copy(self.__dict__))
        return new


def node_children(obj: Any) -> Iterator[Tuple[Any, Any]]:
    """``(key, child)`` for the attributes of a node, or the items of a list/tuple/dict."""
    if isinstance(obj, Node):
        hidden = type(obj).graph_invisible_attrs
        if hidden:
            yield from ((k, v) for k, v in vars(obj).items() if k not in hidden)
        else:
            yield from vars(obj).items()
    elif isinstance(obj, dict):
        yield from obj.items()
    elif isinstance(obj, (list, tuple)):
        yield from enumerate(obj)
