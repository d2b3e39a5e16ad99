"""`jit`: ``jax.jit`` for functions that read and write states."""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Hashable, Optional, Sequence, Tuple

import jax

from brainx.state.state import _EPOCH
from brainx.state.trace import _THREAD
from brainx.transform.bound import bind_to_instance
from brainx.transform.stateful import (
    RetraceNeeded, StatefulFunction, StateSignature, normalize_argnums, read_state_values,
    run_with_rediscovery, write_state_values,
)

__all__ = ["jit", "JittedFunction"]


class _Entry:
    """One cache entry: the states of a static key and the compiled pure function."""

    __slots__ = ("sig", "jitted", "write_states")

    def __init__(self, sig: StateSignature, jitted: Callable):
        self.sig = sig
        self.jitted = jitted
        self.write_states = sig.write_states


def _call_entry(entry: _Entry, dyn_args: tuple, dyn_kwargs: dict):
    return entry.jitted(read_state_values(entry.sig.states), *dyn_args, **dyn_kwargs)


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
    def _entry(self, key, dyn_args: tuple, dyn_kwargs: dict, stale: bool = False) -> _Entry:
        entry = self._entries.get(key)
        if entry is not None and not stale and entry.sig.epoch == _EPOCH[0]:
            return entry
        sig = self.stateful.discover(key, dyn_args, dyn_kwargs)
        if (entry is not None and not stale and entry.sig.states == sig.states
                and entry.sig.written == sig.written):
            entry.sig = sig  # same states as before: keep the compiled function
            return entry
        jitted = jax.jit(self.stateful.pure(sig, key), donate_argnums=self._donate,
                         **self._jit_kwargs)
        entry = self._entries[key] = _Entry(sig, jitted)
        return entry

    def clear_cache(self) -> None:
        """Forget every trace and compiled function."""
        self._entries.clear()
        self.stateful.clear_cache()

    # -- call -------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if jax.config.jax_disable_jit:
            return self.fun(*args, **kwargs)
        if self._has_statics:
            key, dyn_args, dyn_kwargs = self.stateful.split_args(args, kwargs)
        else:
            key, dyn_args, dyn_kwargs = (), args, kwargs
        entry = self._entries.get(key)
        if entry is None or entry.sig.epoch != _EPOCH[0]:
            entry = self._entry(key, dyn_args, dyn_kwargs)
        try:
            if _THREAD.frames:
                values = read_state_values(entry.sig.states)
            else:
                values = [s._value for s in entry.sig.states]
            out, new_values = entry.jitted(values, *dyn_args, **dyn_kwargs)
        except RetraceNeeded as e:
            if e.owner is not self.stateful:
                raise
            entry, (out, new_values) = self._run_entry(key, dyn_args, dyn_kwargs, _call_entry,
                                                       stale=True)
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
                   use: Callable[[_Entry, tuple, dict], Any], stale: bool = False):
        """``(entry, use(entry, dyn_args, dyn_kwargs))``, rediscovering once if the trace finds new states."""
        return run_with_rediscovery(
            lambda entry: (entry, use(entry, dyn_args, dyn_kwargs)),
            self._entry(key, dyn_args, dyn_kwargs, stale=stale),
            lambda: self._entry(key, dyn_args, dyn_kwargs, stale=True),
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
            values = [s._value for s in entry.sig.states]
            return entry.jitted.lower(values, *dyn_args, **dyn_kwargs)

        key, entry, lowered = self._with_entry(args, kwargs, lower)
        return Lowered(lowered, self, key, entry)

    def eval_shape(self, *args, **kwargs):
        """The output's shapes and dtypes, without running or changing any state."""
        def shape(entry, dyn_args, dyn_kwargs):
            values = [s._value for s in entry.sig.states]
            return jax.eval_shape(entry.jitted, values, *dyn_args, **dyn_kwargs)[0]

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
        values = read_state_values(self._entry.sig.states)
        out, new_values = self._compiled(values, *dyn_args, **dyn_kwargs)
        write_state_values(self._entry.write_states, new_values)
        return out

    def __getattr__(self, name):
        return getattr(self._compiled, name)


def jit(fun: Optional[Callable] = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        **jit_kwargs) -> Any:
    """Compile a function that reads and writes states with ``jax.jit``.

    The states the function touches are found on its first call (one abstract
    trace per value of the static arguments); they become explicit inputs of
    a pure function that ``jax.jit`` compiles, and the states it writes become
    outputs that are written back after each call. Later calls dispatch
    straight to ``jax.jit``'s cache: reading the states, one call, writing the
    written ones back.

    Like ``jax.jit``, a change of any argument's or state's shape, dtype or
    tree structure recompiles, and a Python value captured by closure is
    frozen at trace time. Unlike ``jax.jit``, creating a state outside every
    transform (re-initialising a model, say) makes the next call look for the
    function's states again, so new state objects are never missed. That look
    is one abstract trace (no recompilation when the states are the same
    objects), so create long-lived states up front rather than one per call.

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
