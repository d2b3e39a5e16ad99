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
are not recorded: the trace takes them as inputs.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Dict, Hashable, Iterator, Mapping, Tuple

from brainx.util.equality import same_value

__all__ = ["VERSION", "changed", "recording", "record", "replay", "shadow", "unshadow",
           "same_setting", "shadowed", "snapshot"]

#: Grows whenever a global setting may have changed (compared by compiled calls).
VERSION = [0]

_NOT_SET = ("<not set>",)  # what a read of an unset key saw
_LOCAL = ("<set inside the trace>",)  # a key a context opened inside the trace sets


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

    Returns what to give :func:`unshadow` when the context closes.
    """
    marked = []
    for reads in _RECORDERS.stack:
        for key in keys:
            if key not in reads:
                reads[key] = _LOCAL
                marked.append((reads, key))
    return marked


def unshadow(marked: list) -> None:
    """The context of :func:`shadow` closed: later reads of its keys are the outside's again."""
    for reads, key in marked:
        if reads.get(key) is _LOCAL:
            del reads[key]


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
    finally:
        _RECORDERS.stack.pop()


def same_setting(a: Any, b: Any) -> bool:
    """Equal settings: equal type and bits (:func:`~brainx.util.equality.same_value`), quantities by unit too."""
    unit = getattr(a, "unit", None)
    if unit is not None and hasattr(a, "mantissa") and type(a) is type(b):  # a brainunit Quantity
        return unit == b.unit and same_value(a.mantissa, b.mantissa)
    return same_value(a, b)


def snapshot(reads: Mapping[Hashable, Any]) -> Tuple[Tuple[Hashable, Any], ...]:
    """``reads`` as a tuple (what a trace keeps), without the keys set inside the trace."""
    return tuple((k, v) for k, v in reads.items() if v is not _LOCAL)
