"""Model trees to pytrees and back, keeping shared states shared.

A JAX transform takes pytrees; a model is a tree of nodes that own states.
:func:`graph_to_tree` replaces every node in a pytree by a
:class:`NodeStates` (its :class:`~brainx.graph.GraphDef` and snapshots of its
states, itself a pytree whose leaves are the state values), and
:func:`tree_to_graph` turns them back into new nodes.

Both number the states they meet in one :class:`~brainx.graph.RefMap` (a
:func:`split_context`), so a state that two nodes share is rebuilt once and
shared again (a :func:`merge_context`). :func:`flatten` / :func:`unflatten` are
the one-node form, as in brainstate.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import jax

from brainx.graph.structure import GraphDef, merge_indexed, split_indexed
from brainx.graph.refmap import RefMap
from brainx.graph.walk import is_graph_node, walk_tree
from brainx.state.state import State
from brainx.util.filter import Filter
from brainx.util.mappings import FlattedDict, NestedDict

__all__ = ["flatten", "unflatten", "split_context", "merge_context", "SplitContext",
           "MergeContext", "NodeStates", "graph_to_tree", "tree_to_graph", "Static",
           "broadcast_prefix"]


@dataclasses.dataclass(frozen=True)
class Static:
    """A value carried through JAX transforms as static data (a pytree with no leaves).

    ``value`` must be hashable and comparable.

    Examples
    --------
    >>> import jax, brainx
    >>> jax.tree.leaves(brainx.graph.Static("relu"))
    []
    """

    value: Any


jax.tree_util.register_static(Static)


def flatten(node: Any, /, ref_index: Optional[RefMap] = None,
            treefy_state: bool = True) -> Tuple[GraphDef, NestedDict]:
    """``node``'s structure and its states: ``(graphdef, states)``.

    ``states`` holds snapshots (:class:`~brainx.graph.TreefyState`), or the
    ``State`` objects themselves with ``treefy_state=False``. Pass one
    ``ref_index`` to several calls to number the states of several nodes in
    one space (shared states get one number). :func:`unflatten` is the inverse.

    Examples
    --------
    >>> import brainx
    >>> gdef, states = brainx.graph.flatten(brainx.nn.Linear(2, 3))
    >>> list(states.to_flat())
    ['weight']
    >>> brainx.graph.unflatten(gdef, states).weight.value["weight"].shape
    (2, 3)
    """
    if ref_index is None:
        ref_index = RefMap()
    elif not isinstance(ref_index, RefMap):
        raise TypeError(f"ref_index must be a brainx.graph.RefMap, got {type(ref_index).__name__}.")
    if isinstance(node, State):
        raise ValueError(f"flatten: {node!r} is a State, not a node; flatten the node or "
                         "container that holds it.")
    return split_indexed(node, ref_index, treefy_state)


def unflatten(graphdef: GraphDef, state_mapping: Any, /, *,
              index_ref: Optional[Dict[int, State]] = None,
              index_ref_cache: Optional[Dict[int, State]] = None) -> Any:
    """A new node from :func:`flatten`'s output (``State`` objects in the mapping are used as they are).

    ``index_ref`` (index to state) shares states across several calls, as in a
    :func:`merge_context`. ``index_ref_cache`` is accepted for brainstate's
    signature and not used.
    """
    del index_ref_cache
    given = FlattedDict.merge(state_mapping)
    return merge_indexed(graphdef, given, {} if index_ref is None else index_ref)


@dataclasses.dataclass
class SplitContext:
    """Splits several nodes with one numbering of their states (see :func:`split_context`)."""

    ref_index: RefMap
    memo: Dict[int, Any] = dataclasses.field(default_factory=dict)  # node -> its skeleton

    def treefy_split(self, node: Any, *filters: Filter) -> Tuple[Any, ...]:
        graphdef, snapshot = split_indexed(node, self.ref_index, memo=self.memo)
        parts = snapshot.split(*filters) if filters else snapshot
        return (graphdef, *(parts if isinstance(parts, tuple) else (parts,)))


@dataclasses.dataclass
class MergeContext:
    """Merges several nodes, rebuilding each shared state once (see :func:`merge_context`)."""

    index_ref: Dict[int, State]
    memo: Dict[int, Any] = dataclasses.field(default_factory=dict)  # skeleton -> rebuilt node

    def treefy_merge(self, graphdef: GraphDef, state_mapping: Any, /, *state_mappings: Any) -> Any:
        return merge_indexed(graphdef, FlattedDict.merge(state_mapping, *state_mappings),
                             self.index_ref, self.memo)


@contextlib.contextmanager
def split_context() -> Iterator[Tuple[SplitContext, RefMap]]:
    """A :class:`SplitContext` and its ``RefMap`` (state to index), for one group of splits.

    Examples
    --------
    >>> import brainx
    >>> shared = brainx.nn.Linear(2, 2)
    >>> with brainx.graph.split_context() as (ctx, index):
    ...     g1, s1 = ctx.treefy_split([shared])
    ...     g2, s2 = ctx.treefy_split({"again": shared})
    >>> len(index)                      # the shared weight is numbered once
    1
    >>> with brainx.graph.merge_context() as (ctx, _):
    ...     a, b = ctx.treefy_merge(g1, s1), ctx.treefy_merge(g2, s2)
    >>> a[0].weight is b["again"].weight
    True
    """
    ctx = SplitContext(RefMap())
    yield ctx, ctx.ref_index


@contextlib.contextmanager
def merge_context() -> Iterator[Tuple[MergeContext, Dict[int, State]]]:
    """A :class:`MergeContext` and its table (index to rebuilt state), for one group of merges."""
    ctx = MergeContext({})
    yield ctx, ctx.index_ref


@jax.tree_util.register_pytree_node_class
class NodeStates:
    """A node as a pytree: its ``graphdef`` (static) and one or more state mappings (leaves).

    Made by :func:`graph_to_tree`, turned back into a node by :func:`tree_to_graph`.
    """

    def __init__(self, graphdef: Optional[GraphDef], states: Tuple[Any, ...],
                 metadata: Any = None):
        self._graphdef = graphdef
        self.states = tuple(states)
        self.metadata = metadata

    @property
    def graphdef(self) -> GraphDef:
        if self._graphdef is None:
            raise ValueError("This NodeStates has no graphdef (it was made from states only).")
        return self._graphdef

    @property
    def state(self) -> Any:
        if len(self.states) != 1:
            raise ValueError(f"NodeStates.state: expected one state mapping, there are "
                             f"{len(self.states)}; use .states.")
        return self.states[0]

    @classmethod
    def from_split(cls, graphdef: GraphDef, state: Any, /, *states: Any,
                   metadata: Any = None) -> "NodeStates":
        return cls(graphdef, (state, *states), metadata)

    @classmethod
    def from_states(cls, state: Any, *states: Any) -> "NodeStates":
        return cls(None, (state, *states))

    @classmethod
    def from_prefixes(cls, prefixes, /, *, metadata: Any = None) -> "NodeStates":
        return cls(None, tuple(prefixes), metadata)

    def tree_flatten(self):
        return (self.states,), (self._graphdef, self.metadata)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(aux[0], children[0], aux[1])

    def __repr__(self) -> str:
        return f"NodeStates({self._graphdef!r}, states={len(self.states)})"


class _Missing:
    pass


_MISSING = _Missing()


def _default_split(ctx: SplitContext, path, prefix, leaf) -> NodeStates:
    return NodeStates.from_split(*ctx.treefy_split(leaf))


def _default_merge(ctx: MergeContext, path, prefix, leaf) -> Any:
    if not isinstance(leaf, NodeStates):
        raise ValueError(f"tree_to_graph: expected a NodeStates at {jax.tree_util.keystr(path)}, "
                         f"got {type(leaf).__name__}.")
    return ctx.treefy_merge(leaf.graphdef, *leaf.states)


def broadcast_prefix(prefix_tree: Any, full_tree: Any,
                     prefix_is_leaf: Optional[Callable[[Any], bool]] = None,
                     tree_is_leaf: Optional[Callable[[Any], bool]] = None) -> list:
    """One prefix per leaf of ``full_tree``: each leaf of ``prefix_tree`` repeated over its subtree.

    Examples
    --------
    >>> import brainx
    >>> brainx.graph.broadcast_prefix([0, 1], [{"a": 1, "b": 2}, 3])
    [0, 0, 1]
    """
    out: list = []
    jax.tree.map(lambda p, sub: out.extend(
        [p] * jax.tree_util.tree_structure(sub, is_leaf=tree_is_leaf).num_leaves),
        prefix_tree, full_tree, is_leaf=prefix_is_leaf)
    return out


def _prefixes(prefix: Any, flat: list, tree: Any, is_leaf=None) -> list:
    """One prefix per leaf in ``flat`` (``prefix`` is a prefix tree of ``tree``)."""
    if prefix is _MISSING:
        return [None] * len(flat)
    out = broadcast_prefix(prefix, tree, prefix_is_leaf=lambda x: x is None or bool(
        is_leaf and is_leaf(x)), tree_is_leaf=is_leaf)
    if len(out) != len(flat):
        raise ValueError(f"Mismatched number of leaves ({len(flat)}) and broadcast prefixes "
                         f"({len(out)}): the prefix must be a prefix tree of the tree.")
    return out


def _record_aliases(leaf: Any, path, prefix: Any, seen: Dict[int, Tuple[Any, Any, Any]]) -> None:
    """Note the prefix of ``leaf`` and of every node and state inside it; a second prefix raises."""
    for inner, obj in walk_tree(leaf):
        where = jax.tree_util.keystr(path) + "".join(f".{k}" for k in inner)
        first = seen.setdefault(id(obj), (where, prefix, obj))
        if first[1] != prefix:
            raise ValueError(
                f"Inconsistent aliasing: the {type(obj).__name__} at {first[0]} is also at "
                f"{where}: one object with two prefixes ({first[1]!r} and {prefix!r}). It gets one "
                "prefix (e.g. one in_axes); give it the same one in both places, or copy it.")


def graph_to_tree(tree: Any, /, *, prefix: Any = _MISSING,
                  split_fn: Callable[[SplitContext, Any, Any, Any], Any] = _default_split,
                  map_non_graph_nodes: bool = False,
                  check_aliasing: bool = True) -> Tuple[Any, FlattedDict]:
    """``tree`` with every node replaced by ``split_fn``'s result (a :class:`NodeStates`).

    Returns the new pytree and the states met, keyed by their index. All nodes
    are split in one :func:`split_context`, so :func:`tree_to_graph` rebuilds a
    state that several nodes share once. With a ``prefix`` tree, one node
    found under two different prefixes is an error when ``check_aliasing``.

    Examples
    --------
    >>> import jax, brainx
    >>> layer = brainx.nn.Linear(2, 2)
    >>> pure, found = brainx.graph.graph_to_tree({"a": layer, "b": layer, "n": 3})
    >>> doubled = jax.tree.map(lambda x: 2 * x, pure)
    >>> back = brainx.graph.tree_to_graph(doubled)
    >>> back["a"] is back["b"], back["n"]
    (True, 6)
    """
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    prefixes = _prefixes(prefix, flat, tree)
    seen: Dict[int, Tuple[Any, Any, Any]] = {}
    leaves = []
    with split_context() as (ctx, index):
        for (path, leaf), leaf_prefix in zip(flat, prefixes):
            if is_graph_node(leaf):
                if check_aliasing and prefix is not _MISSING:
                    _record_aliases(leaf, path, leaf_prefix, seen)
                leaves.append(split_fn(ctx, path, leaf_prefix, leaf))
            else:
                leaves.append(split_fn(ctx, path, leaf_prefix, leaf)
                              if map_non_graph_nodes else leaf)
        found = FlattedDict({(i,): s for s, i in index.items() if isinstance(s, State)})
    return jax.tree_util.tree_unflatten(treedef, leaves), found


def _is_node_states(x: Any) -> bool:
    return isinstance(x, NodeStates)


def tree_to_graph(tree: Any, /, *, prefix: Any = _MISSING,
                  merge_fn: Callable[[MergeContext, Any, Any, Any], Any] = _default_merge,
                  is_node_leaf: Callable[[Any], bool] = _is_node_states,
                  is_leaf: Callable[[Any], bool] = _is_node_states,
                  map_non_graph_nodes: bool = False) -> Any:
    """The inverse of :func:`graph_to_tree`: every :class:`NodeStates` becomes a new node."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)
    prefixes = _prefixes(prefix, flat, tree, is_leaf)
    with merge_context() as (ctx, _):
        leaves = [merge_fn(ctx, path, p, leaf) if is_node_leaf(leaf) or map_non_graph_nodes
                  else leaf for (path, leaf), p in zip(flat, prefixes)]
    return jax.tree_util.tree_unflatten(treedef, leaves)
