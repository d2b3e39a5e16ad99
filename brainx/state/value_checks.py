"""Checks on what is written into a state: the same tree and shapes, the same structure.

``check_state_value_tree()`` turns on, for a block of code in this thread, the
check that a write keeps the state's tree and leaf shapes; ``restore_value``
always keeps the tree structure. (brainstate's ``check_state_jax_tracer`` changes
nothing here, since brainx always refuses a leaked tracer: it is
:mod:`brainx.compat.no_op_switches`.)
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import jax
import numpy as np

from brainx.errors import StateTypeError
from brainx.state.trace import _THREAD
from brainx.state.values import _Expired, describe_value

__all__ = ["check_state_value_tree"]


class _Checks(threading.local):
    tree = False


_CHECKS = _Checks()


@contextlib.contextmanager
def check_state_value_tree(val: bool = True) -> Iterator[None]:
    """Inside the block (this thread), a write that changes a state's tree or leaf shapes raises.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> s = brainx.State(jnp.zeros(2))
    >>> with brainx.check_state_value_tree():
    ...     try:
    ...         s.value = jnp.zeros(3)
    ...     except brainx.StateTypeError as e:
    ...         print("refused")
    refused
    """
    old, _CHECKS.tree = _CHECKS.tree, val
    try:
        yield
    finally:
        _CHECKS.tree = old


def _value_before_write(state: Any) -> Any:
    """The value a write replaces (the open trace's, inside one), or ``None`` if it has none."""
    old = state._value if not _THREAD.frames else _THREAD.frames[-1]._peek_value(state)
    return None if type(old) is _Expired else old


def _check_same_tree(state: Any, value: Any) -> None:
    old = _value_before_write(state)
    if old is None:
        return
    old_leaves, old_tree = jax.tree.flatten(old)
    new_leaves, new_tree = jax.tree.flatten(value)
    if old_tree != new_tree or any(np.shape(a) != np.shape(b)
                                   for a, b in zip(old_leaves, new_leaves)):
        raise StateTypeError(
            f"{state!r} was written with a value of another structure or shape "
            f"({describe_value(value)}) inside check_state_value_tree(). Write a value of the "
            "same tree and shapes, or leave the check off.")


def _check_same_structure(state: Any, value: Any) -> None:
    old = _value_before_write(state)
    if old is None:
        return
    old_tree, new_tree = jax.tree.structure(old), jax.tree.structure(value)
    if old_tree != new_tree:
        raise StateTypeError(
            f"{state!r}.restore_value was given a value of another tree structure ({new_tree}, "
            f"not {old_tree}). restore_value puts back a value of the state; to give the state "
            "a value of a new structure, assign it: `state.value = new`.")
