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

from typing import Any, Tuple, Union

from brainx.graph.structure import GraphDef, merge_indexed, split_indexed
from brainx.graph.refmap import RefMap
from brainx.state.snapshots import TreefyState
from brainx.graph.walk import (
    MAX_INT, graph_node_impl, is_container, iter_leaf, iter_node, node_children, walk_tree,
)
from brainx.state.known_paths import remember_paths
from brainx.state.state import State
from brainx.util.filter import Filter
from brainx.util.mappings import FlattedDict, NestedDict, select
from brainx.util.path import DottedPath

__all__ = [
    "states", "nodes", "treefy_states", "treefy_split", "treefy_merge", "graphdef", "clone",
    "update_states", "pop_states", "iter_leaf", "iter_node", "GraphDef",
]


def _collect(found, filters: Tuple[Filter, ...]):
    return select([(DottedPath(p), x) for p, x in found], filters)


def states(node: Any, *filters: Filter,
           allowed_hierarchy: Tuple[int, int] = (0, MAX_INT)
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
    found = [(p, x) for p, x in walk_tree(node, allowed_hierarchy=allowed_hierarchy)
             if isinstance(x, State)]
    remember_paths(node, found)   # so that an error about a state can name its path
    return _collect(found, filters)


def nodes(node: Any, *filters: Filter,
          allowed_hierarchy: Tuple[int, int] = (0, MAX_INT)
          ) -> Union[FlattedDict, Tuple[FlattedDict, ...]]:
    """The graph nodes reachable from ``node``, ``node`` itself included (path ``()``), as brainstate.

    ``Module.nodes()`` is the same. Filters and ``allowed_hierarchy`` as in
    :func:`states`.

    Examples
    --------
    >>> import brainx
    >>> net = brainx.nn.Sequential(brainx.nn.Linear(2, 3), brainx.nn.ReLU())
    >>> {str(p): type(m).__name__ for p, m in brainx.graph.nodes(net).items()}
    {'': 'Sequential', 'layers.0': 'Linear', 'layers.1': 'ReLU'}
    >>> list(brainx.graph.nodes(net, brainx.nn.Linear))
    ['layers.0']
    """
    return _collect(iter_node(node, allowed_hierarchy=allowed_hierarchy), filters)


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


def treefy_merge(graphdef: GraphDef, *state_mappings: Union[NestedDict, FlattedDict]) -> Any:
    """A new model with ``graphdef``'s structure and new states built from the snapshots.

    Every state of the structure needs a snapshot (or a ``State``, used as
    it is); the mappings are merged first, later ones winning.
    """
    return merge_indexed(graphdef, FlattedDict.merge(*state_mappings), {})


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
    """Write snapshots, states or plain values into ``node``'s states, by path; re-add missing ones.

    For each path of the (merged) mappings:

    * a state there takes the value (and metadata) of a ``TreefyState`` or
      ``State``, or a plain value;
    * a path whose last key a graph node lacks gets a ``TreefyState`` (as a
      new state) or a ``State`` (as it is) back as an attribute:
      ``update_states(node, pop_states(node, ...))`` undoes a pop;
    * anything else is an error (``ValueError``): a state for an attribute
      that is not a state, a state for a whole sub-node, a plain value for a
      missing key (a typo would add an attribute), a key a list, tuple or
      dict lacks (they are values: rebuild them), or a path through a leaf.

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
    for path, new in given.items():
        _update_one(node, tuple(path), new)


def _update_one(root: Any, path: tuple, new: Any) -> None:
    where, owner = "the root", root
    for key in path[:-1]:
        children = dict(node_children(owner))
        if key not in children:
            raise ValueError(f"update_states: {DottedPath(path)}: {where} "
                             f"({type(owner).__name__}) has no {key!r}.")
        owner, where = children[key], f"{where}.{key}" if where != "the root" else str(key)
    key = path[-1]
    children = dict(node_children(owner))
    if graph_node_impl(owner) is None and not is_container(owner):
        raise ValueError(f"update_states: {DottedPath(path)} goes through {where}, a "
                         f"{type(owner).__name__}, which holds no states.")
    if key not in children:
        impl = graph_node_impl(owner)
        if impl is None:
            raise ValueError(f"update_states: cannot add {key!r} to {where}, a "
                             f"{type(owner).__name__} (a value, not a node). Add states to "
                             "graph nodes only.")
        if not isinstance(new, (State, TreefyState)):
            raise ValueError(f"update_states: {DottedPath(path)} is not a state of "
                             f"{type(root).__name__}, and a plain value ({type(new).__name__}) "
                             "cannot be added as one. Give a State or TreefyState to add a "
                             "state; check the path for a typo.")
        impl.set_key(owner, key, new.to_state() if isinstance(new, TreefyState) else new)
        return
    current = children[key]
    if isinstance(current, State):
        if isinstance(new, State):
            if new is not current:
                current.value = new.value
                _copy_metadata(new, current)
        elif isinstance(new, TreefyState):
            current.value = new.value
            _copy_metadata(new, current)
        else:
            current.value = new
    elif isinstance(new, (State, TreefyState)):
        what = "a node or container" if graph_node_impl(current) or is_container(current) else \
            f"a {type(current).__name__}, not a state"
        raise ValueError(f"update_states: {DottedPath(path)} is {what}; a state cannot "
                         f"replace it ({new!r}). Give the states under it by their own paths.")
    else:
        raise ValueError(f"update_states: {DottedPath(path)} is not a state "
                         f"({type(current).__name__}); update_states writes states only.")


def _copy_metadata(source: Any, target: State) -> None:
    """``name``, ``tag`` and the other metadata of a state or snapshot onto ``target``."""
    meta = source.get_metadata() if isinstance(source, TreefyState) else {
        k: v for k, v in vars(source).items() if not k.startswith("_")}
    for k, v in meta.items():
        if not k.startswith("_"):
            setattr(target, k, v)


def pop_states(node: Any, *filters: Filter) -> Union[NestedDict, Tuple[NestedDict, ...]]:
    """Remove the states the filters match from ``node``'s tree and return them, by path.

    One :class:`~brainx.util.NestedDict` of ``State`` objects per filter (at
    least one filter). A state is removed from every node attribute or dict
    that holds it (a shared or tied state leaves no alias behind) and listed
    once, under its first path. One held by a list or tuple cannot be removed
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
        raise ValueError("Expected at least one filter: pop_states needs to know which states "
                         "to remove, e.g. pop_states(model, brainx.HiddenState).")
    found = states(node, *filters) if len(filters) > 1 else (states(node, filters[0]),)
    chosen = {id(s) for part in found for s in part.values()}
    holders = []
    for owner, key, value in _every_holder(node):
        if id(value) in chosen:
            if isinstance(owner, (list, tuple)) or (
                    graph_node_impl(owner) is None and not isinstance(owner, dict)):
                raise ValueError(f"pop_states: {value!r} is held by a {type(owner).__name__} "
                                 f"(at key {key!r}), which cannot lose an item. Keep it in a "
                                 "node attribute or a dict to pop it.")
            holders.append((owner, key))
    for owner, key in holders:
        impl = graph_node_impl(owner)
        if impl is not None:
            impl.pop_key(owner, key)
        else:
            del owner[key]
    result = tuple(NestedDict.from_flat(part) for part in found)
    return result[0] if len(result) == 1 else result


def _every_holder(root: Any):
    """``(owner, key, state)`` for every place a state is held (each node/container once)."""
    seen: set = set()

    def walk(obj: Any):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        for key, child in node_children(obj):
            if isinstance(child, State):
                yield obj, key, child
            else:
                yield from walk(child)

    yield from walk(root)
