"""Checking mode for the trace caches: every reuse is compared with a trace made afresh.

brainx keeps traces in several caches (``jit`` entries and their rebinding
on new states, the jaxpr an eager transform keeps per static key, the traces
instances of a class share, the compiled loops, the ``make_jaxpr`` /
``eval_shape`` inspection cache). Each reuses a trace when a *key* matches,
and a key that misses something the trace depends on gives silently wrong
results. Reading the keys is not enough to trust them; this mode tests them.

With the environment variable ``BRAINX_CHECK_CACHES=1`` set before brainx is
imported, every time a cache is about to reuse a trace, the function is also
traced afresh (:func:`fresh_tracing`: no cache is consulted for that trace)
and the two are compared: the states touched and their roles, the argument,
state-value, output and written-value tree structures, avals, the static
values baked in, and the jaxpr itself, both by :func:`jaxprs_equal` and by
its printed text. A difference raises :class:`CacheReuseError` at once,
naming the cache, the function and what differed. The mode costs a trace per
call and user code runs twice as often as it would (a test counting traces
does not hold in it): it is for test suites (``make test`` runs the transform
tests once more with it), not for production.

Examples
--------
>>> from brainx.transform.core import cache_check
>>> cache_check.enabled() in (True, False)
True
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from typing import Any, Iterator, List, Sequence

from brainx.environ.reads import same_setting
from brainx.transform.core.jaxpr_equal import jaxprs_equal
from brainx.util.equality import same_value

__all__ = ["CacheReuseError", "enabled", "set_enabled", "fresh_tracing", "tracing_fresh",
           "check_reuse", "check_same_trace", "trace_differences"]

_ENABLED = [os.environ.get("BRAINX_CHECK_CACHES", "").strip().lower()
            not in ("", "0", "false", "no", "off")]


class CacheReuseError(AssertionError):
    """A cache reused a trace that differs from the trace made afresh for the same call."""


def enabled() -> bool:
    """Whether the checking mode is on (``BRAINX_CHECK_CACHES=1``, or :func:`set_enabled`)."""
    return _ENABLED[0]


def set_enabled(on: bool) -> bool:
    """Turn the checking mode on or off; returns the previous setting."""
    previous, _ENABLED[0] = _ENABLED[0], bool(on)
    return previous


class _Fresh(threading.local):
    depth = 0


_FRESH = _Fresh()


@contextlib.contextmanager
def fresh_tracing() -> Iterator[None]:
    """Trace without consulting any cache inside the block (this thread only)."""
    _FRESH.depth += 1
    try:
        yield
    finally:
        _FRESH.depth -= 1


def tracing_fresh() -> bool:
    """Whether a :func:`fresh_tracing` block is open in this thread."""
    return _FRESH.depth > 0


#: The parts of a trace that make its key, with what each is called in an error.
_KEY_PARTS = (
    ("in_tree", "the arguments' tree structure"),
    ("arg_mask", "which argument leaves are traced"),
    ("in_avals", "the input avals"),
    ("inputs", "which states are inputs"),
    ("input_trees", "the state values' tree structures"),
    ("input_statics", "the static leaves of state values"),
    ("out_tree", "the output's tree structure"),
    ("written_specs", "the written values' structures"),
    ("const_digests", "the contents of mutable constants"),
    ("jax_context", "the JAX settings traced under"),
)


def trace_differences(reused: Any, fresh: Any) -> List[str]:
    """What differs between two :class:`~brainx.transform.core.stateful.JaxprTrace` (empty: nothing)."""
    diffs = [what for part, what in _KEY_PARTS
             if not _same(getattr(reused, part), getattr(fresh, part))]
    if not _same_reads(reused.env_reads, fresh.env_reads):
        diffs.append("the brainx.environ settings read")
    if not jaxprs_equal(reused.jaxpr, reused.consts, fresh.jaxpr, fresh.consts,
                        functions_by_name=True):
        diffs.append("the jaxpr (jaxprs_equal)")
    elif _printed(reused.jaxpr) != _printed(fresh.jaxpr):
        diffs.append("the jaxpr (its printed text)")
    elif len(reused.consts) != len(fresh.consts) or not all(
            same_value(a, b) for a, b in zip(reused.consts, fresh.consts)):
        diffs.append("the jaxpr's constants")
    return diffs


def check_same_trace(cache: str, name: str, reused: Any, fresh: Any) -> None:
    """:func:`check_reuse` for two traces of the same states (a jaxpr kept per static key)."""
    diffs = trace_differences(reused, fresh)
    if diffs:
        _raise(cache, name, diffs)


def _printed(jaxpr: Any) -> str:
    """The jaxpr's text without object addresses (a function made per trace prints its own)."""
    return re.sub(r" at 0x[0-9a-f]+", "", str(jaxpr))


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an array among static data: compare by value
        return same_value(a, b)


def check_reuse(cache: str, name: str, states: Sequence[Any], written: Sequence[bool],
                trace: Any, fresh: Any) -> None:
    """Raise :class:`CacheReuseError` if a reused trace differs from ``fresh`` (a signature).

    ``states``, ``written`` and ``trace``: what ``cache`` is about to run for
    a call of ``name``; ``fresh``: the
    :class:`~brainx.transform.core.stateful.StateSignature` of a trace made
    afresh for the same call.
    """
    diffs = []
    if tuple(map(id, states)) != tuple(map(id, fresh.states)):
        diffs.append(f"the states touched (reused: {_names(states)}; fresh: "
                     f"{_names(fresh.states)})")
    elif tuple(written) != tuple(fresh.written):
        diffs.append("which states are written")
    diffs += trace_differences(trace, fresh.trace)
    if diffs:
        _raise(cache, name, diffs)


def _raise(cache: str, name: str, diffs: Sequence[str]) -> None:
    raise CacheReuseError(
            f"BRAINX_CHECK_CACHES: the {cache} of {name} reused a trace that differs from the "
            f"trace made afresh for the same call, in: {'; '.join(diffs)}. The cache's key misses "
            "something the trace depends on; please report this with the code that calls "
            f"{name}. (Set BRAINX_CHECK_CACHES=0 to run without the check.)")


def _same_reads(a: Any, b: Any) -> bool:
    return len(a) == len(b) and all(ka == kb and same_setting(va, vb)
                                    for (ka, va), (kb, vb) in zip(a, b))


def _names(states: Sequence[Any]) -> str:
    return ", ".join(repr(s) for s in states) or "none"
