"""Trace a function to a jaxpr whose inputs grow as it reads states.

A stateful transform does not know, before it traces the user's function,
which states the function reads. It learns that *during* the trace: the first
read of a state makes the state's value a new input of the jaxpr being built
(:func:`new_input`), so the one trace that finds the states is also the trace
that is run, and JAX never sees a state's concrete value while tracing a brainx
transform (a concrete value seen there would be baked into the jaxpr as a
constant, and cached with it by any raw ``jax.jit`` helper the function calls).

This is the only module that reaches into JAX internals
(``jax._src.interpreters.partial_eval``): JAX has no public way to add an
input to a trace in progress. The rest of brainx calls :func:`trace_to_jaxpr`
and :func:`new_input`.

Each trace also sets a configuration value that is part of JAX's trace-cache
key to a fresh number, so raw ``jax.jit`` / ``lax.scan`` / ``jax.checkpoint``
helpers called inside it are traced again there instead of reusing a trace
from an earlier call in which a state was another tracer or a constant.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, List, Sequence, Tuple

import jax
from jax._src import api_util as _api_util
from jax._src import config as _config
from jax._src import core as _core
from jax._src import linear_util as _lu
from jax._src import source_info_util as _source_info_util
from jax._src.array import ArrayImpl as _ArrayImpl
from jax._src.interpreters import partial_eval as _pe
try:
    from jax._src.random.prng import PRNGKeyArray as _PRNGKeyArray
except ImportError:  # jax before the random package moved
    from jax._src.prng import PRNGKeyArray as _PRNGKeyArray

__all__ = ["trace_to_jaxpr", "new_input", "new_cache_epoch", "current_trace", "abstractify", "eval_jaxpr",
           "CONCRETE_TYPES", "jit_disabled"]

#: What a compiled call returns (concrete, not traced): arrays, and typed PRNG keys.
CONCRETE_TYPES = frozenset({_ArrayImpl, _PRNGKeyArray})


def jit_disabled() -> bool:
    """``jax.disable_jit()`` is on (read without going through ``jax.config``)."""
    return _config.disable_jit.value


def _trace_id_state():
    name = "brainx_trace_id"
    try:
        return _config.int_state(
            name, 0, help="Which brainx trace is running (part of JAX's trace-cache key).",
            include_in_jit_key=True, include_in_trace_context=True)
    except Exception:  # pragma: no cover - defined already (module reloaded)
        return _config.config._value_holders[name]  # type: ignore[attr-defined]


_TRACE_ID = _trace_id_state()
_IDS = itertools.count(1)


def current_trace() -> Any:
    """The innermost active JAX trace of this thread."""
    return _core.trace_ctx.trace


def abstractify(x: Any) -> Any:
    """The abstract value (shape, dtype, weak type) JAX would trace ``x`` as."""
    return _core.shaped_abstractify(x)


def new_input(trace: Any, aval: Any) -> Any:
    """A new input of the jaxpr ``trace`` is building, of type ``aval``: its tracer."""
    return trace.new_arg(aval, source_info=_source_info_util.current())


def new_cache_epoch() -> None:
    """Give the running brainx trace a fresh trace-cache key (a state was written).

    A raw helper that reads a state and is called again after the state was
    written in the same trace must be traced again, not reused.
    """
    _TRACE_ID.set_local(next(_IDS))


def trace_to_jaxpr(fun: Callable[..., Sequence[Any]], in_avals: Sequence[Any],
                   name: str) -> Tuple[Any, List[Any]]:
    """``(jaxpr, consts)`` of ``fun(*tracers) -> flat outputs``.

    The jaxpr's inputs are the tracers of ``in_avals`` followed by every
    :func:`new_input` made during the trace, in order. ``fun`` runs with the
    new trace as :func:`current_trace`.
    """
    debug = _api_util.debug_info(name, fun, tuple(in_avals), {})
    wrapped = _lu.wrap_init(lambda *a: list(fun(*a)), debug_info=debug)
    with _TRACE_ID(next(_IDS)):
        jaxpr, _, consts = _pe.trace_to_jaxpr_dynamic(wrapped, list(in_avals))
    return jaxpr, consts


def eval_jaxpr(jaxpr: Any, consts: Sequence[Any], *args: Any) -> List[Any]:
    """Run ``jaxpr`` on ``args`` (binding its equations in the current trace)."""
    return jax.core.eval_jaxpr(jaxpr, consts, *args)
