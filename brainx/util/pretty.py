"""A small protocol for multi-line, cycle-safe ``repr`` of nested objects.

A class opts in by subclassing :class:`PrettyRepr` and writing a generator
``__pretty_repr__`` that yields, in order,

1. one :class:`PrettyType`: the header, i.e. the type name and the brackets
   (``Linear(`` ... ``)``, ``{`` ... ``}``), and
2. any number of :class:`PrettyAttr`: one ``key=value`` line each.

``repr(obj)`` then lays them out one attribute per line, indenting nested
reprs, which is easier to read than one long line for a module tree::

    Linear(
      in_size=3,
      out_size=2
    )

:func:`yield_unique_pretty_repr_items` is the helper most ``__pretty_repr__``
implementations delegate to: it prints an object that was already seen higher
up in the same ``repr`` as ``Type(...)`` so that shared or cyclic references
do not recurse forever. :class:`PrettyMapping` and
:class:`MappingReprMixin` print mappings in the same style (``{'a': 1}``).

Examples
--------
>>> from brainx.util import PrettyRepr, PrettyType, PrettyAttr
>>> class Point(PrettyRepr):
...     def __init__(self, x, y):
...         self.x, self.y = x, y
...     def __pretty_repr__(self):
...         yield PrettyType("Point")
...         yield PrettyAttr("x", self.x)
...         yield PrettyAttr("y", self.y)
>>> Point(1, 2)
Point(
  x=1,
  y=2
)
"""

from __future__ import annotations

import dataclasses
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Callable, Dict, Iterator, Optional, TypeVar, Union

__all__ = [
    "PrettyType", "PrettyAttr", "PrettyRepr", "PrettyMapping", "MappingReprMixin",
    "yield_unique_pretty_repr_items", "pretty_repr_object", "pretty_repr_elem",
]

A = TypeVar("A")
B = TypeVar("B")


@dataclasses.dataclass
class PrettyType:
    """The header of a pretty repr: the type shown and how its attributes are framed.

    Parameters
    ----------
    type : str or type
        The name printed before ``start`` (a class prints as its ``__name__``;
        ``''`` prints nothing, as for a plain mapping).
    start, end : str
        The brackets around the attributes (``'('`` and ``')'``).
    value_sep : str
        What goes between an attribute's key and its value (``'='``, or
        ``': '`` for a mapping).
    elem_indent : str
        The indentation of each attribute line.
    empty_repr : str
        What is printed between the brackets when there are no attributes.

    Examples
    --------
    >>> from brainx.util import PrettyType
    >>> PrettyType("Net").start, PrettyType("Net").end
    ('(', ')')
    """

    type: Union[str, type]
    start: str = "("
    end: str = ")"
    value_sep: str = "="
    elem_indent: str = "  "
    empty_repr: str = ""


@dataclasses.dataclass
class PrettyAttr:
    """One ``key=value`` line of a pretty repr.

    Parameters
    ----------
    key : str
        The attribute's name, printed as is.
    value : object
        A ``str`` is printed as is; anything else through ``repr``.
    start, end : str
        Printed right before the key and right after the value.

    Examples
    --------
    >>> from brainx.util import PrettyAttr
    >>> PrettyAttr("size", 3).value
    3
    """

    key: str
    value: Union[str, Any]
    start: str = ""
    end: str = ""


class PrettyRepr(ABC):
    """Base class of objects whose ``repr`` is laid out from ``__pretty_repr__``.

    Subclasses write ``__pretty_repr__``, a generator that yields one
    :class:`PrettyType` then the :class:`PrettyAttr` lines; ``__repr__`` is
    provided. See the module docstring for an example.
    """

    __slots__ = ()

    @abstractmethod
    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        """Yield the header (:class:`PrettyType`), then one :class:`PrettyAttr` per line."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return pretty_repr_object(self)


def pretty_repr_elem(obj: PrettyType, elem: PrettyAttr) -> str:
    """One attribute line, indented as ``obj`` asks, nested lines indented once more.

    Examples
    --------
    >>> from brainx.util.pretty import pretty_repr_elem, PrettyType, PrettyAttr
    >>> pretty_repr_elem(PrettyType("T"), PrettyAttr("x", 1))
    '  x=1'
    """
    if not isinstance(elem, PrettyAttr):
        raise TypeError(f"__pretty_repr__ must yield PrettyAttr items after the PrettyType "
                        f"header; got a {type(elem).__name__}: {elem!r}.")
    value = elem.value if isinstance(elem.value, str) else repr(elem.value)
    value = value.replace("\n", "\n" + obj.elem_indent)
    return f"{obj.elem_indent}{elem.start}{elem.key}{obj.value_sep}{value}{elem.end}"


def pretty_repr_object(obj: PrettyRepr) -> str:
    """The multi-line repr of a :class:`PrettyRepr` (what its ``__repr__`` returns).

    Examples
    --------
    >>> from brainx.util import PrettyMapping
    >>> from brainx.util.pretty import pretty_repr_object
    >>> print(pretty_repr_object(PrettyMapping({"a": 1})))
    {
      'a': 1
    }
    """
    if not isinstance(obj, PrettyRepr):
        raise TypeError(f"Object {obj!r} is not representable by pretty_repr_object: it is a "
                        f"{type(obj).__name__}, not a PrettyRepr. Use repr() for it.")
    items = obj.__pretty_repr__()
    header = next(items)
    if not isinstance(header, PrettyType):
        raise TypeError(f"First item must be PrettyType: __pretty_repr__ of "
                        f"{type(obj).__name__} yielded a {type(header).__name__} first.")
    lines = ",\n".join(pretty_repr_elem(header, elem) for elem in items)
    body = f"\n{lines}\n" if lines else header.empty_repr
    name = header.type if isinstance(header.type, str) else header.type.__name__
    return f"{name}{header.start}{body}{header.end}"


class MappingReprMixin(Mapping[A, B]):
    """Mix into a :class:`PrettyRepr` mapping to print it as ``{key: value, ...}``.

    Examples
    --------
    >>> from brainx.util import MappingReprMixin, PrettyRepr
    >>> class Table(MappingReprMixin, PrettyRepr):
    ...     def __init__(self, **kw): self._d = kw
    ...     def __getitem__(self, k): return self._d[k]
    ...     def __iter__(self): return iter(self._d)
    ...     def __len__(self): return len(self._d)
    >>> Table(a=1)
    {
      'a': 1
    }
    """

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield PrettyType(type="", value_sep=": ", start="{", end="}")
        for key, value in self.items():
            yield PrettyAttr(repr(key), value)


@dataclasses.dataclass(repr=False)
class PrettyMapping(PrettyRepr):
    """Wraps any mapping to print it one ``key: value`` per line.

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
    Params{
      'w': 1,
      'b': 2
    }
    """

    mapping: Mapping
    type_name: str = ""

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield PrettyType(type=self.type_name, value_sep=": ", start="{", end="}")
        for key, value in self.mapping.items():
            yield PrettyAttr(repr(key), value)


@dataclasses.dataclass
class PrettyReprContext(threading.local):
    """Per thread: the objects already being printed by the outermost ``repr`` call."""

    seen_modules_repr: Optional[Dict[int, Any]] = None


CONTEXT = PrettyReprContext()


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
    """The pretty-repr items of ``node``, printing a repeated object as ``Type(...)``.

    Within one outermost ``repr`` call, the first time an object is met its
    header and attributes are yielded; any later time (a shared submodule, a
    cycle) only ``PrettyType(type(node), empty_repr='...')``.

    Parameters
    ----------
    node : object
        The object being printed.
    repr_object : callable, optional
        ``repr_object(node)`` yields the header; default: the type's name in
        parentheses.
    repr_attr : callable, optional
        ``repr_attr(node)`` yields the attributes; default: the public
        entries of ``vars(node)``.

    Examples
    --------
    >>> from brainx.util import PrettyRepr, yield_unique_pretty_repr_items
    >>> class Node(PrettyRepr):
    ...     def __init__(self): self.child = self      # a cycle
    ...     def __pretty_repr__(self):
    ...         yield from yield_unique_pretty_repr_items(self)
    >>> Node()
    Node(
      child=Node(...)
    )
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
