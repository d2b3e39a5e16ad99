"""Marks on update hooks: which get the step's inputs, which get its output.

A :class:`~brainx.nn.Dynamics` calls its before-update hooks with no
arguments unless a hook is marked :func:`receive_update_input` (then with the
arguments of ``update``), and its after-update hooks with ``update``'s output
unless marked :func:`not_receive_update_output` (then with none). The marks
are attributes on the hook object, as in brainstate.

Examples
--------
>>> from brainx.nn import hooks
>>> class Log:
...     def __call__(self, *args):
...         print("called with", args)
>>> hook = hooks.not_receive_update_output(Log())
>>> hooks.wants_output(hook), hooks.wants_input(hook)
(False, False)
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["receive_update_input", "not_receive_update_input", "receive_update_output",
           "not_receive_update_output", "wants_input", "wants_output"]

T = TypeVar("T")


def receive_update_input(obj: T) -> T:
    """Mark a before-update hook to be called with the arguments of ``update`` (default: none)."""
    obj._receive_update_input = True
    return obj


def not_receive_update_input(obj: T) -> T:
    """Undo :func:`receive_update_input`: the hook is called with no arguments."""
    if hasattr(obj, "_receive_update_input"):
        delattr(obj, "_receive_update_input")
    return obj


def receive_update_output(obj: T) -> T:
    """Mark an after-update hook to be called with the return value of ``update`` (the default)."""
    if hasattr(obj, "_not_receive_update_output"):
        delattr(obj, "_not_receive_update_output")
    return obj


def not_receive_update_output(obj: T) -> T:
    """Mark an after-update hook to be called with no arguments (it reads what it needs)."""
    obj._not_receive_update_output = True
    return obj


def wants_input(hook: Any) -> bool:
    """Whether a before-update hook takes the step's arguments."""
    return bool(getattr(hook, "_receive_update_input", False))


def wants_output(hook: Any) -> bool:
    """Whether an after-update hook takes the step's output."""
    return not getattr(hook, "_not_receive_update_output", False)
