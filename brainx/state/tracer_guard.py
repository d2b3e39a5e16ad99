"""Which JAX tracers a state may hold, outside the brainx transforms.

Inside a brainx transform a state's traced value lives in the transform's
scope and is written back as a real value at the end; outside every brainx
transform a state holds real values. A tracer written there comes from a raw
JAX transform (``jax.jit``, ``jax.grad``, ...) tracing code that writes a
state from outside it: the tracer dies with JAX's trace and the state would
be left holding it, so :func:`check_no_tracer` refuses it
(:class:`~brainx.TracerLeakError`) and the state keeps its value.

Two exceptions:

- A state *created* inside a raw JAX transform belongs to that trace (the one
  its first value's tracers come from, else the innermost one running).
  ``treefy_merge`` inside ``jax.jit`` or ``jax.grad`` (the functional pattern
  of brainstate and flax.nnx) builds such states; they may take that trace's
  tracers, and no other's (an inner ``jax.grad``'s would escape it).
- A state may be *lent* to a raw trace that is still running: code traced by
  ``jax.custom_vjp``'s forward rule or a raw ``lax.scan`` body may write a
  state, read it back, and put the old value back (``restore_value``) before
  its trace ends, as braintrace does. brainx remembers the value from before
  the first such write. If the state is read after that trace has ended and
  still holds its tracer, brainx puts that value back and raises
  :class:`~brainx.TracerLeakError`: no state keeps a dead tracer.

Examples
--------
>>> import jax, jax.numpy as jnp, brainx
>>> w = brainx.ParamState(jnp.ones(2), name="w")
>>> @jax.jit
... def scaled_sum(x):
...     before = w.value
...     w.value = before * x          # lent to jax.jit's trace ...
...     out = w.value.sum()
...     w.restore_value(before)       # ... and given back before it ends
...     return out
>>> float(scaled_sum(3.0)), w.value.tolist()
(6.0, [1.0, 1.0])
"""

from __future__ import annotations

from typing import Any, Optional

import jax
from jax.core import Tracer

from brainx.errors import StateTypeError, TracerLeakError
from brainx._jax.traces import alive_trace_ids, current_trace, jax_is_tracing
from brainx.state.hookable import HookableState
from brainx.state.known_paths import describe_state
from brainx.state.lending import LENT, lend as _lend, raw_write_refused
from brainx.state.values import _Expired

__all__ = ["check_no_tracer", "expire_if_traced"]

def _check_not_state(value: Any, target: Optional[HookableState]) -> None:
    if isinstance(value, HookableState):  # a State (State derives from HookableState)
        where = "a new State" if target is None else repr(target)
        raise StateTypeError(
            f"Cannot store {value!r} inside {where}: a State cannot hold another State. "
            "Assign its value instead: `target.value = source.value`.")


# A state created inside a raw JAX transform (its first value holds that trace's tracers:
# `treefy_merge` inside `jax.jit`/`jax.grad`, the functional pattern) belongs to that trace;
# it may take that trace's tracers, and no other's. Kept out of copies and snapshots.
_BORN_IN = "__brainx_born_in"


def admit_first_value(state: HookableState, value: Any) -> None:
    """:func:`check_no_tracer` for a state's first value, outside every brainx transform.

    Made inside a raw JAX transform, the state belongs to that trace: the one
    its value's tracers come from, else the innermost one running.
    """
    leaves = jax.tree.leaves(value)
    traces = {id(leaf._trace): leaf._trace for leaf in leaves if isinstance(leaf, Tracer)}
    if len(traces) == 1:       # the trace its value comes from
        state.__dict__[_BORN_IN] = next(iter(traces.values()))
    elif not traces and jax_is_tracing():   # a constant value, made inside a raw transform
        state.__dict__[_BORN_IN] = current_trace()
    _check_leaves(state, leaves)


def check_no_tracer(state: HookableState, value: Any, calls: Optional[int] = None) -> None:
    """Refuse a value holding a JAX tracer when no brainx transform is tracing.

    The tracers of the raw JAX trace a state was created in are accepted: such a
    state lives in that trace (it was built there, by ``treefy_merge`` say).
    ``calls``: the write is one brainstate refuses (``state.value = ...``: 0;
    the write-back of a brainx call's results: 1, that call itself), and
    :func:`~brainx.state.lending.set_raw_write_policy` ``("raise")`` refuses it
    when no more than ``calls`` brainx calls run. ``None``: never (``restore_value``).
    """
    _check_leaves(state, jax.tree.leaves(value), calls)


def _check_leaves(state: HookableState, leaves: list, calls: Optional[int] = None) -> None:
    foreign = []
    born_in = state.__dict__.get(_BORN_IN, _NOWHERE)
    for leaf in leaves:
        if isinstance(leaf, Tracer):
            if leaf._trace is not born_in:
                foreign.append(leaf)
        elif isinstance(leaf, HookableState):
            _check_not_state(leaf, state)
    if not foreign:
        LENT.pop(id(state), None)    # a real value again: nothing to give back
        return
    alive = alive_trace_ids()
    if any(id(t._trace) not in alive for t in foreign):
        raise TracerLeakError(
            f"{describe_state(state)} was written with a JAX tracer outside any brainx transform, from a JAX "
            "trace that is not running here. A raw JAX transform (jax.jit, jax.grad, jax.vmap, "
            "jax.lax.scan, ...) traced a function that writes this state; use "
            "brainx.transform.jit / grad / vmap / scan (or checkpoint) instead, which thread "
            "the state through the trace and write it back. The state keeps its previous value.")
    if calls is not None and born_in is _NOWHERE and raw_write_refused(calls):
        # (a state made inside a raw transform lives in it: brainstate lets it take tracers)
        raise TracerLeakError(
            f"{describe_state(state)} would hold a tracer of a raw JAX transform (jax.jit, jax.vmap, "
            "jax.grad, ...) running outside every brainx transform: assigned by code it traces, "
            "or written back by a brainx transform called inside it. brainstate's rule refuses "
            "that (set by brainx.compat.install_as_brainstate; brainx's own rule lends the "
            "state to that trace, see brainx.state.lending.set_raw_write_policy). Call the "
            "function through brainx.transform.jit / vmap / grad, which thread the state "
            "through the trace, or use restore_value to put a value back. The state keeps its "
            "previous value.")
    _lend(state)


_NOWHERE = object()


def expire_if_traced(state: HookableState, where: Optional[str]) -> None:
    if any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves(state._value)):
        state._value = _Expired(where)
