"""The types of state values: compare, describe, promote and cast them (the core's value-type helpers).

A state written inside ``scan``, ``while_loop`` or a branch of ``cond``
travels as part of a loop carry or a branch output, so JAX requires its new
value to have exactly the type of the old one. JAX's own error ("carry input
and carry output must have equal types") cannot name the state;
:func:`check_state_types` runs while the step is traced, before JAX compares
the carry, and names the state with both types. The other helpers (weak-type
promotion, :func:`cast_like`, :func:`joined_type`) serve the loops, the
gradients, checkpointing and saving alike, which is why they live in the core.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import jax
import numpy as np
# The one private JAX function we need: there is no public way to make a weakly typed array.
from brainx._jax.internals import convert_element_type as _convert_element_type

from brainx.errors import StateTypeError
from brainx.state.state import State
from brainx.dtype_names import dtype_name
from brainx.transform.core.stateful import StaticLeaves

__all__ = ["check_state_types", "describe_type", "same_type", "keep_weak_types", "joined_type",
           "cast_leaf", "promote_weak", "has_weak_leaf"]


def _leaf_type(x: Any) -> Optional[Any]:
    try:
        return jax.typeof(x)
    except (TypeError, ValueError):
        return None


def _typematch(a: Any, b: Any) -> bool:
    """Same shape and dtype (weak typing aside)."""
    return a.shape == b.shape and a.dtype == b.dtype


def _leaf_str(x: Any) -> str:
    aval = _leaf_type(x)
    if aval is None or not hasattr(aval, "dtype"):
        text = repr(x)  # a leaf JAX cannot trace (a string, an object): show it
        return text if len(text) <= 40 else f"<{type(x).__name__}>"
    weak = "weak " if getattr(aval, "weak_type", False) else ""
    return f"{weak}{dtype_name(aval.dtype)}{list(aval.shape)}"


class _Shown:
    """A leaf that prints as a given text (used to draw a tree of types)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def describe_type(value: Any) -> str:
    """A short text for the type of a pytree: ``float32[3]``, ``{'a': int32[]}``, ``float32[2] mV``.

    A leaf JAX cannot trace (a string, say) is shown as its ``repr``.
    """
    if type(value) is StaticLeaves:
        value = value.tree
    leaves, treedef = jax.tree.flatten(value)
    types = [_leaf_str(x) for x in leaves]
    if treedef.num_nodes == 1 and treedef.num_leaves == 1:
        return types[0]
    unit = getattr(value, "unit", None)
    if unit is not None and len(types) == 1:
        return f"{types[0]} {unit}"
    try:
        return repr(jax.tree.unflatten(treedef, [_Shown(t) for t in types]))
    except Exception:  # a pytree node that validates its children on unflatten
        return f"{treedef} with leaves [{', '.join(types)}]"


def same_type(old: Any, new: Any, *, weak_promotion: bool = False) -> bool:
    """Whether ``new`` can replace ``old`` in a loop carry or branch output.

    Tree structures (units of Quantities included) must be equal, and each
    leaf must have the same shape and dtype. Weak typing is ignored, as JAX
    does. With ``weak_promotion``, a weakly typed old leaf (a Python scalar)
    may also change its dtype, since ``jax.lax.scan`` and ``while_loop``
    promote such a carry and trace again.
    """
    old_leaves, old_tree = jax.tree.flatten(old)
    new_leaves, new_tree = jax.tree.flatten(new)
    if old_tree != new_tree:
        return False
    for a, b in zip(old_leaves, new_leaves):
        ta, tb = _leaf_type(a), _leaf_type(b)
        if ta is None or tb is None:
            if ta is not tb:
                return False
            continue
        if _typematch(ta, tb):
            continue
        if (weak_promotion and getattr(ta, "weak_type", False)
                and getattr(ta, "shape", None) == getattr(tb, "shape", None)):
            continue
        return False
    return True


def check_state_types(states: Sequence[State], old_values: Sequence[Any],
                      new_values: Sequence[Any], where: str, *,
                      weak_promotion: bool = False) -> None:
    """Raise :class:`~brainx.StateTypeError` if a state's new value changes its type.

    Parameters
    ----------
    states : sequence of State
        The written states, in the order of the values.
    old_values, new_values : sequence
        Their values before and after one step (arrays, tracers or
        ``jax.ShapeDtypeStruct`` s).
    where : str
        What produced the new values, for the message (``"scan"``,
        ``"branch 1 of switch"``).
    weak_promotion : bool
        Let a weakly typed old value change dtype (see :func:`same_type`).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.transform.core.value_types import check_state_types
    >>> v = brainx.State(jnp.zeros(3), name="v")
    >>> check_state_types([v], [jnp.zeros(3)], [jnp.ones(3)], "scan")
    >>> check_state_types([v], [jnp.zeros(3)], [jnp.ones(4)], "scan")
    Traceback (most recent call last):
    ...
    brainx.errors.StateTypeError: scan changes the type of State(f32[3], name='v'): before float32[3], after float32[4]...
    """
    for state, old, new in zip(states, old_values, new_values):
        if not same_type(old, new, weak_promotion=weak_promotion):
            raise StateTypeError(
                f"{where} changes the type of {state!r}: before {describe_type(old)}, after "
                f"{describe_type(new)}. A state written inside a loop step or a branch must "
                "keep its shape, dtype and tree structure (and unit), because it is carried "
                "from one step to the next (or returned by every branch). Cast or reshape "
                "the new value, or give the state its final type before the loop; a leaf "
                "that is not an array (a string, None, an object) must stay the same. No state "
                "was changed.")


def keep_weak_types(old_values: Sequence[Any], new_values: Sequence[Any]) -> list:
    """``new_values``, weakly typed wherever the old value was and the type is otherwise equal.

    A state that starts as a Python scalar is weakly typed; a loop carry or a
    ``cond`` output would make it strongly typed, so a compiled loop would see
    a new input type on its second call and compile again. Keeping the weak
    flag keeps the state's type exactly as it was. Call while tracing.
    """
    def fix(old, new):
        ta, tb = _leaf_type(old), _leaf_type(new)
        if (ta is not None and tb is not None and getattr(ta, "weak_type", False)
                and not getattr(tb, "weak_type", False) and _typematch(ta, tb)):
            return _convert_element_type(new, tb.dtype, weak_type=True)
        return new

    result = []
    for old, new in zip(old_values, new_values):
        old_leaves, old_tree = jax.tree.flatten(old)
        new_leaves, new_tree = jax.tree.flatten(new)
        if old_tree == new_tree:
            new = jax.tree.unflatten(new_tree, [fix(a, b) for a, b in zip(old_leaves, new_leaves)])
        result.append(new)
    return result


def _promotes_like(aval: Any) -> Any:
    """What promotes as ``aval`` does: a Python scalar for a weak type, its dtype otherwise."""
    if getattr(aval, "weak_type", False):
        return {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}.get(np.dtype(aval.dtype).kind,
                                                                 aval.dtype)
    return aval.dtype


def joined_type(values: Sequence[Any]) -> Tuple[np.dtype, bool]:
    """``(dtype, weak)`` that the leaves ``values`` (arrays or abstract values) promote to together.

    A weakly typed leaf (a Python scalar) yields to a strongly typed one, as
    in JAX's type promotion: a weak ``int32`` and a weak ``float32`` give a
    weak ``float32``, a weak ``int32`` and an ``int16`` give ``int16``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.transform.core.value_types import joined_type
    >>> joined_type([jnp.asarray(0), 0.5])
    (dtype('float32'), True)
    >>> joined_type([jnp.asarray(0), jnp.int16(1)])
    (dtype('int16'), False)
    """
    types = [_leaf_type(v) for v in values]
    dtype, weak = jax.dtypes.result_type(*[_promotes_like(t) for t in types],
                                         return_weak_type_flag=True)
    return np.dtype(dtype), bool(weak)


def cast_leaf(x: Any, dtype: Any, weak: bool) -> Any:
    """``x`` as ``dtype``, weakly typed if ``weak`` (unchanged if it is so already)."""
    aval = _leaf_type(x)
    if (aval is not None and aval.dtype == dtype
            and bool(getattr(aval, "weak_type", False)) == weak):
        return x
    return _convert_element_type(x, np.dtype(dtype), weak_type=weak)


def has_weak_leaf(value: Any) -> bool:
    """Whether a leaf of ``value`` is weakly typed (a Python scalar, say)."""
    return any(getattr(_leaf_type(x), "weak_type", False) for x in jax.tree.leaves(value))


def promote_weak(old: Any, new: Any) -> Tuple[Any, bool]:
    """``(old promoted, changed)``: each weakly typed leaf of ``old`` cast to what it joins ``new`` in.

    ``new`` holds the types a loop step returns for ``old`` (arrays or
    ``jax.ShapeDtypeStruct`` s). A weakly typed leaf whose dtype differs from
    the new one (a ``State(0)`` that the step makes a float) is promoted, as
    ``jax.lax.scan`` promotes such a carry; every other leaf is kept. Trees
    that differ are left for :func:`check_state_types` to report.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform.core.value_types import promote_weak
    >>> value, changed = promote_weak(0, jax.ShapeDtypeStruct((), jnp.float32, weak_type=True))
    >>> changed, value.dtype, value.weak_type
    (True, dtype('float32'), True)
    """
    old_leaves, old_tree = jax.tree.flatten(old)
    new_leaves, new_tree = jax.tree.flatten(new)
    if old_tree != new_tree:
        return old, False
    changed = False
    leaves = []
    for a, b in zip(old_leaves, new_leaves):
        ta, tb = _leaf_type(a), _leaf_type(b)
        if (ta is not None and tb is not None and getattr(ta, "weak_type", False)
                and ta.shape == tb.shape and ta.dtype != tb.dtype):
            a = cast_leaf(a, *joined_type([a, b]))
            changed = True
        leaves.append(a)
    return jax.tree.unflatten(old_tree, leaves), changed


def cast_like(value: Any, like: Any) -> Any:
    """``value`` with each array leaf cast to the dtype (and weak type) of ``like``'s leaf."""
    def one(x, t):
        ty = _leaf_type(t)
        return x if ty is None or not hasattr(ty, "dtype") else cast_leaf(
            x, ty.dtype, bool(getattr(ty, "weak_type", False)))
    return jax.tree.map(one, value, like)
