"""Small helpers for model-building code: sizes, unique names, type predicates.

* :func:`split_total`: how many of ``total`` items a part gets, given as a
  fraction (``0.8``) or a count (``80``): e.g. the excitatory share of a
  population;
* :func:`get_unique_name`: ``"Dense0"``, ``"Dense1"``, ...: a counter per
  type, per thread;
* :func:`is_instance_eval` / :func:`not_instance_eval`: ``isinstance`` tests
  as one-argument predicates, for filters and ``DictManager.subset``.

Examples
--------
>>> from brainx.util import split_total, is_instance_eval
>>> split_total(100, 0.8), split_total(100, 30)
(80, 30)
>>> list(filter(is_instance_eval(int), [1, "a", 2.0, 3]))
[1, 3]
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Dict, Optional, Tuple, Type, Union

__all__ = ["split_total", "get_unique_name", "NameContext", "is_instance_eval",
           "not_instance_eval"]


def split_total(total: int, fraction: Union[int, float]) -> int:
    """The number of items out of ``total`` that ``fraction`` stands for.

    Parameters
    ----------
    total : int
        The whole, a positive integer.
    fraction : float or int
        A ``float`` in ``[0, 1]`` is a share of ``total`` (rounded down); an
        ``int`` in ``[0, total]`` is already a count and is returned as is.

    Returns
    -------
    int
        The part's size.

    Raises
    ------
    TypeError
        ``total`` is not an ``int`` or ``fraction`` not an ``int``/``float``
        (``bool`` is refused for both).
    ValueError
        ``total`` is not positive, or ``fraction`` is out of range.

    Examples
    --------
    >>> from brainx.util import split_total
    >>> split_total(10, 0.25), split_total(10, 1.0), split_total(10, 4)
    (2, 10, 4)
    """
    if isinstance(total, bool) or not isinstance(total, int):
        raise TypeError(f"split_total: 'total' must be an integer, got "
                        f"{type(total).__name__} {total!r}.")
    if total <= 0:
        raise ValueError(f"split_total: 'total' must be a positive integer, got {total}.")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise TypeError(f"split_total: 'fraction' must be an integer or float (a count or a "
                        f"share of total), got {type(fraction).__name__} {fraction!r}.")
    if fraction < 0:
        raise ValueError(f"split_total: 'fraction' value cannot be negative, got {fraction}.")
    if isinstance(fraction, float):
        if fraction > 1:
            raise ValueError(f"split_total: a float 'fraction' is a share, so it cannot be "
                             f"greater than 1, got {fraction}. Pass an int for a count.")
        return int(total * fraction)
    if fraction > total:
        raise ValueError(f"split_total: an int 'fraction' is a count, so it cannot be greater "
                         f"than total ({total}), got {fraction}.")
    return fraction


class NameContext(threading.local):
    """The per-thread counters behind :func:`get_unique_name` (one per type name)."""

    def __init__(self) -> None:
        self.typed_names: Dict[str, int] = {}

    def reset(self, type_: Optional[str] = None) -> None:
        """Restart the counter of ``type_`` at 0, or every counter when ``type_`` is None."""
        if type_ is None:
            self.typed_names.clear()
        elif type_ in self.typed_names:
            self.typed_names[type_] = 0


NAME = NameContext()


def get_unique_name(type_: str, prefix: str = "") -> str:
    """A fresh name ``f"{prefix}{type_}{n}"``, ``n`` counting up from 0 per ``type_``.

    The counters are per thread and live for the whole process; reset them
    with ``brainx.util.helpers.NAME.reset()``.

    Parameters
    ----------
    type_ : str
        What is named (``"Dense"``); each has its own counter.
    prefix : str
        Put in front of the name; does not change which counter is used.

    Returns
    -------
    str
        The new name.

    Examples
    --------
    >>> from brainx.util import get_unique_name
    >>> from brainx.util.helpers import NAME
    >>> NAME.reset("Probe")
    >>> get_unique_name("Probe"), get_unique_name("Probe", prefix="my_")
    ('Probe0', 'my_Probe1')
    """
    count = NAME.typed_names.get(type_, 0)
    NAME.typed_names[type_] = count + 1
    return f"{prefix}{type_}{count}"


def _is_instance(x: Any, cls: Tuple[Type, ...]) -> bool:
    return isinstance(x, cls)


def _is_not_instance(x: Any, cls: Tuple[Type, ...]) -> bool:
    return not isinstance(x, cls)


def is_instance_eval(*cls: Type) -> Callable[[Any], bool]:
    """A predicate ``x -> isinstance(x, cls)`` (picklable: a ``functools.partial``).

    Examples
    --------
    >>> from brainx.util import is_instance_eval
    >>> is_number = is_instance_eval(int, float)
    >>> is_number(1.5), is_number("1.5")
    (True, False)
    """
    return functools.partial(_is_instance, cls=cls)


def not_instance_eval(*cls: Type) -> Callable[[Any], bool]:
    """A predicate ``x -> not isinstance(x, cls)`` (picklable: a ``functools.partial``).

    Examples
    --------
    >>> from brainx.util import not_instance_eval
    >>> not_instance_eval(str)("a"), not_instance_eval(str)(1)
    (False, True)
    """
    return functools.partial(_is_not_instance, cls=cls)
