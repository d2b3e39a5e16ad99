"""`jit`: ``jax.jit`` for functions that read and write states."""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Dict, Hashable, Optional, Sequence, Tuple

import jax

from brainx._jax.traces import jit_disabled
from brainx.environ import reads as env_reads
from brainx.util.filter import to_predicate
from brainx.transform.core import cache_check
from brainx.transform.core.arguments import no_function
from brainx.transform.core.method_binding import bind_to_instance
from brainx.transform.compiled.call_codegen import make_fast_call
from brainx.transform.compiled.jit_entry import JitEntry, trace_holds_tracers
from brainx.transform.compiled.shared_traces import InstanceSharing
from brainx.transform.compiled.static_hint import (
    CONCRETIZATION_ERRORS, add_non_array_hint, add_static_hint,
)
from brainx.transform.core.stateful import (
    StatefulFunction, normalize_argnums, run_with_rediscovery, write_state_values,
)

__all__ = ["jit", "JittedFunction"]


def _call_entry(entry: JitEntry, dyn_args: tuple, dyn_kwargs: dict):
    return entry.jitted(entry.values(), *dyn_args, **dyn_kwargs)


class JittedFunction:
    """A stateful function compiled with ``jax.jit``; see :func:`jit`."""

    #: Static keys kept per function (the oldest is dropped first), as JAX bounds its caches.
    max_entries = 512
    #: Entries kept per static key for other values of the settings they read (``fit=True``
    #: and ``fit=False``, say), so switching back compiles nothing.
    max_parked = 8

    def __init__(self, fun: Callable, static_argnums=(), static_argnames=(), donate_argnums=(),
                 _sharing: Optional[InstanceSharing] = None, name: Optional[str] = None,
                 donate_states: Any = False, share_instances: bool = True, **jit_kwargs):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"jit: name must be a string, got {name!r}.")
        self.fun = fun
        self.name = name
        self._sharing = _sharing  # set for a method bound to an instance (shared traces)
        self._share_instances = share_instances  # as a method: may instances share traces?
        self._instance_sharing: Optional[InstanceSharing] = None  # this method's, for its instances
        self._graph = None
        self.stateful = StatefulFunction(fun, static_argnums, static_argnames,
                                         name=f"jit({name or getattr(fun, '__name__', 'fun')})")
        self._entries: Dict[Hashable, JitEntry] = {}
        # brainstate's inspection API (get_*_by_cache) reads the traces the entries keep
        self.stateful.kept_traces = functools.partial(_kept_traces, self._entries)
        if name is not None:  # the name of the function jax.jit compiles (jit_<name> in HLO)
            self.stateful.fun = _renamed(fun, name)
        self._static_argnums = static_argnums
        self._static_argnames = static_argnames
        self._donate_argnums = donate_argnums
        self._jit_kwargs = jit_kwargs
        self._donate_states_option = donate_states
        self._donate_states = _donation_predicate(donate_states)
        self._donate = self._pure_donate_argnums(
            normalize_argnums(fun, donate_argnums, "donate_argnums"))
        self._parked: Dict[Hashable, list] = {}  # entries traced under other settings
        self._has_statics = bool(self.stateful.static_argnums or self.stateful.static_argnames)
        self._dispatch = self._general_call
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
    def _trace(self, key, dyn_args: tuple, dyn_kwargs: dict) -> JitEntry:
        """:meth:`_trace_new`, with a hint on JAX's error for a Python branch on a traced value."""
        try:
            return self._trace_new(key, dyn_args, dyn_kwargs)
        except CONCRETIZATION_ERRORS as e:
            add_static_hint(e, "jit", self.fun, self._static_argnums, self._static_argnames)
            raise

    def _trace_new(self, key, dyn_args: tuple, dyn_kwargs: dict) -> JitEntry:
        """Trace the function for these arguments and file the trace under ``key``.

        The trace joins the current entry when that entry is valid and has
        every state the trace touches, writing none it does not write: the
        compiled function is kept and ``jax.jit`` compiles only the new
        argument types. Otherwise a new entry (and a new compiled function)
        holds the union of what is still valid and the new trace.
        """
        entry = self._entries.get(key)
        if entry is not None and not entry.settings_hold():  # traced under other settings
            self._park(key, entry)
            entry = None
        sharing = self._sharing if entry is None else None
        if sharing is not None:  # an instance's first call: another instance may have traced it
            shared = sharing.entry(self, self.fun.__self__, key, dyn_args, dyn_kwargs)
            if shared is not None:
                return self._file(key, shared)
        sig = self.stateful.discover(key, dyn_args, dyn_kwargs)
        held = entry is not None and entry.holds_states()
        if held and entry.fits(sig):
            entry.add(sig)  # the compiled pure function reads the list of traces
            self._install_fast_call(key, entry)
            return entry
        if entry is not None and not held and entry.revalidate(sig):
            self._install_fast_call(key, entry)  # the same computation: nothing to compile
            return entry
        if sharing is not None and not trace_holds_tracers(sig.trace):  # (else: only valid in here)
            shared = sharing.register(self, key, dyn_args, dyn_kwargs, sig)
            if shared is not None:
                shared.prime(dyn_args, dyn_kwargs)
                return self._file(key, shared)
        new = JitEntry(self, [sig], previous=entry if held else None)
        new.prime(dyn_args, dyn_kwargs)  # jax.jit lowers the trace just made, not a second one
        return self._file(key, new)

    def _park(self, key, entry: JitEntry) -> None:
        """Set aside an entry traced under other settings (``brainx.environ``) for when they return."""
        self._entries.pop(key, None)
        if entry.holds_tracers():  # traced inside a trace that has ended: never valid again
            return
        parked = self._parked.setdefault(key, [])
        if entry not in parked:
            parked.append(entry)
        del parked[:-self.max_parked]

    def _unpark(self, key) -> Optional[JitEntry]:
        """The set-aside entry of ``key`` traced under the current settings, filed again (or ``None``)."""
        for entry in self._parked.get(key, ()):
            if entry.is_current(values=False):  # a new trace may still join it
                self._parked[key].remove(entry)
                return self._file(key, entry)
        return None

    def _file(self, key, entry: JitEntry) -> JitEntry:
        entries = self._entries
        entries.pop(key, None)
        entries[key] = entry
        while len(entries) > self.max_entries:
            del entries[next(iter(entries))]
        self._install_fast_call(key, entry)
        return entry

    def _install_fast_call(self, key, entry: JitEntry) -> None:
        """Give ``entry`` its generated call; it becomes ``__call__`` if there are no statics."""
        if entry.static or cache_check.enabled():  # static leaves in state values: the
            entry.fast = None                          # general path makes them inputs
        else:
            write_refs = entry.write_refs
            entry.fast = make_fast_call(
                entry.jitted, entry.refs, entry.n_written, plain=entry.plain, epoch=entry.epoch,
                env_version=entry.env_version, settings_hold=entry.settings_hold,
                static_changed=entry.static_changed,
                fun=self.fun, owner=self.stateful,
                slow=lambda args, kwargs, traced: self._call(key, args, kwargs, traced),
                write_back=lambda new: write_state_values([r() for r in write_refs], new))
        if not self._has_statics:
            self._dispatch = entry.fast or self._general_call

    @property
    def origin_fun(self) -> Callable:
        """The user's function (brainstate's name)."""
        return self.fun

    @property
    def stateful_fun(self) -> StatefulFunction:
        """The :class:`StatefulFunction` that traces it (brainstate's name)."""
        return self.stateful

    def clear_cache(self) -> None:
        """Forget every trace and compiled function."""
        self._entries.clear()
        self._parked.clear()
        self._dispatch = self._general_call
        self.stateful.clear_cache()
        self.__dict__.pop("_pure_jitted", None)

    @property
    def jitted_fun(self) -> Callable:
        """The compiled pure function, in brainstate's calling convention.

        ``jitted_fun(state_values, *args, **kwargs)`` returns
        ``(new_state_values, out)``: ``state_values`` line up with
        ``stateful_fun.get_states(*args)``, and a state the function does not
        write comes back as ``None``. Nothing is read from or written to the
        states; calling the jitted function itself does that.
        """
        jitted = self.__dict__.get("_pure_jitted")
        if jitted is None:
            stateful = self.stateful
            jitted = self.__dict__["_pure_jitted"] = jax.jit(
                stateful.jaxpr_call,
                static_argnums=tuple(i + 1 for i in stateful.static_argnums),
                static_argnames=stateful.static_argnames)
        return jitted

    # -- call -------------------------------------------------------------------
    # ``step(x)`` resolves ``__call__`` through a property whose getter is C
    # (``attrgetter``) to ``self._dispatch``: the entry's generated fast call
    # (compiled/call_codegen.py) for a function without static arguments, else
    # ``_general_call``. A call then runs one Python frame around ``jax.jit``.
    __call__ = property(operator.attrgetter("_dispatch"))

    def _general_call(self, *args, **kwargs):
        if jit_disabled():
            return self.fun(*args, **kwargs)
        if self._has_statics:
            key, dyn_args, dyn_kwargs = self.stateful.split_args(args, kwargs)
        else:
            key, dyn_args, dyn_kwargs = (), args, kwargs
        entry = self._entries.get(key)
        if entry is None or entry.fast is None:
            return self._call(key, dyn_args, dyn_kwargs)
        return entry.fast(*dyn_args, **dyn_kwargs)

    def _call(self, key, dyn_args: tuple, dyn_kwargs: dict, traced: bool = False):
        """A call that needs more than the fast path: a trace, a scope, static leaves."""
        try:
            entry, (out, new_values) = self._run_entry(key, dyn_args, dyn_kwargs, _call_entry,
                                                       traced=traced)
        except TypeError as e:
            add_non_array_hint(e, "jit", self.fun, self._static_argnums, self._static_argnames)
            raise
        if new_values:
            write_state_values(entry.write_states, new_values)
        return out

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        if self._instance_sharing is None and self._share_instances:
            self._instance_sharing = InstanceSharing()
        return bind_to_instance(self, instance, lambda f, **kw: JittedFunction(f, **kw), dict(
            static_argnums=self._static_argnums, static_argnames=self._static_argnames,
            donate_argnums=self._donate_argnums, _sharing=self._instance_sharing,
            name=self.name, donate_states=self._donate_states_option, **self._jit_kwargs))

    # -- ahead of time ------------------------------------------------------------
    def _run_entry(self, key, dyn_args: tuple, dyn_kwargs: dict,
                   use: Callable[[JitEntry, tuple, dict], Any], traced: bool = False):
        """``(entry, use(entry, dyn_args, dyn_kwargs))``, tracing once more if the entry lacks these types."""
        def current():
            entry = self._entries.get(key)
            if entry is not None and not entry.settings_hold():  # a setting it read changed
                self._park(key, entry)
                entry = self._unpark(key)
            if entry is None or not entry.is_current():
                entry = self._trace(key, dyn_args, dyn_kwargs)
            env_reads.replay(entry.env_reads)  # an enclosing trace depends on these too
            return entry

        entry = self._trace(key, dyn_args, dyn_kwargs) if traced else current()
        if cache_check.enabled():
            self._check_reuse(key, entry, dyn_args, dyn_kwargs)
        return run_with_rediscovery(
            lambda entry: (entry, use(entry, dyn_args, dyn_kwargs)),
            entry,
            lambda: self._trace(key, dyn_args, dyn_kwargs),
            lambda owner: owner is None or owner is self.stateful)

    def _check_reuse(self, key, entry: JitEntry, dyn_args: tuple, dyn_kwargs: dict) -> None:
        """``BRAINX_CHECK_CACHES``: the trace ``entry`` runs for this call against a fresh one."""
        plan = entry.plan_for(dyn_args, dyn_kwargs)
        if plan is None:  # no trace of the entry fits: the call traces anew
            return
        with cache_check.fresh_tracing():
            fresh = self.stateful.discover(key, dyn_args, dyn_kwargs)
        cache_check.check_reuse("jit cache", self.stateful.name, *plan, fresh)

    def _with_entry(self, args: tuple, kwargs: dict, use: Callable[[JitEntry, tuple, dict], Any]):
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

    def compile(self, *args, **kwargs) -> "Compiled":
        """``lower(*args, **kwargs).compile()``: calling the result reads and writes the states."""
        return self.lower(*args, **kwargs).compile()

    def trace(self, *args, **kwargs) -> "jax.stages.Traced":
        """Trace for these arguments, like ``jax.jit(f).trace``: the pure function's ``Traced``.

        Its ``jaxpr`` takes the states' values first (in ``stateful_fun.get_states``
        order), then the arguments. Nothing runs and no state changes.
        """
        def trace(entry, dyn_args, dyn_kwargs):
            return entry.jitted.trace(entry.values(), *dyn_args, **dyn_kwargs)

        return self._with_entry(args, kwargs, trace)[2]

    def eval_shape(self, *args, **kwargs):
        """The output's shapes and dtypes, without running or changing any state."""
        def shape(entry, dyn_args, dyn_kwargs):
            return jax.eval_shape(entry.jitted, entry.values(), *dyn_args, **dyn_kwargs)[0]

        return self._with_entry(args, kwargs, shape)[2]

    def __repr__(self) -> str:
        return f"<brainx.transform.jit of {self.stateful.name}>"


def _kept_traces(entries: Dict[Hashable, JitEntry], static_key: Any):
    """``(static key, signature)`` of the traces ``entries`` keep under ``static_key``
    (every key: ``None``), newest first, from entries that still hold their states: what
    brainstate's inspection API of the function reads (``StatefulFunctionAPI.kept_traces``)."""
    keys = list(entries) if static_key is None else [static_key]
    for key in keys:
        entry = entries.get(key)
        if entry is not None and entry.holds_states():
            for sig in entry.signatures():
                yield key, sig


def _donation_predicate(donate_states: Any) -> Optional[Callable[[Any], bool]]:
    """``None`` (donate nothing) or a predicate over states, from ``jit(donate_states=...)``
    (a filter, as :func:`brainx.util.to_predicate` reads it)."""
    if donate_states is False or donate_states is None:
        return None
    select = to_predicate(donate_states)
    return lambda state: bool(select((), state))


def _renamed(fun: Callable, name: str) -> Callable:
    """``fun`` under another ``__name__``: JAX names the compiled computation after it."""
    @functools.wraps(fun)
    def named(*args, **kwargs):
        return fun(*args, **kwargs)

    named.__name__ = named.__qualname__ = name
    return named


class Lowered:
    """A lowered stateful function: ``as_text()``, ``compile()``, and the rest of ``jax.stages.Lowered``."""

    def __init__(self, lowered, owner: JittedFunction, key, entry: JitEntry):
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

    def __init__(self, compiled, owner: JittedFunction, key, entry: JitEntry):
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
        donate_states: Any = False, name: Optional[str] = None, share_instances: bool = True,
        **jit_kwargs) -> Any:
    """Compile a function that reads and writes states with ``jax.jit``.

    The function is traced once per value of the static arguments and per
    argument types; that one trace finds the states it touches, which become
    explicit inputs of the function ``jax.jit`` compiles, and the states it
    writes become outputs, written back after each call. Later calls dispatch
    straight to ``jax.jit``'s cache: reading the states, one call, writing the
    written ones back.

    Caching rules. Like ``jax.jit``, a change of any argument's or state's
    shape, dtype, weak type or tree structure retraces (each type is compiled
    once, so alternating shapes do not recompile), and a Python value
    captured by closure is frozen at trace time. A static argument is keyed
    by its value, its type and the sign of a zero: ``1``, ``1.0`` and
    ``True``, or ``-0.0`` and ``0.0``, are equal in Python (and share one
    trace in ``jax.jit``) but get a trace each here, as settings of
    ``brainx.environ`` do (compared by bits). The function traces again
    when a state it found is garbage collected (a model rebuilt, a global
    rebound to a new State), when a ``brainx.nn.Module`` State attribute is
    rebound (``net.h = HiddenState(...)``, ``net.cur = net.buf_b``) and when
    a state hook is registered, removed, enabled or disabled; if the new trace
    computes what the old one did on the same states, the compiled function
    is kept. It also traces again when a setting it read
    (``brainx.environ``: ``dt``, ``fit``, ...) has another value; the
    compiled function for the old values is kept for when they return. A
    State swapped inside a plain object or container while the old one stays
    alive is not seen: call ``brainx.state.structure_changed()`` or
    ``clear_cache()`` after such a swap. Creating states costs nothing.

    Methods. On a method (``@jit`` in a class body), instances of the class
    share traces: an instance whose attributes, sub-objects, state types and
    class attributes equal those of one already traced, called with
    arguments of the same types, runs that instance's compiled function on
    its own states, with no trace. So a shared method may depend on the
    instance's attributes, its class's attributes and methods, the module
    globals its own code names, ``brainx.environ`` settings and its
    arguments, but not on per-instance values kept outside the instance (a
    ``WeakKeyDictionary`` keyed by it, a registry). For such a method pass
    ``share_instances=False``, or set ``__brainx_share_jit__ = False`` on
    the class: each instance then traces its own. See
    :class:`~brainx.transform.compiled.shared_traces.InstanceSharing`.

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
    donate_states : bool or filter
        Donate the buffers of the states the function writes (``True``: all
        of them; a filter, as in ``brainx.graph.states``: those it selects),
        so XLA updates them in place instead of holding an old and a new
        copy. An array read from such a state before a call is deleted by
        the call; a state holding a deleted array raises ``ValueError``
        naming it. Off by default.
    name : str, optional
        The name of the compiled computation (its HLO module, and so the
        profiler's, is named after it) and of the transform in error
        messages; by default the function's ``__name__``.
    share_instances : bool
        For a method: whether instances of its class with equal structure
        share one trace and compiled function (default ``True``; see
        *Methods* above). ``False``: every instance traces its own.
    **jit_kwargs
        Passed to ``jax.jit`` (``in_shardings``, ``out_shardings``,
        ``keep_unused``, ``device``, ``backend``, ``inline``,
        ``compiler_options``). ``in_shardings`` / ``out_shardings`` apply to
        the function's arguments and output (one sharding given alone as
        ``in_shardings`` is broadcast over every positional argument, as in
        ``jax.jit``; brainstate raises ``NotImplementedError`` for it).
        A state's own ``sharding``
        (see :func:`brainx.distributed.shard_states`) is used for its value
        in and out, so sharded states stay sharded across calls.

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
    if no_function(fun):
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, donate_states=donate_states,
                                 name=name, share_instances=share_instances, **jit_kwargs)
    for bad in ("abstracted_axes",):
        if bad in jit_kwargs:
            raise NotImplementedError(f"brainx.transform.jit does not support {bad!r} yet.")
    return JittedFunction(fun, static_argnums=static_argnums, static_argnames=static_argnames,
                          donate_argnums=donate_argnums, donate_states=donate_states, name=name,
                          share_instances=share_instances, **jit_kwargs)
