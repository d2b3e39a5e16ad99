"""Utilities shared by brainx's graph functions: filters, paths and state mappings.

* :mod:`brainx.util.filter`: filters that pick states by type, tag or path,
  and :func:`to_predicate`;
* :class:`FlattedDict` / :class:`NestedDict`: what ``states()`` and
  ``treefy_states()`` return;
* :class:`DottedPath`: their keys, path tuples that print as dotted strings.
"""

from brainx.util import filter
from brainx.util.filter import (
    All, Any, Everything, Not, Nothing, OfType, PathContains, PathGlob, PathRegex, WithTag,
    to_predicate,
)
from brainx.util.mappings import FlattedDict, NestedDict, flat_mapping, nest_mapping
from brainx.util.path import DottedPath

__all__ = [
    "filter", "to_predicate", "WithTag", "PathContains", "PathGlob", "PathRegex", "OfType",
    "Any", "All", "Not", "Everything", "Nothing", "FlattedDict", "NestedDict", "flat_mapping",
    "nest_mapping", "DottedPath",
]
