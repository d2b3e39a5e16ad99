"""The pretty-repr protocol: how an object describes itself for ``repr`` and ``print``.

A class opts in by subclassing :class:`PrettyRepr` and writing a generator
``__pretty_repr__`` that yields, in order,

1. one :class:`PrettyType`: the header, i.e. the type name and the brackets
   (``Linear(`` ... ``)``, ``{`` ... ``}``), and
2. any number of :class:`PrettyAttr`: one item each, ``key=value``, or a bare
   value when the key is ``''``.

``repr(obj)`` then goes through the engine of :mod:`brainx.pretty_repr.layout`:
on one line when it fits in the width of the repr options, otherwise one item
per line; a shared object prints as ``<shared: .path>`` and a cycle as
``<cycle: .path>``, so self-references never recurse forever. ``print(obj)``
(``str``) is the same text, coloured when the ``color`` option is on.

Two optional hooks: ``__pretty_repr_summary__()`` returns a
:class:`~brainx.util.ReprSummary` (the ``# 26 params (104 B)`` footer of a
graph node), and :class:`~brainx.util.PrettyObject`'s
``__pretty_repr_item__(name, value)`` hides or renames an attribute.

:func:`pretty_format` lays out any value (lists, dicts, dataclasses, arrays) the
same way, :func:`pretty_repr_object` an object of the protocol.

Examples
--------
>>> from brainx.util import PrettyRepr, PrettyType, PrettyAttr, repr_options
>>> class Point(PrettyRepr):
...     def __init__(self, x, y):
...         self.x, self.y = x, y
...     def __pretty_repr__(self):
...         yield PrettyType("Point")
...         yield PrettyAttr("x", self.x)
...         yield PrettyAttr("y", self.y)
>>> Point(1, 2)
Point(x=1, y=2)
>>> with repr_options(width=10):
...     print(repr(Point(1, 2)))
Point(
  x=1,
  y=2,
)
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Callable, Iterator, Optional, TypeVar, Union

from brainx.pretty_repr.layout import PrettyAttr, PrettyType, is_pretty, pretty_str, render
from brainx.pretty_repr.options import CONTEXT, PrettyReprContext, repr_options

__all__ = [
    "PrettyType", "PrettyAttr", "PrettyRepr", "PrettyMapping", "MappingReprMixin",
    "PrettyReprContext", "CONTEXT", "yield_unique_pretty_repr_items", "pretty_repr_object",
    "pretty_repr_elem", "pretty_format", "pretty_str",
]

A = TypeVar("A")
B = TypeVar("B")


def pretty_repr_object(obj: Any, *, color: bool = False) -> str:
    """The pretty repr of an object of the protocol (what :class:`PrettyRepr`'s ``repr`` is).

    Parameters
    ----------
    obj : PrettyRepr
        An object with a ``__pretty_repr__`` method.
    color : bool, default False
        Colour the text with ANSI codes.

    Returns
    -------
    str
        The text, fitted to the ``width`` of the repr options.

    Raises
    ------
    TypeError
        If ``obj`` has no ``__pretty_repr__``, or that does not yield a
        :class:`PrettyType` first and :class:`PrettyAttr` items after it.

    Examples
    --------
    >>> from brainx.util import PrettyMapping, pretty_repr_object, repr_options
    >>> m = PrettyMapping({"a": 1, "b": [1, 2]}, type_name="Cfg")
    >>> print(pretty_repr_object(m))
    Cfg{'a': 1, 'b': [1, 2]}
    >>> with repr_options(width=16):
    ...     print(pretty_repr_object(m))
    Cfg{
      'a': 1,
      'b': [1, 2],
    }
    """
    if not is_pretty(obj):
        raise TypeError(f"Object {obj!r} is not representable by pretty_repr_object: a "
                        f"{type(obj).__name__} has no __pretty_repr__. Use pretty_format.")
    return render(obj, color)


def pretty_format(value: Any, *, color: bool = False, **options: Any) -> str:
    """Any value laid out by the pretty-repr engine.

    Parameters
    ----------
    value : object
        Lists, tuples, dicts, dataclasses, arrays and objects of the protocol, nested in
        any way; anything else prints by its ``repr``.
    color : bool, default False
        Colour the text with ANSI codes.
    **options
        Repr options for this call only (``width=40``, ``max_items=3``; brainx's
        addition to brainstate's signature).

    Returns
    -------
    str
        One line when it fits in the width, otherwise one item per line with trailing
        commas; arrays as ``f32[2,3]``.

    Examples
    --------
    >>> import numpy as np
    >>> from brainx.util import pretty_format
    >>> pretty_format({"w": np.zeros((2, 3), np.float32), "n": 3})
    "{'w': f32[2,3], 'n': 3}"
    >>> print(pretty_format({"layers": [1, 2, 3], "name": "net"}, width=24))
    {
      'layers': [1, 2, 3],
      'name': 'net',
    }
    """
    if not options:
        return render(value, color)
    with repr_options(**options):
        return render(value, color)


class PrettyRepr(ABC):
    """Base class of objects whose ``repr`` is laid out from ``__pretty_repr__``.

    Subclasses write ``__pretty_repr__``, a generator that yields one
    :class:`PrettyType` then the :class:`PrettyAttr` items; ``__repr__`` and
    ``__str__`` (the same text, coloured when the ``color`` option is on) are
    provided. A subclass that writes its own ``__repr__`` keeps it for ``str``
    too, and is still laid out by the protocol inside another object's repr.

    Examples
    --------
    >>> from brainx.util import PrettyRepr, PrettyType, PrettyAttr
    >>> class Pair(PrettyRepr):
    ...     def __pretty_repr__(self):
    ...         yield PrettyType("Pair", start="<", end=">")
    ...         yield PrettyAttr("", "a")
    ...         yield PrettyAttr("", "b")
    >>> Pair(), str(Pair())
    (Pair<a, b>, 'Pair<a, b>')
    """

    __slots__ = ()

    @abstractmethod
    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        """Yield the header (:class:`PrettyType`), then one :class:`PrettyAttr` per item."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return pretty_repr_object(self)

    __repr__._uses_pretty_repr = True  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return pretty_str(self)


def pretty_repr_elem(obj: PrettyType, elem: PrettyAttr) -> str:
    """One item as a line of the plain (not fitted) layout: indented, ``key<sep>value``.

    Examples
    --------
    >>> from brainx.util.pretty import pretty_repr_elem, PrettyType, PrettyAttr
    >>> pretty_repr_elem(PrettyType("T"), PrettyAttr("x", 1))
    '  x=1'
    """
    if not isinstance(elem, PrettyAttr):
        raise TypeError(f"Item must be Elem (a PrettyAttr) after the PrettyType header; got "
                        f"{type(elem).__name__}: {elem!r}.")
    value = elem.value if isinstance(elem.value, str) else repr(elem.value)
    value = value.replace("\n", "\n" + obj.elem_indent)
    return f"{obj.elem_indent}{elem.start}{elem.key}{obj.value_sep}{value}{elem.end}"


class MappingReprMixin(Mapping[A, B]):
    """Gives a mapping a ``__pretty_repr__`` that prints it as ``{key: value, ...}``.

    It supplies only the hook: mix it into a :class:`PrettyRepr` (before it) for the
    ``repr``, and give a ``dict`` subclass a ``__repr__`` that calls
    :func:`pretty_repr_object`, since ``dict.__repr__`` comes first otherwise.

    Examples
    --------
    >>> from brainx.util import MappingReprMixin, PrettyRepr
    >>> class Table(MappingReprMixin, PrettyRepr):
    ...     def __init__(self, **kw): self._d = kw
    ...     def __getitem__(self, k): return self._d[k]
    ...     def __iter__(self): return iter(self._d)
    ...     def __len__(self): return len(self._d)
    >>> Table(a=1, b=2)
    {'a': 1, 'b': 2}
    """

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield PrettyType(type="", value_sep=": ", start="{", end="}")
        for key, value in self.items():
            yield PrettyAttr(repr(key), value)


@dataclasses.dataclass(repr=False)
class PrettyMapping(PrettyRepr):
    """Wraps any mapping to print it with the pretty layout, ``Name{key: value, ...}``.

    Parameters
    ----------
    mapping : Mapping
        What to print.
    type_name : str
        Printed before the opening brace (default: nothing).

    Examples
    --------
    >>> from brainx.util import PrettyMapping
    >>> PrettyMapping({"w": 1, "b": 2}, type_name="Params")
    Params{'w': 1, 'b': 2}
    """

    mapping: Mapping
    type_name: str = ""

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield PrettyType(type=self.type_name, value_sep=": ", start="{", end="}")
        for key, value in self.mapping.items():
            yield PrettyAttr(repr(key), value)


def _default_repr_object(node: Any) -> Iterator[PrettyType]:
    yield PrettyType(type=type(node))


def _default_repr_attr(node: Any) -> Iterator[PrettyAttr]:
    for name, value in vars(node).items():
        if not name.startswith("_"):
            yield PrettyAttr(name, repr(value))


def yield_unique_pretty_repr_items(
    node: Any,
    repr_object: Optional[Callable[[Any], Iterator[PrettyType]]] = None,
    repr_attr: Optional[Callable[[Any], Iterator[PrettyAttr]]] = None,
) -> Iterator[Union[PrettyType, PrettyAttr]]:
    """The pretty-repr items of ``node``; ``Type(...)`` for one already met in this call.

    Within one outermost call (nested calls, made while its items are produced, share
    it), an object met again yields only ``PrettyType(type(node), empty_repr='...')``.
    The engine marks shared and cyclic objects itself (``<shared: ...>``,
    ``<cycle: ...>``); this guards code that walks the items by hand.

    Parameters
    ----------
    node : object
        The object being printed.
    repr_object : callable, optional
        ``repr_object(node)`` yields the header; default: the type's name in parentheses.
    repr_attr : callable, optional
        ``repr_attr(node)`` yields the items; default: the public entries of
        ``vars(node)``, as their ``repr``.

    Examples
    --------
    >>> from brainx.util import PrettyRepr, yield_unique_pretty_repr_items
    >>> class Node(PrettyRepr):
    ...     def __init__(self): self.size = 3
    ...     def __pretty_repr__(self):
    ...         yield from yield_unique_pretty_repr_items(self)
    >>> Node()
    Node(size=3)
    """
    repr_object = repr_object or _default_repr_object
    repr_attr = repr_attr or _default_repr_attr
    outermost = CONTEXT.seen_modules_repr is None
    if outermost:
        CONTEXT.seen_modules_repr = {}
    try:
        if id(node) in CONTEXT.seen_modules_repr:
            yield PrettyType(type=type(node), empty_repr="...")
            return
        yield from repr_object(node)
        CONTEXT.seen_modules_repr[id(node)] = node
        yield from repr_attr(node)
    finally:
        if outermost:
            CONTEXT.seen_modules_repr = None
