"""Which JAX batch traces (vmap lanes) a brainx transform created on purpose.

A random key state that is split while a raw ``jax.vmap`` is tracing gives
every lane the same numbers, silently. To tell that apart from the vmaps
brainx applies itself (``transform.vmap``, and the ``jax.vmap`` inside
``jax.jacfwd`` / ``jax.hessian``), each such transform marks the JAX traces it
opened as *owned* while it runs the user's function, and
:func:`foreign_batch_traces` lists the batch traces that are not.

JAX keeps the active traces as a chain (each trace has a ``parent_trace``);
nothing here changes them, it only reads the chain.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, List, Optional, Tuple

import jax

from brainx._jax.internals import batching as _batching
from brainx._jax.internals import config as _config
from brainx._jax.internals import core as _core

__all__ = ["jit_disabled", "DISABLE_JIT", "current_trace", "alive_trace_ids", "owned_traces",
           "foreign_batch_traces", "is_batched_along", "jax_is_tracing"]


class _Owned(threading.local):
    def __init__(self):
        # (inner, outer): every trace from `inner` down to `outer` (exclusive)
        # was opened by a brainx transform.
        self.regions: List[Tuple[Any, Any]] = []


_OWNED = _Owned()


#: ``jax.disable_jit()``'s flag (``DISABLE_JIT.value``): what generated call code reads.
DISABLE_JIT = _config.disable_jit


def jit_disabled() -> bool:
    """Whether ``jax.disable_jit()`` is on: brainx's one test of it.

    Examples
    --------
    >>> import jax
    >>> from brainx._jax.traces import jit_disabled
    >>> with jax.disable_jit():
    ...     print(jit_disabled())
    True
    """
    return DISABLE_JIT.value


def jax_is_tracing() -> bool:
    """Whether any JAX transform is tracing in this thread."""
    return not isinstance(_core.trace_ctx.trace, _core.EvalTrace)


def current_trace() -> Any:
    """The innermost active JAX trace (an ``EvalTrace`` outside every transform)."""
    return _core.trace_ctx.trace


def alive_trace_ids(trace: Any = None) -> set:
    """Ids of ``trace`` (default: the current one) and of the traces it is nested in.

    A tracer whose trace is not among them belongs to a trace that has ended
    (or that runs in another thread).
    """
    trace = current_trace() if trace is None else trace
    alive = set()
    while trace is not None:
        alive.add(id(trace))
        trace = getattr(trace, "parent_trace", None)
    return alive


@contextlib.contextmanager
def owned_traces(outer: Any) -> Iterator[None]:
    """Mark the traces between the current one and ``outer`` as opened by brainx.

    Call it inside the function a brainx transform hands to JAX, with
    ``outer`` the trace that was current when the transform was called.
    """
    _OWNED.regions.append((current_trace(), outer))
    try:
        yield
    finally:
        _OWNED.regions.pop()


def foreign_batch_traces(value: Any = None) -> List[Any]:
    """The active batch traces not opened by brainx, innermost first.

    A trace along which ``value`` is batched is left out: its lanes already
    differ.
    """
    skip = {id(inner): outer for inner, outer in _OWNED.regions}
    found = []
    trace: Optional[Any] = current_trace()
    while trace is not None:
        if id(trace) in skip:
            trace = skip[id(trace)]
            continue
        if isinstance(trace, _batching.BatchTrace) and not is_batched_along(value, trace):
            found.append(trace)
        trace = getattr(trace, "parent_trace", None)
    return found


def is_batched_along(value: Any, trace: Any) -> bool:
    """``value`` (a pytree) has a leaf mapped along the batch trace ``trace``."""
    for leaf in jax.tree.leaves(value):
        if (isinstance(leaf, _batching.BatchTracer) and leaf._trace.tag is trace.tag
                and leaf.batch_dim is not None):
            return True
    return False
