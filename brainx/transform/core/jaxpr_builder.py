"""Trace a function to a jaxpr whose inputs grow as it reads states.

A stateful transform does not know, before it traces the user's function,
which states the function reads. It learns that *during* the trace: the first
read of a state makes the state's value a new input of the jaxpr being built
(:func:`new_input`), so the one trace that finds the states is also the trace
that is run, and JAX never sees a state's concrete value while tracing a brainx
transform (a concrete value seen there would be baked into the jaxpr as a
constant, and cached with it by any raw ``jax.jit`` helper the function calls).

It uses JAX's private tracing machinery (partial evaluation's dynamic trace,
through :mod:`brainx._jax.internals`): JAX has no public way to add an input
to a trace in progress. The rest of brainx calls :func:`trace_to_jaxpr`
and :func:`new_input`.

JAX's caches and raw helpers. A raw ``jax.jit`` / ``lax.scan`` /
``jax.checkpoint`` helper that reads a state captures the value it sees (a
constant outside brainx, a tracer of the brainx trace inside one) in the trace
JAX caches for the helper. Reused where the state's value is another (another
brainx trace, after the state was written) that cached trace would compute
with a stale value. So brainx keeps a configuration value that is part of
JAX's trace-cache key (``brainx_trace_id``):

* inside brainx traces it is a number of the thread's own, never the value
  outside them, so a helper traced eagerly with a state as a constant is never
  reused inside a trace;
* it moves to a fresh number at the next *cache boundary* (a brainx trace
  starting or ending, a state written inside one) after a raw trace inside a
  brainx trace read a state (:func:`note_raw_capture`).

A program whose raw helpers read no state never changes the number, so JAX's
caches (``jax.numpy``'s internally jitted functions among them) stay warm
across brainx traces, and outside them the key is JAX's own.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, List, Sequence, Tuple

import jax
from jax.extend import source_info_util as _source_info_util

from brainx._jax.internals import ArrayImpl as _ArrayImpl
from brainx._jax.internals import JaxprInputEffect as _JaxprInputEffect
from brainx._jax.internals import PRNGKeyArray as _PRNGKeyArray
from brainx._jax.internals import api_util as _api_util
from brainx._jax.internals import config as _config
from brainx._jax.internals import core as _core
from brainx._jax.internals import linear_util as _lu
from brainx._jax.internals import mesh as _mesh_lib
from brainx._jax.internals import partial_eval as _pe
from brainx._jax.traces import current_trace

__all__ = ["trace_to_jaxpr", "new_input", "note_raw_capture", "cache_boundary",
           "inside_brainx_trace", "jax_context",
           "abstractify", "eval_jaxpr",
           "CONCRETE_TYPES"]

#: What a compiled call returns (concrete, not traced): arrays, and typed PRNG keys.
CONCRETE_TYPES = frozenset({_ArrayImpl, _PRNGKeyArray})


def jax_context() -> tuple:
    """The JAX settings a trace depends on (``jax.jit``'s ``trace_context``, less the axis env).

    ``jax.threefry_partitionable``, ``jax.default_matmul_precision``, x64 and
    the other settings that change what tracing a function gives; a trace
    made under other values is not reused (as ``jax.jit`` does not). The
    axis environment, an object compared by identity, is left out: the
    transforms that bind axes key their traces themselves, and so is brainx's
    own ``brainx_trace_id`` (a nonce for JAX's caches, not a setting). An
    empty abstract mesh reads as no mesh: a ``custom_vjp`` rule runs under an
    empty one, and what is traced there is the same.
    """
    return tuple(None if _is_empty_mesh(x) else x
                 for i, x in enumerate(_config.trace_context())
                 if i != _TRACE_ID_POSITION and not isinstance(x, _core.AxisEnv))


def _is_empty_mesh(x: Any) -> bool:
    return isinstance(x, _mesh_lib.AbstractMesh) and x.empty


def _trace_id_state():
    name = "brainx_trace_id"
    try:
        return _config.int_state(
            name, 0, help="Which brainx trace is running (part of JAX's trace-cache key).",
            include_in_jit_key=True, include_in_trace_context=True)
    except Exception:  # pragma: no cover - defined already (module reloaded)
        return _config.config._value_holders[name]  # type: ignore[attr-defined]


_TRACE_ID = _trace_id_state()


def _position_in_trace_context(state: Any) -> int:
    """Where ``state``'s value stands in ``trace_context()`` (-1: not there)."""
    before = _config.trace_context()
    previous = state.swap_local(-7)
    try:
        after = _config.trace_context()
    finally:
        state.set_local(previous)
    moved = [i for i, (a, b) in enumerate(zip(before, after)) if a is not b and a != b]
    return moved[0] if len(moved) == 1 else -1


_TRACE_ID_POSITION = _position_in_trace_context(_TRACE_ID)
_IDS = itertools.count(1)


class _CacheKey(threading.local):
    """This thread's ``brainx_trace_id`` inside brainx traces, and whether it is spent."""

    def __init__(self):
        self.id = next(_IDS)  # never the value outside brainx traces, never another thread's
        self.captured = False  # a raw trace read a state under this id
        self.depth = 0  # brainx traces running in this thread


_KEY = _CacheKey()


def note_raw_capture() -> None:
    """A raw JAX trace read a state's value: the current cache key must not be used again."""
    _KEY.captured = True


def inside_brainx_trace() -> bool:
    """Whether a brainx trace (:func:`trace_to_jaxpr`) is running in this thread.

    There, JAX's trace-cache key is brainx's own (see the module's notes), and
    a function run under a JAX transform is traced, not executed.
    """
    return _KEY.depth > 0


def cache_boundary() -> None:
    """A point after which a captured state value may differ: a fresh key if one was captured.

    Called when a brainx trace starts and ends and when a state is written
    inside one.
    """
    if _KEY.captured:
        _KEY.id = next(_IDS)
        _KEY.captured = False
        if _KEY.depth:
            _TRACE_ID.set_local(_KEY.id)


def abstractify(x: Any) -> Any:
    """The abstract value (shape, dtype, weak type) JAX would trace ``x`` as."""
    return _core.shaped_abstractify(x)


def new_input(trace: Any, aval: Any) -> Any:
    """A new input of the jaxpr ``trace`` is building, of type ``aval``: its tracer."""
    return trace.new_arg(aval, source_info=_source_info_util.current())


def trace_to_jaxpr(fun: Callable[..., Sequence[Any]], in_avals: Sequence[Any],
                   name: str) -> Tuple[Any, List[Any]]:
    """``(jaxpr, consts)`` of ``fun(*tracers) -> flat outputs``.

    The jaxpr's inputs are the tracers of ``in_avals`` followed by every
    :func:`new_input` made during the trace, in order. ``fun`` runs with the
    new trace as :func:`current_trace`.
    """
    debug = _api_util.debug_info(name, fun, tuple(in_avals), {})
    wrapped = _lu.wrap_init(lambda *a: list(fun(*a)), debug_info=debug)
    cache_boundary()
    if _KEY.depth:
        return _trace_nested(wrapped, in_avals)
    with _TRACE_ID(_KEY.id):  # outside, the key is put back as it was
        return _trace_nested(wrapped, in_avals)


def _trace_nested(wrapped: Any, in_avals: Sequence[Any]) -> Tuple[Any, List[Any]]:
    _KEY.depth += 1
    try:
        jaxpr, _, consts = _pe.trace_to_jaxpr_dynamic(wrapped, list(in_avals))
    finally:
        _KEY.depth -= 1
        cache_boundary()
    return attach_consts(jaxpr, consts), consts


def attach_consts(jaxpr: Any, consts: Sequence[Any]) -> Any:
    """``jaxpr`` whose leading inputs are ``consts``'s constvars, on every JAX.

    JAX 0.12 merged ``ClosedJaxpr`` into ``Jaxpr``: a jaxpr's constvars are
    the inputs that carry a value, and the tracer hands back its constants as
    plain leading inputs. Attaching them restores the layout brainx reads
    everywhere (``jaxpr.constvars`` for ``consts``, ``jaxpr.invars`` for the
    arguments); on older JAX the jaxpr has it already.
    """
    if consts and hasattr(jaxpr, "with_consts") and not jaxpr.consts:
        return jaxpr.with_consts(list(consts))
    return jaxpr


def eval_jaxpr(jaxpr: Any, consts: Sequence[Any], *args: Any) -> List[Any]:
    """Run ``jaxpr`` on ``args`` (its equations go into the current trace).

    When the current trace is building a jaxpr (``jax.jit`` tracing a pure
    function) and ``args`` are its tracers, the equations are copied into it
    as they are, without binding each primitive again (``jax.jit`` inlines
    a nested jitted function the same way): a function found by a brainx trace
    costs ``jax.jit`` no second trace. Values from outside that trace (a loop
    body's closed-over weights) are made its constants first. Elsewhere
    (eagerly, under ``grad`` or ``vmap``) each equation is bound in the
    current trace.
    """
    trace = _core.trace_ctx.trace
    if type(trace) is _pe.DynamicJaxprTrace:
        source = _source_info_util.current()
        own = args
        if not all(type(x) is _pe.DynamicJaxprTracer and x._trace is trace for x in args):
            own = _own_tracers(trace, source, jaxpr, args)
        if own is not None and not _types_hold(jaxpr, own):
            own = None  # a weak type differs: binding works the output types out again
        if own is not None:
            return _inline(trace, source, jaxpr, consts, own)
    return jax.core.eval_jaxpr(jaxpr, consts, *args)


def _inline(trace: Any, source: Any, jaxpr: Any, consts: Sequence[Any],
            args: Sequence[Any]) -> List[Any]:
    """Copy ``jaxpr``'s equations into ``trace`` (JAX's ``inline_jaxpr_into_trace``), each
    keeping the source line it was traced at: the line an error, ``debug_nan`` or a profile
    of the compiled program names is the user's, not this call's."""
    if not (hasattr(trace, "emit_eqn") and hasattr(_pe, "try_constant_folding")):  # older JAX
        return _pe.inline_jaxpr_into_trace(trace, source, jaxpr, consts, *args)
    if getattr(jaxpr, "is_high", False):  # JAX 0.12's high-level primitives: lower them later
        trace.frame.is_high = True
    env = dict(zip(jaxpr.constvars, [trace.new_const(c, source) for c in consts]))
    env.update(zip(jaxpr.invars, args))

    def read(x, where):
        if type(x) is _core.Literal:
            return _pe.DynamicJaxprTracer(trace, x.aval, x, where)
        return env[x]

    for eqn in jaxpr.eqns:
        where = eqn.source_info.replace(name_stack=source.name_stack + eqn.source_info.name_stack)
        ins = [read(x, where) for x in eqn.invars]
        out_avals = [v.aval for v in eqn.outvars]
        folded = _pe.try_constant_folding(eqn.primitive, ins, eqn.params, out_avals)
        if folded is not None:
            outs = [trace.new_const(c, where, aval=a) for c, a in zip(folded, out_avals)]
        else:
            effects = eqn.effects
            if effects:  # an input effect names the input it acts on: here, its new tracer
                effects = {e.replace(env[e.input].val) if isinstance(e, _JaxprInputEffect)
                           else e for e in effects}
            outs = trace.emit_eqn(ins, out_avals, eqn.primitive, eqn.params, effects, where,
                                  eqn.ctx)
        for v, t in zip(eqn.outvars, outs):
            env.setdefault(v, t)
    return [read(x, source) for x in jaxpr.outvars]


def _own_tracers(trace: Any, source: Any, jaxpr: Any, args: Sequence[Any]):
    """``args`` as tracers of ``trace``, or ``None`` if one cannot be made one here.

    A loop body's closed-over values (an outer trace's tracers, arrays) become
    constants of the trace, as binding an equation on them would make them;
    only the inputs the jaxpr uses are lifted, so an unused one adds none.
    Python and NumPy values (which JAX canonicalises first) and values placed
    on a mesh (which a ``shard_map`` may reshard) are left to binding.
    """
    used = _used_inputs(jaxpr)
    out = list(args)
    for i, x in enumerate(args):
        if not used[i] or (type(x) is _pe.DynamicJaxprTracer and x._trace is trace):
            continue
        if not isinstance(x, (_core.Tracer, _ArrayImpl)):
            return None
        sharding = getattr(_core.typeof(x), "sharding", None)
        if sharding is None or not sharding.mesh.empty:
            return None
        out[i] = trace.to_jaxpr_tracer(x, source)
    return out


def _types_hold(jaxpr: Any, args: Sequence[Any]) -> bool:
    """Whether each tracer has its input's weak type: the copied equations' types then hold.

    A jaxpr traced for a weakly typed input (``x * 2.0`` of a Python float) and run on a
    strongly typed one would keep weakly typed outputs, which a later ``bfloat16`` operand
    would then win against. Values that are not tracers are inputs the jaxpr does not use
    (:func:`_own_tracers` lifts every used one).
    """
    return all(x.aval.weak_type == v.aval.weak_type for x, v in zip(args, jaxpr.invars)
               if isinstance(x, _core.Tracer) and hasattr(v.aval, "weak_type"))


def _used_inputs(jaxpr: Any) -> List[bool]:
    """Which of ``jaxpr.invars`` an equation or an output reads."""
    read = {id(v) for eqn in jaxpr.eqns for v in eqn.invars}
    read.update(id(v) for v in jaxpr.outvars)
    return [id(v) in read for v in jaxpr.invars]
