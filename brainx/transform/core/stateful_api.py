"""brainstate's inspection API of ``StatefulFunction``: a cache of traces by argument types.

brainx's transforms trace a function once per call and need no cache here;
brainstate programs call ``sf.make_jaxpr(*args)`` and then ask for the jaxpr,
the states, the output shapes, or evaluate the jaxpr themselves. This mixin
gives :class:`~brainx.transform.StatefulFunction` those methods, over a small
bounded cache of traces keyed by :meth:`get_arg_cache_key`.

A transform that keeps its own traces (``jit``, in its entries) files nothing
here while it traces: it sets :attr:`StatefulFunctionAPI.kept_traces`, and the
methods read what it keeps on their first call after a new trace (the
``*_by_cache`` family finds ``jit``'s traces so, as in brainstate).

The jaxpr of :meth:`get_jaxpr` has brainstate's layout: inputs are the
dynamic arguments' leaves followed by the leaves of every state's value (in
:meth:`get_states` order); outputs are the function's output, then the new
values of the written states (with ``return_only_write``) or of every state.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, Hashable, Iterable, NamedTuple, Optional, Sequence, Tuple

import jax

from brainx.environ.settings import settings_unchanged
from brainx.state.weak_refs import StateRef
from brainx.state.state import _EPOCH, State
from brainx.state.trace import StateTraceStack
from brainx.transform.core import cache_check
from brainx.transform.core.jaxpr_builder import abstractify
from brainx.transform.core.state_io import peek_state_values, read_state_values, write_state_values
from brainx.transform.core.state_values import _is_array_like

__all__ = ["StatefulFunctionAPI", "CacheKey"]

_MAX_CACHED = 128


class CacheKey(NamedTuple):
    """The key of one trace: what :meth:`StatefulFunctionAPI.get_arg_cache_key` returns.

    Static arguments by value (with their type: ``1`` and ``1.0`` differ), dynamic ones
    by tree structure and abstract value. An immutable, hashable named tuple, as
    brainstate's (its field names).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> sf = brainx.transform.StatefulFunction(lambda x, n: x * n, static_argnums=1)
    >>> key = sf.get_arg_cache_key(jnp.ones(3), 2)
    >>> key.static_args, key == sf.get_arg_cache_key(jnp.zeros(3), 2)
    (((1, <class 'int'>, 2),), True)
    """

    static_args: tuple
    dyn_args: tuple
    static_kwargs: tuple
    dyn_kwargs: tuple


class StatefulFunctionAPI:
    """Mixin: brainstate's ``StatefulFunction`` methods (see the module docstring)."""

    return_only_write: bool = True

    #: Set by a transform that keeps traces of this function itself (``jit``):
    #: ``kept_traces(static_key)`` yields ``(static_key, StateSignature)`` for the
    #: traces it keeps and still trusts under that static key (every key: ``None``),
    #: newest first. The methods here file them when first asked (:meth:`_import_kept`).
    kept_traces: Optional[Callable[[Any], Iterable[Tuple[Any, Any]]]] = None

    # -- the cache ------------------------------------------------------------------
    def _api_cache(self) -> "OrderedDict[Hashable, Any]":
        cache = self.__dict__.get("_traces")
        if cache is None:
            cache = self.__dict__["_traces"] = OrderedDict()
            self.__dict__["_stats"] = {"hits": 0, "misses": 0}
            self.__dict__["_trace_args"] = {}  # cache key -> the arguments' shapes
            self.__dict__["_jaxprs"] = {}      # cache key -> its jaxpr, made once
            self.__dict__["_epochs"] = {}      # cache key -> the structure epoch it was traced in
            self.__dict__["_imported"] = {}    # cache key -> the kept trace filed last
        return cache

    def _key_of(self, key, dyn_args: tuple, dyn_kwargs: dict) -> CacheKey:
        static_args, static_kwargs = key if key else ((), ())
        return CacheKey(static_args, self._types_of(dyn_args), static_kwargs,
                        self._types_of(dyn_kwargs))

    def _types_of(self, tree: Any) -> tuple:
        """``(treedef, abstract leaves)``: a non-array leaf is kept by value."""
        leaves, treedef = jax.tree.flatten(tree)
        return treedef, tuple(abstractify(x) if self._traceable(x) else ("static", x)
                              for x in leaves)

    def get_arg_cache_key(self, *args, compile_if_miss: bool = False, **kwargs) -> Hashable:
        """The cache key of a call: the static arguments and the dynamic ones' types."""
        key, dyn_args, dyn_kwargs = self.split_args(args, kwargs)
        cache_key = self._key_of(key, dyn_args, dyn_kwargs)
        if compile_if_miss and cache_key not in self._api_cache():
            self.make_jaxpr(*args, **kwargs)
        return cache_key

    @staticmethod
    def _traceable(x: Any) -> bool:
        return _is_array_like(x)

    def make_jaxpr(self, *args, **kwargs):
        """Trace the function for these arguments (once per cache key); returns ``self``."""
        cache = self._api_cache()
        key, dyn_args, dyn_kwargs = self.split_args(args, kwargs)
        cache_key = self._key_of(key, dyn_args, dyn_kwargs)
        sig = self._lookup(cache_key)
        if sig is not None and not self._fits(sig, cache_key, args, kwargs):
            sig = None  # a state was replaced or changed shape: a miss, re-filed in place below
        if sig is not None:
            self._stats["hits"] += 1
            cache.move_to_end(cache_key)
            return self
        self._stats["misses"] += 1
        self.remember(key, dyn_args, dyn_kwargs, self.discover(key, dyn_args, dyn_kwargs))
        return self

    def remember(self, key, dyn_args: tuple, dyn_kwargs: dict, sig, weak: bool = False) -> None:
        """File a trace made for these arguments under their cache key.

        Keeps the arguments' shapes, not their values, so the ``*_by_cache``
        methods can rebuild the jaxpr without holding the arrays. A ``weak``
        trace holds its states weakly: it is forgotten once one of them is
        garbage collected.
        """
        self._file(self._key_of(key, dyn_args, dyn_kwargs), sig, jax.tree.map(
            lambda x: _shape_of(x) if self._traceable(x) else x, (dyn_args, dyn_kwargs)), weak)

    def _file(self, cache_key: CacheKey, sig, trace_args: tuple, weak: bool) -> None:
        cache = self._api_cache()
        cache[cache_key] = _WeakSignature(sig) if weak else sig
        self._epochs[cache_key] = _EPOCH[0]
        cache.move_to_end(cache_key)
        self._trace_args[cache_key] = trace_args
        self._jaxprs.pop(cache_key, None)
        while len(cache) > _MAX_CACHED:
            old, _ = cache.popitem(last=False)
            self._forget(old)

    def _import_kept(self, cache_key: Optional[CacheKey] = None) -> None:
        """File the traces :attr:`kept_traces` gives that are new since the last look.

        Only ``cache_key``'s (every key's: ``None``); of a key's traces the
        newest, as if each trace had been filed when it was made. Nothing runs
        while the transform traces: the bookkeeping is done here, when a
        method of brainstate's API asks.
        """
        kept = self.kept_traces
        if kept is None:
            return
        self._api_cache()
        static_key = None if cache_key is None else self._static_key(cache_key)
        seen = set()
        for key, sig in kept(static_key):
            found = _key_of_trace(key, sig.trace)
            if found is None or found in seen or (cache_key is not None and found != cache_key):
                continue
            seen.add(found)
            if self._imported.get(found) is not sig.trace:
                self._imported[found] = sig.trace
                self._file(found, sig, _shapes_of_key(found), weak=True)

    def _static_key(self, cache_key: CacheKey) -> Any:
        """The static part of ``cache_key`` as :meth:`split_args` gives it."""
        if not (self.static_argnums or self.static_argnames):
            return ()
        return cache_key.static_args, cache_key.static_kwargs

    def _cached(self, args, kwargs, compile_if_miss: bool):
        cache_key = self.get_arg_cache_key(*args, **kwargs)
        sig = self._lookup(cache_key)
        if sig is not None and not self._fits(sig, cache_key, args, kwargs):
            if not compile_if_miss:
                raise ValueError(
                    f"{self.name}: the trace for these arguments is stale: the shape or dtype "
                    f"of a state it uses changed since ({self._stale_states(sig)}). Call "
                    "make_jaxpr(*args, **kwargs) again, or pass compile_if_miss=True.")
            sig = None  # make_jaxpr re-files it in place: another thread never sees a hole
        if sig is None:
            if not compile_if_miss:
                raise ValueError(f"{self.name}: no trace for these arguments (not compiled "
                                 "yet); call make_jaxpr(*args, **kwargs) first, or pass "
                                 "compile_if_miss=True.")
            self.make_jaxpr(*args, **kwargs)
            sig = self._lookup(cache_key)
        return sig

    def _lookup(self, cache_key: Hashable):
        """The trace under ``cache_key`` (``None``: none, or one of its states died)."""
        self._import_kept(cache_key)
        cache = self._api_cache()
        sig = cache.get(cache_key)
        if type(sig) is _WeakSignature:
            sig = sig.resolve()
            if sig is None:
                self._forget(cache_key)
        return sig

    def _fits(self, sig, cache_key: Hashable, args: tuple, kwargs: dict) -> bool:
        """Whether ``sig``'s trace still holds: no module's states were rebound since it was
        made (``structure_changed``: the function may reach other states now), the
        settings it read (``brainx.environ``) are unchanged, and the states' current
        values (and these arguments) have the trace's types."""
        if self._epochs.get(cache_key) != _EPOCH[0]:
            return False
        if not settings_unchanged(sig.trace.env_reads):
            return False
        key, dyn_args, dyn_kwargs = self.split_args(args, kwargs)
        if sig.trace.flat_inputs(peek_state_values(sig.states),
                                 *jax.tree.flatten((dyn_args, dyn_kwargs))) is None:
            return False
        if cache_check.enabled():
            with cache_check.fresh_tracing():
                fresh = self.discover(key, dyn_args, dyn_kwargs)
            cache_check.check_reuse("make_jaxpr cache", self.name, sig.states, sig.written,
                                    sig.trace, fresh)
        return True

    def _stale_states(self, sig) -> str:
        return ", ".join(repr(s) for s in sig.states) or "no states"

    def _forget(self, cache_key: Hashable) -> None:
        self._api_cache().pop(cache_key, None)
        self._trace_args.pop(cache_key, None)
        self._jaxprs.pop(cache_key, None)
        self._epochs.pop(cache_key, None)

    def _by_cache(self, cache_key: Hashable):
        sig = self._lookup(cache_key)
        if sig is None:
            self._import_kept()
            known = list(self._api_cache())
            raise ValueError(
                f"{self.name}: no trace under this cache key (not compiled yet); call "
                "make_jaxpr() (or the function) with those arguments first "
                "(get_arg_cache_key(*args) gives their key).\n"
                f"  Requested key: {cache_key!r}\n"
                f"  Available keys ({len(known)}, the latest 5 shown): "
                + ("none" if not known else "\n    " + "\n    ".join(map(repr, known[-5:]))))
        return sig

    # -- by cache key (brainstate's *_by_cache family) ---------------------------------
    def get_states_by_cache(self, cache_key: Hashable) -> Tuple[State, ...]:
        """The states of the trace filed under ``cache_key`` (see :meth:`get_arg_cache_key`)."""
        return self._by_cache(cache_key).states

    def get_read_states_by_cache(self, cache_key: Hashable) -> Tuple[State, ...]:
        """The states that trace reads and does not write."""
        return self._by_cache(cache_key).read_only_states

    def get_write_states_by_cache(self, cache_key: Hashable) -> Tuple[State, ...]:
        """The states that trace writes."""
        return self._by_cache(cache_key).write_states

    def get_state_trace_by_cache(self, cache_key: Hashable) -> StateTraceStack:
        """A :class:`~brainx.StateTraceStack` of what that trace recorded."""
        return self._trace_stack(self._by_cache(cache_key))

    def get_jaxpr_by_cache(self, cache_key: Hashable):
        """That trace's ``ClosedJaxpr`` in brainstate's layout (made once, then the same object)."""
        sig = self._by_cache(cache_key)
        jaxpr = self._jaxprs.get(cache_key)
        if jaxpr is None:
            dyn_args, dyn_kwargs = self._trace_args[cache_key]
            jaxpr = self._jaxprs[cache_key] = jax.make_jaxpr(self._layout(sig))(
                dyn_args, dyn_kwargs, [s.value for s in sig.states])
        return jaxpr

    def get_out_shapes_by_cache(self, cache_key: Hashable):
        """``(output shapes, new state value shapes)`` of that trace."""
        sig = self._by_cache(cache_key)
        dyn_args, dyn_kwargs = self._trace_args[cache_key]
        return jax.eval_shape(self._layout(sig), dyn_args, dyn_kwargs,
                              [s.value for s in sig.states])

    def get_out_treedef_by_cache(self, cache_key: Hashable):
        """The tree structure of that trace's ``(output, new state values)``."""
        return jax.tree.structure(self.get_out_shapes_by_cache(cache_key))

    def clear_cache(self) -> None:
        """Forget the traces kept for brainstate's inspection methods."""
        self._api_cache().clear()
        self._trace_args.clear()
        self._jaxprs.clear()
        self._epochs.clear()
        self._imported.clear()

    def get_cache_stats(self) -> Dict[str, Any]:
        """``{'compilation_cache': {size, maxsize, hits, misses, hit_rate}}``."""
        self._import_kept()
        cache = self._api_cache()
        hits, misses = self._stats["hits"], self._stats["misses"]
        total = hits + misses
        return {"compilation_cache": {"size": len(cache), "maxsize": _MAX_CACHED, "hits": hits,
                                      "misses": misses, "hit_rate": hits / total if total else 0.0}}

    # -- what a trace found ----------------------------------------------------------
    def get_states(self, *args, compile_if_miss: bool = True, **kwargs) -> Tuple[State, ...]:
        """Every state the function touches, in first-touch order."""
        return self._cached(args, kwargs, compile_if_miss).states

    def get_read_states(self, *args, compile_if_miss: bool = True, **kwargs) -> Tuple[State, ...]:
        """The states the function reads and does not write."""
        return self._cached(args, kwargs, compile_if_miss).read_only_states

    def get_write_states(self, *args, compile_if_miss: bool = True, **kwargs) -> Tuple[State, ...]:
        """The states the function writes."""
        return self._cached(args, kwargs, compile_if_miss).write_states

    def get_state_trace(self, *args, compile_if_miss: bool = True, **kwargs) -> StateTraceStack:
        """A :class:`~brainx.StateTraceStack` holding what the trace recorded."""
        return self._trace_stack(self._cached(args, kwargs, compile_if_miss))

    def _trace_stack(self, sig) -> StateTraceStack:
        trace = StateTraceStack(self.name)
        for s, r, w in zip(sig.states, sig.read, sig.written):
            trace._touched[s] = None
            if r:
                trace._read[s] = None
            if w:
                trace._written[s] = None
        return trace

    def get_jaxpr(self, *args, compile_if_miss: bool = True, **kwargs):
        """The ``ClosedJaxpr`` in brainstate's layout (see the module docstring)."""
        self._cached(args, kwargs, compile_if_miss)
        return self.get_jaxpr_by_cache(self.get_arg_cache_key(*args, **kwargs))

    def get_out_shapes(self, *args, compile_if_miss: bool = True, **kwargs):
        """``(output shapes, new state value shapes)`` as ``jax.ShapeDtypeStruct`` trees."""
        self._cached(args, kwargs, compile_if_miss)
        return self.get_out_shapes_by_cache(self.get_arg_cache_key(*args, **kwargs))

    def get_out_treedef(self, *args, compile_if_miss: bool = True, **kwargs):
        """The tree structure of ``(output, new state values)``."""
        return jax.tree.structure(self.get_out_shapes(*args, compile_if_miss=compile_if_miss,
                                                      **kwargs))

    def _layout(self, sig):
        pure = self.pure(sig)
        only_written = self.return_only_write

        def run(dyn_args, dyn_kwargs, values):
            out, new_values = pure(values, *dyn_args, **dyn_kwargs)
            new = iter(new_values)
            states = [next(new) if w else (None if only_written else v)
                      for v, w in zip(values, sig.written)]
            return out, states

        return run

    # -- evaluating it ---------------------------------------------------------------
    def jaxpr_call(self, state_vals, *args, **kwargs):
        """``(new_state_vals, out)`` from the trace, for given values of :meth:`get_states`.

        ``new_state_vals`` lines up with :meth:`get_states`; with
        ``return_only_write``, a state the function does not write is ``None``.
        """
        sig = self._cached(args, kwargs, True)
        state_vals = self._check_state_vals(sig, state_vals, "jaxpr_call")
        _, dyn_args, dyn_kwargs = self.split_args(args, kwargs)
        if sig.trace.flat_inputs(state_vals, *jax.tree.flatten((dyn_args, dyn_kwargs))) is None:
            raise ValueError(
                f"{self.name}.jaxpr_call: the state values do not have the shapes and dtypes "
                f"the trace was made with (states {list(sig.states)!r}). Give values shaped "
                "like get_states()' current values, or call make_jaxpr again.")
        return self._evaluate(sig, state_vals, dyn_args, dyn_kwargs)

    def _evaluate(self, sig, state_vals: list, dyn_args: tuple, dyn_kwargs: dict):
        """``(new_state_vals, out)`` of ``sig``'s jaxpr on values that fit it."""
        out, states = self._layout(sig)(dyn_args, dyn_kwargs, state_vals)
        return tuple(states), out

    def jaxpr_call_auto(self, *args, **kwargs):
        """Evaluate the trace on the states' current values and write the written ones back.

        A state whose shape or dtype changed since the trace makes a new trace
        (a cache miss), as a new argument type does.
        """
        sig = self._cached(args, kwargs, True)  # re-traced if the states no longer fit
        _, dyn_args, dyn_kwargs = self.split_args(args, kwargs)
        new_values, out = self._evaluate(sig, read_state_values(sig.states), dyn_args,
                                         dyn_kwargs)
        write_state_values(sig.write_states, [v for v, w in zip(new_values, sig.written) if w])
        return out

    def __call__(self, *args, **kwargs):
        """:meth:`jaxpr_call_auto`: run the function on the states, as brainstate's does.

        Examples
        --------
        >>> import jax.numpy as jnp, brainx
        >>> h = brainx.State(jnp.zeros(2))
        >>> def step(x):
        ...     h.value = h.value + x
        ...     return h.value.sum()
        >>> sf = brainx.transform.StatefulFunction(step)
        >>> float(sf(1.0)), float(sf(1.0)), h.value.tolist()
        (2.0, 4.0, [2.0, 2.0])
        """
        return self.jaxpr_call_auto(*args, **kwargs)

    def _check_state_vals(self, sig: Any, state_vals: Sequence[Any], method: str) -> list:
        """``state_vals`` as a list, refused unless it has one value (not None) per state."""
        state_vals = list(state_vals)
        if len(state_vals) != len(sig.states):
            raise ValueError(f"State length mismatch: {self.name}.{method} expected values for "
                             f"{len(sig.states)} states ({list(sig.states)!r}), got "
                             f"{len(state_vals)}. Pass one value per state of get_states(), "
                             "in that order.")
        missing = [i for i, v in enumerate(state_vals) if v is None]
        if missing:
            raise ValueError(f"{self.name}.{method}: state_vals has None at index {missing}; "
                             "every state needs a value.")
        return state_vals

    def debug_call(self, state_vals, *args, **kwargs):
        """Like :meth:`jaxpr_call`, but running the Python function eagerly on the values.

        The states are given ``state_vals`` and keep the values the function
        leaves in them (as in brainstate). A ``state_vals`` of the wrong
        length, or with a ``None``, is a ``ValueError`` before any state
        changes; if the function raises, every state gets its value back.

        Examples
        --------
        >>> import jax.numpy as jnp, brainx
        >>> h = brainx.State(jnp.zeros(2))
        >>> def step(x):
        ...     h.value = h.value + x
        ...     return h.value.sum()
        >>> sf = brainx.transform.StatefulFunction(step)
        >>> new, out = sf.debug_call([jnp.ones(2)], 1.0)
        >>> new[0].tolist(), float(out)
        ([2.0, 2.0], 4.0)
        """
        sig = self._cached(args, kwargs, True)
        state_vals = self._check_state_vals(sig, state_vals, "debug_call")
        before = [s.value for s in sig.states]
        try:
            for s, v in zip(sig.states, state_vals):
                s.restore_value(v)
            out = self.fun(*args, **kwargs)
        except BaseException:
            # put every value back as it was, whatever the function left (even another tree)
            write_state_values(sig.states, before)
            raise
        return tuple(s.value if (w or not self.return_only_write) else None
                     for s, w in zip(sig.states, sig.written)), out

    def validate_states(self, cache_key: Hashable) -> bool:
        """Whether every state of the trace under ``cache_key`` is still usable."""
        sig = self._lookup(cache_key)
        if sig is None:
            raise ValueError(f"{self.name}: no trace under {cache_key!r}.")
        for s in sig.states:
            s.value  # noqa: B018 - raises ExpiredStateError for a dead trace's state
        return True

    def validate_all_states(self) -> Dict[Hashable, Any]:
        """:meth:`validate_states` for every kept trace: ``True``, or the error's message."""
        results: Dict[Hashable, Any] = {}
        self._import_kept()
        for cache_key in list(self._api_cache()):
            try:
                results[cache_key] = self.validate_states(cache_key)
            except (ValueError, RuntimeError) as e:
                results[cache_key] = str(e)
        return results


class _WeakSignature:
    """A :class:`StateSignature` whose states are held weakly (a ``jit`` trace's)."""

    __slots__ = ("kind", "refs", "written", "read", "trace")

    def __init__(self, sig):
        self.kind = type(sig)  # StateSignature (defined in stateful.py, which imports this module)
        self.refs = tuple(StateRef(s) for s in sig.states)
        self.written, self.read, self.trace = sig.written, sig.read, sig.trace

    def resolve(self):
        states = tuple(r() for r in self.refs)
        if any(s is None for s in states):
            return None
        return self.kind(states, self.written, self.read, self.trace)


def _shape_of(x: Any) -> jax.ShapeDtypeStruct:
    """``x``'s shape, dtype and weak type (a trace made for a weak type fits only a weak type)."""
    return _shape_of_aval(abstractify(x))


def _shape_of_aval(aval: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _key_of_trace(static_key: Any, trace: Any) -> Optional[CacheKey]:
    """The cache key of the calls ``trace`` was made for (``None``: it baked in an
    argument leaf it did not trace, whose value the trace does not keep)."""
    if trace is None or trace.in_tree is None or not all(trace.arg_mask):
        return None
    args_tree, kwargs_tree = trace.in_tree.children()
    avals = trace.in_avals[:len(trace.arg_mask)]
    n = args_tree.num_leaves
    static_args, static_kwargs = static_key if static_key else ((), ())
    return CacheKey(static_args, (args_tree, tuple(avals[:n])), static_kwargs,
                    (kwargs_tree, tuple(avals[n:])))


def _shapes_of_key(cache_key: CacheKey) -> tuple:
    """``(dyn_args, dyn_kwargs)`` as shapes, rebuilt from a cache key (a kept value as it is)."""
    def rebuild(types: tuple) -> Any:
        treedef, leaves = types
        return jax.tree.unflatten(treedef, [x[1] if type(x) is tuple else _shape_of_aval(x)
                                            for x in leaves])

    return rebuild(cache_key.dyn_args), rebuild(cache_key.dyn_kwargs)
