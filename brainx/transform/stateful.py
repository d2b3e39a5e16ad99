"""The one core under every stateful transform.

A :class:`StatefulFunction` wraps a user function that reads and writes
:class:`~brainx.State` objects. For each call signature (its static arguments)
it *discovers* the states the function touches, by tracing it once under
``jax.eval_shape`` inside a :class:`~brainx.StateTraceStack`, and it builds the
*pure* function a JAX transform can take::

    pure(state_values, *dynamic_args, **dynamic_kwargs) -> (out, written_values)

Every transform is then three steps: read the state values, run the JAX
transform on ``pure``, write the returned values back
(:func:`read_state_values`, :func:`write_state_values`).

While ``pure`` is traced it also checks that the function touched no state
the discovery did not see (a closure changed, a state was replaced). If it did,
it raises :class:`RetraceNeeded`, and :meth:`StatefulFunction.call` discovers
again and retries. So a cached discovery can be stale only for as long as JAX
itself reuses a cached trace, which is exactly ``jax.jit``'s own contract.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Hashable, Optional, Sequence, Tuple

import jax
import numpy as np
from jax.core import Tracer

from brainx.errors import TracerLeakError
from brainx.lanes import jax_is_tracing
from brainx.state.state import State, check_no_tracer, creation_epoch
from brainx.state.trace import _THREAD, transform_scope

__all__ = [
    "StatefulFunction", "StateSignature", "RetraceNeeded",
    "read_state_values", "write_state_values", "run_with_rediscovery",
]


class RetraceNeeded(Exception):
    """Raised while tracing ``pure`` when the function touched states its discovery missed.

    ``owner`` is the :class:`StatefulFunction` whose signature is stale; only
    it handles the exception, so an inner transform's stale cache never makes
    an outer one rediscover.
    """

    def __init__(self, owner: "StatefulFunction", states: Sequence[State]):
        super().__init__(owner, states)
        self.owner = owner
        self.states = tuple(states)


@dataclass(frozen=True)
class StateSignature:
    """The external states one call signature of a function touches.

    ``states`` lists every state read or written, in first-touch order;
    ``written`` marks the ones written. Only written states become outputs of
    the pure function; the others are inputs only.
    """

    states: Tuple[State, ...]
    written: Tuple[bool, ...]
    read: Tuple[bool, ...]
    epoch: int = 0
    index: Dict[State, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        self.index.update({s: i for i, s in enumerate(self.states)})

    @classmethod
    def from_scope(cls, scope, epoch: int = 0) -> "StateSignature":
        """The signature recorded by a discovery scope (a :class:`~brainx.StateTraceStack`)."""
        states = scope.states
        return cls(states=states, written=tuple(scope.was_written(s) for s in states),
                   read=tuple(s in scope._read for s in states), epoch=epoch)

    @property
    def write_states(self) -> Tuple[State, ...]:
        return tuple(s for s, w in zip(self.states, self.written) if w)

    @property
    def read_only_states(self) -> Tuple[State, ...]:
        return tuple(s for s, w in zip(self.states, self.written) if not w)

    @property
    def read_states(self) -> Tuple[State, ...]:
        return tuple(s for s, r in zip(self.states, self.read) if r)

    @property
    def write_indices(self) -> Tuple[int, ...]:
        return tuple(i for i, w in enumerate(self.written) if w)


def run_with_rediscovery(run: Callable[[Any], Any], sig: Any, rediscover: Callable[[], Any],
                         owns: Callable[[Any], bool]) -> Any:
    """``run(sig)``; if its trace finds ``sig`` stale, ``run(rediscover())`` once.

    Only a :class:`RetraceNeeded` whose owner ``owns`` accepts is handled here;
    an inner transform's is left to that transform. A second stale trace means
    the function touches different states each time it is traced: an error.
    """
    try:
        return run(sig)
    except RetraceNeeded as e:
        if not owns(e.owner):
            raise
    try:
        return run(rediscover())
    except RetraceNeeded as e:
        if not owns(e.owner):
            raise
        raise RuntimeError(
            f"{e.owner.name} touched different states on two traces with the same "
            f"arguments ({list(e.states)!r}). A function under a brainx transform must "
            "touch the same states every time it is traced.") from None


def read_state_values(states: Sequence[State]) -> list:
    """The current values of ``states``, reported as reads to the enclosing trace."""
    frames = _THREAD.frames
    if frames:
        top = frames[-1]
        for s in states:
            top.record_read(s)
    return [s._value for s in states]


def write_state_values(states: Sequence[State], values: Sequence[Any]) -> None:
    """Write ``values`` into ``states`` all at once, or not at all.

    Outside every brainx transform a tracer among the values means a raw JAX
    transform is tracing us: that is refused before any state changes.
    """
    if not _THREAD.depth and jax_is_tracing() and _holds_tracer(values):
        for s, v in zip(states, values):
            check_no_tracer(s, v)
        raise TracerLeakError("a JAX tracer would be stored in a state")  # pragma: no cover
    frames = _THREAD.frames
    if frames:
        top = frames[-1]
        for s in states:
            top.record_write(s)
    for s, v in zip(states, values):
        s._value = v


def _holds_tracer(values: Sequence[Any]) -> bool:
    return any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves(values))


def _is_array_like(x: Any) -> bool:
    # ShapeDtypeStruct: an abstract argument (a loop discovers its step with the type of one
    # slice of xs, which may have no slice at all).
    return isinstance(x, (jax.Array, np.ndarray, np.generic, int, float, complex, bool,
                          jax.ShapeDtypeStruct)) or hasattr(x, "__jax_array__")


def normalize_argnums(fun: Callable, argnums, what: str = "static_argnums") -> Tuple[int, ...]:
    """Sorted non-negative positional indices; negative ones resolved against ``fun``'s signature."""
    if argnums is None:
        return ()
    if isinstance(argnums, int):
        argnums = (argnums,)
    argnums = tuple(argnums)
    for i in argnums:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"{what} must be ints, got {i!r}.")
    if any(i < 0 for i in argnums):
        n = _fixed_positional_count(fun)
        if n is None:
            raise ValueError(
                f"{what}={argnums} has a negative index, which is ambiguous for "
                f"{_name(fun)}: it takes *args or has no inspectable signature. Use "
                "non-negative indices.")
        resolved = []
        for i in argnums:
            j = i + n if i < 0 else i
            if j < 0:
                raise ValueError(f"{what}={argnums}: index {i} is out of range for "
                                 f"{_name(fun)}, which takes {n} positional arguments.")
            resolved.append(j)
        argnums = tuple(resolved)
    n = _fixed_positional_count(fun)
    if n is not None:
        for i in argnums:
            if i >= n:
                raise ValueError(f"{what}={argnums}: index {i} is out of range for "
                                 f"{_name(fun)}, which takes {n} positional arguments.")
    return tuple(sorted(set(argnums)))


def _infer_static(fun: Callable, argnums: Tuple[int, ...], argnames: Tuple[str, ...]):
    """Complete each list from the other through ``fun``'s signature, as ``jax.jit`` does.

    So a static argument may be passed by position or by keyword.
    """
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return argnums, argnames
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = list(argnames)
    for i in argnums:
        if i < len(positional) and positional[i].kind is positional[i].POSITIONAL_OR_KEYWORD:
            if positional[i].name not in names:
                names.append(positional[i].name)
    nums = set(argnums)
    for i, p in enumerate(positional):
        if p.name in argnames and p.kind is p.POSITIONAL_OR_KEYWORD:
            nums.add(i)
    return tuple(sorted(nums)), tuple(names)


def _fixed_positional_count(fun: Callable) -> Optional[int]:
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return None
    n = 0
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n


def _name(fun: Callable) -> str:
    return getattr(fun, "__qualname__", None) or getattr(fun, "__name__", None) or repr(fun)


class StatefulFunction:
    """A function over states, turned into a pure function of explicit state values.

    Parameters
    ----------
    fun : callable
        The function. It may read and write any state it can reach (closure,
        attribute, container).
    static_argnums, static_argnames : int or sequence
        Arguments that are Python values: they are part of the cache key and
        are not passed through JAX.
    name : str, optional
        The transform's name, used in error messages.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w, h = brainx.ParamState(jnp.ones(3)), brainx.HiddenState(jnp.zeros(3))
    >>> def step(x):
    ...     h.value = h.value + w.value * x
    ...     return h.value.sum()
    >>> sf = brainx.transform.StatefulFunction(step)
    >>> sig = sf.signature((2.0,), {})
    >>> sig.states == (h, w), sig.written
    (True, (True, False))
    """

    def __init__(self, fun: Callable, static_argnums=(), static_argnames=(),
                 name: Optional[str] = None, traced_argnums: Optional[Sequence[int]] = None):
        if not callable(fun):
            raise TypeError(f"Expected a callable, got {fun!r}.")
        self.fun = fun
        self.name = name or _name(fun)
        self.traced_argnums = None if traced_argnums is None else tuple(traced_argnums)
        static_argnums = normalize_argnums(fun, static_argnums)
        if isinstance(static_argnames, str):
            static_argnames = (static_argnames,)
        self.static_argnums, self.static_argnames = _infer_static(
            fun, static_argnums, tuple(static_argnames or ()))
        self._has_names = _fixed_positional_count(fun) is not None
        self._cache: Dict[Hashable, StateSignature] = {}

    # -- arguments ---------------------------------------------------------
    def split_args(self, args: tuple, kwargs: dict):
        """``(key, dyn_args, dyn_kwargs)``: the hashable static part and the rest."""
        if not self.static_argnums and not self.static_argnames:
            return (), args, kwargs
        static_pos = []
        dyn_args = []
        nums = self.static_argnums
        if nums and nums[-1] >= len(args) and not self._has_names:
            missing = [i for i in nums if i >= len(args)]
            raise ValueError(
                f"{self.name} has static_argnums={nums} but was called with only {len(args)} "
                f"positional arguments; pass argument(s) {missing} positionally, or use "
                "static_argnames for keyword arguments.")
        for i, a in enumerate(args):
            if i in nums:
                _check_hashable(a, f"positional argument {i}", self.name)
                static_pos.append((i, type(a), a))
            else:
                dyn_args.append(a)
        static_kw = []
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self.static_argnames:
                _check_hashable(v, f"keyword argument {k!r}", self.name)
                static_kw.append((k, type(v), v))
            else:
                dyn_kwargs[k] = v
        # The type is part of the key: 1, 1.0 and True are equal but not interchangeable.
        static_kw.sort(key=lambda item: item[0])
        return (tuple(static_pos), tuple(static_kw)), tuple(dyn_args), dyn_kwargs

    def merge_args(self, key, dyn_args: tuple, dyn_kwargs: dict):
        """Inverse of :meth:`split_args`."""
        if key == ():
            return dyn_args, dyn_kwargs
        static_pos, static_kw = key
        args = list(dyn_args)
        for i, _, a in static_pos:
            args.insert(i, a)
        kwargs = dict(dyn_kwargs)
        kwargs.update((k, v) for k, _, v in static_kw)
        return tuple(args), kwargs

    # -- discovery -----------------------------------------------------------
    def signature(self, args: tuple, kwargs: dict) -> StateSignature:
        """The states this call touches (cached per static key)."""
        key, dyn_args, dyn_kwargs = self.split_args(args, kwargs)
        return self.lookup(key, dyn_args, dyn_kwargs)

    def lookup(self, key, dyn_args: tuple, dyn_kwargs: dict) -> StateSignature:
        """The cached signature for ``key``, discovered first if missing or stale."""
        sig = self._cache.get(key)
        if sig is None:
            sig = self.discover(key, dyn_args, dyn_kwargs)
        return sig

    def discover(self, key, dyn_args: tuple, dyn_kwargs: dict) -> StateSignature:
        """Trace the function once, abstractly, and record the states it touches."""
        epoch = creation_epoch()
        scope = transform_scope(self.name)
        leaves, tree = jax.tree.flatten((dyn_args, dyn_kwargs))
        is_array = self._traced_leaves(dyn_args, leaves)

        def traced(*arrays):
            it = iter(arrays)
            full = [next(it) if a else leaf for leaf, a in zip(leaves, is_array)]
            args, kwargs = self.merge_args(key, *jax.tree.unflatten(tree, full))
            with scope:
                return self.fun(*args, **kwargs)

        jax.eval_shape(traced, *[leaf for leaf, a in zip(leaves, is_array) if a])
        sig = StateSignature.from_scope(scope, epoch)
        self._cache[key] = sig
        return sig

    def _traced_leaves(self, dyn_args: tuple, leaves: list) -> list:
        """Which leaves discovery traces abstractly; the others ride along as they are.

        By default every array-like leaf is traced, as under ``jax.jit``; other
        Python objects (a module passed to a function that ``grad`` closes over,
        say) are passed through. With ``traced_argnums`` (``grad`` and friends:
        the differentiated arguments) only those arguments are traced, so the
        function may branch on the others in Python, as under ``jax.grad``.
        """
        if self.traced_argnums is None:
            return [_is_array_like(leaf) for leaf in leaves]
        n = len(dyn_args)
        traced = {i + n if i < 0 else i for i in self.traced_argnums}
        mask = []
        for i, arg in enumerate(dyn_args):
            mask += [i in traced and _is_array_like(leaf) for leaf in jax.tree.leaves(arg)]
        return mask + [False] * (len(leaves) - len(mask))

    def clear_cache(self) -> None:
        self._cache.clear()

    # -- the pure function ----------------------------------------------------
    def pure(self, sig: StateSignature, key) -> Callable:
        """``pure(state_values, *dyn_args, **dyn_kwargs) -> (out, written_values)``.

        A fresh closure on every call, so that JAX's own trace caches keyed on
        the function never return a trace of an older closure.
        """
        states = sig.states
        write_idx = sig.write_indices

        def pure(state_values, *dyn_args, **dyn_kwargs):
            args, kwargs = self.merge_args(key, dyn_args, dyn_kwargs)
            scope = transform_scope(self.name)
            with scope:
                for s, v in zip(states, state_values):
                    scope.swap_in(s, v)
                out = self.fun(*args, **kwargs)
                new_values = [states[i]._value for i in write_idx]
            unknown = [s for s in scope.states if s not in sig.index]
            unknown += [s for s in scope.get_write_states()
                        if s in sig.index and not sig.written[sig.index[s]]]
            if unknown:
                raise RetraceNeeded(self, unknown)
            return out, new_values

        pure.__name__ = f"pure_{getattr(self.fun, '__name__', 'fun')}"
        return pure

    def call(self, run: Callable[[StateSignature, Any, tuple, dict], Any], args: tuple,
             kwargs: dict):
        """``run(sig, key, dyn_args, dyn_kwargs)`` with a signature, retrying once if stale."""
        key, dyn_args, dyn_kwargs = self.split_args(args, kwargs)
        return run_with_rediscovery(lambda sig: run(sig, key, dyn_args, dyn_kwargs),
                                    self.lookup(key, dyn_args, dyn_kwargs),
                                    lambda: self.discover(key, dyn_args, dyn_kwargs),
                                    lambda owner: owner is self)

    # -- inspection -----------------------------------------------------------
    def make_jaxpr(self, *args, **kwargs):
        """``(closed_jaxpr, states)``: the jaxpr with state values as explicit inputs/outputs.

        The jaxpr's inputs are the leaves of ``[s.value for s in states]``
        followed by the dynamic arguments; its outputs are the leaves of the
        function's output followed by the new values of the written states.
        """
        def run(sig, key, dyn_args, dyn_kwargs):
            values = [s._value for s in sig.states]
            jaxpr = jax.make_jaxpr(self.pure(sig, key))(values, *dyn_args, **dyn_kwargs)
            return jaxpr, sig.states

        return self.call(run, args, kwargs)

    def get_states(self, *args, **kwargs) -> Tuple[State, ...]:
        return self.signature(args, kwargs).states

    def get_read_states(self, *args, **kwargs) -> Tuple[State, ...]:
        return self.signature(args, kwargs).read_states

    def get_write_states(self, *args, **kwargs) -> Tuple[State, ...]:
        return self.signature(args, kwargs).write_states

    def __repr__(self) -> str:
        return f"StatefulFunction({self.name})"


def _check_hashable(value: Any, what: str, name: str) -> None:
    try:
        hash(value)
    except TypeError:
        raise ValueError(
            f"Static {what} of {name} must be hashable, got a {type(value).__name__}: "
            f"{value!r}. Pass a hashable value (a tuple instead of a list, say), or make the "
            "argument dynamic.") from None
