"""The cache entries of ``transform.jit``.

A :class:`JitEntry` is what one static key of a jitted function holds: the
traces of every argument type seen, the states they touch (held weakly), and
the ``jax.jit`` of a pure function that runs the right trace. How instances of
a class share entries is :mod:`brainx.transform.compiled.shared_traces`.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import jax

from brainx.state.state import _EPOCH
from brainx.state.lending import LENT
from brainx.state.trace import _THREAD
from brainx.environ import reads as env_reads
from brainx.environ.settings import settings_unchanged
from brainx.state.weak_refs import StateRef
from brainx.transform.core.jaxpr_equal import jaxprs_equal
from brainx.transform.compiled.jit_cache_seed import prime
from brainx.transform.compiled.device_sharding import compile_pure, state_sharding
from brainx.transform.core.stateful import (
    RetraceNeeded, StateSignature, as_input, has_static_leaves,
    read_state_values, same_key,
)

__all__ = ["JitEntry"]


class JitEntry:
    """The compiled function of one static key, and the traces it runs.

    ``states`` is the union of the states of every trace kept here (one per
    argument type seen), ``write_states`` the states any of them writes. The
    function handed to ``jax.jit`` takes the values of all of ``states`` and
    returns new values for all of ``write_states``; it evaluates the trace
    made for the argument types ``jax.jit`` traces it with (a trace that does
    not write a state gives its value back unchanged). A type with no trace
    yet raises :class:`~brainx.transform.core.stateful.RetraceNeeded`: the owner
    traces the user's function for it and adds the trace here, or, if the
    trace touches states this entry does not have, builds a new entry.

    States are held weakly: when one is garbage collected (its model was
    rebuilt, a global was rebound to a new State), the entry is stale and the
    next call traces again.
    """

    __slots__ = ("plans", "index", "write_pos", "refs", "write_refs", "n_written", "jitted",
                 "epoch", "static", "stateful", "shared", "plain", "fast", "env_reads",
                 "env_version", "pure", "donates", "unplaced", "__weakref__")

    def __init__(self, owner: Any, sigs: Sequence[StateSignature],
                 previous: Optional["JitEntry"] = None, jitted: Optional[Callable] = None,
                 pure: Optional[Callable] = None):
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
        # The settings (brainx.environ) its traces read; env_version[0]: the settings version
        # they were last found unchanged at (a list: the generated fast call reads it in place).
        self.env_reads: Dict[Any, Any] = {}
        self.env_version = [env_reads.VERSION[0]]
        self.fast: Optional[Callable] = None  # set by the owner (see compiled/call_codegen.py)
        self.n_written = tuple(index[s] for s in write_states)
        self._bind(states)
        self.plans: List[tuple] = []  # (trace, positions, write positions), newest last
        if previous is not None:
            for trace, local, own in previous.plans:
                self.env_reads.update(trace.env_reads)
                self.plans.append((trace, tuple(index[old_states[i]] for i in local),
                                   tuple(self.write_pos[id(old_written[k])] for k in own)))
        for sig in sigs:
            self.add(sig)
        # A jitted function shared between instances (see InstanceSharing) runs one trace only.
        # (``pure``: the function it compiles, which evaluates the one trace.)
        self.shared = jitted is not None
        self.pure = pure if self.shared else self._pure()
        self.jitted = jitted or compile_pure(self.pure, owner, states, write_states)
        # What of its states the compiled function depends on besides their values' types:
        # shardings and donation (none: it may run on other states of the same types).
        self.donates = getattr(owner, "_donate_states", None)
        self.unplaced = self._unplaced(states, write_states)

    def _bind(self, states: Sequence[Any]) -> None:
        """Hold ``states`` (weakly), the written ones at the positions ``n_written``."""
        this = weakref.ref(self)

        def stale(_ref):  # the entry is stale once one of its states is collected
            entry = this()
            if entry is not None:
                entry.epoch = -1

        self.refs = [StateRef(s, stale) for s in states]
        # By identity: positions of each state, and of each written state among the outputs.
        self.index = {id(s): i for i, s in enumerate(states)}
        self.write_pos = {id(states[i]): k for k, i in enumerate(self.n_written)}
        self.write_refs = [self.refs[i] for i in self.n_written]

    def _find_static(self) -> None:
        """Whether a state's value has leaves JAX cannot trace (the general call path takes it)."""
        self.static = self._has_static()

    def _has_static(self) -> bool:
        values = [r()._value for r in self.refs]
        return any(has_static_leaves(v) for v in values if not isinstance(v, jax.Array))

    def static_changed(self) -> bool:
        """Whether a state's value gained (or lost) leaves JAX cannot trace since the last trace.

        A state holding an array then set to a string: the call must trace
        again (and take the general path, which passes the string as static
        data), not hand the string to ``jax.jit``.
        """
        try:
            return self._has_static() != self.static
        except AttributeError:  # a state died: the caller finds it
            return False

    def _unplaced(self, states: Sequence[Any], write_states: Sequence[Any]) -> bool:
        """No state asks for a sharding and none is donated."""
        return (all(state_sharding(s) is None for s in states)
                and (self.donates is None or not any(self.donates(s) for s in write_states)))

    @property
    def states(self) -> Tuple[Any, ...]:
        return tuple(r() for r in self.refs)

    @property
    def write_states(self) -> Tuple[Any, ...]:
        return tuple(r() for r in self.write_refs)

    def fits(self, sig: StateSignature) -> bool:
        """Whether ``sig`` touches only states of this entry, writing exactly those it writes."""
        return not self.shared and all(id(s) in self.index and w == (id(s) in self.write_pos)
                                       for s, w in zip(sig.states, sig.written))

    def revalidate(self, sig: StateSignature) -> bool:
        """After a structure change: keep this entry if ``sig`` is its one trace again.

        True (and the entry is current again) when the entry holds a single
        trace and ``sig`` touches states in the same roles with an equal jaxpr
        (:func:`jaxprs_equal`): the compiled function computes what a new one
        would. The states may be new objects in place of the entry's (a model's
        ``init_state`` made new ones, the old ones were garbage collected, as
        when ``init_all_states`` runs before each step): the entry then takes
        them in their place (:meth:`_rebind`) when neither its states nor the
        new ones ask for a sharding or are donated, the only things of a state's
        own the compiled function depends on. Nothing is compiled again.
        """
        if len(self.plans) != 1 or self.shared or len(sig.states) != len(self.refs):
            return False
        old, local, own = self.plans[0]
        new = sig.trace
        if not same_key(old, new):
            return False
        same = (self.alive() and self.fits(sig)
                and local == tuple(self.index[id(s)] for s in sig.states)
                and own == tuple(self.write_pos[id(s)] for s in sig.write_states))
        if not same and not self._can_rebind(sig, local, own):
            return False
        if not jaxprs_equal(old.jaxpr, old.consts, new.jaxpr, new.consts):
            return False
        if not same:
            self._rebind(sig)
        self.epoch = _EPOCH[0]
        self.env_reads = dict(new.env_reads)
        self.env_version[0] = env_reads.VERSION[0]
        return True

    def _can_rebind(self, sig: StateSignature, local: tuple, own: tuple) -> bool:
        """Whether ``sig``'s states can stand in for this entry's, position for position."""
        return (local == tuple(range(len(self.refs))) and own == tuple(range(len(self.n_written)))
                and tuple(i for i, w in enumerate(sig.written) if w) == self.n_written
                and self.unplaced and self._unplaced(sig.states, sig.write_states))

    def _rebind(self, sig: StateSignature) -> None:
        """Run on ``sig``'s states from now on (see :meth:`revalidate`), with ``sig``'s trace."""
        self._bind(sig.states)
        self.plans[0] = (sig.trace, *self.plans[0][1:])  # in place: the compiled function reads it
        self._find_static()

    # -- is it still current? ------------------------------------------------------
    # The policy, in one place. The generated fast call (compiled/call_codegen.py) inlines
    # the same checks on the hot path, without a method call: the epoch and the settings
    # version, a dead state when it reads the values, a changed static leaf on TypeError.
    def alive(self) -> bool:
        """Whether every state it holds is still alive (none was garbage collected)."""
        return all(r() is not None for r in self.refs)

    def holds_states(self) -> bool:
        """Whether its traces still describe the states the function reaches.

        Made (or revalidated, :meth:`revalidate`) in the current structure epoch
        (no module's State attribute rebound, no hook changed since: see
        ``brainx.state.structure_changed``) and every state alive. Such an
        entry may take one more trace (:meth:`fits`, :meth:`add`) or hand its
        traces to a new entry; one that does not is revalidated or replaced.
        """
        return self.epoch == _EPOCH[0] and self.alive()

    def is_current(self, values: bool = True) -> bool:
        """Whether a call may run this entry as it is, with no new trace.

        It holds its states (:meth:`holds_states`), the settings its traces
        read have the values they read (:meth:`settings_hold`) and, with
        ``values``, no state's value gained or lost leaves JAX cannot trace
        (:meth:`static_changed`). ``values=False`` is for an entry set aside
        under other settings and taken back: a new trace may still join it.
        """
        return (self.holds_states() and self.settings_hold()
                and not (values and self.static_changed()))

    def settings_hold(self) -> bool:
        """Whether the settings its traces read still have the values they read.

        Cheap when no setting changed at all; otherwise the settings read are
        compared, and on a match the entry is current again.
        """
        if self.env_version[0] == env_reads.VERSION[0]:
            return True
        if not settings_unchanged(self.env_reads):
            return False
        self.env_version[0] = env_reads.VERSION[0]
        return True

    def holds_tracers(self) -> bool:
        """Whether a trace of it closes over an enclosing trace's values (a tracer constant, or a
        setting a ``context`` opened inside that trace set): it is valid only inside that trace."""
        return any(trace_holds_tracers(trace) for trace, _, _ in self.plans)

    def add(self, sig: StateSignature) -> None:
        """Keep one more trace (see :meth:`fits`)."""
        self.env_reads.update(sig.trace.env_reads)
        self.plans.append((sig.trace, tuple(self.index[id(s)] for s in sig.states),
                           tuple(self.write_pos[id(s)] for s in sig.write_states)))
        # Every written value is one array: then the outputs of a call are all concrete
        # or (under a raw JAX transform) all tracers, and the first one tells which.
        # (jax.jit returns concrete arrays as ArrayImpl, so only pytree values differ.)
        self.plain = all(spec.treedef.num_nodes == 1 and not spec.wrap
                         for trace, _, _ in self.plans for spec in trace.written_specs)
        self._find_static()

    def prime(self, dyn_args: tuple, dyn_kwargs: dict) -> bool:
        """Give ``jax.jit`` this entry's one trace for these arguments (see :mod:`.jit_cache_seed`).

        The first call then lowers the jaxpr discovery found instead of
        tracing the pure function again. Returns whether it was given.
        """
        if self.pure is None or len(self.plans) != 1 or self.static:
            return False
        trace = self.plans[0][0]
        values = self.values()
        if values is None or len(trace.written_specs) != len(self.n_written):
            return False
        return prime(self.jitted, self.pure, trace, values, dyn_args, dyn_kwargs)

    def _pure(self) -> Callable:
        plans, n_written, stateful = self.plans, self.n_written, self.stateful

        def pure(values, *dyn_args, **dyn_kwargs):
            leaves, tree = jax.tree.flatten((dyn_args, dyn_kwargs))
            for trace, local, own in reversed(plans):  # the newest trace first
                result = trace.run([values[i] for i in local], leaves, tree, exact=True)
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

    def plan_for(self, dyn_args: tuple, dyn_kwargs: dict) -> Optional[tuple]:
        """``(states, written, trace)`` of the trace a call with these arguments runs.

        The trace the compiled function picks (:meth:`_pure`: the newest that
        fits the states' current values and the arguments), its states and
        which of them it writes; ``None`` if no trace fits.
        """
        values = self.values()
        if values is None:
            return None
        leaves, tree = jax.tree.flatten((dyn_args, dyn_kwargs))
        states, write_states = self.states, self.write_states
        for trace, local, own in reversed(self.plans):
            if trace.flat_inputs([values[i] for i in local], leaves, tree, exact=True) is not None:
                return _plan_states(local, own, states, write_states) + (trace,)
        return None

    def signatures(self) -> List[StateSignature]:
        """The signature of each trace it keeps, newest first (none once a state died).

        What brainstate's inspection API of its function reads
        (:attr:`~brainx.transform.core.stateful_api.StatefulFunctionAPI.kept_traces`).
        """
        states, write_states = self.states, self.write_states
        if any(s is None for s in states):
            return []
        sigs = []
        for trace, local, own in reversed(self.plans):
            picked, written = _plan_states(local, own, states, write_states)
            sigs.append(StateSignature(picked, written, trace.read, trace))
        return sigs

    def values(self) -> Optional[list]:
        """The states' current values (``None`` if one was garbage collected)."""
        if _THREAD.frames or LENT:  # LENT: checked reads (a state may hold a dead tracer)
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


def trace_holds_tracers(trace: Any) -> bool:
    """Whether ``trace`` closes over values of an enclosing trace (constants or settings read)."""
    return any(isinstance(x, jax.core.Tracer)
               for x in (*trace.consts, *jax.tree.leaves([v for _, v in trace.env_reads])))


def _plan_states(local: tuple, own: tuple, states: tuple, write_states: tuple) -> tuple:
    """``(states, written)`` of one trace of an entry: its states in its order, and which it writes."""
    written = {id(write_states[k]) for k in own}
    picked = tuple(states[i] for i in local)
    return picked, tuple(id(s) in written for s in picked)
