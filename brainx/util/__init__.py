"""Utilities: filters, state mappings, config dicts, frozen dicts, pytree dataclasses, pretty reprs.

Used by brainx's graph functions:

* :mod:`brainx.util.filter`: filters that pick states by type, tag or path,
  and :func:`to_predicate`;
* :class:`FlattedDict` / :class:`NestedDict`: what ``states()`` and
  ``treefy_states()`` return;
* :class:`DottedPath`: their keys, path tuples that print as dotted strings.

For user programs (the names of ``brainstate.util``):

* :mod:`brainx.util.dicts`: :class:`DotDict` (attribute-access config dict,
  a pytree), :func:`flatten_dict`, :func:`unflatten_dict`,
  :func:`merge_dicts`;
* :mod:`brainx.util.dict_manager`: :class:`DictManager`, a dict of named
  objects with by-type and by-identity selection;
* :mod:`brainx.util.frozen`: :class:`FrozenDict` (immutable, hashable,
  a pytree), :func:`freeze`, :func:`unfreeze`, :func:`copy`, :func:`pop`,
  :func:`pretty_repr`;
* :mod:`brainx.util.struct`: :func:`dataclass`, :func:`field`,
  :class:`PyTreeNode`, :func:`is_dataclass`: frozen dataclasses that are
  pytrees, with static fields;
* :mod:`brainx.util.pretty` (the protocol: :class:`PrettyRepr`,
  :func:`pretty_repr_object`, :func:`pretty_format`, ...),
  :mod:`brainx.util.pretty_containers` (:class:`PrettyDict`,
  :class:`PrettyList`, :class:`PrettyObject`) and the engine under them,
  :mod:`brainx.pretty_repr`: width-fitting, cycle-safe reprs;
* the options of those reprs
  (:class:`ReprOptions`, :func:`repr_options`, :func:`set_repr_options`,
  :func:`get_repr_options`), :class:`ReprSummary` (a model's size footer),
  :func:`format_array_like` (``f32[3,4]``) and :func:`format_bytes`;
* :mod:`brainx.util.cache`: :class:`BoundedCache`, a thread-safe LRU cache;
* :mod:`brainx.util.helpers`: :func:`split_total`, :func:`get_unique_name`,
  :func:`is_instance_eval`, :func:`not_instance_eval`;
* :mod:`brainx.util.memory`: :func:`clear_buffer_memory`;
* :mod:`brainx.util.tracing`: :class:`StateJaxTracer`;
* :func:`breakpoint_if` is :func:`brainx.transform.breakpoint_if`.
"""

from brainx.util import filter
from brainx.util.filter import (
    All, Any, Everything, IsState, Not, Nothing, OfType, PathContains, PathGlob, PathRegex,
    TagOrPathGlob, WithTag, to_predicate,
)
from brainx.util.mappings import FlattedDict, NestedDict, flat_mapping, nest_mapping
from brainx.util.path import DottedPath
from brainx.util.cache import BoundedCache
from brainx.util.struct import PyTreeNode, dataclass, field, is_dataclass
from brainx.util.dict_manager import DictManager
from brainx.util.dicts import DotDict, flatten_dict, merge_dicts, unflatten_dict
from brainx.util.frozen import FrozenDict, copy, freeze, pop, pretty_repr, unfreeze
from brainx.util.helpers import (
    NameContext, get_unique_name, is_instance_eval, not_instance_eval, split_total,
)
from brainx.util.memory import clear_buffer_memory
from brainx.util.pretty_containers import NestedStateRepr, PrettyDict, PrettyList, PrettyObject
from brainx.util.pretty import (
    MappingReprMixin, PrettyAttr, PrettyMapping, PrettyRepr, PrettyReprContext, PrettyType,
    pretty_format, pretty_repr_elem, pretty_repr_object, yield_unique_pretty_repr_items,
)
from brainx.util.tracing import StateJaxTracer, current_jax_trace
from brainx.pretty_repr.options import (
    ReprOptions, ReprSummary, format_array_like, format_bytes, get_repr_options, repr_options,
    set_repr_options,
)


__all__ = [
    "filter", "to_predicate", "IsState", "WithTag", "TagOrPathGlob", "PathContains", "PathGlob", "PathRegex", "OfType",
    "Any", "All", "Not", "Everything", "Nothing", "FlattedDict", "NestedDict", "flat_mapping",
    "nest_mapping", "DottedPath",
    # brainstate.util's other public names
    "StateJaxTracer", "BoundedCache",
    "yield_unique_pretty_repr_items", "PrettyType", "PrettyAttr", "PrettyRepr", "PrettyMapping",
    "MappingReprMixin",
    "split_total", "clear_buffer_memory", "not_instance_eval", "is_instance_eval", "DictManager",
    "DotDict", "get_unique_name", "merge_dicts", "flatten_dict", "unflatten_dict",
    "field", "is_dataclass", "dataclass", "PyTreeNode", "FrozenDict", "freeze", "unfreeze",
    "copy", "pop", "pretty_repr",
    "PrettyDict", "PrettyList", "PrettyObject",
    "breakpoint_if",
    # brainstate 0.6.0's repr options
    "repr_options", "set_repr_options", "get_repr_options", "ReprOptions", "ReprSummary",
    "pretty_format", "pretty_repr_object", "format_bytes", "format_array_like",
]
