"""`State`: a named, mutable container for a pytree of arrays."""

from __future__ import annotations

import copy as _copy
from typing import Any, Callable, Iterator, Optional, Tuple

import jax
import numpy as np
from jax.extend import source_info_util

from brainx.errors import ExpiredStateError, StateTypeError
from brainx.pretty_repr.layout import pretty_str, render
from brainx.state.hook_manager import watch_hook_activity, watch_hook_changes
from brainx.state.hookable import (
    HookableState, fire_init, fire_read, fire_restore, fire_write_after, fire_write_before,
    has_hooks_for,
)
from brainx.state.lending import LENT, check_lent
from brainx.state.trace import _THREAD, _notify_created, visible_value
from brainx.util.state_like import StateLike
from brainx.state.tracer_guard import (
    _check_not_state, admit_first_value, check_no_tracer, expire_if_traced,
)
from brainx.state.subclassing import ValueProtocol, bind as bind_value_protocol
from brainx.state.state_repr import state_pretty_items
from brainx.state.snapshots import TreefyState
from brainx.state.value_checks import _CHECKS, _check_same_structure, _check_same_tree
from brainx.state.values import (
    NO_UNIT_TYPES, _ARRAY_TYPES, _Expired, check_unit_kept, describe_value,
)

__all__ = [
    "State", "ShortTermState", "LongTermState", "ParamState", "HiddenState", "BatchState",
    "DelayState", "NonBatchState", "StateMetadata", "maybe_state",
    "structure_epoch", "structure_changed",
]

# Bumped when something that can change which states a function reaches has
# changed: a State attribute of a `brainx.nn.Module` was assigned or deleted.
# `transform.jit` keeps the states it found per cache entry, with this epoch,
# and looks again when it moved. (A state it found that is garbage collected
# marks that entry stale by itself: see `transform.jit`.)
_EPOCH = [0]
_MISSING = object()

# True while any hook is registered, on any state or globally. ``State.value``
# tests it and nothing else about hooks: a program with no hook pays one test.
_HOOKED = False


def _hooks_changed(active: bool) -> None:
    global _HOOKED
    _HOOKED = active


watch_hook_activity(_hooks_changed)


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


# A hook registered, removed, enabled or disabled changes what a trace of a function
# touching its state computes: every compiled function traces again on its next call.
watch_hook_changes(structure_changed)


class State(HookableState, ValueProtocol):
    """A mutable value that the stateful transforms thread through JAX.

    ``State.value`` may hold any pytree of arrays, brainunit Quantities
    included. Reads and writes inside a transform are recorded, so the
    transform can turn the state into an explicit input and output of the
    pure function it hands to JAX, and write the new value back afterwards.
    Hooks (``register_hook``, :func:`~brainx.register_state_hook`) run on reads,
    writes, restores and creation: see the :doc:`state hooks guide </state-hooks>`.

    Parameters
    ----------
    value : pytree or State
        The initial value (a State: its value).
    name : str, optional
        Shown in ``repr`` and in error messages.
    **metadata
        Kept as attributes of the state. ``tag`` (a string or a set of
        strings) is kept as a set, for :meth:`StateCatcher.get_by_tag` and
        filters.

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

    # No __slots__: a class may derive from State and from a class with slots of its own
    # (brainpy's ``Variable(State, Array)``, where ``Array.__slots__ = ("_value",)``).

    def __init__(self, value: Any, name: Optional[str] = None, **metadata: Any):
        if isinstance(value, StateMetadata):
            metadata = {**value.metadata, **metadata}
            value = value.raw_value
        if isinstance(value, State):
            value = value.value
        self._value = value
        self.name = name
        tag = metadata.pop("tag", None)
        self.tag = None if tag is None else ({tag} if isinstance(tag, str) else set(tag))
        if metadata:
            self.__dict__.update(metadata)
        self._level = _THREAD.depth
        self._source = _source_info()
        if self._level == 0:  # outside every transform
            admit_first_value(self, value)
        if _HOOKED:
            fire_init(self, value, {"name": name, "_name": name, "tag": self.tag, **metadata})
        _notify_created(self)

    @property
    def value(self) -> Any:
        """The current value; inside a transform, the value the trace sees (recorded as a read)."""
        if _HOOKED:
            return self._read_with_hooks()
        frames = _THREAD.frames  # the same as in _read_with_hooks: the path of every read
        if frames:
            return frames[-1].read_value(self)
        value = self._value
        if type(value) is _Expired:
            self._raise_expired(value)
        if LENT and id(self) in LENT:  # holds a raw JAX trace's tracer: is it still running?
            value = check_lent(self)
        return value

    @value.setter
    def value(self, value: Any) -> None:
        if _HOOKED:
            self._write_with_hooks(value)
            return
        _check_not_state(value, self)
        # the same as _store(value), inlined: this is the path of every write
        if _CHECKS.tree:
            _check_same_tree(self, value)
        frames = _THREAD.frames
        if frames or type(self._value) not in NO_UNIT_TYPES:
            check_unit_kept(self, value)  # a Quantity's unit is kept
        if frames:
            frames[-1].write_value(self, value)
            return
        check_no_tracer(self, value, calls=0)
        self._value = value

    def _read_with_hooks(self) -> Any:
        """The getter while hooks exist: the read, then the ``read`` hooks."""
        frames = _THREAD.frames
        if frames:
            value = frames[-1].read_value(self)
        else:
            value = self._checked_value()
        fire_read(self, value)
        return value

    def _store(self, value: Any) -> None:
        """Write ``value`` (checked not to be a State) as the setter does with no hook."""
        if _CHECKS.tree:
            _check_same_tree(self, value)
        check_unit_kept(self, value)
        frames = _THREAD.frames
        if frames:
            frames[-1].write_value(self, value)
            return
        check_no_tracer(self, value, calls=0)
        self._value = value

    def _write_with_hooks(self, value: Any) -> None:
        """The setter while hooks exist: ``write_before``, the write, ``write_after``.

        A cancelling or raising ``write_before`` hook leaves the state as it
        was; a raising ``write_after`` hook puts the old value back.
        """
        _check_not_state(value, self)
        if not has_hooks_for(self, "write_before", "write_after"):
            self._store(value)
            return
        old, put_back = self._value_before()
        value = fire_write_before(self, value, old)
        _check_not_state(value, self)
        self._store(value)
        try:
            fire_write_after(self, value, old)
        except BaseException:
            self._put_back_raw(put_back)
            raise

    def _value_before(self) -> Tuple[Any, Any]:
        """``(value seen here, what to put back)`` before a hooked write or restore."""
        frames = _THREAD.frames
        if not frames:
            raw = self._value
            return (None if type(raw) is _Expired else raw), raw
        try:
            value = visible_value(frames[-1], self)  # inside a transform: of its trace
        except ExpiredStateError:
            return None, _MISSING
        return value, value

    def _put_back_raw(self, value: Any) -> None:
        if value is _MISSING:
            return
        frames = _THREAD.frames
        if frames:
            frames[-1]._put_back(self, value)
        else:
            self._value = value

    # -- brainstate's State API -------------------------------------------------
    def restore_value(self, value: Any) -> None:
        """Set the value without recording a write (to put back a value read earlier).

        The value must have the tree structure of the current one (as in
        brainstate); runs the ``restore`` hooks, not the write hooks.
        """
        _check_not_state(value, self)
        _check_same_structure(self, value)
        hooked = _HOOKED and has_hooks_for(self, "restore")
        if hooked:
            old, put_back = self._value_before()
        frames = _THREAD.frames
        if frames:
            frames[-1]._put_back(self, value)
        else:
            check_no_tracer(self, value)
            self._value = value
        if hooked:
            try:
                fire_restore(self, value, old)
            except BaseException:
                self._put_back_raw(put_back)
                raise

    def value_call(self, func: Callable[[Any], Any]) -> Any:
        """``func`` applied to every leaf of the value."""
        return jax.tree.map(func, self.value)

    def numel(self) -> int:
        """The number of elements in the value, summed over its leaves."""
        return int(sum(np.size(leaf) for leaf in jax.tree.leaves(self.value)))

    def add_tag(self, tag: str) -> None:
        """Add ``tag`` to the state's tags."""
        self.tag = {tag} if self.tag is None else self.tag | {tag}

    @property
    def stack_level(self) -> int:
        """How many transforms were tracing (in this thread) when the state was created."""
        return self._level

    @stack_level.setter
    def stack_level(self, level: int) -> None:
        self._level = level

    def increase_stack_level(self) -> None:
        """One more level (brainstate's bookkeeping; brainx's transforms do not need it)."""
        self._level += 1

    def decrease_stack_level(self) -> None:
        """One level less, never below 0."""
        self._level = max(self._level - 1, 0)

    @property
    def source_info(self) -> Any:
        """Where the state was created (a ``jax`` source-info record: file, line, function)."""
        return self._source

    def copy(self) -> "State":
        """A new state of the same type, value and metadata."""
        new = object.__new__(type(self))
        _copy_fields(self, new)
        new._level, new._source = _THREAD.depth, _source_info()
        if _notify_created(new):
            check_no_tracer(new, new._value)
        return new

    def __deepcopy__(self, memo: dict) -> "State":
        """A deep copy (value, name, metadata); the record of where it was made is shared.

        That record holds JAX's traceback, which cannot be copied, and it says where
        the original was made, which the copy was too.
        """
        new = object.__new__(type(self))
        memo[id(self)] = new
        for key, item in self.__dict__.items():
            new.__dict__[key] = item if key == "_source" else _copy.deepcopy(item, memo)
        if "_value" not in self.__dict__:   # a subclass that keeps the value in a slot
            new._value = _copy.deepcopy(self._value, memo)
        return new

    def copy_from(self, other: "State") -> None:
        """Take ``other``'s value and metadata (a state of the same type)."""
        if type(self) is not type(other):
            raise ValueError(f"{self!r}.copy_from: expected a {type(self).__name__}, got "
                             f"{other!r}.")
        if other is self:
            return
        value = other.value
        keep = self._level, self._source
        _copy_fields(other, self, value=False)
        self._level, self._source = keep
        self.value = value

    def replace(self, value: Any = _MISSING, **metadata: Any) -> "State":
        """A copy with another value and/or other metadata (a State as ``value``: that state)."""
        if isinstance(value, State):
            if type(value) is not type(self):
                raise ValueError(f"{self!r}.replace: expected a {type(self).__name__}, got "
                                 f"{value!r}.")
            return value.replace(**metadata) if metadata else value
        new = self.copy()
        if value is not _MISSING:
            _check_not_state(value, new)
            new._put_back_raw(value)  # any structure: a new state, not a restore
        for k, v in metadata.items():
            setattr(new, "name" if k == "_name" else k, v)  # `_name`: brainstate's key
        return new

    def to_state_ref(self) -> TreefyState:
        """A snapshot of this state (type, current value, name and tag) as a JAX pytree.

        Examples
        --------
        >>> import jax, jax.numpy as jnp, brainx
        >>> w = brainx.ParamState(jnp.ones(2), name="w")
        >>> ref = jax.tree.map(lambda x: 3 * x, w.to_state_ref())
        >>> ref.name, ref.value.tolist(), w.value.tolist()
        ('w', [3.0, 3.0], [1.0, 1.0])
        >>> w.update_from_ref(ref)
        >>> w.value.tolist()
        [3.0, 3.0]
        """
        return TreefyState.from_state(self)

    def update_from_ref(self, state_ref: TreefyState) -> None:
        """Take the value and metadata (name, tag, ...) of a :class:`~brainx.TreefyState`.

        The value is written as ``state.value = ...`` would be (inside a
        transform the write is recorded); nothing changes if it is refused.
        """
        if not isinstance(state_ref, TreefyState):
            raise TypeError(f"{self!r}.update_from_ref: expected a TreefyState, got "
                            f"{describe_value(state_ref)}.")
        if not (isinstance(self, state_ref.type) or issubclass(state_ref.type, type(self))):
            raise TypeError(f"{self!r}.update_from_ref: the snapshot is of a "
                            f"{state_ref.type.__name__}, an unrelated kind of state; give it a "
                            f"snapshot of a {type(self).__name__} (or of a class it derives "
                            "from). Nothing was changed.")
        metadata = state_ref.get_metadata()
        self.value = state_ref.value
        self.name = metadata.pop("_name", self.name)
        for k, v in metadata.items():
            setattr(self, k, set(v) if k == "tag" and isinstance(v, set) else v)

    @classmethod
    def init(cls, fn: Any, in_size: Any, batch_size: Optional[int] = None,
             tag: Optional[str] = None) -> "State":
        """A state of shape ``(batch_size, *in_size)`` from an initialiser ``fn(shape)`` or a value.

        Examples
        --------
        >>> import jax.numpy as jnp, brainx
        >>> brainx.HiddenState.init(jnp.zeros, 3, batch_size=2).value.shape
        (2, 3)
        """
        size = (in_size,) if isinstance(in_size, (int, np.integer)) else tuple(in_size)
        shape = size if batch_size is None else (int(batch_size),) + size
        value = fn(shape) if callable(fn) else jax.numpy.broadcast_to(fn, shape)
        return cls(value, tag=tag)

    def check_valid_trace(self, error_msg: Callable[[], str]) -> None:
        """Raise ``TraceContextError(error_msg())`` if the transform that made this state ended."""
        if type(self._value) is _Expired:
            raise ExpiredStateError(error_msg())

    def check_if_deleted(self) -> None:
        """Raise if a leaf's device buffer was deleted (donated to a compiled call)."""
        if any(isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.is_deleted()
               for x in jax.tree.leaves(self._value)):
            raise RuntimeError(f"{self!r}: its value's buffer was deleted (donated to a compiled "
                               "function?). Give it a new value before reading it.")

    def raise_error_with_source_info(self, error: BaseException) -> None:
        """Raise ``error`` with the traceback of the line that created this state attached."""
        with source_info_util.user_context(self._source.traceback):
            raise error

    @classmethod
    def _from_snapshot(cls, value: Any, name: Optional[str], metadata: dict) -> "State":
        # TreefyState.to_state: a new state of this class without running its __init__.
        state = object.__new__(cls)
        State.__init__(state, value, name=name, **metadata)
        return state

    def _assign_checked(self, value: Any) -> None:
        """Assign outside every trace scope, refusing a tracer (the scopes call this)."""
        check_no_tracer(self, value)
        self._value = value

    def _expire_if_traced(self, where: Optional[str]) -> None:
        """Called when the transform this state was created in ends."""
        expire_if_traced(self, where)

    def _checked_value(self) -> Any:
        """The value outside every trace scope; an expired state raises."""
        value = self._value
        if type(value) is _Expired:
            self._raise_expired(value)
        if LENT and id(self) in LENT:
            return check_lent(self)
        return value

    def _raise_expired(self, value: "_Expired"):
        raise ExpiredStateError(
            f"{self!r} was created inside {value.where or 'a transform'} and its value was a "
            "JAX tracer of that trace, which has ended. Create the state outside the transform "
            "(for example in the model's __init__ or init_state()), or return its value from "
            "the transformed function.")

    def __pretty_repr__(self) -> Iterator[Any]:
        """The pretty-repr items: the value's summary, then the metadata that is set
        (see :mod:`brainx.state.state_repr`)."""
        return state_pretty_items(self)

    def __repr__(self) -> str:
        return render(self)

    __repr__._uses_pretty_repr = True  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return pretty_str(self)


def _copy_fields(source: State, target: State, value: bool = True) -> None:
    target.name = source.name
    target.__dict__.update({k: v for k, v in source.__dict__.items()
                            if not k.startswith("__brainx") and k not in ("_value", "name")})
    if isinstance(target.__dict__.get("tag"), set):  # a tag set of its own, not the source's
        target.__dict__["tag"] = set(target.__dict__["tag"])
    if value:
        target._value = source._value


def _source_info() -> Any:
    return source_info_util.current()  # jax's own record: cheap, symbolised lazily


StateLike.register(State)   # what brainx.util's mappings treat as a state


class ShortTermState(State):
    """A state that is reset between trials (the running variables of a model)."""


class LongTermState(State):
    """A state kept across trials (running averages, counters)."""


class ParamState(LongTermState):
    """A trainable parameter."""


class HiddenState(ShortTermState):
    """A model's dynamical variable (membrane potential, synaptic current, ...).

    Its value is one array (a JAX or NumPy array, a brainunit Quantity, or a
    number), not a container.
    """

    def __init__(self, value: Any, name: Optional[str] = None, **metadata: Any):
        check_array_value(type(self).__name__, value)
        super().__init__(value, name, **metadata)

    @property
    def varshape(self) -> Tuple[int, ...]:
        """The shape of the variable (of its value)."""
        return tuple(np.shape(self.value))

    @property
    def num_state(self) -> int:
        """How many variables the state holds (1; see ``HiddenGroupState``)."""
        return 1


class DelayState(ShortTermState):
    """A state holding a delay buffer."""


class NonBatchState(ShortTermState):
    """A short-term state that has no batch axis (``vmap`` leaves it unbatched when told so)."""


class BatchState(LongTermState):
    """A state holding batch-specific data."""


def check_array_value(kind: str, value: Any, what: str = "its value") -> None:
    """Refuse a value that is not one array (a container, a string, ...) for ``kind``."""
    if isinstance(value, State):
        value = value.value
    if not isinstance(value, _ARRAY_TYPES):
        raise TypeError(f"{kind}: {what} must be one array (a jax.Array, numpy.ndarray, "
                        f"brainunit Quantity or a number), got {type(value).__name__}. Stack "
                        "several variables into an array, or use HiddenTreeState for a "
                        "dictionary of them.")


bind_value_protocol(State.__dict__["value"], _check_same_tree)


class StateMetadata:
    """A value with metadata: ``State(StateMetadata(value, {"unit": "mV"}))`` keeps both.

    Examples
    --------
    >>> import brainx
    >>> s = brainx.State(brainx.state.StateMetadata(0.5, {"unit": "mV"}))
    >>> s.value, s.unit
    (0.5, 'mV')
    """

    __slots__ = ("raw_value", "metadata")

    def __init__(self, raw_value: Any, metadata: Optional[dict] = None):
        self.raw_value = raw_value
        self.metadata = dict(metadata or {})


def maybe_state(value: Any) -> Any:
    """``value.value`` for a State, ``value`` itself otherwise."""
    return value.value if isinstance(value, State) else value
