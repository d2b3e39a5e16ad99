"""`GraphDef`: a model's structure without its states, and the split/merge that use it.

:func:`split_indexed` copies the graph nodes and containers of a model into
a *skeleton* in which every state is replaced by a slot holding the state's
index, and returns it in a :class:`GraphDef` with snapshots of the states.
:func:`merge_indexed` copies the skeleton back, filling each slot with a new
state made from its snapshot. Both copy each graph node once (a node reached
twice, or a cycle, comes back shared) and each state once. Values that are
neither nodes, containers nor states (arrays, numbers, functions) are shared
with the original model, not copied.

``treefy_split`` / ``treefy_merge`` / ``clone`` / ``flatten`` / ``unflatten``
and ``Node.__deepcopy__`` are built on these two functions.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from brainx.graph.refmap import RefMap
from brainx.state.snapshots import TreefyState
from brainx.graph.walk import (
    graph_node_impl, is_container, is_graph_node, node_children, rebuild_container, walk_tree,
)
from brainx.state.state import State
from brainx.util.mappings import FlattedDict, NestedDict
from brainx.util.path import DottedPath

__all__ = ["GraphDef", "split_indexed", "merge_indexed"]


class _Slot:
    """Where a state was, in a :class:`GraphDef` skeleton: its index in the split."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"<state {self.index}>"


class GraphDef:
    """A model's structure without its states: what ``treefy_merge`` rebuilds from.

    Two ``GraphDef``\\ s are equal (and hash equal) when they describe the
    same structure: the same node types and keys, the same state slots, and
    the same other values (compared by ``==`` when hashable, else by identity).
    So ``graphdef(model) == treefy_split(model)[0]``, and a ``GraphDef`` can
    key a cache.

    Attributes
    ----------
    type : type
        The type of the root (the node or container that was split).
    paths : tuple of DottedPath
        The path of each state, in split order.

    Examples
    --------
    >>> import brainx
    >>> net = brainx.nn.Linear(2, 3)
    >>> gdef = brainx.graph.graphdef(net)
    >>> gdef.type.__name__, gdef == brainx.graph.treefy_split(net)[0]
    ('Linear', True)
    """

    def __init__(self, skeleton: Any, paths: Tuple[DottedPath, ...], state_index: Tuple[int, ...]):
        self._skeleton = skeleton
        self.paths = paths
        self.state_index = state_index  # each state's index in the split's RefMap
        self._key: Optional[tuple] = None

    @property
    def type(self) -> type:
        return type(self._skeleton)

    def _structure(self) -> tuple:
        if self._key is None:
            self._key = (_describe(self._skeleton, {}), self.paths, self.state_index)
        return self._key

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, GraphDef):
            return NotImplemented
        return self is other or self._structure() == other._structure()

    def __hash__(self) -> int:
        return hash(self._structure())

    def __repr__(self) -> str:
        return f"GraphDef({self.type.__name__}, states={[str(p) for p in self.paths]})"


class _ById:
    """A value that is not hashable, compared by identity inside a GraphDef's description."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _ById) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def _describe(obj: Any, seen: Dict[int, int]) -> Any:
    """A hashable description of a skeleton (a node seen before: its number)."""
    if isinstance(obj, _Slot):
        return ("state", obj.index)
    if is_graph_node(obj) or is_container(obj):
        if id(obj) in seen:
            return ("ref", seen[id(obj)])
        if is_graph_node(obj):
            seen[id(obj)] = len(seen)
        return (type(obj), tuple((_hashable(k), _describe(v, seen))
                                 for k, v in node_children(obj)))
    return _hashable(obj)


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return _ById(value)
    return value


def rebuild(obj: Any, leaf: Callable[[Any], Any], memo: Dict[int, Any]) -> Any:
    """A copy of the node/container structure of ``obj``; ``leaf(x)`` replaces states and slots.

    Graph nodes are copied once each (``memo``: id of the original to its
    copy), so sharing and cycles come back; containers are copied where met.
    """
    key = id(obj)
    if key in memo:
        return memo[key]
    if isinstance(obj, (State, _Slot)):
        new = memo[key] = leaf(obj)
        return new
    impl = graph_node_impl(obj)
    if impl is not None:
        items, metadata = impl.flatten(obj)
        new = memo[key] = impl.create_empty(metadata)   # before the children: cycles
        impl.fill(new, [(k, rebuild(v, leaf, memo)) for k, v in items])
        return new
    if is_container(obj):
        memo[key] = obj   # a container that holds itself: keep the original there
        try:
            return rebuild_container(obj, [rebuild(v, leaf, memo) for _, v in node_children(obj)])
        finally:
            del memo[key]
    return obj


def split_indexed(node: Any, ref_index: RefMap, treefy_state: bool = True,
                  memo: Optional[Dict[int, Any]] = None) -> Tuple[GraphDef, NestedDict]:
    """``(graphdef, NestedDict)`` of ``node``; each state gets an index in ``ref_index``.

    States already in ``ref_index`` (seen in an earlier split of the same
    ``split_context``) keep their index, and nodes already in ``memo`` their
    skeleton, so :func:`merge_indexed` rebuilds one state and one node for
    them, shared again.
    """
    found = [(DottedPath(p), s) for p, s in walk_tree(node) if isinstance(s, State)]
    index = tuple(ref_index.setdefault(s, len(ref_index)) for _, s in found)
    slots = {id(s): _Slot(i) for (_, s), i in zip(found, index)}
    skeleton = rebuild(node, lambda s: slots[id(s)], {} if memo is None else memo)
    snapshot = NestedDict.from_flat(FlattedDict(
        (p, TreefyState.from_state(s) if treefy_state else s) for p, s in found))
    return GraphDef(skeleton, tuple(p for p, _ in found), index), snapshot


def merge_indexed(graphdef: GraphDef, given: FlattedDict, index_ref: Dict[int, State],
                  memo: Optional[Dict[int, Any]] = None) -> Any:
    """A new model from ``graphdef`` and the snapshots (or states) in ``given``, by path.

    A state whose index is in ``index_ref`` is reused from there, and a node
    already rebuilt in ``memo`` (by skeleton) too.
    """
    if not isinstance(graphdef, GraphDef):
        raise TypeError(f"treefy_merge/unflatten: expected a GraphDef first (from treefy_split "
                        f"or flatten), got {type(graphdef).__name__}.")
    missing = [str(p) for p in graphdef.paths if p not in given]
    if missing:
        raise ValueError(f"Expected key(s) {missing} in the state mapping: no state given for "
                         "them. Pass every part that treefy_split returned.")
    path_of = dict(zip(graphdef.state_index, graphdef.paths))

    def make(slot: _Slot) -> State:
        if slot.index in index_ref:
            return index_ref[slot.index]
        path = path_of[slot.index]
        ref = given[path]
        if isinstance(ref, TreefyState):
            ref = ref.to_state()
        elif not isinstance(ref, State):
            raise TypeError(f"treefy_merge: {path} is {ref!r}; expected a TreefyState "
                            "(from treefy_split or treefy_states) or a State.")
        index_ref[slot.index] = ref
        return ref

    return rebuild(graphdef._skeleton, make, {} if memo is None else memo)
