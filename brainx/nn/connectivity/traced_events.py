"""Finding the booleans behind float spikes in the trace that made them.

A neuron's spikes are floats (``(V >= V_th).astype(float)``, with a surrogate
gradient), and an event-driven projection wants booleans: it tests ``x > 0``.
XLA does not fold ``convert(b) > 0`` back to ``b``, so a step written with
brainx would compile to a conversion and a comparison a hand-written step
(which passes ``V >= V_th`` to the kernel) does not have.

:func:`bools_behind` looks at how a traced float array was made. When it is a
float conversion of booleans, directly or as the output of a nested ``jit`` or
a ``custom_jvp`` function (a surrogate spike), possibly sliced or reshaped
after, it returns those booleans (recomputed in the current trace: XLA merges
the recomputed comparison with the original one). Otherwise, or on a JAX whose
tracers do not record their equation, it returns ``None`` and the caller
compares as before. ``convert(b) > 0`` is ``b`` exactly, so the result is the
same; only the compiled program is smaller.
"""

from __future__ import annotations

from typing import Any, Optional

import jax.numpy as jnp
from jax import core as jax_core
from jax.extend import core as jex_core

__all__ = ["bools_behind", "events_of"]

# Shape operations that commute with the float conversion (each takes one array).
_SHAPE_OPS = frozenset({"slice", "reshape", "squeeze", "broadcast_in_dim", "transpose",
                        "rev", "expand_dims"})
# Calls whose jaxpr may end in the conversion, and the parameter holding it.
_CALLS = {"custom_jvp_call": "call_jaxpr", "jit": "jaxpr", "pjit": "jaxpr",
          "closed_call": "call_jaxpr"}
_MAX_DEPTH = 16


def bools_behind(x: Any) -> Optional[Any]:
    """The booleans ``b`` with ``x == b.astype(x.dtype)``, read off the current trace, or ``None``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.nn.connectivity.traced_events import bools_behind
    >>> def f(v):
    ...     spikes = (v >= 1.0).astype(jnp.float32)
    ...     print(bools_behind(spikes[:2]).dtype)     # found while tracing
    ...     return spikes
    >>> _ = jax.make_jaxpr(f)(jnp.zeros(3))
    bool
    >>> bools_behind(jnp.ones(3)) is None             # a concrete array: nothing recorded
    True
    """
    if not isinstance(x, jax_core.Tracer) or not jnp.issubdtype(x.dtype, jnp.floating):
        return None
    try:
        return _search(x)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        return None     # another JAX's internals: compare as before


def events_of(x: Any) -> Any:
    """The events ``x > 0`` of float spikes ``x``, as the booleans the trace shows ``x`` was
    made from when it does (:func:`bools_behind`: the step then compiles to no conversion
    back), else as the comparison.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn.connectivity.traced_events import events_of
    >>> events_of(jnp.array([0.5, 0.0, -1.0])).tolist()
    [True, False, False]
    """
    found = bools_behind(x)
    return x > 0 if found is None else found


def _search(x) -> Optional[Any]:
    trace = x._trace
    chain = []
    tracer = x
    for _ in range(_MAX_DEPTH):
        eqn = getattr(tracer, "parent", None)
        if eqn is None or tracer._trace is not trace:
            return None
        name = eqn.primitive.name
        if name in _SHAPE_OPS and len(eqn.in_tracers) == 1:
            chain.append(eqn)
            tracer = eqn.in_tracers[0]
            continue
        bools = _bools_of(eqn, tracer)
        if bools is None:
            return None
        for shape_eqn in reversed(chain):
            bools = shape_eqn.primitive.bind(bools, **shape_eqn.params)
        return bools
    return None


def _is_bool_conversion(primitive_name: str, operand_aval) -> bool:
    return primitive_name == "convert_element_type" and operand_aval.dtype == jnp.bool_


def _bools_of(eqn, tracer) -> Optional[Any]:
    """The booleans behind ``tracer``, an output of ``eqn``, or ``None``."""
    if _is_bool_conversion(eqn.primitive.name, eqn.in_tracers[0].aval):
        return eqn.in_tracers[0]
    key = _CALLS.get(eqn.primitive.name)
    if key is None:
        return None
    closed = eqn.params[key]
    jaxpr, consts = (closed.jaxpr, closed.consts) if hasattr(closed, "consts") else (closed, ())
    inner_out = jaxpr.outvars[eqn.outvars.index(tracer.val)]
    producer = next((e for e in jaxpr.eqns if inner_out in e.outvars), None)
    if producer is None or not _is_bool_conversion(producer.primitive.name,
                                                   producer.invars[0].aval):
        return None
    source = producer.invars[0]
    if isinstance(source, jex_core.Literal) or any(e.effects for e in jaxpr.eqns):
        return None
    prefix = jaxpr.replace(outvars=[source])
    (bools,) = jax_core.eval_jaxpr(prefix, consts, *eqn.in_tracers)
    return bools
