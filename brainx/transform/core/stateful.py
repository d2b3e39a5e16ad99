"""The one core under every stateful transform.

A :class:`StatefulFunction` wraps a user function that reads and writes
:class:`~brainx.State` objects. For one call it *traces* the function once to
a jaxpr (:meth:`StatefulFunction.discover`): the states' values are not
arguments, so the trace starts with the function's arguments as inputs and
adds a state's value as a new input the first time the function reads it (see
:mod:`brainx.transform.core.jaxpr_builder`). Writes go to the trace's overlay (see
:class:`~brainx.state.trace.TransformScope`); at the end, the new values of
the written states become outputs. The result is a :class:`StateSignature`:
the states in first-touch order, which were written, and the jaxpr.

Every transform then runs the JAX transform on the *pure* function

    pure(state_values, *dynamic_args, **dynamic_kwargs) -> (out, written_values)

which evaluates that jaxpr (:meth:`StatefulFunction.pure`), and writes the
returned values back (:func:`read_state_values`, :func:`write_state_values`).
So the user's Python runs once per call signature, JAX never sees a state's
concrete value while tracing it, and what the trace found is exactly what
runs. (``transform.grad`` inside a brainx trace skips discovery: it runs the
function once under the JAX transform, through the same
:func:`~brainx.transform.core.scope_run.run_in_scope`.)

A ``jit`` keeps signatures across calls; if JAX traces ``pure`` for argument
types its jaxpr was not made for, ``pure`` raises :class:`RetraceNeeded` and
the owner traces the function again (:func:`run_with_rediscovery`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import jax
import numpy as np
from jax.core import Tracer

from brainx.environ import reads as env_reads
from brainx.state.state import State
from brainx.state.lending import transform_call
from brainx.transform.core.arguments import (
    check_hashable, check_static_argnames, fixed_positional_count, function_name, infer_static,
    normalize_argnums,
)
from brainx.transform.core.stateful_api import StatefulFunctionAPI
from brainx.transform.core.state_io import (
    peek_state_values, read_state_values, write_state_values,
)
from brainx.transform.core.state_values import (
    LEAF, StaticLeaves, WrittenSpec, _as_array, _is_array_like, as_input, build_written,
    has_static_leaves, is_array_leaf, is_single_array,
)
from brainx.transform.core.jaxpr_builder import (
    abstractify, current_trace, eval_jaxpr, jax_context, new_input, trace_to_jaxpr,
)
from brainx.transform.core.scope_run import refuse_state_arguments, run_in_scope
from brainx.transform.core.jaxpr_equal import jaxprs_equal
from brainx.transform.ir.optimize import _pipeline, optimize_jaxpr
from brainx.transform.core.cache_check import (
    check_same_trace, enabled as check_enabled, tracing_fresh,
)

__all__ = [
    "StatefulFunction", "StateSignature", "JaxprTrace", "RetraceNeeded", "run_with_rediscovery",
    "same_key", "const_digests",
    # the core's face: value I/O and value types, defined in state_io / state_values
    "read_state_values", "write_state_values", "peek_state_values", "StaticLeaves",
    "as_input", "has_static_leaves", "is_array_leaf",
]


class RetraceNeeded(Exception):
    """Raised while JAX traces ``pure`` for arguments its jaxpr was not traced with.

    ``owner`` is the :class:`StatefulFunction` whose signature does not fit;
    only it handles the exception, so an inner transform's miss never makes
    an outer one trace again.
    """

    def __init__(self, owner: "StatefulFunction", states: Sequence[State] = ()):
        super().__init__(owner, states)
        self.owner = owner
        self.states = tuple(states)


@dataclass(frozen=True, eq=False)
class JaxprTrace:
    """One trace of a stateful function: its jaxpr and how values map onto it.

    The jaxpr's inputs are the traced argument leaves (``arg_mask`` says
    which), then the array leaves of the values of the states at positions
    ``inputs`` of the signature; its outputs are the output's leaves, then the
    array leaves of the written states' new values. It holds no State, so a
    cache of traces does not keep states alive.

    A trace is the function's meaning for one *type* of call, and its key
    is what ``jax.jit``'s is: the tree structure of the arguments
    (``in_tree``) and of every state value read (``input_trees``), with
    their static data (dict keys, node types, static dataclass fields,
    brainunit units), and the leaves' shapes, dtypes and weak types
    (``in_avals``). :meth:`flat_inputs` refuses values of any other type, so
    no cache replays a trace for another structure.
    """

    jaxpr: Any
    consts: Sequence[Any]
    arg_mask: Tuple[bool, ...]
    in_avals: Tuple[Any, ...]
    inputs: Tuple[int, ...]
    out_tree: Any
    written_specs: Tuple[WrittenSpec, ...]
    # For each input state whose value had leaves JAX cannot trace (a string): those
    # leaves, which the trace baked in (None: all leaves are arrays).
    input_statics: Tuple[Any, ...] = ()
    # The global settings (brainx.environ) the trace read, and the values it baked in.
    env_reads: Tuple[Tuple[Any, Any], ...] = ()
    # The tree structure of ``(dyn_args, dyn_kwargs)`` and of each input state's value
    # (``LEAF`` for one array), static data included: part of the trace's key.
    in_tree: Any = None
    input_trees: Tuple[Any, ...] = ()
    # A digest of each constant that is a mutable NumPy array, taken when the trace was made:
    # JAX keeps such a constant as a view of the user's array (see :func:`const_digests`).
    const_digests: Tuple[Any, ...] = ()
    # The JAX settings it was traced under (:func:`jax_context`): another random-bits mode
    # or matmul precision traces again, as under ``jax.jit``.
    jax_context: Any = None
    # Which states of the signature the function read (first-touch order, as ``inputs``
    # counts them): brainstate's inspection API rebuilds a kept trace's signature from it.
    read: Tuple[bool, ...] = ()

    def flat_inputs(self, state_values: Sequence[Any], arg_leaves: Sequence[Any],
                    arg_tree: Any, exact: bool = False):
        """The jaxpr's input list for these values, or ``None`` if their types do not fit.

        ``arg_leaves`` and ``arg_tree`` are ``jax.tree.flatten((dyn_args,
        dyn_kwargs))``. The types fit when every tree structure equals the
        trace's (static data included) and every leaf has its aval's shape
        and dtype. ``exact``: the weak types must match too, as in
        ``jax.jit``'s cache key (``int8 + 100`` is int8, ``int8 + int32(100)``
        is int32). ``jit`` keeps traces across calls and asks for it; a loop
        body traced for a weakly typed initial carry runs as it is on the
        strong carry ``lax.scan`` makes of it.
        """
        if arg_tree != self.in_tree or jax_context() != self.jax_context:
            return None
        flat = [x for x, m in zip(arg_leaves, self.arg_mask) if m]
        for i, tree, statics in zip(self.inputs, self.input_trees,
                                    self.input_statics or [None] * len(self.inputs)):
            value = state_values[i]
            if is_single_array(value):
                if tree != LEAF:
                    return None
                flat.append(value)
                continue
            if type(value) is StaticLeaves:
                value = value.tree
            leaves, treedef = jax.tree.flatten(value)
            if treedef != tree:
                return None  # dict keys, a node type, a static field or a unit changed
            if statics is not None and tuple(x for x in leaves if not is_array_leaf(x)) != statics:
                return None  # a string (or other static leaf) changed: trace again
            flat += [x for x in leaves if is_array_leaf(x)]
        if len(flat) != len(self.in_avals):
            return None
        for x, aval in zip(flat, self.in_avals):
            if not _same_type(x, aval, exact):
                return None
        return flat

    def run(self, state_values: Sequence[Any], arg_leaves: Sequence[Any], arg_tree: Any,
            exact: bool = False):
        """``(out, written_values)``, or ``None`` if the types do not fit (:meth:`flat_inputs`)."""
        flat = self.flat_inputs(state_values, arg_leaves, arg_tree, exact)
        if flat is None:
            return None
        outs = eval_jaxpr(self.jaxpr, self.consts, *flat)
        outs = [o if isinstance(o, (jax.Array, Tracer)) else _as_array(o, v.aval)
                for o, v in zip(outs, self.jaxpr.outvars)]
        k = self.out_tree.num_leaves
        out = jax.tree.unflatten(self.out_tree, outs[:k])
        return out, build_written(self.written_specs, outs[k:])


def _key_kind(value: Any) -> Any:
    """What a static argument's key holds beside its value: its type, and the sign of a zero
    (``-0.0 == 0.0``, but ``1 / x`` tells them apart)."""
    kind = type(value)
    if kind is float and value == 0.0 and math.copysign(1.0, value) < 0:
        return (kind, "-0.0")
    return kind


def same_key(a: JaxprTrace, b: JaxprTrace) -> bool:
    """Whether two traces were made for the same type of call and lay out their values alike.

    Everything but the jaxpr itself: argument and state-value tree
    structures, avals, which states are inputs, the output's and the
    written values' structures, the static leaves baked in, the digests of
    mutable constants and the JAX settings it was traced under. With
    :func:`jaxprs_equal` of their jaxprs, one trace may stand for the other.
    """
    return ((a.in_tree, a.arg_mask, a.in_avals, a.inputs, a.input_trees, a.input_statics,
             a.out_tree, a.written_specs, a.const_digests, a.jax_context)
            == (b.in_tree, b.arg_mask, b.in_avals, b.inputs, b.input_trees, b.input_statics,
                b.out_tree, b.written_specs, b.const_digests, b.jax_context))


@dataclass(frozen=True, eq=False)
class StateSignature:
    """The states one call of a function touches, and the trace of that call.

    ``states`` lists every state read or written, in first-touch order;
    ``written`` marks the ones written (assigned, or a container mutated in
    place); ``read`` the ones read. Only written states become outputs of the
    pure function; the others are inputs only. ``trace`` is the jaxpr.
    """

    states: Tuple[State, ...]
    written: Tuple[bool, ...]
    read: Tuple[bool, ...]
    trace: Optional[JaxprTrace] = field(default=None, repr=False)
    index: Dict[State, int] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.index.update({s: i for i, s in enumerate(self.states)})

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


def _same_type(x: Any, aval: Any, exact: bool) -> bool:
    try:
        other = abstractify(x)
    except TypeError:
        return False
    return (other.shape == aval.shape and other.dtype == aval.dtype
            and (not exact or other.weak_type == aval.weak_type))


def run_with_rediscovery(run: Callable[[Any], Any], sig: Any, rediscover: Callable[[], Any],
                         owns: Callable[[Any], bool]) -> Any:
    """``run(sig)``; if its trace finds ``sig`` does not fit, ``run(rediscover())`` once.

    Only a :class:`RetraceNeeded` whose owner ``owns`` accepts is handled here;
    an inner transform's is left to that transform.
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
        raise RuntimeError(  # pragma: no cover - a fresh trace always fits its own arguments
            f"{e.owner.name}: the jaxpr traced for these arguments does not fit them.") from None


_SELF = object()


class StatefulFunction(StatefulFunctionAPI):
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
    return_only_write : bool
        brainstate's inspection API: :meth:`jaxpr_call` gives ``None`` for the
        states the function does not write.
    axis_env : sequence of tuple, optional
        ``(axis name, size)`` pairs bound while tracing.
    ir_optimizations : str or sequence of str, optional
        Passes of :func:`~brainx.transform.optimize_jaxpr` run over each trace
        before it is used (``'constant_fold'``, ``'algebraic_simplification'``,
        ``'copy_propagation'``, ``'cse'``, ``'dce'``), as in brainstate. The
        function computes the same; XLA makes these rewrites itself when the
        function is compiled, so they matter for a jaxpr read or run eagerly.

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

    #: Said first when a State is given as an argument (``grad``: use ``grad_states``).
    state_argument_hint: str = ""

    def __init__(self, fun: Callable, static_argnums=(), static_argnames=(),
                 name: Optional[str] = None, traced_argnums: Optional[Sequence[int]] = None,
                 return_only_write: bool = True, axis_env: Any = None,
                 ir_optimizations: Any = None):
        if not callable(fun):
            raise TypeError(f"Expected a callable, got {fun!r}.")
        self.fun = fun
        self.name = name or function_name(fun)
        self.traced_argnums = None if traced_argnums is None else tuple(traced_argnums)
        self.return_only_write = return_only_write
        self.ir_optimizations = None
        if ir_optimizations is not None:
            self.ir_optimizations = _pipeline(ir_optimizations)
        if axis_env:
            raise NotImplementedError(
                f"{self.name}: axis_env is not supported; trace inside brainx.transform.vmap "
                "(which binds the axis name) instead.")
        static_argnums = normalize_argnums(fun, static_argnums)
        if isinstance(static_argnames, str):
            static_argnames = (static_argnames,)
        self.static_argnums, self.static_argnames = infer_static(
            fun, static_argnums, tuple(static_argnames or ()))
        self._has_names = fixed_positional_count(fun) is not None
        self._last_jaxprs: Dict[Any, Tuple[Any, Sequence[Any], Any]] = {}  # see _reuse_jaxpr
        check_static_argnames(fun, self.static_argnames, self.name)

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
                check_hashable(a, f"positional argument {i}", self.name)
                static_pos.append((i, _key_kind(a), a))
            else:
                dyn_args.append(a)
        static_kw = []
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self.static_argnames:
                check_hashable(v, f"keyword argument {k!r}", self.name)
                static_kw.append((k, _key_kind(v), v))
            else:
                dyn_kwargs[k] = v
        # The type is part of the key: 1, 1.0 and True are equal but not interchangeable
        # (nor are -0.0 and 0.0: _key_kind).
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

    # -- discovery: the one trace ---------------------------------------------
    def signature(self, args: tuple, kwargs: dict) -> StateSignature:
        """Trace this call (arguments as given to the function) and return its signature."""
        key, dyn_args, dyn_kwargs = self.split_args(args, kwargs)
        return self.discover(key, dyn_args, dyn_kwargs)

    def discover(self, key, dyn_args: tuple, dyn_kwargs: dict,
                 outer_values: Optional[Dict[State, Any]] = None) -> StateSignature:
        """Trace the function once for these arguments: the states it touches, and its jaxpr.

        ``outer_values`` gives, for some states, the value to trace them with
        instead of the one visible outside (``vmap``: one lane's value).
        Nothing is changed: states created inside expire with the trace, and
        an exception leaves every state as it was.
        """
        leaves, tree = jax.tree.flatten((dyn_args, dyn_kwargs))
        if any(isinstance(x, State) for x in leaves):
            refuse_state_arguments(dyn_args, dyn_kwargs, self.name, self.state_argument_hint)
        arg_mask = tuple(self._traced_leaves(dyn_args, leaves))
        in_avals = [abstractify(x) for x, m in zip(leaves, arg_mask) if m]
        found: Dict[str, Any] = {}

        def traced(*arrays):
            trace = current_trace()

            def lift_value(state, outer):
                if outer_values is not None and state in outer_values:
                    outer = outer_values[state]
                if is_single_array(outer):  # most states: no tree to flatten
                    return new_input(trace, abstractify(outer))
                value_leaves, treedef = jax.tree.flatten(outer)
                return jax.tree.unflatten(treedef, [
                    new_input(trace, abstractify(x)) if is_array_leaf(x) else x
                    for x in value_leaves])

            it = iter(arrays)
            full = [next(it) if m else x for x, m in zip(leaves, arg_mask)]
            args, kwargs = self.merge_args(key, *jax.tree.unflatten(tree, full))
            run = run_in_scope(self.fun, args, kwargs, self.name, lift_value)
            states, lifted = run.states, run.lifted
            inputs = tuple(i for i, s in enumerate(states) if s in lifted)
            statics = tuple(_lifted_statics(lifted[states[i]]) for i in inputs)
            found.update(states=states, written=run.written, read=run.read, inputs=inputs,
                         input_trees=tuple(lifted[states[i]][0] for i in inputs),
                         input_statics=statics if any(x is not None for x in statics) else (),
                         out_tree=run.out_tree, specs=run.specs)
            return run.out_leaves + run.new_arrays()

        context = jax_context()
        with env_reads.recording() as settings:
            jaxpr, consts = trace_to_jaxpr(traced, in_avals, self.name)
        if self.ir_optimizations is not None:
            jaxpr = optimize_jaxpr(jaxpr, optimizations=self.ir_optimizations)
        trace = self._reuse_jaxpr(key, JaxprTrace(
            jaxpr=jaxpr, consts=consts, arg_mask=arg_mask,
            in_avals=tuple(v.aval for v in jaxpr.invars), inputs=found["inputs"],
            out_tree=found["out_tree"], written_specs=found["specs"],
            input_statics=found["input_statics"], env_reads=env_reads.snapshot(settings),
            in_tree=tree, input_trees=found["input_trees"], const_digests=const_digests(consts),
            jax_context=context, read=found["read"]))
        return StateSignature(states=found["states"], written=found["written"],
                              read=found["read"], trace=trace)

    def _reuse_jaxpr(self, key: Any, trace: JaxprTrace) -> JaxprTrace:
        """``trace``, holding the previous trace's jaxpr objects where the two are equal.

        A function called outside ``jit`` (an eager ``grad``, ``vmap`` or
        ``checkpoint``) is traced on every call, since its Python may have
        changed. JAX keeps what it derives from a jaxpr (a loop body's JVP, the
        executable of a primitive run eagerly) by the jaxpr *object*, so an equal
        but new jaxpr on each call would compile again; the previous one
        (:func:`jaxprs_equal`: the same computation) is used instead.
        """
        if tracing_fresh() or any(isinstance(c, Tracer) for c in trace.consts):
            return trace  # an enclosing trace's values: kept by nothing beyond it
        last = self._last_jaxprs.get(key)
        if (last is not None and last[2] == trace.const_digests
                and jaxprs_equal(last[0], last[1], trace.jaxpr, trace.consts)):
            reused = replace(trace, jaxpr=last[0], consts=last[1])
            if check_enabled():
                check_same_trace("jaxpr kept per static key", self.name, reused, trace)
            return reused
        self._last_jaxprs[key] = (trace.jaxpr, trace.consts, trace.const_digests)
        if len(self._last_jaxprs) > 8:
            del self._last_jaxprs[next(iter(self._last_jaxprs))]
        return trace

    def _traced_leaves(self, dyn_args: tuple, leaves: list) -> list:
        """Which argument leaves are inputs of the trace; the others are constants of it.

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

    # -- the pure function ----------------------------------------------------
    def pure(self, sig: StateSignature, key=None) -> Callable:
        """``pure(state_values, *dyn_args, **dyn_kwargs) -> (out, written_values)``.

        Evaluates the jaxpr of ``sig`` (the user's function is not run again).
        ``state_values`` line up with ``sig.states``. Arguments of other types
        than the trace's raise :class:`RetraceNeeded`.
        """
        return self.pure_of(sig.trace)

    def pure_of(self, trace: JaxprTrace, owner: Any = _SELF, exact: bool = False) -> Callable:
        """:meth:`pure` for a :class:`JaxprTrace` (holds no State).

        Its :class:`RetraceNeeded` names ``owner`` (this function by default;
        ``None``: whoever calls it). ``exact``: see :meth:`JaxprTrace.flat_inputs`.
        """
        owner = self if owner is _SELF else owner

        def pure(state_values, *dyn_args, **dyn_kwargs):
            result = trace.run(state_values, *jax.tree.flatten((dyn_args, dyn_kwargs)), exact)
            if result is None:
                raise RetraceNeeded(owner)
            return result

        pure.__name__ = f"pure_{getattr(self.fun, '__name__', 'fun')}"
        return pure

    def call(self, run: Callable[[StateSignature, Any, tuple, dict], Any], args: tuple,
             kwargs: dict):
        """``run(sig, key, dyn_args, dyn_kwargs)`` with this call's signature (one trace)."""
        key, dyn_args, dyn_kwargs = self.split_args(args, kwargs)
        with transform_call():  # states lent to raw traces inside it are put back at its end
            return run(self.discover(key, dyn_args, dyn_kwargs), key, dyn_args, dyn_kwargs)

    def __repr__(self) -> str:
        return f"StatefulFunction({self.name})"


def _lifted_statics(lifted: Tuple[Any, list]) -> Any:
    """The leaves of a lifted state value that JAX cannot trace (``None``: there are none)."""
    _, leaves = lifted
    statics = tuple(x for x in leaves if not isinstance(x, Tracer) and not is_array_leaf(x))
    return statics or None


def const_digests(consts: Sequence[Any]) -> Tuple[Any, ...]:
    """A digest of each constant that is a writeable NumPy array (``None`` for the others).

    JAX keeps a NumPy array a function closes over as a constant that is a
    view of the user's array, so comparing an old trace's constant with a
    new one's after ``K[:] = 2`` compares the buffer with itself. The digest,
    taken when the trace is made, is what the trace baked in; two traces are
    the same only if their digests are equal too.
    """
    return tuple(_digest(c) if isinstance(c, np.ndarray) and c.flags.writeable else None
                 for c in consts)


def _digest(array: np.ndarray) -> Tuple[Any, ...]:
    data = np.ascontiguousarray(array)
    return (array.shape, array.dtype.str, hashlib.blake2b(data.view(np.uint8).ravel(),
                                                          digest_size=16).digest())


