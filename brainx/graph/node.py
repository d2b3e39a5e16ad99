"""`Node`: an object whose attributes hold states and other nodes (brainstate's ``graph.Node``).

:class:`~brainx.nn.Module` is a ``Node`` with a model's methods
(``update``, ``init_state``, ...). A plain ``Node`` is for the other objects
of a model tree that own states: a buffer, a connectivity table, a parameter
group. ``graph.states``, ``graph.treefy_split``, ``Module.states`` and every
transform find the states of a ``Node`` the way they find a module's: through
its attributes and the containers among them, in definition order, skipping
the names in ``graph_invisible_attrs``.

Rules a ``Node`` keeps:

* rebinding or deleting an attribute that holds states tells the compiled
  functions that reached them to look again (see ``transform.jit``);
* ``copy.deepcopy(node)`` is ``graph.clone(node)``: new states with the same
  values, shared states and nodes shared again in the copy;
* ``repr(node)`` shows its attributes, leaving out ``None`` values and
  ``graph_invisible_attrs`` (``nn.Module`` has its own, shorter repr).
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union

import jax

from brainx.errors import TraceContextError
from brainx.graph.structure import merge_indexed, split_indexed
from brainx.graph.node_repr import node_pretty_items, node_summary
from brainx.graph.refmap import RefMap
from brainx.pretty_repr.layout import PrettyAttr, PrettyType, pretty_str, render
from brainx.pretty_repr.options import ReprSummary
from brainx.graph.walk import node_children, register_graph_node_type, walk_tree
from brainx.state.state import State, _Expired, structure_changed
from brainx.util.mappings import FlattedDict

__all__ = ["Node", "node_children", "BOUND_TRANSFORMS_ATTR"]

_ABSENT = object()

#: Where a transform used as a method keeps an instance's bindings
#: (:mod:`brainx.transform.core.method_binding`): bookkeeping, not a child, so a
#: node's walk, repr and copies leave it out.
BOUND_TRANSFORMS_ATTR = "__brainx_bound_transforms__"


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
    walked: states kept there are not the node's (a clone shares them with
    the original).

    Examples
    --------
    >>> import copy, jax.numpy as jnp, brainx
    >>> class Buffer(brainx.graph.Node):
    ...     graph_invisible_attrs = ("cache",)
    ...     def __init__(self, n):
    ...         self.data = brainx.ShortTermState(jnp.zeros(n))
    ...         self.cache = brainx.State(jnp.ones(n))
    ...         self.unit = None
    >>> buf = Buffer(3)
    >>> list(brainx.graph.states(buf))
    ['data']
    >>> buf
    Buffer(data=ShortTermState(f32[3]))  # 3 state values (12 B)
    >>> copy.deepcopy(buf).data is buf.data
    False
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

    def __deepcopy__(self, memo: Optional[dict] = None) -> "Node":
        """A copy with new states holding copies of the values (shared states stay shared)."""
        graphdef, snapshot = split_indexed(self, RefMap())
        snapshot = jax.tree.map(copy.deepcopy, snapshot)   # the values only, not the metadata
        return merge_indexed(graphdef, FlattedDict.merge(snapshot), {})

    def __copy__(self) -> "Node":
        new = object.__new__(type(self))
        new.__dict__.update(copy.copy(self.__dict__))
        new.__dict__.pop(BOUND_TRANSFORMS_ATTR, None)
        return new

    def __pretty_repr_item__(self, name: str, value: Any) -> Optional[Tuple[str, Any]]:
        """``(name, value)`` to show in ``repr``, or ``None`` to leave it out.

        ``None`` values, the names in ``graph_invisible_attrs`` and the
        bindings of jitted methods are left out; everything else (private
        attributes included) is shown.
        """
        if (value is None or name in type(self).graph_invisible_attrs
                or name == BOUND_TRANSFORMS_ATTR):
            return None
        return name, value

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        """The pretty-repr items: the class, then the attributes ``__pretty_repr_item__`` keeps."""
        return node_pretty_items(self)

    def __pretty_repr_summary__(self) -> ReprSummary:
        """The size of the states reachable from this node, each counted once: the
        ``# 16 params (64 B)`` that ends its ``repr`` (no read hook runs).

        Examples
        --------
        >>> import brainx
        >>> s = brainx.nn.Linear(3, 4).__pretty_repr_summary__()
        >>> s.n_params, s.param_bytes
        (16, 64)
        """
        return node_summary(self)

    def __repr__(self) -> str:
        return render(self)

    __repr__._uses_pretty_repr = True  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return pretty_str(self)

    def check_valid_context(self, error_msg: Callable[[], str]) -> None:
        """Raise ``TraceContextError(error_msg())`` if a state of this node belongs to an ended trace.

        A node has no trace of its own; its states do. A state created inside
        a transform with a traced value is expired once that transform ends;
        such a node cannot be used any more.

        Examples
        --------
        >>> import brainx
        >>> brainx.nn.Linear(2, 3).check_valid_context(lambda: "stale")   # fine: nothing raised
        """
        for _, state in walk_tree(self):
            if isinstance(state, State) and type(vars(state).get("_value")) is _Expired:
                raise TraceContextError(error_msg())


def _node_flatten(node: Node):
    """The visible attributes, in definition order; metadata: the type and the hidden ones."""
    hidden = type(node).graph_invisible_attrs
    items = vars(node).items()
    if BOUND_TRANSFORMS_ATTR in vars(node):
        items = [(k, v) for k, v in items if k != BOUND_TRANSFORMS_ATTR]
    if not hidden:
        return list(items), (type(node), {})
    return ([(k, v) for k, v in items if k not in hidden],
            (type(node), {k: v for k, v in items if k in hidden}))


def _check_key(key: Any) -> None:
    if not isinstance(key, str):
        raise KeyError(f"Invalid key {key!r}: a node's children are attributes, named by strings.")


def _node_set_key(node: Node, key: str, value: Any) -> None:
    _check_key(key)
    setattr(node, key, value)


def _node_pop_key(node: Node, key: str) -> Any:
    _check_key(key)
    value = getattr(node, key)
    delattr(node, key)
    return value


def _node_create_empty(metadata: Tuple[type, Dict[str, Any]]) -> Node:
    node_type, hidden = metadata
    node = object.__new__(node_type)
    vars(node).update(hidden)   # not the node's: kept as they are
    return node


def _node_init(node: Node, items) -> None:
    vars(node).update(items)    # an empty node: no setter, no structure change to report


def _node_clear(node: Node) -> None:
    vars(node).clear()
    structure_changed()


register_graph_node_type(Node, flatten=_node_flatten, set_key=_node_set_key,
                         pop_key=_node_pop_key, create_empty=_node_create_empty,
                         clear=_node_clear, init=_node_init)

