"""Which settings a trace read, and whether they changed since: environ in the trace caches.

A model reads settings while it is traced (``dt``, ``fit``, the precision):
the values are baked into the jaxpr like any Python value. A compiled function
must therefore be traced again when a setting it read changes (a dropout layer
traced under ``context(fit=True)`` must not run as in training under
``context(fit=False)``). Two pieces make that cheap:

* :data:`VERSION` grows whenever a global setting may have changed (``set``,
  ``pop``, ``reset``, a ``context`` entered or left), so a compiled call tests
  one integer to know that nothing changed;
* :func:`recording` collects the settings a trace reads (``get`` and the
  functions built on it report each read), so when :data:`VERSION` moved, a
  cache compares just those settings with their current values
  (:func:`brainx.environ.settings.settings_unchanged`).

Only the global environment is tracked; an ``EnvironmentState`` passed as
``env=`` is the program's own object, read like any Python value. The
per-step settings (``t``, ``i``, array values: :mod:`brainx.environ.step_values`)
are recorded as :data:`PER_STEP`, not by value: the trace takes them as inputs,
and is reused wherever the value comes from outside every trace in progress
(not where a ``context`` opened inside an enclosing trace sets the key: see
:func:`shadowed`).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Dict, Hashable, Iterator, Mapping, Tuple

from brainx.util.equality import same_value

__all__ = ["VERSION", "PER_STEP", "changed", "recording", "record", "replay", "shadow",
           "unshadow", "same_setting", "shadowed", "snapshot", "per_step_reads"]

#: Grows whenever a global setting may have changed (compared by compiled calls).
VERSION = [0]

_NOT_SET = ("<not set>",)  # what a read of an unset key saw
_LOCAL = ("<set inside the trace>",)  # a key a context opened inside the trace sets
#: What a trace that took a per-step setting as an input read: the value comes in at each
#: call, from the settings around it. The trace is valid only where no ``context`` opened
#: inside an enclosing trace sets the key (there the value is that trace's own, not an input).
PER_STEP = ("<an input at each call>",)
_NO_READ = object()  # (shadow) the trace had not read the key


class _Recorders(threading.local):
    def __init__(self):
        self.stack: list = []  # one dict per trace in progress in this thread, innermost last


_RECORDERS = _Recorders()


def changed() -> None:
    """A global setting may have changed: compiled functions compare what they read."""
    VERSION[0] += 1


def record(key: Hashable, value: Any) -> None:
    """A trace in progress read ``key`` and saw ``value`` (``_NOT_SET`` for an unset key)."""
    for reads in _RECORDERS.stack:
        reads.setdefault(key, value)


def shadow(keys: Any) -> list:
    """A ``context`` opened inside a trace sets ``keys``: reads of them there depend on nothing outside.

    Marks the keys in every trace in progress, also where the trace read
    them before (that read is kept and comes back when the context closes).
    Returns what to give :func:`unshadow` when the context closes.
    """
    marked = []
    for reads in _RECORDERS.stack:
        for key in keys:
            marked.append((reads, key, reads.get(key, _NO_READ)))
            reads[key] = _LOCAL
    return marked


def unshadow(marked: list) -> None:
    """The context of :func:`shadow` closed: later reads of its keys are the outside's again."""
    for reads, key, before in reversed(marked):
        if reads.get(key) is _LOCAL:
            if before is _NO_READ:
                del reads[key]
            else:
                reads[key] = before


def shadowed(key: Hashable) -> bool:
    """Whether a ``context`` opened inside a trace in progress sets ``key`` (see :func:`shadow`)."""
    for reads in _RECORDERS.stack:
        if reads.get(key) is _LOCAL:
            return True
    return False


def replay(reads: Mapping[Hashable, Any]) -> None:
    """Report the reads of a trace that is reused inside a trace in progress (if any is)."""
    if _RECORDERS.stack:
        for key, value in reads.items():
            record(key, value)


@contextlib.contextmanager
def recording() -> Iterator[Dict[Hashable, Any]]:
    """Collect, in the yielded dict, the settings read (in this thread) inside the block.

    Examples
    --------
    >>> from brainx import environ
    >>> from brainx.environ.reads import recording
    >>> with environ.context(fit=True), recording() as reads:
    ...     _ = environ.get("fit")
    >>> reads
    {'fit': True}
    """
    reads: Dict[Hashable, Any] = {}
    _RECORDERS.stack.append(reads)
    try:
        yield reads
    except BaseException as error:
        _note_per_step_reads(error, reads)
        raise
    finally:
        _RECORDERS.stack.pop()


def _note_per_step_reads(error: BaseException, reads: Mapping[Hashable, Any]) -> None:
    """Keep on ``error`` the per-step settings the failed trace took as inputs (innermost first)."""
    keys = tuple(k for k, v in reads.items() if v is PER_STEP)
    if keys and not hasattr(error, "_brainx_per_step_reads"):
        try:
            error._brainx_per_step_reads = keys
        except AttributeError:  # pragma: no cover - an exception type without a __dict__
            pass


def per_step_reads(error: BaseException) -> Tuple[Hashable, ...]:
    """The per-step settings the trace that raised ``error`` had taken as inputs (tracers).

    What a hint on a Python ``if`` over a traced value names: ``if environ.get("t") > 5``
    inside ``jit`` fails on such an input.
    """
    return getattr(error, "_brainx_per_step_reads", ())


def same_setting(a: Any, b: Any) -> bool:
    """Equal settings: equal type and bits (:func:`~brainx.util.equality.same_value`), quantities by unit too."""
    unit = getattr(a, "unit", None)
    if unit is not None and hasattr(a, "mantissa") and type(a) is type(b):  # a brainunit Quantity
        return unit == b.unit and same_value(a.mantissa, b.mantissa)
    return same_value(a, b)


def snapshot(reads: Mapping[Hashable, Any]) -> Tuple[Tuple[Hashable, Any], ...]:
    """``reads`` as a tuple (what a trace keeps), without the keys set inside the trace."""
    return tuple((k, v) for k, v in reads.items() if v is not _LOCAL)
