"""Check that the states a loop step (or a branch) writes keep their type.

A state written inside ``scan``, ``while_loop`` or a branch of ``cond``
travels as part of a loop carry or a branch output, so JAX requires its new
value to have exactly the type of the old one. JAX's own error ("carry input
and carry output must have equal types") cannot name the state; the check
here runs while the step is traced, before JAX compares the carry, and names
the state with both types.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import jax
import numpy as np
# The one private JAX function we need: there is no public way to make a weakly typed array.
from jax._src.lax.lax import _convert_element_type

from brainx.errors import StateTypeError
from brainx.state.state import State

__all__ = ["check_state_types", "describe_type", "same_type", "keep_weak_types"]


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
        return type(x).__name__
    weak = "weak " if getattr(aval, "weak_type", False) else ""
    return f"{weak}{np.dtype(aval.dtype).name}{list(aval.shape)}"


class _Shown:
    """A leaf that prints as a given text (used to draw a tree of types)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def describe_type(value: Any) -> str:
    """A short text for the type of a pytree: ``float32[3]``, ``{'a': int32[]}``, ``float32[2] mV``."""
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
    >>> from brainx.transform.carry_check import check_state_types
    >>> v = brainx.State(jnp.zeros(3), name="v")
    >>> check_state_types([v], [jnp.zeros(3)], [jnp.ones(3)], "scan")
    >>> check_state_types([v], [jnp.zeros(3)], [jnp.ones(4)], "scan")
    Traceback (most recent call last):
    ...
    brainx.errors.StateTypeError: scan changes the type of State(name='v', ...): before float32[3], after float32[4]...
    """
    for state, old, new in zip(states, old_values, new_values):
        if not same_type(old, new, weak_promotion=weak_promotion):
            raise StateTypeError(
                f"{where} changes the type of {state!r}: before {describe_type(old)}, after "
                f"{describe_type(new)}. A state written inside a loop step or a branch must "
                "keep its shape, dtype and tree structure (and unit), because it is carried "
                "from one step to the next (or returned by every branch). Cast or reshape "
                "the new value, or give the state its final type before the loop. No state "
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
