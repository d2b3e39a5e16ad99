"""The states and nodes of a model tree: collect, snapshot, split and merge them.

brainstate's ``brainstate.graph`` functions over brainx modules, nodes and
plain containers: :func:`states`, :func:`nodes`, :func:`iter_leaf`,
:func:`treefy_states`, :func:`treefy_split` / :func:`treefy_merge` (with
:class:`GraphDef`), :func:`graphdef`, :func:`clone`, :func:`update_states`,
:func:`pop_states`; :func:`flatten` / :func:`unflatten` and
:func:`graph_to_tree` / :func:`tree_to_graph` (a model as a pytree of
:class:`NodeStates`, shared states kept shared). :class:`Node` is the base of
objects that own states (``nn.Module`` is one). Filters come from
:mod:`brainx.util.filter`; results are :class:`~brainx.util.FlattedDict` and
:class:`~brainx.util.NestedDict`. The guide is :doc:`/graph`.
"""

from brainx.graph.convert import (
    MergeContext, NodeStates, SplitContext, Static, broadcast_prefix, flatten, graph_to_tree,
    merge_context, split_context, tree_to_graph, unflatten,
)
from brainx.graph.structure import GraphDef
from brainx.graph.node import Node
from brainx.graph.operations import (
    clone, graphdef, nodes, pop_states, states, treefy_merge, treefy_split, treefy_states,
    update_states,
)
from brainx.graph.refmap import RefMap
from brainx.state.snapshots import TreefyState
from brainx.graph.walk import iter_leaf, iter_node, register_graph_node_type

__all__ = [
    "Node", "states", "nodes", "iter_leaf", "iter_node", "treefy_states", "treefy_split",
    "treefy_merge", "graphdef", "clone", "update_states", "pop_states", "flatten", "unflatten",
    "graph_to_tree", "tree_to_graph", "NodeStates", "split_context", "merge_context",
    "SplitContext", "MergeContext", "RefMap", "Static", "GraphDef", "TreefyState",
    "register_graph_node_type", "broadcast_prefix",
]
