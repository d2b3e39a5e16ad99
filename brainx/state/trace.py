"""The per-thread stack of state traces.

A :class:`StateTraceStack` is a recording scope: while it is the innermost
active scope of its thread, every ``State.value`` read and write goes through
it. Scopes nest; each one records what it sees and passes the read or write on
to the scope around it, so an outer scope sees everything an inner one did.

A *transform scope* (:class:`TransformScope`) is the scope a stateful
transform opens while JAX traces the user's function. It does not pass writes
on: it keeps the values the trace gives to states in an *overlay* of its own,
visible only to code running inside it, in this thread. The states themselves
are never changed while a function is traced, so

* another thread reading a state sees its real value, never a tracer;
* an exception inside the trace leaves every state as it was, with nothing to
  restore;
* a container held by a state (a dict, a list) is copied when the trace first
  reads it, so mutating it in place changes the copy; the transform notices
  the change and treats it as a write.

What a transform scope does when a state is first read (make it an input of
the jaxpr being traced) is the transform's business: it passes a ``lift``
function.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from brainx.errors import BrainxError, TraceContextError
from brainx.state.lending import LENT, call_depth, check_lent, lend_in_scope

__all__ = ["StateTraceStack", "TransformScope", "catch_new_states", "StateCatcher", "NewStateCatcher",
           "active_traces", "inside_transform"]

_MISSING = object()


class _ThreadTraces(threading.local):
    def __init__(self):
        self.frames: List["StateTraceStack"] = []  # innermost last
        self.catchers: List["StateCatcher"] = []
        self.depth = 0  # how many of the frames are transform scopes


_THREAD = _ThreadTraces()


def active_traces() -> List["StateTraceStack"]:
    """The active :class:`StateTraceStack` scopes of this thread, innermost last."""
    return _THREAD.frames


def inside_transform() -> bool:
    """Whether a brainx transform is tracing in this thread.

    Only then may a state's visible value be a JAX tracer (it lives in the
    transform's overlay); a plain user :class:`StateTraceStack` records, but
    does not make tracers safe.
    """
    return _THREAD.depth > 0


def visible_value(scope: "StateTraceStack", state) -> Any:
    """The value of ``state`` seen in ``scope``, recorded as read only where it must be.

    Inside a transform a state not read yet is lifted into the trace (a read
    of that transform scope: the trace needs it as an input); recording scopes
    in between do not record a read. Hooks use it for ``old_value``.
    """
    while scope is not None:
        if scope.is_transform:
            value = scope.overlay.get(state, _MISSING)
            return scope.read_value(state) if value is _MISSING else value
        scope = scope._parent
    return state._checked_value()


def mark_written(state) -> None:
    """Record a write of ``state`` with the value it has, in every scope open now.

    brainstate's ``record_state_value_write``: a subclass that keeps more than
    the value (braincell's ``DiffEqState.derivative``) tells the scopes the
    state counts as written (see :meth:`StateTraceStack.mark_written`).
    """
    if _THREAD.frames:
        _THREAD.frames[-1].mark_written(state)


def _real_value(state) -> Any:
    """The value outside every scope, refusing an expired one."""
    return state._checked_value()


class StateTraceStack:
    """Record which states are read and written inside a ``with`` block.

    Parameters
    ----------
    name : str, optional
        A label used in error messages.
    restore : bool
        Put every written state back to the value it had before the block when
        the block exits. The default, ``False``, only records.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> a, b = brainx.State(jnp.zeros(2)), brainx.State(jnp.ones(2))
    >>> with brainx.StateTraceStack() as trace:
    ...     b.value = a.value + 1
    >>> trace.get_read_states() == (a,), trace.get_write_states() == (b,)
    (True, True)
    """

    is_transform = False

    def __init__(self, name: Optional[str] = None, *, restore: bool = False):
        self.name = name
        self.restore = restore
        # Dicts keep first-touch order; keys are states (hashed by identity).
        self._touched: Dict[Any, None] = {}
        self._read: Dict[Any, None] = {}
        self._written: Dict[Any, None] = {}
        self._original: Dict[Any, Any] = {}  # value before this scope first wrote it
        self._created: Dict[Any, None] = {}
        self._parent: Optional[StateTraceStack] = None

    # -- reads and writes (called by State) ---------------------------------
    def read_value(self, state) -> Any:
        """Record a read of ``state`` and return the value visible here."""
        if state in self._created:
            return state._checked_value()
        self._touched[state] = None
        self._read[state] = None
        return self.outer_value(state)

    def write_value(self, state, value) -> None:
        """Record a write of ``state`` and pass it on to the scope around."""
        if state in self._created:
            state._value = value
            return
        self._note_write(state)
        self._write_outer(state, value)

    def mark_written(self, state) -> None:
        """Record a write of ``state`` that keeps its value, here and in the scopes around.

        Nothing is assigned and no hook runs; the innermost transform scope
        takes the value it sees as the written one (the state becomes an
        output of its trace, unchanged).
        """
        if state in self._created:
            return
        self._note_write(state)
        if self._parent is not None:
            self._parent.mark_written(state)

    def _note_write(self, state) -> None:
        if state not in self._original:
            self._original[state] = self._peek(state)
        self._touched[state] = None
        self._written[state] = None

    def _peek(self, state) -> Any:
        """The value visible around this scope (lifting it into a trace if needed)."""
        scope = self._parent
        while scope is not None:
            if scope.is_transform:
                value = scope.overlay.get(state, _MISSING)
                return scope.read_value(state) if value is _MISSING else value
            scope = scope._parent
        if LENT and id(state) in LENT:
            return check_lent(state)
        return state._value

    def _peek_value(self, state) -> Any:
        """The value visible in this scope now, without recording (``None``: not traced yet)."""
        scope = self
        while scope is not None:
            if scope.is_transform:
                return scope.overlay.get(state)
            scope = scope._parent
        return state._value

    def outer_value(self, state) -> Any:
        """The value of ``state`` visible to the scope around this one (a read there)."""
        parent = self._parent
        return parent.read_value(state) if parent is not None else state._checked_value()

    def _write_outer(self, state, value) -> None:
        parent = self._parent
        if parent is not None:
            parent.write_value(state, value)
        else:
            state._assign_checked(value)

    def _put_back(self, state, value) -> None:
        """Set the visible value without recording a write (for ``restore``)."""
        parent = self._parent
        if parent is not None:
            parent._put_back(state, value)
        else:
            state._value = value

    def record_created(self, state) -> None:
        scope = self
        while scope is not None:
            scope._created[state] = None
            if scope.is_transform:
                break
            scope = scope._parent

    # -- queries (brainstate's names) -------------------------------------------
    @property
    def states(self) -> Tuple[Any, ...]:
        """Every state touched from outside the scope, in first-touch order."""
        return tuple(self._touched)

    @property
    def been_writen(self) -> Tuple[bool, ...]:
        """For each of :attr:`states`, whether it was written (brainstate's spelling)."""
        return tuple(s in self._written for s in self._touched)

    def get_read_states(self, replace_writen: bool = False) -> Tuple[Any, ...]:
        """The states read and not written (``replace_writen``: ``None`` in place of the others)."""
        if replace_writen:
            return tuple(None if s in self._written else s for s in self._touched)
        return tuple(s for s in self._touched if s not in self._written)

    def get_write_states(self, replace_read: bool = False) -> Tuple[Any, ...]:
        """The states written (``replace_read``: ``None`` in place of the others)."""
        if replace_read:
            return tuple(s if s in self._written else None for s in self._touched)
        return tuple(self._written)

    def get_read_state_values(self, replace_writen: bool = False) -> Tuple[Any, ...]:
        """The current values of :meth:`get_read_states`."""
        return tuple(None if s is None else s.value
                     for s in self.get_read_states(replace_writen))

    def get_write_state_values(self, replace_read: bool = False) -> Tuple[Any, ...]:
        """The current values of :meth:`get_write_states`."""
        return tuple(None if s is None else s.value for s in self.get_write_states(replace_read))

    def get_state_values(self, separate: bool = False, replace: bool = False):
        """The values of :attr:`states`; ``separate``: ``(written, read-only)`` values."""
        if not separate:
            return tuple(s.value for s in self._touched)
        if replace:
            return self.get_write_state_values(True), self.get_read_state_values(True)
        return self.get_write_state_values(), self.get_read_state_values()

    @property
    def original_state_values(self) -> Tuple[Any, ...]:
        """For each state written here, the value it had before (``restore=True`` scopes)."""
        return tuple(self._original.get(s) for s in self._touched)

    def recovery_original_values(self) -> None:
        """Put every state written here back to the value it had before its first write."""
        for state, value in self._original.items():
            self._put_back(state, value)

    def assign_state_vals(self, state_vals) -> None:
        """Give each of :attr:`states` a value: written states by a write, the others by a restore."""
        self.assign_state_vals_v2(state_vals, state_vals)

    def assign_state_vals_v2(self, read_state_vals, write_state_vals) -> None:
        """Write ``write_state_vals`` into the written states, restore ``read_state_vals`` into the rest."""
        states = tuple(self._touched)
        if not len(read_state_vals) == len(write_state_vals) == len(states):
            raise ValueError(f"{self!r} recorded {len(states)} states; got {len(read_state_vals)} "
                             f"read and {len(write_state_vals)} written values. Pass one value "
                             "per state of `trace.states`, in that order.")
        for state, read, written in zip(states, read_state_vals, write_state_vals):
            if state in self._written:
                state.value = written
            else:
                state.restore_value(read)

    def state_subset(self, state_type: type) -> List[Any]:
        """The touched states that are instances of ``state_type``."""
        return [s for s in self._touched if isinstance(s, state_type)]

    def merge(self, *traces: "StateTraceStack") -> "StateTraceStack":
        """Add what other scopes recorded to this one (in place); returns ``self``."""
        for trace in traces:
            for state in trace._touched:
                self._touched[state] = None
                if state in trace._read:
                    self._read[state] = None
                if state in trace._written:
                    self._written[state] = None
                    if state in trace._original:
                        self._original.setdefault(state, trace._original[state])
        return self

    def __add__(self, other: "StateTraceStack") -> "StateTraceStack":
        merged = StateTraceStack(self.name, restore=self.restore)
        return merged.merge(self, other)

    def get_created_states(self) -> Tuple[Any, ...]:
        return tuple(self._created)

    def was_written(self, state) -> bool:
        return state in self._written

    def was_read(self, state) -> bool:
        return state in self._read

    # -- scope --------------------------------------------------------------
    def __enter__(self) -> "StateTraceStack":
        frames = _THREAD.frames
        self._parent = frames[-1] if frames else None
        frames.append(self)
        if self.is_transform:
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
            scope._close()
        if not in_order and exc_type is None:
            raise TraceContextError(
                f"{self!r} was closed while an inner StateTraceStack was still open; scopes must "
                "nest (a `with` block cannot end inside a generator that is still suspended). "
                "The inner scopes were closed too; no state holds a value of theirs.")

    def _close(self) -> None:
        if self.is_transform:
            _THREAD.depth -= 1
        if self.restore:
            for state, value in self._original.items():
                self._put_back(state, value)

    def __repr__(self) -> str:
        return (f"StateTraceStack(name={self.name!r}, read={len(self._read)}, "
                f"written={len(self._written)})")


class TransformScope(StateTraceStack):
    """The scope of one JAX trace of a stateful transform: values live in an overlay.

    Parameters
    ----------
    name : str
        The transform, for error messages.
    lift : callable
        ``lift(state, outer_value) -> value``: called on the first read of a
        state the trace has not written yet; returns the value the trace sees
        (the transform makes it an input of its jaxpr).
    check_write : callable, optional
        ``check_write(state, value)``: called on every write; raises to refuse it.
    check_read : callable, optional
        ``check_read()``: called on every read made in this scope (not on the
        lifts of a transform scope nested in it). The transform uses it to
        notice a read made while another JAX trace than its own is running: a
        raw ``jax.jit``/``lax.scan`` helper capturing the state's value.
    """

    is_transform = True

    def __init__(self, name: str, lift: Callable[[Any, Any], Any],
                 check_write: Optional[Callable[[Any, Any], None]] = None,
                 check_read: Optional[Callable[[], None]] = None):
        super().__init__(name)
        self._lift = lift
        self._check_write = check_write  # check_write(state, value), after-write hook included
        self._check_read = check_read
        self.overlay: Dict[Any, Any] = {}
        self._call_depth = call_depth()  # the brainx call this trace belongs to

    def read_value(self, state) -> Any:
        if self._check_read is not None:
            self._check_read()
        return self._read_here(state)

    def outer_value(self, state) -> Any:
        parent = self._parent
        if parent is not None and parent.is_transform:  # this trace lifts it: not a capture there
            return parent._read_here(state)
        return super().outer_value(state)

    def _read_here(self, state) -> Any:
        if state in self._created:
            return state._checked_value()
        self._touched[state] = None
        self._read[state] = None
        value = self.overlay.get(state, _MISSING)
        if value is _MISSING:
            value = self.overlay[state] = self._lift(state, self.outer_value(state))
        return value

    def write_value(self, state, value) -> None:
        if state in self._created:
            state._value = value
            return
        if self._check_write is not None:
            self._check_write(state, value)
        self._lend_if_nested(state)
        self._touched[state] = None
        self._written[state] = None
        self.overlay[state] = value

    def mark_written(self, state) -> None:
        if state not in self._created:
            self.write_value(state, visible_value(self, state))

    def _put_back(self, state, value) -> None:
        self._lend_if_nested(state)
        self.overlay[state] = value

    def _lend_if_nested(self, state) -> None:
        if call_depth() > self._call_depth:
            # written by the machinery of a brainx call nested here whose own trace has ended
            # (transform.grad tracing a custom_vjp forward rule): taken back at that call's
            # end if it holds a tracer of a trace that ended by then (brainx.state.lending)
            lend_in_scope(self, state, self.overlay.get(state, _MISSING), state in self._written)

    def give_back(self, state, before: Any, was_written: bool) -> None:
        """Undo a write (:func:`~brainx.state.lending.lend_in_scope`): ``before`` back."""
        if before is _MISSING:  # not read here before: read it now, as the trace would have
            self._read[state] = None
            self.overlay[state] = self._lift(state, self.outer_value(state))
        else:
            self.overlay[state] = before
        if not was_written:
            self._written.pop(state, None)

    def _close(self) -> None:
        super()._close()
        _expire_traced_states(self._created, self.name)

    def __repr__(self) -> str:
        return f"TransformScope({self.name!r})"


def _expire_traced_states(created, where: Optional[str]) -> None:
    for state in created:
        state._expire_if_traced(where)


class StateCatcher:
    """The states created while a :func:`catch_new_states` block was open.

    Indexable and iterable; ``get_by_tag`` filters by tag. With ``state_tag``,
    every caught state gets that tag.
    """

    def __init__(self, tag: Optional[str] = None, state_to_exclude: Any = None):
        self.tag = tag
        self._exclude = state_to_exclude
        self._states: List[Any] = []

    def append(self, state) -> None:
        if self._exclude is not None and _excluded(self._exclude, state):
            return
        if any(s is state for s in self._states):
            return
        self._states.append(state)
        if self.tag is not None:
            state.add_tag(self.tag)

    def __getitem__(self, index):
        return self._states[index]

    def __contains__(self, state) -> bool:
        return any(s is state for s in self._states)

    def get_by_tag(self, tag: str) -> List[Any]:
        """The caught states whose tags include ``tag``."""
        return [s for s in self._states if s.tag is not None and tag in s.tag]

    def remove(self, state) -> None:
        self._states = [s for s in self._states if s is not state]

    def clear(self) -> None:
        self._states.clear()

    @property
    def states(self) -> Tuple[Any, ...]:
        return tuple(self._states)

    def get_states(self) -> Tuple[Any, ...]:
        return tuple(self._states)

    def get_state_values(self) -> List[Any]:
        return [s.value for s in self._states]

    @property
    def values(self) -> List[Any]:
        """The caught states' values."""
        return self.get_state_values()

    def decrease_stack_level(self) -> None:
        """Lower every caught state's :attr:`~brainx.State.stack_level` by one (not below 0)."""
        for state in self._states:
            state.decrease_stack_level()

    def __len__(self) -> int:
        return len(self._states)

    def __iter__(self):
        return iter(self._states)

    def __enter__(self) -> "StateCatcher":
        _THREAD.catchers.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _THREAD.catchers.remove(self)


class NewStateCatcher(StateCatcher):
    """Brainstate's catcher: :class:`StateCatcher` whose ``get_states()`` is a list.

    Examples
    --------
    >>> import brainx
    >>> from brainx.state import NewStateCatcher
    >>> catcher = NewStateCatcher(state_tag="new")
    >>> s = brainx.State(1.0)
    >>> catcher.append(s)
    >>> catcher.get_states() == [s], s.tag
    (True, {'new'})
    """

    def __init__(self, state_tag: Optional[str] = None, state_to_exclude: Any = None):
        super().__init__(state_tag, state_to_exclude)

    def get_states(self) -> List[Any]:  # type: ignore[override]
        return list(self._states)


def _excluded(spec: Any, state) -> bool:
    """``state_to_exclude``: a State type (or tuple of types), a predicate, or states."""
    if isinstance(spec, type) or (isinstance(spec, tuple) and all(isinstance(t, type)
                                                                   for t in spec)):
        return isinstance(state, spec)
    if callable(spec):
        try:
            return bool(spec((), state))
        except TypeError:
            return bool(spec(state))
    return any(s is state for s in spec)


def catch_new_states(state_tag: Optional[str] = None, state_to_exclude: Any = None,
                     *, tag: Optional[str] = None) -> StateCatcher:
    """Collect the states created inside a ``with`` block.

    ``state_tag`` tags every caught state; ``state_to_exclude`` (a State type,
    a predicate ``(path, state) -> bool`` or a collection of states) leaves
    some out.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> with brainx.catch_new_states() as catcher:
    ...     a = brainx.ShortTermState(jnp.zeros(3))
    >>> catcher.get_states() == (a,)
    True
    """
    return StateCatcher(state_tag if tag is None else tag, state_to_exclude)


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
