"""`State`: a named, mutable container for a pytree of arrays."""

from __future__ import annotations

from typing import Any, Optional

import jax
import numpy as np
from jax.core import Tracer

from brainx.errors import ExpiredStateError, StateTypeError, TracerLeakError
from brainx.state.trace import _THREAD, _notify_created

__all__ = [
    "State", "ShortTermState", "LongTermState", "ParamState", "HiddenState", "BatchState",
    "structure_epoch", "structure_changed",
]

# Bumped when something that can change which states a function reaches has
# changed: a State attribute of a `brainx.nn.Module` was assigned or deleted.
# `transform.jit` keeps the states it found per cache entry, with this epoch,
# and looks again when it moved. (A state it found that is garbage collected
# marks that entry stale by itself: see `transform.jit`.)
_EPOCH = [0]


def structure_epoch() -> int:
    """A counter that grows each time a model's structure of states may have changed."""
    return _EPOCH[0]


def structure_changed() -> None:
    """Tell every compiled function to look for its states again on its next call.

    ``brainx.nn.Module`` calls it when a State attribute is assigned or
    deleted. Call it after swapping states inside a plain object or container
    that a compiled function reads (or call the function's ``clear_cache()``).
    """
    _EPOCH[0] += 1


class _Expired:
    """Stands in for the value of a state whose tracer died with its transform."""

    __slots__ = ("where",)

    def __init__(self, where: Optional[str]):
        self.where = where


class State:
    """A mutable value that the stateful transforms thread through JAX.

    ``State.value`` may hold any pytree of arrays, brainunit Quantities
    included. Reads and writes inside a transform are recorded, so the
    transform can turn the state into an explicit input and output of the
    pure function it hands to JAX, and write the new value back afterwards.

    Parameters
    ----------
    value : pytree
        The initial value.
    name : str, optional
        Shown in ``repr`` and in error messages.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> count = brainx.State(jnp.zeros(()), name="count")
    >>> @brainx.transform.jit
    ... def tick():
    ...     count.value += 1
    >>> tick(); tick()
    >>> int(count.value)
    2
    """

    __slots__ = ("_value", "name", "__weakref__", "__dict__")

    def __init__(self, value: Any, name: Optional[str] = None):
        _check_not_state(value, None)
        self._value = value
        self.name = name
        if _notify_created(self):  # outside every transform
            check_no_tracer(self, value)

    @property
    def value(self) -> Any:
        """The current value; inside a transform, the value the trace sees (recorded as a read)."""
        frames = _THREAD.frames
        if frames:
            return frames[-1].read_value(self)
        value = self._value
        if type(value) is _Expired:
            self._raise_expired(value)
        return value

    @value.setter
    def value(self, value: Any) -> None:
        _check_not_state(value, self)
        frames = _THREAD.frames
        if frames:
            frames[-1].write_value(self, value)
            return
        check_no_tracer(self, value)
        self._value = value

    def _checked_value(self) -> Any:
        """The value outside every trace scope; an expired state raises."""
        value = self._value
        if type(value) is _Expired:
            self._raise_expired(value)
        return value

    def _raise_expired(self, value: "_Expired"):
        raise ExpiredStateError(
            f"{self!r} was created inside {value.where or 'a transform'} and its value was a "
            "JAX tracer of that trace, which has ended. Create the state outside the transform "
            "(for example in the model's __init__ or init_state()), or return its value from "
            "the transformed function.")

    def __repr__(self) -> str:
        fields = [] if self.name is None else [f"name={self.name!r}"]
        fields.append(describe_value(self._value))
        return f"{type(self).__name__}({', '.join(fields)})"


class ShortTermState(State):
    """A state that is reset between trials (the running variables of a model)."""


class LongTermState(State):
    """A state kept across trials (running averages, counters)."""


class ParamState(LongTermState):
    """A trainable parameter."""


class HiddenState(ShortTermState):
    """A model's dynamical variable (membrane potential, synaptic current, ...)."""


class BatchState(LongTermState):
    """A state holding batch-specific data."""


def _check_not_state(value: Any, target: Optional[State]) -> None:
    if isinstance(value, State):
        where = "a new State" if target is None else repr(target)
        raise StateTypeError(
            f"Cannot store {value!r} inside {where}: a State cannot hold another State. "
            "Assign its value instead: `target.value = source.value`.")


def check_no_tracer(state: State, value: Any) -> None:
    """Refuse a value holding a JAX tracer when no brainx transform is tracing."""
    for leaf in jax.tree.leaves(value):
        if isinstance(leaf, Tracer):
            raise TracerLeakError(
                f"{state!r} was written with a JAX tracer outside any brainx transform. A raw JAX "
                "transform (jax.jit, jax.grad, jax.vmap, jax.lax.scan, ...) is tracing a function "
                "that writes this state; use brainx.transform.jit / grad / vmap / scan (or "
                "checkpoint) instead, which thread the state through the trace and write it "
                "back. The state keeps its previous value.")
        if isinstance(leaf, State):
            _check_not_state(leaf, state)


def expire_if_traced(state: State, where: Optional[str]) -> None:
    if any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves(state._value)):
        state._value = _Expired(where)


def describe_value(value: Any) -> str:
    """``shape=(3,), dtype=float32`` for one array; a tree of ``f32[3]`` otherwise."""
    if type(value) is _Expired:
        return f"<expired: created inside {value.where or 'a transform'}>"
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
    return f"shape={tuple(shape)}, dtype={np.dtype(dtype).name}"


def _short_array(x: Any) -> str:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return repr(x)
    return f"{np.dtype(dtype).name}{list(np.shape(x))}"


def _unit_of(value: Any):
    try:
        import brainunit as u
    except ImportError:  # pragma: no cover - brainunit is a dependency
        return None
    if isinstance(value, u.Quantity):
        return value.unit
    return None
