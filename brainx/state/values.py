"""What a state's value may be, and how it is shown.

A state created inside a transform holds a tracer of that transform's trace;
when the trace ends its value becomes an :class:`_Expired` stand-in, so that a
later read can say where the state was made instead of failing inside JAX.
:func:`describe_value` is the short form of a value used in reprs and errors.
"""

from __future__ import annotations

from typing import Any, Optional

import brainunit as u
import jax
import numpy as np
from brainx._jax.internals import ArrayImpl as _ArrayImpl

from brainx.dtype_names import dtype_name
from brainx.errors import StateTypeError
from brainx.state.trace import _THREAD

__all__ = ["describe_value", "dtype_name", "check_unit_kept"]

# The values a HiddenState (one array) may hold.
_ARRAY_TYPES = (jax.Array, np.ndarray, np.generic, int, float, complex, u.Quantity)


class _Expired:
    """Stands in for the value of a state whose tracer died with its transform."""

    __slots__ = ("where",)

    def __init__(self, where: Optional[str]):
        self.where = where


def describe_value(value: Any) -> str:
    """``shape=(3,), dtype=float32`` for one array; a tree of ``float32[3]`` otherwise.

    The short form of a value in error messages (a state's ``repr`` is the
    pretty one, ``ParamState(f32[3])``).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.state.values import describe_value
    >>> describe_value(jnp.zeros((2, 3)))
    'shape=(2, 3), dtype=float32'
    >>> describe_value({"w": jnp.zeros(2)})
    "value={'w': 'float32[2]'}"
    """
    if type(value) is _Expired:
        return f"<expired: created inside {value.where or 'a transform'}>"
    return _describe_summary(value)


def _describe_summary(value: Any) -> str:
    leaves, treedef = jax.tree.flatten(value)
    if treedef.num_leaves == 1 and treedef.num_nodes == 1:
        return _describe_array(value)
    unit = _unit_of(value)
    if unit is not None and len(leaves) == 1:
        return f"{_describe_array(leaves[0])}, unit={unit}"
    short = jax.tree.map(_short_array, value)
    return f"value={short}"


def _describe_array(x: Any) -> str:
    shape, dtype = np.shape(x), getattr(x, "dtype", None)
    if dtype is None:
        return f"value={x!r}"
    return f"shape={tuple(shape)}, dtype={dtype_name(dtype)}"


def _short_array(x: Any) -> str:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return repr(x)
    return f"{dtype_name(dtype)}{list(np.shape(x))}"


def _unit_of(value: Any):
    return value.unit if isinstance(value, u.Quantity) else None


#: Types of values that hold no unit (a write over one drops none); tracer types join on sight.
NO_UNIT_TYPES = {float, int, bool, complex, np.ndarray, type(None), _ArrayImpl}  # no backend at import
_NO_UNIT = NO_UNIT_TYPES
_DIMENSIONLESS = u.DIMENSIONLESS
_MISSING = object()


def _value_seen(state: Any) -> Any:
    """The value a write of ``state`` replaces, here, without recording a read."""
    scope = _THREAD.frames[-1] if _THREAD.frames else None
    while scope is not None:
        if scope.is_transform:
            value = scope.overlay.get(state, _MISSING)
            if value is not _MISSING:
                return value
        scope = scope._parent
    return state._value


def _is_quantity(x: Any) -> bool:
    return isinstance(x, u.Quantity)


def _unit_name(unit: Any) -> str:
    return "dimensionless" if unit is None or unit.is_unitless else str(unit)


def check_unit_kept(state: Any, value: Any) -> None:
    """Raise :class:`~brainx.errors.StateTypeError` if writing ``value`` drops or changes a unit.

    A state holding a brainunit Quantity with a unit (``jnp.ones(3) * u.mV``),
    alone or as a leaf of a tree, must be written with a Quantity of the same
    dimension (``mV`` or ``V``; not a plain array, nor ``mA``): otherwise the
    error would come later, from brainunit, naming no state. A state without a
    unit may be given one. ``State.value``'s setter calls it before the write,
    eagerly and inside every transform, so a refused write changes nothing.

    Examples
    --------
    >>> import jax.numpy as jnp, brainunit as u, brainx
    >>> v = brainx.State(jnp.zeros(2) * u.mV, name="v")
    >>> try:
    ...     v.value = jnp.ones(2)
    ... except brainx.StateTypeError as e:
    ...     print(str(e)[:51])
    State(f32[2] mV, name='v') was written with a value
    >>> v.value
    Quantity([0. 0.], "mV")
    """
    old = _value_seen(state) if _THREAD.frames else state._value
    kind = type(old)
    if kind in _NO_UNIT or kind is _Expired:
        return
    if isinstance(old, u.Quantity):
        pairs = [("", old, value)]
    elif isinstance(old, jax.Array):  # a tracer or another array type: no unit
        _NO_UNIT.add(kind)
        return
    else:  # a tree: its Quantity leaves
        if type(old) is dict and all(type(x) in _NO_UNIT for x in old.values()):
            return  # a flat dict of arrays (a layer's weights), without flattening it
        old_leaves, old_tree = jax.tree.flatten(old, is_leaf=_is_quantity)
        if not any(isinstance(x, u.Quantity) for x in old_leaves):
            return
        new_leaves, new_tree = jax.tree.flatten(value, is_leaf=_is_quantity)
        if new_tree != old_tree:
            return  # another tree: the structure checks (loops, check_state_value_tree) decide
        paths = [jax.tree_util.keystr(k) for k, _ in
                 jax.tree_util.tree_flatten_with_path(old, is_leaf=_is_quantity)[0]]
        pairs = list(zip(paths, old_leaves, new_leaves))
    for where, a, b in pairs:
        if not isinstance(a, u.Quantity):
            continue
        old_unit = a.unit
        new_unit = b.unit if isinstance(b, u.Quantity) else None
        if new_unit is not None and (new_unit is old_unit or new_unit.dim is old_unit.dim
                                     or new_unit.dim == old_unit.dim):
            continue  # (Unit and Dimension comparisons take microseconds: identity first)
        if old_unit.dim is _DIMENSIONLESS or old_unit.is_unitless:
            continue  # no unit to keep
        what = ("drops its unit" if new_unit is None or new_unit.is_unitless else
                "changes its unit")
        raise StateTypeError(
            f"{state!r} was written with a value that {what}"
            f"{f' at leaf {where}' if where else ''}: from {old_unit} to "
            f"{_unit_name(new_unit)} (the new value: {describe_value(b)}). The state keeps its "
            f"old value. Write a Quantity in {old_unit} (a plain array times the unit; "
            "`u.math.zeros_like(state.value)` resets it to zero), or make a new State for a "
            "value of another unit.")
