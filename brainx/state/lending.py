"""States lent to a raw JAX trace while it runs, and what happens when it has ended.

Outside brainx's trace scopes, code traced by a raw JAX transform
(``jax.custom_vjp``'s forward rule, a ``lax.scan`` body, ``jax.jit``) may
write a state with that trace's tracer, read it back and put the old value
back before the trace ends (braintrace does this). :func:`lend` records such a
state in :data:`LENT` with its value from before the first such write. The
state never keeps a tracer of a trace that has ended:

- a brainx transform call (:func:`transform_call`) puts back, at its end, the
  value of every state lent while it ran whose trace has ended, as brainstate
  restores the states a transform read (this is braintrace's pattern: a
  ``custom_vjp`` forward rule run by ``transform.grad`` leaves a parameter
  holding its tracer);
- a read of such a state (:func:`check_lent`) puts the value back too, and,
  outside every brainx transform call, raises :class:`~brainx.TracerLeakError`:
  ``jax.jit`` over a function that writes a state is a bug (the compiled
  function would not write it again), and brainstate loses that update silently.
  :func:`set_ended_write_policy` ``("restore")`` makes that read return the value
  from before the write instead, as brainstate lets it go on (braincell's solvers
  write a cell's states under ``jax.vjp``, then read them only for their shapes
  and overwrite them); :func:`brainx.compat.install_as_brainstate` sets it.

Only the thread that lent a state can tell whether the trace is still running
(JAX keeps each thread's traces apart), so the entry records that thread. A
read from another thread while it lives sees the value from before the write,
never the lending thread's tracer, and changes nothing: no value put back, no
error (that thread's trace may still be running and read its write back). The
lending thread itself (its next read, the end of its brainx call) judges the
state as above; once it has died, a read in any thread does.

Readers test ``LENT`` first: while nothing is lent, a read costs one truth test.

Examples
--------
>>> import jax, jax.numpy as jnp, brainx
>>> w = brainx.ParamState(jnp.ones(2), name="w")
>>> _ = jax.jit(lambda x: setattr(w, "value", w.value * x) or x)(3.0)
>>> try:
...     w.value
... except brainx.TracerLeakError as e:
...     print(str(e)[:39])
ParamState(f32[2], name='w') still held
>>> w.value.tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import jax
from jax.core import Tracer

from brainx.errors import TracerLeakError
from brainx._jax.traces import alive_trace_ids
from brainx.state.known_paths import describe_state

__all__ = ["LENT", "lend", "check_lent", "transform_call", "call_depth", "lend_in_scope",
           "set_ended_write_policy", "set_raw_write_policy", "raw_write_refused"]

# States lent to a raw JAX trace: ``id(state) -> (weak ref, value before, call depth, lender)``.
# The value before is the one from before the first write of a tracer; the depth is how many
# brainx transform calls were running then, and the lender a weak ref to the thread whose
# trace it is (only that thread can see whether the trace still runs).
LENT: dict = {}


class _Calls(threading.local):
    depth = 0

    def __init__(self):
        # This thread's writes into its brainx trace scopes made by a nested call's
        # machinery: ``[(depth, scope, state, value before, was written)]``.
        self.scope_lent: list = []


_CALLS = _Calls()


_POLICIES = ("error", "restore")
# What a read outside every brainx call does on finding a state written by a raw trace that
# has ended: raise TracerLeakError, or just give the value from before that write.
_ENDED_WRITE = ["error"]


def set_ended_write_policy(policy: str) -> str:
    """Choose what reading a state written by an ended raw JAX trace does; returns the old policy.

    Both policies put back the value the state had before the raw trace wrote
    it, so the state never keeps a dead tracer. ``"error"`` (brainx's default)
    then raises :class:`~brainx.TracerLeakError` when the read is outside every
    brainx transform: the write was probably meant to last (``jax.jit`` over a
    function that writes a state). ``"restore"`` returns that value, as
    brainstate goes on: libraries that write states inside ``jax.vjp`` or
    ``jax.jvp`` and overwrite them afterwards (braincell's solvers) rely on it.
    :func:`brainx.compat.install_as_brainstate` sets ``"restore"``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> from brainx.state.lending import set_ended_write_policy
    >>> w = brainx.State(jnp.ones(2))
    >>> previous = set_ended_write_policy("restore")
    >>> _ = jax.jvp(lambda x: setattr(w, "value", x) or x, (jnp.zeros(2),), (jnp.ones(2),))
    >>> w.value.tolist()                          # the value from before the raw write
    [1.0, 1.0]
    >>> set_ended_write_policy(previous)
    'restore'
    """
    return _swap_policy(_ENDED_WRITE, _POLICIES, policy, "set_ended_write_policy")


def _swap_policy(holder: list, allowed: tuple, policy: str, who: str) -> str:
    """Put ``policy`` (one of ``allowed``) in ``holder``; the one it held before."""
    if policy not in allowed:
        raise ValueError(f"{who}: policy must be one of {allowed}, got {policy!r}.")
    previous, holder[0] = holder[0], policy
    return previous


_RAW_WRITES = ("lend", "raise")
# What assigning a raw JAX trace's tracer to a state does outside every brainx call: lend the
# state to that trace (brainx's rule), or raise at the write (brainstate's rule).
_RAW_WRITE = ["lend"]


def set_raw_write_policy(policy: str) -> str:
    """Choose what assigning a raw JAX trace's tracer to a state does; returns the old policy.

    It applies to ``state.value = tracer`` while no brainx transform call runs
    (``jax.jit``, ``jax.vmap`` or ``jax.grad`` tracing a function that writes
    a state it did not create), not to ``restore_value``. ``"lend"`` (brainx's
    default) lets the state hold the tracer while that trace runs; if the
    trace ends with the state still holding it, the next read puts the value
    from before back (see :func:`set_ended_write_policy`). ``"raise"`` is
    brainstate's rule: :class:`~brainx.TracerLeakError` (a
    ``TraceContextError``) at the write, the state keeping its value; it
    points at the line of the write, where the lent form reports the next read.
    The same holds for the new values a brainx transform called inside a raw
    one writes back at its end (``jax.jit`` over ``transform.checkify(f)``).
    :func:`brainx.compat.install_as_brainstate` sets ``"raise"``. Inside a
    brainx transform call both lend, as brainstate allows inside its own.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> from brainx.state.lending import set_raw_write_policy
    >>> w = brainx.State(jnp.ones(2))
    >>> previous = set_raw_write_policy("raise")
    >>> try:
    ...     jax.jit(lambda x: setattr(w, "value", x))(jnp.zeros(2))
    ... except brainx.TraceContextError as e:
    ...     print(type(e).__name__, w.value.tolist())
    TracerLeakError [1.0, 1.0]
    >>> set_raw_write_policy(previous)
    'raise'
    """
    return _swap_policy(_RAW_WRITE, _RAW_WRITES, policy, "set_raw_write_policy")


def raw_write_refused(calls: int = 0) -> bool:
    """Whether writing a raw trace's tracer raises here (:func:`set_raw_write_policy`).

    ``calls``: how many of the running brainx calls are the writer's own (the
    write-back at the end of a call: 1).
    """
    return _RAW_WRITE[0] == "raise" and _CALLS.depth <= calls


def call_depth() -> int:
    """How many brainx transform calls are running in this thread."""
    return _CALLS.depth


def lend_in_scope(scope: Any, state: Any, before: Any, was_written: bool) -> None:
    """Record a write into ``scope`` by a nested call's machinery (see :func:`transform_call`).

    Such a write is made into a brainx trace scope after its own scope closed, by the
    machinery of a brainx call nested in it (``transform.grad`` differentiating: a
    ``custom_vjp`` forward rule it traces then writes a state). Kept per thread: the
    scope and its traces are this thread's.
    """
    _CALLS.scope_lent.append((_CALLS.depth, scope, state, before, was_written))


def _holds_dead_tracer(value: Any, alive: set) -> bool:
    return any(isinstance(x, Tracer) and id(x._trace) not in alive for x in jax.tree.leaves(value))


def _give_back_scope_writes(depth: int) -> None:
    """At the end of the call at ``depth``: undo its machinery's writes whose trace ended."""
    scope_lent = _CALLS.scope_lent
    alive = alive_trace_ids()
    keep = []
    for entry in reversed(scope_lent):
        made_at, scope, state, before, was_written = entry
        if made_at <= depth:
            keep.append(entry)
        elif _holds_dead_tracer(scope.overlay.get(state), alive):
            scope.give_back(state, before, was_written)
    scope_lent[:] = reversed(keep)


def lend(state: Any) -> None:
    """Record that ``state`` now holds a tracer of a running raw trace (keeps its value before).

    Lent already by another thread, the state passes to this one (the tracer it
    holds now is this thread's) and keeps the value from before the first write.
    """
    key = id(state)
    entry = LENT.get(key)
    thread = threading.current_thread()
    if entry is None:
        ref = weakref.ref(state, lambda _, key=key: LENT.pop(key, None))
        LENT[key] = (ref, state._value, _CALLS.depth, weakref.ref(thread))
    elif entry[3]() is not thread:
        LENT[key] = (entry[0], entry[1], _CALLS.depth, weakref.ref(thread))


def _lent_elsewhere(entry: tuple) -> bool:
    """Whether ``entry`` was lent by another thread that still runs (its trace may be alive)."""
    lender = entry[3]()
    return lender is not None and lender is not threading.current_thread() and lender.is_alive()


def _give_back_if_ended(state: Any, entry: tuple) -> bool:
    """Put back ``state``'s value from before it was lent if its trace ended; ``True`` if so.

    Judged by this thread's traces: call it in the lending thread, or once it has died.
    """
    tracers = [x for x in jax.tree.leaves(state._value) if isinstance(x, Tracer)]
    if tracers:
        alive = alive_trace_ids()
        if all(id(t._trace) in alive for t in tracers):
            return False
        state._value = entry[1]
    LENT.pop(id(state), None)
    return bool(tracers)


def check_lent(state: Any) -> Any:
    """Called on reading a lent state: has the trace it was lent to ended? The value to read.

    If it has, the state gets back its value from before it was lent; outside
    every brainx transform call :class:`~brainx.TracerLeakError` says so.
    Only the lending thread can see its traces: read from another thread while
    that one lives, the state is left as it is and the read gets the value from
    before it was lent (the tracer is not this thread's, and the trace may still
    run); once the lending thread has died, any thread judges it.
    """
    entry = LENT.get(id(state))
    if entry is None:                      # given back meanwhile (by the lending thread)
        return state._value
    if _lent_elsewhere(entry):
        return entry[1]
    if _give_back_if_ended(state, entry) and not _CALLS.depth and _ENDED_WRITE[0] == "error":
        raise TracerLeakError(
            f"{describe_state(state)} still held a tracer of a raw JAX transform that has ended (jax.jit, "
            "jax.custom_vjp, jax.lax.scan, ...): code traced by it wrote the state and did not "
            "put the earlier value back. brainx has put back the value the state had before "
            "that write. Write states through brainx.transform.jit / scan / grad, or call "
            "state.restore_value(old) before the raw transform's function returns.")
    return state._value


class _TransformCall:
    """``with transform_call():`` (a class, not a generator: it wraps every transform call)."""

    __slots__ = ()

    def __enter__(self) -> None:
        _CALLS.depth += 1

    def __exit__(self, *exc: Any) -> None:
        calls = _CALLS
        calls.depth -= 1
        if calls.scope_lent:
            _give_back_scope_writes(calls.depth)
        if LENT:  # this thread's entries only: another's depth and traces are its own
            thread = threading.current_thread()
            for entry in list(LENT.values()):
                state = entry[0]()
                if state is not None and entry[2] > calls.depth and entry[3]() is thread:
                    _give_back_if_ended(state, entry)


_TRANSFORM_CALL = _TransformCall()


def transform_call() -> _TransformCall:
    """A brainx transform call: states lent while it runs get their values back at its end."""
    return _TRANSFORM_CALL
