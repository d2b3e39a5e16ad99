"""`jit`: ``jax.jit`` for functions that read and write states."""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple

import jax

from brainx.state.state import _EPOCH
from brainx.state.trace import _THREAD
from brainx.transform.bound import bind_to_instance
from brainx.transform.stateful import (
    RetraceNeeded, StatefulFunction, StateSignature, as_input, has_static_leaves,
    normalize_argnums, read_state_values, run_with_rediscovery, write_state_values,
)

__all__ = ["jit", "JittedFunction"]


class _Entry:
    """The compiled function of one static key, and the traces it runs.

    ``states`` is the union of the states of every trace kept here (one per
    argument type seen), ``write_states`` the states any of them writes. The
    function handed to ``jax.jit`` takes the values of all of ``states`` and
    returns new values for all of ``write_states``; it evaluates the trace
    made for the argument types ``jax.jit`` traces it with (a trace that does
    not write a state gives its value back unchanged). A type with no trace
    yet raises :class:`~brainx.transform.stateful.RetraceNeeded`: the owner
    traces the user's function for it and adds the trace here, or, if the
    trace touches states this entry does not have, builds a new entry.

    States are held weakly: when one is garbage collected (its model was
    rebuilt, a global was rebound to a new State), the entry is stale and the
    next call traces again.
    """

    __slots__ = ("plans", "index", "write_pos", "refs", "n_written", "jitted", "epoch",
                 "static", "stateful", "__weakref__")

    def __init__(self, owner: "JittedFunction", sigs: Sequence[StateSignature],
                 previous: Optional["_Entry"] = None):
        index: Dict[Any, int] = {}
        written: Dict[Any, None] = {}
        if previous is not None:  # keep its traces: the union of their states and the new ones
            old_states, old_written = previous.states, previous.write_states
            index.update((s, i) for i, s in enumerate(old_states))
            written.update((s, None) for s in old_written)
        for sig in sigs:
            for s, w in zip(sig.states, sig.written):
                index.setdefault(s, len(index))
                if w:
                    written[s] = None
        states, write_states = tuple(index), tuple(written)
        self.stateful = owner.stateful
        self.epoch = _EPOCH[0]
        this = weakref.ref(self)

        def stale(_ref):
            entry = this()
            if entry is not None:
                entry.epoch = -1

        self.refs = [weakref.ref(s, stale) for s in states]
        # By identity: positions of each state, and of each written state among the outputs.
        self.index = {id(s): i for s, i in index.items()}
        self.write_pos = {id(s): k for k, s in enumerate(write_states)}
        self.n_written = tuple(index[s] for s in write_states)
        self.plans: List[tuple] = []  # (trace, positions, write positions), newest last
        if previous is not None:
            for trace, local, own in previous.plans:
                self.plans.append((trace, tuple(index[old_states[i]] for i in local),
                                   tuple(self.write_pos[id(old_written[k])] for k in own)))
        for sig in sigs:
            self.add(sig)
        self.jitted = jax.jit(self._pure(), donate_argnums=owner._donate, **owner._jit_kwargs)

    @property
    def states(self) -> Tuple[Any, ...]:
        return tuple(r() for r in self.refs)

    @property
    def write_states(self) -> Tuple[Any, ...]:
        return tuple(self.refs[i]() for i in self.n_written)

    def fits(self, sig: StateSignature) -> bool:
        """Whether ``sig`` touches only states of this entry, writing exactly those it writes."""
        return all(id(s) in self.index and w == (id(s) in self.write_pos)
                   for s, w in zip(sig.states, sig.written))

    def add(self, sig: StateSignature) -> None:
        """Keep one more trace (see :meth:`fits`)."""
        self.plans.append((sig.trace, tuple(self.index[id(s)] for s in sig.states),
                           tuple(self.write_pos[id(s)] for s in sig.write_states)))
        self.static = any(has_static_leaves(r()._value) for r in self.refs
                          if not isinstance(r()._value, jax.Array))

    def _pure(self) -> Callable:
        plans, n_written, stateful = self.plans, self.n_written, self.stateful

        def pure(values, *dyn_args, **dyn_kwargs):
            leaves = jax.tree.leaves((dyn_args, dyn_kwargs))
            for trace, local, own in reversed(plans):  # the newest trace first
                result = trace.run([values[i] for i in local], leaves)
                if result is None:
                    continue
                out, new_values = result
                written = [values[i] for i in n_written]
                for k, v in zip(own, new_values):
                    written[k] = v
                return out, written
            raise RetraceNeeded(stateful)

        pure.__name__ = f"jit_{getattr(stateful.fun, '__name__', 'fun')}"
        return pure

    def values(self) -> Optional[list]:
        """The states' current values (``None`` if one was garbage collected)."""
        if _THREAD.frames:
            states = [r() for r in self.refs]
            if any(s is None for s in states):
                return None
            return read_state_values(states)
        try:
            values = [r()._value for r in self.refs]
        except AttributeError:  # a state died since the last call
            return None
        if self.static:
            values = [as_input(v) for v in values]
        return values


def _call_entry(entry: _Entry, dyn_args: tuple, dyn_kwargs: dict):
    return entry.jitted(entry.values(), *dyn_args, **dyn_kwargs)


class JittedFunction:
    """A stateful function compiled with ``jax.jit``; see :func:`jit`."""

    def __init__(self, fun: Callable, static_argnums=(), static_argnames=(), donate_argnums=(),
                 **jit_kwargs):
        self.fun = fun
        self.stateful = StatefulFunction(fun, static_argnums, static_argnames,
                                         name=f"jit({getattr(fun, '__name__', 'fun')})")
        self._static_argnums = static_argnums
        self._static_argnames = static_argnames
        self._donate_argnums = donate_argnums
        self._jit_kwargs = jit_kwargs
        self._donate = self._pure_donate_argnums(
            normalize_argnums(fun, donate_argnums, "donate_argnums"))
        self._entries: Dict[Hashable, _Entry] = {}
        self._has_statics = bool(self.stateful.static_argnums or self.stateful.static_argnames)
        functools.update_wrapper(self, fun, updated=())

    def _pure_donate_argnums(self, donate: Tuple[int, ...]) -> Tuple[int, ...]:
        statics = self.stateful.static_argnums
        clash = [i for i in donate if i in statics]
        if clash:
            raise ValueError(f"donate_argnums {clash} are also static_argnums; a static "
                             "argument cannot be donated.")
        # pure(state_values, *dyn_args): dynamic argument j sits at position j + 1.
        return tuple(1 + i - sum(s < i for s in statics) for i in donate)

    # -- cache ----------------------------------------------------------------
    def _trace(self, key, dyn_args: tuple, dyn_kwargs: dict) -> _Entry:
        """Trace the function for these arguments and file the trace under ``key``.

        The trace joins the current entry when that entry is valid and has
        every state the trace touches, writing none it does not write: the
        compiled function is kept and ``jax.jit`` compiles only the new
        argument types. Otherwise a new entry (and a new compiled function)
        holds the union of what is still valid and the new trace.
        """
        sig = self.stateful.discover(key, dyn_args, dyn_kwargs)
        entry = self._entries.get(key)
        if entry is not None and entry.epoch == _EPOCH[0] and entry.fits(sig):
            entry.add(sig)  # the compiled pure function reads the list of traces
            return entry
        valid = entry is not None and entry.epoch == _EPOCH[0] and entry.values() is not None
        entry = self._entries[key] = _Entry(self, [sig], previous=entry if valid else None)
        return entry

    def clear_cache(self) -> None:
        """Forget every trace and compiled function."""
        self._entries.clear()

    # -- call -------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if jax.config.jax_disable_jit:
            return self.fun(*args, **kwargs)
        if self._has_statics:
            key, dyn_args, dyn_kwargs = self.stateful.split_args(args, kwargs)
        else:
            key, dyn_args, dyn_kwargs = (), args, kwargs
        entry = self._entries.get(key)
        if entry is None or entry.epoch != _EPOCH[0]:
            entry = self._trace(key, dyn_args, dyn_kwargs)
        values = entry.values()
        if values is None:
            entry = self._trace(key, dyn_args, dyn_kwargs)
            values = entry.values()
        try:
            out, new_values = entry.jitted(values, *dyn_args, **dyn_kwargs)
        except RetraceNeeded as e:
            if e.owner is not self.stateful:
                raise
            entry, (out, new_values) = self._run_entry(key, dyn_args, dyn_kwargs, _call_entry,
                                                       traced=True)
        if new_values:
            write_state_values(entry.write_states, new_values)
        return out

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return bind_to_instance(self, instance, lambda f, **kw: JittedFunction(f, **kw), dict(
            static_argnums=self._static_argnums, static_argnames=self._static_argnames,
            donate_argnums=self._donate_argnums, **self._jit_kwargs))

    # -- ahead of time ------------------------------------------------------------
    def _run_entry(self, key, dyn_args: tuple, dyn_kwargs: dict,
                   use: Callable[[_Entry, tuple, dict], Any], traced: bool = False):
        """``(entry, use(entry, dyn_args, dyn_kwargs))``, tracing once more if the entry lacks these types."""
        def current():
            entry = self._entries.get(key)
            if entry is None or entry.epoch != _EPOCH[0] or entry.values() is None:
                entry = self._trace(key, dyn_args, dyn_kwargs)
            return entry

        return run_with_rediscovery(
            lambda entry: (entry, use(entry, dyn_args, dyn_kwargs)),
            self._trace(key, dyn_args, dyn_kwargs) if traced else current(),
            lambda: self._trace(key, dyn_args, dyn_kwargs),
            lambda owner: owner is self.stateful)

    def _with_entry(self, args: tuple, kwargs: dict, use: Callable[[_Entry, tuple, dict], Any]):
        """``(key, entry, use(entry, dyn_args, dyn_kwargs))`` for a call's arguments."""
        key, dyn_args, dyn_kwargs = self.stateful.split_args(args, kwargs)
        return (key, *self._run_entry(key, dyn_args, dyn_kwargs, use))

    def lower(self, *args, **kwargs) -> "Lowered":
        """Lower for these arguments, like ``jax.jit(f).lower``.

        The returned object's ``compile()`` gives a callable that reads and
        writes the states like the jitted function itself.
        """
        def lower(entry, dyn_args, dyn_kwargs):
            return entry.jitted.lower(entry.values(), *dyn_args, **dyn_kwargs)

        key, entry, lowered = self._with_entry(args, kwargs, lower)
        return Lowered(lowered, self, key, entry)

    def eval_shape(self, *args, **kwargs):
        """The output's shapes and dtypes, without running or changing any state."""
        def shape(entry, dyn_args, dyn_kwargs):
            return jax.eval_shape(entry.jitted, entry.values(), *dyn_args, **dyn_kwargs)[0]

        return self._with_entry(args, kwargs, shape)[2]

    def __repr__(self) -> str:
        return f"<brainx.transform.jit of {self.stateful.name}>"


class Lowered:
    """A lowered stateful function: ``as_text()``, ``compile()``, and the rest of ``jax.stages.Lowered``."""

    def __init__(self, lowered, owner: JittedFunction, key, entry: _Entry):
        self._lowered = lowered
        self._owner = owner
        self._key = key
        self._entry = entry

    def compile(self, *args, **kwargs) -> "Compiled":
        return Compiled(self._lowered.compile(*args, **kwargs), self._owner, self._key, self._entry)

    def __getattr__(self, name):
        return getattr(self._lowered, name)


class Compiled:
    """A compiled stateful function. Calling it reads and writes the states."""

    def __init__(self, compiled, owner: JittedFunction, key, entry: _Entry):
        self._compiled = compiled
        self._owner = owner
        self._key = key
        self._entry = entry

    def __call__(self, *args, **kwargs):
        key, dyn_args, dyn_kwargs = self._owner.stateful.split_args(args, kwargs)
        if key != self._key:
            raise ValueError(f"This compiled function was lowered with static arguments "
                             f"{self._key}, but was called with {key}.")
        out, new_values = self._compiled(self._entry.values(), *dyn_args, **dyn_kwargs)
        write_state_values(self._entry.write_states, new_values)
        return out

    def __getattr__(self, name):
        return getattr(self._compiled, name)


def jit(fun: Optional[Callable] = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        **jit_kwargs) -> Any:
    """Compile a function that reads and writes states with ``jax.jit``.

    The function is traced once per value of the static arguments and per
    argument types; that one trace finds the states it touches, which become
    explicit inputs of the function ``jax.jit`` compiles, and the states it
    writes become outputs, written back after each call. Later calls dispatch
    straight to ``jax.jit``'s cache: reading the states, one call, writing the
    written ones back.

    Caching rules. Like ``jax.jit``, a change of any argument's or state's
    shape, dtype or tree structure retraces (each type is compiled once, so
    alternating shapes do not recompile), and a Python value captured by
    closure is frozen at trace time. The function traces again, without
    recompiling when the states are the same, when a state it found is
    garbage collected (a model rebuilt, a global rebound to a new State) and
    when a ``brainx.nn.Module`` State attribute is rebound (``net.h =
    HiddenState(...)``, ``net.cur = net.buf_b``). A State swapped inside a
    plain object or container while the old one stays alive is not seen: call
    ``brainx.state.structure_changed()`` or ``clear_cache()`` after such a
    swap. Creating states costs nothing.

    Calls are not atomic: two threads calling a function that writes the
    same state both read its old value, and the later write-back wins. Use a
    lock, or per-thread states.

    Parameters
    ----------
    fun : callable, optional
        The function. Without it, ``jit(**options)`` returns a decorator.
    static_argnums, static_argnames
        Arguments passed as Python values: hashable, part of the cache key.
    donate_argnums
        Positional arguments whose buffers XLA may reuse for outputs.
    **jit_kwargs
        Passed to ``jax.jit`` (``keep_unused``, ``device``, ``backend``,
        ``inline``, ``compiler_options``).

    Returns
    -------
    JittedFunction
        Callable like ``fun``, with ``lower(...)`` (then ``.compile()``),
        ``eval_shape(...)`` and ``clear_cache()``.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> h = brainx.HiddenState(jnp.zeros(3))
    >>> @brainx.transform.jit(static_argnums=1)
    ... def step(x, decay):
    ...     h.value = decay * h.value + x
    ...     return h.value.sum()
    >>> float(step(jnp.ones(3), 0.5)), float(step(jnp.ones(3), 0.5))
    (3.0, 4.5)
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, **jit_kwargs)
    for bad in ("in_shardings", "out_shardings", "abstracted_axes"):
        if bad in jit_kwargs:
            raise NotImplementedError(f"brainx.transform.jit does not support {bad!r} yet.")
    return JittedFunction(fun, static_argnums=static_argnums, static_argnames=static_argnames,
                          donate_argnums=donate_argnums, **jit_kwargs)
