"""`Node`, where ``brainx.nn`` code imports it from: defined in :mod:`brainx.graph.node`.

The graph package owns the node type and the tree walk; ``brainx.nn`` builds
on them (``nn.Module`` is a ``Node``), so the dependency goes one way.
"""

from brainx.graph.node import Node
from brainx.graph.walk import node_children

__all__ = ["Node", "node_children"]
