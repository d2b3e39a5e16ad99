"""State values with leaves JAX cannot trace, and how written values are rebuilt.

A state may hold a pytree with a string or another Python object among its
leaves. Only the array leaves can cross a JAX boundary (a ``jax.jit``
argument, a loop carry); :class:`StaticLeaves` carries the rest as static
data, and :class:`WrittenSpec` rebuilds a written state's value from the
array leaves a jaxpr returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import jax
import numpy as np
from jax.core import Tracer
from brainx._jax.internals import ArrayImpl

#: The tree structure of a single leaf.
LEAF = jax.tree.structure(0)

__all__ = ["is_array_leaf", "is_single_array", "StaticLeaves", "has_static_leaves", "as_input",
           "WrittenSpec", "build_written", "LEAF"]

_SCALAR_TYPES = (int, float, complex, bool, np.generic, np.ndarray)
_ARRAY_LEAF_TYPES = (Tracer, jax.Array, *_SCALAR_TYPES, jax.ShapeDtypeStruct)


def is_array_leaf(x: Any) -> bool:
    """A pytree leaf JAX can trace: an array, a tracer, or a Python/NumPy scalar."""
    # (The isinstance test comes first: hasattr on a tracer builds an error message.)
    return isinstance(x, _ARRAY_LEAF_TYPES) or hasattr(x, "__jax_array__")


def _is_none(x: Any) -> bool:
    return x is None


def _leaves(tree: Any) -> list:
    """The leaves of ``tree``, ``None`` included (JAX may put ``None`` where an array was)."""
    return jax.tree.leaves(tree, is_leaf=_is_none)


@jax.tree_util.register_pytree_node_class
class StaticLeaves:
    """A state value with leaves JAX cannot trace, which ride along as static data.

    Its pytree leaves are the value's array leaves only, so it can cross a
    ``jax.jit`` or loop boundary; :func:`write_state_values` unwraps it.

    Which leaves are arrays is decided once, when the value is wrapped, and
    kept through flatten/unflatten: JAX maps its own objects over the array
    leaves (``CustomVJPPrimal``, symbolic zeros, ``None``), and those must
    stay dynamic leaves, not become static data.
    """

    __slots__ = ("tree", "mask")

    def __init__(self, tree: Any, mask: Optional[Tuple[bool, ...]] = None):
        self.tree = tree
        self.mask = tuple(is_array_leaf(x) for x in _leaves(tree)) if mask is None else mask

    def tree_flatten(self):
        leaves, treedef = jax.tree.flatten(self.tree, is_leaf=_is_none)
        statics = tuple(x for x, m in zip(leaves, self.mask) if not m)
        return [x for x, m in zip(leaves, self.mask) if m], (treedef, self.mask, statics)

    @classmethod
    def tree_unflatten(cls, aux, arrays):
        treedef, mask, statics = aux
        arrays, statics = iter(arrays), iter(statics)
        return cls(jax.tree.unflatten(treedef, [next(arrays) if m else next(statics)
                                                for m in mask]), mask)

    def __eq__(self, other):
        return type(other) is StaticLeaves and self.tree_flatten()[1] == other.tree_flatten()[1]

    __hash__ = None


def has_static_leaves(value: Any) -> bool:
    return not all(is_array_leaf(x) for x in jax.tree.leaves(value))


def as_input(value: Any) -> Any:
    """``value``, wrapped in :class:`StaticLeaves` if it has leaves JAX cannot trace."""
    return StaticLeaves(value) if has_static_leaves(value) else value


# -- signatures --------------------------------------------------------------------------------

@dataclass(frozen=True)
class WrittenSpec:
    """How a written state's new value is rebuilt from the jaxpr's outputs."""

    treedef: Any
    mask: Tuple[bool, ...]  # which leaves are jaxpr outputs (the rest are static)
    statics: Tuple[Any, ...]
    wrap: bool  # has static leaves: give it back as StaticLeaves

    @classmethod
    def of(cls, value: Any) -> "WrittenSpec":
        if is_single_array(value):
            return _ONE_ARRAY
        leaves, treedef = jax.tree.flatten(value)
        mask = tuple(is_array_leaf(x) for x in leaves)
        return cls(treedef, mask, tuple(x for x, m in zip(leaves, mask) if not m),
                   not all(mask))

    def arrays(self, value: Any) -> list:
        if self is _ONE_ARRAY:
            return [value]
        return [x for x, m in zip(jax.tree.leaves(value), self.mask) if m]

    def build(self, arrays: Sequence[Any]) -> Any:
        if self is _ONE_ARRAY:
            return arrays[0]
        arrays, statics = iter(arrays), iter(self.statics)
        tree = jax.tree.unflatten(self.treedef, [next(arrays) if m else next(statics)
                                                 for m in self.mask])
        return StaticLeaves(tree) if self.wrap else tree


def build_written(specs: Sequence[WrittenSpec], arrays: Sequence[Any]) -> list:
    """The written states' new values from their array leaves, in order (see :meth:`WrittenSpec.arrays`)."""
    values, k = [], 0
    for spec in specs:
        n = sum(spec.mask)
        values.append(spec.build(arrays[k:k + n]))
        k += n
    return values


def is_single_array(x: Any) -> bool:
    """``x`` is one JAX array or tracer (a pytree of one leaf: no flattening needed)."""
    return isinstance(x, (Tracer, ArrayImpl))


#: The spec of a state whose new value is one array (most states).
_ONE_ARRAY = WrittenSpec(LEAF, (True,), (), False)


def _is_array_like(x: Any) -> bool:
    # ShapeDtypeStruct: an abstract argument (a loop discovers its step with the type of one
    # slice of xs, which may have no slice at all).
    return isinstance(x, (jax.Array, np.ndarray, np.generic, int, float, complex, bool,
                          jax.ShapeDtypeStruct, Tracer)) or hasattr(x, "__jax_array__")


def _as_array(x: Any, aval: Any) -> jax.Array:
    """A jaxpr output that is a literal (a NumPy value) as a JAX array of its type."""
    x = np.asarray(x)
    if aval.weak_type and x.ndim == 0:
        return jax.numpy.asarray(x.item())  # a Python scalar gives a weakly typed array
    return jax.numpy.asarray(x, dtype=aval.dtype)
