"""The per-thread stack of state traces.

A :class:`StateTraceStack` is a recording scope: while it is the innermost active
scope of its thread, every ``State.value`` read and write is reported to it. The
stateful transforms push one while JAX traces the user's function, which is how
they learn which states the function touches, and they use it to put every
state back as it was when the trace ends, even after an exception.

Only the innermost scope records. A transform reports its *net* effect (the
states it read and the states it wrote back) to the scope around it, and a
plain user scope hands what it saw to its parent when it closes, so an outer
scope sees everything an inner one did.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["StateTraceStack", "catch_new_states", "StateCatcher", "active_traces",
           "inside_transform"]


class _ThreadTraces(threading.local):
    def __init__(self):
        self.frames: List["StateTraceStack"] = []  # innermost last
        self.catchers: List["StateCatcher"] = []
        self.depth = 0  # how many of the frames are transform scopes (own a JAX trace)


_THREAD = _ThreadTraces()


def active_traces() -> List["StateTraceStack"]:
    """The active :class:`StateTraceStack` scopes of this thread, innermost last."""
    return _THREAD.frames


def inside_transform() -> bool:
    """Whether a brainx transform is tracing in this thread.

    Only then may a state hold a JAX tracer (the transform restores it); a plain
    user :class:`StateTraceStack` records, but does not make tracers safe.
    """
    return _THREAD.depth > 0


class StateTraceStack:
    """Record which states are read and written inside a ``with`` block.

    Parameters
    ----------
    name : str, optional
        A label used in error messages (the transform's name).
    restore : bool
        Put every written state back to the value it had before the block when
        the block exits. The transforms use ``True``; the default, ``False``,
        only records.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> a, b = brainx.State(jnp.zeros(2)), brainx.State(jnp.ones(2))
    >>> with brainx.StateTraceStack() as trace:
    ...     b.value = a.value + 1
    >>> trace.get_read_states() == (a,), trace.get_write_states() == (b,)
    (True, True)
    """

    def __init__(self, name: Optional[str] = None, *, restore: bool = False):
        self.name = name
        self.restore = restore
        # Dicts keep first-touch order; keys are states (hashed by identity).
        self._touched: Dict[Any, None] = {}
        self._read: Dict[Any, None] = {}
        self._written: Dict[Any, None] = {}
        self._original: Dict[Any, Any] = {}  # value before this scope first changed it
        self._created: Dict[Any, None] = {}
        # Transform scopes own a JAX trace: states created inside them that hold
        # its tracers must not be readable after it ends.
        self._owns_trace = False
        self._propagate = True

    # -- recording (called by State) -------------------------------------
    def record_read(self, state) -> None:
        if state in self._created:
            return
        self._touched[state] = None
        self._read[state] = None

    def record_write(self, state) -> None:
        if state in self._created:
            return
        self._touched[state] = None
        self._written[state] = None
        if state not in self._original:
            self._original[state] = state._value

    def record_created(self, state) -> None:
        self._created[state] = None

    def swap_in(self, state, value) -> None:
        """Give ``state`` a value for the duration of the scope (not a user write)."""
        if state not in self._original:
            self._original[state] = state._value
        state._value = value

    # -- queries ----------------------------------------------------------
    @property
    def states(self) -> Tuple[Any, ...]:
        """Every state touched from outside the scope, in first-touch order."""
        return tuple(self._touched)

    def get_read_states(self) -> Tuple[Any, ...]:
        return tuple(self._read)

    def get_write_states(self) -> Tuple[Any, ...]:
        return tuple(self._written)

    def get_created_states(self) -> Tuple[Any, ...]:
        return tuple(self._created)

    def was_written(self, state) -> bool:
        return state in self._written

    # -- scope --------------------------------------------------------------
    def __enter__(self) -> "StateTraceStack":
        _THREAD.frames.append(self)
        if self._owns_trace:
            _THREAD.depth += 1
        return self

    def __exit__(self, exc_type, *exc) -> None:
        frames = _THREAD.frames
        in_order = bool(frames) and frames[-1] is self
        # Close this scope and any left open inside it (a generator suspended
        # inside a transform, say), so the stack stays consistent either way.
        if self in frames:
            i = frames.index(self)
            closing = frames[i:]
            del frames[i:]
        else:
            closing = [self]
        for scope in reversed(closing):
            scope._close(frames)
        if not in_order and exc_type is None:
            from brainx.errors import BrainxError
            raise BrainxError(
                f"{self!r} was closed while an inner StateTraceStack was still open; scopes must "
                "nest (a `with` block cannot end inside a generator that is still suspended). "
                "Every state written inside was put back.")

    def _close(self, frames) -> None:
        if self._owns_trace:
            _THREAD.depth -= 1
        if self.restore:
            for state, value in self._original.items():
                state._value = value
        if self._owns_trace:
            _expire_traced_states(self._created, self.name)
        elif self._propagate and frames:
            frames[-1]._merge(self)

    def _merge(self, child: "StateTraceStack") -> None:
        for state in child._created:
            self._created[state] = None
        for state in child._read:
            self.record_read(state)
        for state in child._written:
            if state in self._created:
                continue
            self._original.setdefault(state, child._original[state])
            self._touched[state] = None
            self._written[state] = None

    def __repr__(self) -> str:
        return (f"StateTraceStack(name={self.name!r}, read={len(self._read)}, "
                f"written={len(self._written)})")


def transform_scope(name: str) -> StateTraceStack:
    """A scope for one JAX trace of a transform: restores writes, does not propagate."""
    scope = StateTraceStack(name, restore=True)
    scope._owns_trace = True
    scope._propagate = False
    return scope


def _expire_traced_states(created, where: Optional[str]) -> None:
    from brainx.state.state import expire_if_traced  # local: state imports this module
    for state in created:
        expire_if_traced(state, where)


class StateCatcher:
    """The states created while a :func:`catch_new_states` block was open."""

    def __init__(self, tag: Optional[str] = None):
        self.tag = tag
        self._states: List[Any] = []

    def append(self, state) -> None:
        self._states.append(state)

    @property
    def states(self) -> Tuple[Any, ...]:
        return tuple(self._states)

    def get_states(self) -> Tuple[Any, ...]:
        return tuple(self._states)

    def get_state_values(self) -> List[Any]:
        return [s.value for s in self._states]

    def __len__(self) -> int:
        return len(self._states)

    def __iter__(self):
        return iter(self._states)

    def __enter__(self) -> "StateCatcher":
        _THREAD.catchers.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _THREAD.catchers.remove(self)


def catch_new_states(tag: Optional[str] = None) -> StateCatcher:
    """Collect the states created inside a ``with`` block.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> with brainx.catch_new_states() as catcher:
    ...     a = brainx.ShortTermState(jnp.zeros(3))
    >>> catcher.get_states() == (a,)
    True
    """
    return StateCatcher(tag)


def _notify_created(state) -> bool:
    """Tell the innermost scope and every catcher about a new state.

    Returns ``True`` when the state was created outside every transform.
    """
    for catcher in _THREAD.catchers:
        catcher.append(state)
    frames = _THREAD.frames
    if frames:
        frames[-1].record_created(state)
    return _THREAD.depth == 0

