"""How a graph node prints: its attributes through the pretty-repr engine, and its size.

``repr(node)`` lists the node's attributes as ``name=value`` (leaving out
``None`` values and :attr:`~brainx.graph.Node.graph_invisible_attrs`), lays
them out to the width of the repr options, marks a sub-node met twice as
``<shared: .a>`` and the node itself inside itself as ``<cycle: .>``, and ends
with the size of the states below it::

    Net(w=ParamState(f32[3]))  # 3 params (12 B)

:func:`node_summary` counts those sizes: every state reachable from the node,
each once however often it is shared, the elements of
:class:`~brainx.ParamState` values as parameters and those of every other
state as state values. The raw values are read, so no read hook runs.
"""

from __future__ import annotations

import math
from typing import Any, Iterator, Tuple, Union

import jax
import numpy as np

from brainx.graph.walk import walk_tree
from brainx.pretty_repr.layout import PrettyAttr, PrettyType
from brainx.pretty_repr.options import ReprSummary
from brainx.state.state import ParamState, State
from brainx.util.pretty import yield_unique_pretty_repr_items
from brainx.util.pretty_containers import _repr_attribute_general, _repr_object_general

__all__ = ["node_pretty_items", "node_summary"]


def node_pretty_items(node: Any) -> Iterator[Union[PrettyType, PrettyAttr]]:
    """The pretty-repr items of a node: its class, then each attribute its
    ``__pretty_repr_item__`` keeps (strings quoted, lists and dicts laid out)."""
    return yield_unique_pretty_repr_items(node, _repr_object_general, _repr_attribute_general)


def node_summary(node: Any) -> ReprSummary:
    """The sizes of the states reachable from ``node``, each state counted once.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.graph.node_repr import node_summary
    >>> s = node_summary(brainx.nn.Linear(3, 4))
    >>> s.n_params, s.param_bytes
    (16, 64)
    """
    n_params = param_bytes = n_values = value_bytes = 0
    for _, leaf in walk_tree(node):
        if not isinstance(leaf, State):
            continue
        size, nbytes = value_size(leaf._value)
        if isinstance(leaf, ParamState):
            n_params += size
            param_bytes += nbytes
        else:
            n_values += size
            value_bytes += nbytes
    return ReprSummary(n_params, param_bytes, n_values, value_bytes)


def value_size(value: Any) -> Tuple[int, int]:
    """``(elements, bytes)`` over the array leaves of ``value`` (Quantities by their numbers).

    Examples
    --------
    >>> import jax.numpy as jnp, brainunit as u
    >>> from brainx.graph.node_repr import value_size
    >>> value_size({"v": jnp.zeros(4) * u.mV, "n": None, "s": "text"})
    (4, 16)
    """
    size = nbytes = 0
    for leaf in jax.tree.leaves(value):
        leaf = getattr(leaf, "mantissa", leaf)
        if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
            continue
        n = math.prod(leaf.shape)
        size += n
        nbytes += n * _itemsize(leaf.dtype)
    return size, nbytes


def _itemsize(dtype: Any) -> int:
    try:
        return np.dtype(dtype).itemsize
    except TypeError:  # an extended dtype (a typed PRNG key)
        return int(getattr(dtype, "itemsize", 0) or 0)
