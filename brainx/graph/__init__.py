"""The states and modules of a model tree: collect, snapshot, split and merge them.

brainstate's ``brainstate.graph`` functions over brainx modules and plain
containers: :func:`states`, :func:`nodes`, :func:`treefy_states`,
:func:`treefy_split` / :func:`treefy_merge` (with :class:`GraphDef`),
:func:`graphdef`, :func:`clone` and :func:`update_states`. Filters come from
:mod:`brainx.util.filter`; results are :class:`~brainx.util.FlattedDict` and
:class:`~brainx.util.NestedDict`. See ``docs/graph.md``.
"""

from brainx.graph.operations import (
    GraphDef, clone, graphdef, iter_node, nodes, states, treefy_merge, treefy_split,
    treefy_states, update_states,
)
from brainx.graph.treefy import TreefyState

__all__ = [
    "states", "nodes", "treefy_states", "treefy_split", "treefy_merge", "graphdef", "clone",
    "update_states", "iter_node", "GraphDef", "TreefyState",
]
