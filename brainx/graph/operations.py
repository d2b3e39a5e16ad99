"""Collect the states and modules of a model tree; split a model into structure and states.

Every function here walks the same tree as ``Module.states()``: modules and
their attributes, and the lists, tuples and dicts among them, each object
once, in attribute-definition order. A path is the tuple of attribute names,
list indices and dict keys that leads to an object (a
:class:`~brainx.util.DottedPath`, printed ``"blocks.0.w"``).

* :func:`states` / :func:`nodes`: the live ``State`` / ``Module`` objects, in
  a :class:`~brainx.util.FlattedDict`;
* :func:`treefy_states`: snapshots of the states (:class:`TreefyState`) in a
  :class:`~brainx.util.NestedDict`;
* :func:`treefy_split` / :func:`treefy_merge`: a :class:`GraphDef` (everything
  but the states) and the states' snapshots, and back to a new model with new
  states; :func:`clone` does both; :func:`update_states` writes snapshots (or
  values) into a model's existing states.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

from brainx.graph.refmap import RefMap
from brainx.graph.treefy import TreefyState
from brainx.nn.module import MAX_DEPTH, walk_tree
from brainx.nn.node import Node, node_children
from brainx.state.state import State
from brainx.util.filter import Filter
from brainx.util.mappings import FlattedDict, NestedDict, select
from brainx.util.path import DottedPath

__all__ = [
    "states", "nodes", "treefy_states", "treefy_split", "treefy_merge", "graphdef", "clone",
    "update_states", "iter_node", "GraphDef",
]


def _collect(found, filters: Tuple[Filter, ...]):
    return select([(DottedPath(p), x) for p, x in found], filters)


def states(node: Any, *filters: Filter,
           allowed_hierarchy: Tuple[int, int] = (0, MAX_DEPTH)
           ) -> Union[FlattedDict, Tuple[FlattedDict, ...]]:
    """The states reachable from ``node`` (a module, or lists/tuples/dicts of them and of states).

    Parameters
    ----------
    node : Module or container
        Where to start.
    *filters
        As in ``Module.states``: none (all states), one (those it matches),
        or several (a tuple of mappings, each state in the first that matches).
    allowed_hierarchy : (int, int)
        Only states of modules at these depths (``node``'s own: 0).

    Returns
    -------
    FlattedDict or tuple of FlattedDict

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> net = brainx.nn.Sequential(brainx.nn.Linear(2, 3), brainx.nn.Linear(3, 1))
    >>> params = brainx.graph.states(net, brainx.ParamState)
    >>> list(params), params["layers", 1, "weight"] is net.layers[1].weight
    (['layers.0.weight', 'layers.1.weight'], True)
    >>> found = brainx.graph.states([net.layers[1], {"h": brainx.HiddenState(jnp.zeros(1))}])
    >>> {path: type(s).__name__ for path, s in found.items()}
    {'0.weight': 'ParamState', '1.h': 'HiddenState'}
    """
    found = ((p, x) for p, x in walk_tree(node, allowed_hierarchy=allowed_hierarchy)
             if isinstance(x, State))
    return _collect(found, filters)


def nodes(node: Any, *filters: Filter,
          allowed_hierarchy: Tuple[int, int] = (0, MAX_DEPTH)
          ) -> Union[FlattedDict, Tuple[FlattedDict, ...]]:
    """The modules reachable from ``node``, ``node`` itself included (path ``()``), as brainstate.

    ``Module.nodes()`` leaves the module itself out. Filters and
    ``allowed_hierarchy`` as in :func:`states`.

    Examples
    --------
    >>> import brainx
    >>> net = brainx.nn.Sequential(brainx.nn.Linear(2, 3), brainx.nn.ReLU())
    >>> {str(p): type(m).__name__ for p, m in brainx.graph.nodes(net).items()}
    {'': 'Sequential', 'layers.0': 'Linear', 'layers.1': 'ReLU'}
    >>> list(brainx.graph.nodes(net, brainx.nn.Linear))
    ['layers.0']
    """
    found = ((p, x) for p, x in walk_tree(node, allowed_hierarchy=allowed_hierarchy)
             if isinstance(x, Node))
    return _collect(found, filters)


def iter_node(node: Any, allowed_hierarchy: Tuple[int, int] = (0, MAX_DEPTH)):
    """``(path, module)`` for every module reachable from ``node``, ``node`` included."""
    for path, x in walk_tree(node, allowed_hierarchy=allowed_hierarchy):
        if isinstance(x, Node):
            yield DottedPath(path), x


def treefy_states(node: Any, *filters: Filter) -> Union[NestedDict, Tuple[NestedDict, ...]]:
    """Snapshots (:class:`TreefyState`) of the states of ``node``, nested by path.

    With filters, the snapshots they match (one :class:`NestedDict` per filter).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> net = brainx.nn.Sequential(brainx.nn.Linear(2, 1))
    >>> snap = brainx.graph.treefy_states(net)
    >>> ref = snap["layers"][0]["weight"]
    >>> ref.type.__name__, ref.value["weight"].shape
    ('ParamState', (2, 1))
    """
    snapshot = NestedDict.from_flat(
        FlattedDict((p, TreefyState.from_state(s)) for p, s in states(node).items()))
    return snapshot.filter(*filters) if filters else snapshot


class GraphDef:
    """A model's structure without its states: what :func:`treefy_merge` rebuilds from.

    It holds a copy of the modules, lists, tuples and dicts of the model in
    which every state is replaced by the path of its snapshot. Other
    attributes (arrays, numbers, functions, other objects) are shared with
    the model, not copied.
    """

    def __init__(self, skeleton: Any, paths: Tuple[DottedPath, ...], index: Tuple[int, ...]):
        self._skeleton = skeleton
        self.paths = paths
        self.index = index  # each state's index in the split's RefMap (shared states: one)

    def __repr__(self) -> str:
        return f"GraphDef({type(self._skeleton).__name__}, states={list(self.paths)})"


class _Slot:
    """Where a state was, in a :class:`GraphDef` skeleton: its index in the split."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"<state {self.index}>"


def _rebuild(obj: Any, leaf, memo: Dict[int, Any]) -> Any:
    """A copy of the module/container structure of ``obj``; ``leaf(x)`` replaces states/slots."""
    key = id(obj)
    if key in memo:
        return memo[key]
    if isinstance(obj, (State, _Slot)):
        new = memo[key] = leaf(obj)
        return new
    if isinstance(obj, Node):
        new = memo[key] = object.__new__(type(obj))
        hidden = type(obj).graph_invisible_attrs  # not the node's: kept as they are
        new.__dict__.update({k: v if k in hidden else _rebuild(v, leaf, memo)
                             for k, v in vars(obj).items()})
        return new
    if isinstance(obj, dict):
        items = {k: _rebuild(v, leaf, memo) for k, v in obj.items()}
        new = memo[key] = items if type(obj) is dict else type(obj)(items)
        return new
    if isinstance(obj, list):
        new = memo[key] = type(obj)() if type(obj) is not list else []
        new.extend(_rebuild(v, leaf, memo) for v in obj)
        return new
    if isinstance(obj, tuple):
        items = [_rebuild(v, leaf, memo) for v in obj]
        new = memo[key] = (type(obj)(*items) if hasattr(obj, "_fields") else
                           tuple(items) if type(obj) is tuple else type(obj)(items))
        return new
    return obj


def treefy_split(node: Any, *filters: Filter) -> Tuple[Any, ...]:
    """Split ``node`` into its :class:`GraphDef` and snapshots of its states.

    Returns ``(graphdef, state)``, or ``(graphdef, state1, state2, ...)`` with
    filters, which must then cover every state (end with ``...``).
    :func:`treefy_merge` turns them back into a model with new states.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> net = brainx.nn.Sequential(brainx.nn.Linear(2, 1))
    >>> gdef, params = brainx.graph.treefy_split(net, brainx.ParamState)
    >>> zeroed = jax.tree.map(jnp.zeros_like, params)
    >>> new = brainx.graph.treefy_merge(gdef, zeroed)
    >>> float(new.layers[0].weight.value["weight"].sum()), new.layers[0].weight is net.layers[0].weight
    (0.0, False)
    """
    graphdef, snapshot = split_indexed(node, RefMap())
    parts = snapshot.split(*filters) if filters else snapshot
    parts = parts if isinstance(parts, tuple) else (parts,)
    return (graphdef, *parts)


def split_indexed(node: Any, ref_index: "RefMap", treefy_state: bool = True,
                  memo: Optional[Dict[int, Any]] = None):
    """``(graphdef, NestedDict)`` of ``node``; each state gets an index in ``ref_index``.

    States already in ``ref_index`` (seen in an earlier split of the same
    :func:`~brainx.graph.split_context`) keep their index, and nodes already
    in ``memo`` their skeleton, so :func:`merge_indexed` rebuilds one state
    and one node for them, shared again.
    """
    found = states(node)
    index = tuple(ref_index.setdefault(s, len(ref_index)) for s in found.values())
    slots = {id(s): _Slot(i) for s, i in zip(found.values(), index)}
    skeleton = _rebuild(node, lambda s: slots[id(s)], {} if memo is None else memo)
    snapshot = NestedDict.from_flat(FlattedDict(
        (p, TreefyState.from_state(s) if treefy_state else s) for p, s in found.items()))
    return GraphDef(skeleton, tuple(found), index), snapshot


def treefy_merge(graphdef: GraphDef, *state_mappings: Union[NestedDict, FlattedDict]) -> Any:
    """A new model with ``graphdef``'s structure and new states built from the snapshots.

    Every state of the structure needs a snapshot (or a ``State``, used as
    it is); the mappings are merged first, later ones winning.
    """
    return merge_indexed(graphdef, FlattedDict.merge(*state_mappings), {})


def merge_indexed(graphdef: GraphDef, given: FlattedDict, index_ref: Dict[int, State],
                  memo: Optional[Dict[int, Any]] = None) -> Any:
    """As :func:`treefy_merge`; a state whose index is in ``index_ref`` is reused from there,
    and a node already rebuilt in ``memo`` (by skeleton) too."""
    if not isinstance(graphdef, GraphDef):
        raise TypeError(f"treefy_merge: expected a GraphDef first (from treefy_split), got "
                        f"{type(graphdef).__name__}.")
    missing = [p for p in graphdef.paths if p not in given]
    if missing:
        raise ValueError(f"treefy_merge: no state given for {[str(p) for p in missing]}. Pass "
                         "every part that treefy_split returned.")
    path_of = dict(zip(graphdef.index, graphdef.paths))

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

    return _rebuild(graphdef._skeleton, make, {} if memo is None else memo)


def graphdef(node: Any) -> GraphDef:
    """The :class:`GraphDef` of ``node`` (the first result of :func:`treefy_split`)."""
    return treefy_split(node)[0]


def clone(node: Any) -> Any:
    """A copy of ``node`` with new states holding the same values (shared states stay shared).

    Examples
    --------
    >>> import brainx
    >>> net = brainx.nn.Linear(2, 1)
    >>> twin = brainx.graph.clone(net)
    >>> twin.weight is net.weight, bool((twin.weight.value["weight"] == net.weight.value["weight"]).all())
    (False, True)
    """
    return treefy_merge(*treefy_split(node))


def update_states(node: Any, state_dict: Union[NestedDict, FlattedDict], /,
                  *state_dicts: Union[NestedDict, FlattedDict]) -> None:
    """Write snapshots, states or plain values, keyed by path, into ``node``'s existing states.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> net = brainx.nn.Linear(2, 1)
    >>> snap = brainx.graph.treefy_states(net)
    >>> brainx.graph.update_states(net, jax.tree.map(jnp.zeros_like, snap))
    >>> float(net.weight.value["weight"].sum())
    0.0
    """
    given = FlattedDict.merge(state_dict, *state_dicts)
    current = states(node)
    unknown = [str(p) for p in given if p not in current]
    if unknown:
        raise KeyError(f"update_states: {unknown} is not a state of {type(node).__name__} (its "
                       f"states: {[str(p) for p in current]}).")
    for path, new in given.items():
        current[path].value = new.value if isinstance(new, (State, TreefyState)) else new


def iter_leaf(node: Any, allowed_hierarchy: Tuple[int, int] = (0, MAX_DEPTH)):
    """``(path, leaf)`` for every value in ``node``'s tree that is not a node or a container.

    States are leaves (each once, under its first path), and so are the other
    attribute values: arrays, numbers, ``None``, functions.

    Examples
    --------
    >>> import brainx
    >>> [(str(p), type(x).__name__) for p, x in brainx.graph.iter_leaf(brainx.nn.Dropout(0.5))]
    [('_name', 'NoneType'), ('prob', 'float'), ('broadcast_dims', 'tuple')]
    """
    lo, hi = allowed_hierarchy
    seen: set = set()

    def walk(obj: Any, path: tuple, depth: int):
        if isinstance(obj, State):
            if id(obj) not in seen:
                seen.add(id(obj))
                if lo <= depth:
                    yield DottedPath(path), obj
            return
        is_node = isinstance(obj, Node)
        if is_node or isinstance(obj, (dict, list, tuple)) and any(
                isinstance(v, (State, Node, dict, list, tuple)) for _, v in node_children(obj)):
            if id(obj) in seen:
                return
            seen.add(id(obj))
            depth += bool(is_node and path)
            if depth <= hi:
                for key, child in node_children(obj):
                    yield from walk(child, path + (key,), depth)
            return
        if lo <= depth:
            yield DottedPath(path), obj

    yield from walk(node, (), 0)


def pop_states(node: Any, *filters: Filter) -> Union[NestedDict, Tuple[NestedDict, ...]]:
    """Remove the states the filters match from ``node``'s tree and return them, by path.

    One :class:`~brainx.util.NestedDict` of ``State`` objects per filter (at
    least one filter). A state is removed from the node attribute or dict
    that holds it; one inside a list or tuple cannot be removed
    (``ValueError``, nothing removed).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> class Cell(brainx.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = brainx.ParamState(jnp.ones(2))
    ...         self.h = brainx.HiddenState(jnp.zeros(2))
    >>> cell = Cell()
    >>> hidden = brainx.graph.pop_states(cell, brainx.HiddenState)
    >>> list(hidden.to_flat()), hasattr(cell, "h")
    (['h'], False)
    """
    if not filters:
        raise ValueError("pop_states needs at least one filter (which states to remove), "
                         "e.g. pop_states(model, brainx.HiddenState).")
    found = states(node, *filters) if len(filters) > 1 else (states(node, filters[0]),)
    owners = []
    for part in found:
        for path in part:
            owner = _owner(node, tuple(path))
            if not isinstance(owner, (Node, dict)):
                raise ValueError(f"pop_states: the state at {path} is held by a "
                                 f"{type(owner).__name__}, which cannot lose an item. Keep it in "
                                 "a node attribute or a dict to pop it.")
            owners.append((owner, tuple(path)[-1]))
    for owner, key in owners:
        if isinstance(owner, Node):
            delattr(owner, key)
        else:
            del owner[key]
    result = tuple(NestedDict.from_flat(part) for part in found)
    return result[0] if len(result) == 1 else result


def _owner(root: Any, path: tuple) -> Any:
    obj = root
    for key in path[:-1]:
        obj = vars(obj)[key] if isinstance(obj, Node) else obj[key]
    return obj
