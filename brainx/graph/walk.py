"""The tree walk under every graph function: what a model tree is made of, and how to visit it.

A model tree holds three kinds of objects:

* **graph nodes**: objects of a type registered with
  :func:`register_graph_node_type` (every :class:`~brainx.graph.Node`, so
  every ``nn.Module``). They are mutable and have an identity: a node reached
  twice is one node, and a split/merge rebuilds it once.
* **containers**: lists, tuples, dicts (and their subclasses), ``None`` (an
  empty container) and any other JAX pytree (a ``NamedTuple``, a registered
  dataclass). The walk looks inside them.
* **leaves**: everything else: states, arrays, numbers, strings, functions.

:func:`walk_tree` yields the nodes and states (each once, by identity, under
the first path that reaches it), :func:`iter_leaf` the leaves and
:func:`iter_node` the nodes. Only entering a graph node adds a level to the
hierarchy that ``allowed_hierarchy=(lo, hi)`` bounds: the root and what its
own attributes and containers hold are level 0.

This module imports nothing of brainx but ``State`` and ``DottedPath``, so
:mod:`brainx.graph.node` and :mod:`brainx.nn` both build on it.
"""

from __future__ import annotations

import builtins
import dataclasses
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple

import jax
import numpy as np

from brainx.state.state import State
from brainx.util.path import DottedPath

__all__ = [
    "register_graph_node_type", "GraphNodeImpl", "graph_node_impl", "is_graph_node",
    "is_container", "node_children", "walk_tree", "iter_leaf", "iter_node", "MAX_INT",
]

MAX_INT = int(np.iinfo(np.int32).max)   # "no bound" for allowed_hierarchy, as brainstate
Path = Tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class GraphNodeImpl:
    """How the graph functions take a registered node type apart and build it again.

    ``flatten(node) -> (items, metadata)`` gives its children as ``(key, value)``
    pairs; ``create_empty(metadata)`` an empty node; ``set_key`` / ``pop_key`` /
    ``clear`` change one; ``init(node, items)`` (optional) fills an empty node
    (default: ``set_key`` for each item).
    """

    type: type
    flatten: Callable[[Any], Tuple[Sequence[Tuple[Any, Any]], Any]]
    set_key: Callable[[Any, Any, Any], None]
    pop_key: Callable[[Any, Any], Any]
    create_empty: Callable[[Any], Any]
    clear: Callable[[Any], None]
    init: Optional[Callable[[Any, Sequence[Tuple[Any, Any]]], None]] = None

    def fill(self, node: Any, items: Sequence[Tuple[Any, Any]]) -> None:
        """Put ``items`` into the empty ``node``."""
        if self.init is not None:
            self.init(node, items)
        else:
            for key, value in items:
                self.set_key(node, key, value)


_REGISTRY: Dict[type, GraphNodeImpl] = {}
_IMPL_CACHE: Dict[type, Optional[GraphNodeImpl]] = {}   # a type -> its (inherited) impl
_KIND_CACHE: Dict[type, int] = {}
_NODE, _CONTAINER, _STATE, _LEAF = range(4)


def register_graph_node_type(type: type, flatten: Callable, set_key: Callable,
                             pop_key: Callable, create_empty: Callable, clear: Callable,
                             *, init: Optional[Callable] = None) -> None:
    """Make objects of ``type`` (and its subclasses) graph nodes, as brainstate's function.

    Subclassing :class:`~brainx.graph.Node` does this for you; register a type
    you cannot make a ``Node`` (a class from another library).

    Parameters
    ----------
    type : type
        The class. Its subclasses use the same functions unless registered themselves.
    flatten : callable
        ``node -> (items, metadata)``: ``items`` the ``(key, child)`` pairs,
        ``metadata`` what ``create_empty`` needs.
    set_key, pop_key, clear : callable
        ``(node, key, value)``, ``(node, key) -> value``, ``node``: change a node in place.
    create_empty : callable
        ``metadata -> node``, an empty node (its ``__init__`` not run).
    init : callable, optional
        ``(node, items)``: fill an empty node at once (default: ``set_key`` per item).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> class Bag:                       # a class we cannot change
    ...     def __init__(self):
    ...         self.items = {}
    >>> brainx.graph.register_graph_node_type(
    ...     Bag, flatten=lambda b: (list(b.items.items()), None),
    ...     set_key=lambda b, k, v: b.items.__setitem__(k, v),
    ...     pop_key=lambda b, k: b.items.pop(k),
    ...     create_empty=lambda meta: Bag(), clear=lambda b: b.items.clear())
    >>> bag = Bag()
    >>> bag.items["w"] = brainx.ParamState(jnp.ones(2))
    >>> list(brainx.graph.states(bag)), brainx.graph.clone(bag).items["w"] is bag.items["w"]
    (['w'], False)
    """
    if not isinstance(type, builtins.type):
        raise TypeError(f"register_graph_node_type: expected a class, got {type!r}.")
    _REGISTRY[type] = GraphNodeImpl(type, flatten, set_key, pop_key, create_empty, clear, init)
    _IMPL_CACHE.clear()
    _KIND_CACHE.clear()


def graph_node_impl(x: Any) -> Optional[GraphNodeImpl]:
    """The :class:`GraphNodeImpl` of ``x``'s type (or of its nearest registered base); ``None``."""
    t = builtins.type(x)
    try:
        return _IMPL_CACHE[t]
    except KeyError:
        impl = next((_REGISTRY[c] for c in t.__mro__ if c in _REGISTRY), None)
        _IMPL_CACHE[t] = impl
        return impl


def _kind(x: Any) -> int:
    t = builtins.type(x)
    kind = _KIND_CACHE.get(t)
    if kind is None:
        if graph_node_impl(x) is not None:
            kind = _NODE
        elif issubclass(t, State):
            kind = _STATE
        elif issubclass(t, (list, tuple, dict)) or not jax.tree_util.all_leaves((x,)):
            kind = _CONTAINER
        else:
            kind = _LEAF
        _KIND_CACHE[t] = kind
    return kind


def is_graph_node(x: Any) -> bool:
    """Whether ``x`` is a graph node (a registered type, such as every ``graph.Node``)."""
    return _kind(x) == _NODE


def is_container(x: Any) -> bool:
    """Whether the walk looks inside ``x``: a list, tuple, dict, ``None`` or other JAX pytree."""
    return _kind(x) == _CONTAINER


def _pytree_key(entry: Any) -> Any:
    for field in ("key", "idx", "name"):
        if hasattr(entry, field):
            return getattr(entry, field)
    return str(entry)


def node_children(obj: Any) -> Iterator[Tuple[Any, Any]]:
    """``(key, child)`` for a graph node's children or a container's items (nothing for a leaf).

    Examples
    --------
    >>> import brainx
    >>> list(brainx.graph.walk.node_children({"a": 1, "b": [2]}))
    [('a', 1), ('b', [2])]
    """
    kind = _kind(obj)
    if kind == _NODE:
        items, _ = graph_node_impl(obj).flatten(obj)
        yield from items
    elif kind == _CONTAINER:
        if isinstance(obj, dict):
            yield from obj.items()
        elif isinstance(obj, (list, tuple)):
            yield from enumerate(obj)
        elif obj is not None:
            leaves, _ = jax.tree_util.tree_flatten_with_path(obj, is_leaf=lambda y: y is not obj)
            yield from ((_pytree_key(path[0]), value) for path, value in leaves)


def rebuild_container(obj: Any, items: Sequence[Any]) -> Any:
    """A container like ``obj`` holding ``items`` (its children, in :func:`node_children` order)."""
    if isinstance(obj, dict):
        new = dict(zip(obj.keys(), items))
        return new if builtins.type(obj) is dict else builtins.type(obj)(new)
    if isinstance(obj, list):
        return list(items) if builtins.type(obj) is list else builtins.type(obj)(items)
    if isinstance(obj, tuple):
        return (builtins.type(obj)(*items) if hasattr(obj, "_fields") else
                tuple(items) if builtins.type(obj) is tuple else builtins.type(obj)(items))
    if obj is None:
        return None
    treedef = jax.tree_util.tree_structure(obj, is_leaf=lambda y: y is not obj)
    return treedef.unflatten(items)


def walk_tree(root: Any, order: str = "pre",
              allowed_hierarchy: Tuple[int, int] = (0, MAX_INT)) -> Iterator[Tuple[Path, Any]]:
    """Every graph node and state reachable from ``root``, each once, with its path tuple.

    A path holds attribute names, list/tuple indices (``int``) and dict keys
    as they are: ``("blocks", 0, "w")``. ``order="pre"`` yields a node
    before its contents, ``"post"`` after (children initialise before their
    parent). Containers are walked but not yielded.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> net = brainx.nn.Sequential(brainx.nn.Linear(2, 3))
    >>> [(p, type(x).__name__) for p, x in brainx.graph.walk.walk_tree(net)]
    [((), 'Sequential'), (('layers', 0), 'Linear'), (('layers', 0, 'weight'), 'ParamState')]
    """
    if order not in ("pre", "post"):
        raise ValueError(f"order must be 'pre' or 'post', got {order!r}.")
    lo, hi = allowed_hierarchy
    seen: set = set()

    def walk(obj: Any, path: Path, depth: int):
        kind = _kind(obj)
        if kind == _STATE:
            if id(obj) not in seen:
                seen.add(id(obj))
                if lo <= depth:
                    yield path, obj
            return
        if kind == _LEAF or id(obj) in seen:
            return
        seen.add(id(obj))
        is_node = kind == _NODE
        if is_node and path:
            depth += 1
        if depth > hi:
            return
        if is_node and order == "pre" and lo <= depth:
            yield path, obj
        for key, child in node_children(obj):
            yield from walk(child, path + (key,), depth)
        if is_node and order == "post" and lo <= depth:
            yield path, obj

    yield from walk(root, (), 0)


def iter_leaf(node: Any, allowed_hierarchy: Tuple[int, int] = (0, MAX_INT)
              ) -> Iterator[Tuple[Any, Any]]:
    """``(path, leaf)`` for every value in ``node``'s tree that is not a node or a container.

    States are leaves (each once, under its first path), and so are arrays,
    numbers, strings and functions. Containers are looked into, each once
    (``None`` and ``()`` hold nothing, so they yield nothing).

    Examples
    --------
    >>> import brainx
    >>> [(str(p), x) for p, x in brainx.graph.iter_leaf(brainx.nn.Dropout(0.5))]
    [('prob', 0.5)]
    """
    for path, leaf in _iter_leaves(node, allowed_hierarchy):
        yield DottedPath(path), leaf


def iter_node(node: Any, allowed_hierarchy: Tuple[int, int] = (0, MAX_INT)
              ) -> Iterator[Tuple[Any, Any]]:
    """``(path, node)`` for every graph node reachable from ``node``, ``node`` included (path ``()``).

    Examples
    --------
    >>> import brainx
    >>> net = brainx.nn.Sequential(brainx.nn.Linear(2, 3), brainx.nn.ReLU())
    >>> [str(p) for p, _ in brainx.graph.iter_node(net)]
    ['', 'layers.0', 'layers.1']
    """
    for path, obj in walk_tree(node, allowed_hierarchy=allowed_hierarchy):
        if _kind(obj) == _NODE:
            yield DottedPath(path), obj


def _iter_leaves(node: Any, allowed_hierarchy: Tuple[int, int]):
    lo, hi = allowed_hierarchy
    seen: set = set()

    def walk(obj: Any, path: Path, depth: int):
        kind = _kind(obj)
        if kind in (_NODE, _CONTAINER):
            if id(obj) in seen:
                return
            seen.add(id(obj))
            depth += bool(kind == _NODE and path)
            if depth <= hi:
                for key, child in node_children(obj):
                    yield from walk(child, path + (key,), depth)
            return
        if kind == _STATE:
            if id(obj) in seen:
                return
            seen.add(id(obj))
        if lo <= depth:
            yield path, obj

    yield from walk(node, (), 0)
