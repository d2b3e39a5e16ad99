"""Reading and writing state values around a transform: all at once, through the scopes.

A transform reads the values of the states its trace found before it runs
(inside an enclosing transform, that lifts them into the enclosing trace) and
writes the new values of the written states afterwards, all of them or none.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
from jax.core import Tracer

from brainx._jax.traces import jax_is_tracing
from brainx.state.state import State, check_no_tracer
from brainx.state.trace import _THREAD
from brainx.transform.core.state_values import StaticLeaves, _as_array, as_input, is_array_leaf

__all__ = ["read_state_values", "write_state_values", "peek_state_values"]


def read_state_values(states: Sequence[State]) -> list:
    """The values of ``states`` visible here, reported as reads to the enclosing scope.

    A value with leaves JAX cannot trace comes wrapped in :class:`StaticLeaves`.
    """
    frames = _THREAD.frames
    if frames:
        top = frames[-1]
        values = [top.read_value(s) for s in states]
    else:
        values = [s._checked_value() for s in states]
    return [v if _plain(v) else as_input(v) for v in values]


def _plain(value: Any) -> bool:
    return isinstance(value, (jax.Array, Tracer))


def write_state_values(states: Sequence[State], values: Sequence[Any]) -> None:
    """Write ``values`` into ``states`` all at once, or not at all.

    Outside every brainx transform a tracer among the values means a raw JAX
    transform is tracing us: that is refused before any state changes.
    """
    values = [v.tree if type(v) is StaticLeaves else v if isinstance(v, (jax.Array, Tracer))
              else jax.tree.map(_as_jax_leaf, v) for v in values]
    frames = _THREAD.frames
    if frames:
        top = frames[-1]
        for s, v in zip(states, values):
            top.write_value(s, v)
        return
    if jax_is_tracing() and _holds_tracer(values):
        for s, v in zip(states, values):
            # refuses, unless s was created in the trace the tracer is of (calls=1: this
            # write-back is brainstate's to refuse when its own call is the only one running)
            check_no_tracer(s, v, calls=1)
    for s, v in zip(states, values):
        s._value = v


def _holds_tracer(values: Sequence[Any]) -> bool:
    return any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves(values))


def _as_jax_leaf(x: Any) -> Any:
    """A value JAX handed back as a NumPy value or a typed literal, as a JAX array."""
    if isinstance(x, (jax.Array, Tracer)) or not is_array_leaf(x) or type(x) in (
            int, float, bool, complex):
        return x
    return _as_array(x, jax.typeof(x))


def peek_state_values(states: Sequence[State]) -> list:
    """The values of ``states`` visible here (for inspection: ``make_jaxpr``, ``eval_shape``).

    Inside a scope this reads through it, so the reads are recorded as any read is.
    """
    frames = _THREAD.frames
    if not frames:
        return [as_input(s._checked_value()) for s in states]
    return [as_input(frames[-1].read_value(s)) for s in states]
