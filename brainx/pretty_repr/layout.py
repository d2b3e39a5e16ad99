"""The pretty-repr engine: objects to a document tree, and the tree laid out to a width.

An object takes part by a ``__pretty_repr__`` method that yields one
:class:`PrettyType` (its header: name and brackets) and then :class:`PrettyAttr`
items (``key=value``, or a bare value when the key is ``''``). :func:`render`
turns a value into text in two steps:

1. **Build**: the value becomes a tree of groups (an object's or a container's
   items between brackets) and leaves (text). Lists, tuples, dicts and
   dataclasses with their generated repr are groups too; arrays become their
   summary (``f32[3,4]``, :func:`~brainx.util.format_array_like`). An object
   met a second time prints as ``<shared: .path>``, one met inside itself as
   ``<cycle: .path>``, where the path says where it was first printed.
2. **Lay out**: a group that fits in the columns left on its line is printed
   on that line (``Linear((3,) -> (4,), name='l')``); otherwise its items go
   one per line, indented, each with a trailing comma and with the size
   comment of a sub-node (``# 16 params``), and each is laid out again in the
   room it has.

The options (:class:`~brainx.util.ReprOptions`) give the width, the depth and
item limits, the footer and the colours.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from brainx.pretty_repr.options import (
    CONTEXT, ReprOptions, ReprSummary, color_enabled, format_array_like, get_repr_options,
)

__all__ = ["PrettyType", "PrettyAttr", "render", "pretty_str", "summary_of", "is_pretty"]


@dataclasses.dataclass
class PrettyType:
    """The header of a pretty repr: the type shown and how its items are framed.

    Parameters
    ----------
    type : str or type
        The name printed before ``start`` (a class prints as its ``__name__``; ``''``
        prints nothing, as for a plain mapping).
    start, end : str
        The brackets around the items.
    value_sep : str
        What goes between an item's key and its value (``'='``; ``': '`` for a mapping).
    elem_indent : str
        The indentation of each item when the repr is broken over lines.
    empty_repr : str
        What is printed between the brackets when there are no items.
    ref : str or None
        When set, the object prints as this text (a marker such as ``'<shared: .a>'``)
        and is not expanded.

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
    ref: Optional[str] = None


@dataclasses.dataclass
class PrettyAttr:
    """One item of a pretty repr: ``key=value``, or a bare value when ``key`` is ``''``.

    Parameters
    ----------
    key : str
        The item's name, printed as is (``''``: a positional item).
    value : object
        A ``str`` is printed as is (quote string data yourself: ``repr(text)``); anything
        else is laid out by the engine.
    start, end : str
        Printed right before the key and right after the value.
    comment : str or None
        A ``# comment`` after the item, shown when its group is broken over lines.

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
    comment: Optional[str] = None


def render(value: Any, color: bool = False) -> str:
    """The pretty text of ``value`` with the options in force (``color``: ANSI colours).

    The outermost render of a graph node (an object with ``__pretty_repr_summary__``)
    ends with its size footer when the ``summary`` option is on.

    Examples
    --------
    >>> from brainx.pretty_repr.layout import render
    >>> render({"a": [1, 2], "b": (3,)})
    "{'a': [1, 2], 'b': (3,)}"
    """
    options = get_repr_options()
    outermost = CONTEXT.render_depth == 0
    CONTEXT.render_depth += 1
    try:
        doc = _Builder(options).build(value, "", 0)
        text = _Layout(options, color).render(doc, 0, options.width)
        if outermost and options.summary and isinstance(doc, _Group):
            summary = summary_of(value)
            footer = "" if summary is None else summary.footer()
            if footer:
                text += _style(f"  # {footer}", "comment", color)
        return text
    finally:
        CONTEXT.render_depth -= 1


def pretty_str(obj: Any) -> str:
    """``str(obj)`` of a pretty object: its repr, coloured when the options say so.

    An object whose class wrote its own ``__repr__`` (one not marked
    ``_uses_pretty_repr``) gets that ``__repr__``.
    """
    if not getattr(type(obj).__repr__, "_uses_pretty_repr", False):
        return repr(obj)
    return render(obj, color_enabled())


def summary_of(obj: Any) -> Optional[ReprSummary]:
    """``obj.__pretty_repr_summary__()``, or ``None`` (no such method, or it failed: a
    summary is decoration and never breaks a repr)."""
    method = getattr(obj, "__pretty_repr_summary__", None)
    if method is None:
        return None
    try:
        return method()
    except Exception:
        return None


def is_pretty(value: Any) -> bool:
    """Whether ``value`` lays itself out through ``__pretty_repr__`` (not a class)."""
    return not isinstance(value, type) and hasattr(type(value), "__pretty_repr__")


# --------------------------------------------------------------------------------------------
# The document tree

_ANSI = {"type": "\x1b[1;36m", "key": "\x1b[34m", "array": "\x1b[32m", "ref": "\x1b[2;35m",
         "comment": "\x1b[2m"}
_RESET = "\x1b[0m"


def _style(text: str, kind: Optional[str], color: bool) -> str:
    if not color or kind is None or not text:
        return text
    return f"{_ANSI[kind]}{text}{_RESET}"


@dataclasses.dataclass(eq=False)
class _Leaf:
    text: str
    kind: Optional[str] = None  # the colour: 'array', 'ref', 'comment' or None


@dataclasses.dataclass(eq=False)
class _Item:
    key: str  # '' for a positional item
    sep: str
    value: Any = None  # a _Leaf or a _Group
    start: str = ""
    end: str = ""
    label: str = ""  # '[0] ': shown only when the parent is broken over lines
    comment: Union[None, str, Callable[[], str]] = None

    def prefix_width(self) -> int:
        return len(self.start) + (len(self.key) + len(self.sep) if self.key else 0)


@dataclasses.dataclass(eq=False)
class _Group:
    head: str
    open: str
    close: str
    items: List[_Item] = dataclasses.field(default_factory=list)
    empty: str = ""
    indent: int = 2
    one_tuple: bool = False  # ``(x,)`` when on one line


def _is_more_marker(item: _Item) -> bool:
    return isinstance(item.value, _Leaf) and item.value.kind == "comment"


def _generated_dataclass_repr(value: Any) -> bool:
    """Whether ``value`` is a dataclass instance printed by the ``__repr__`` dataclasses wrote."""
    if isinstance(value, type) or not dataclasses.is_dataclass(value):
        return False
    # dataclasses compiles its __repr__ from a "<string>" source and wraps it with
    # reprlib.recursive_repr (which sets __wrapped__); a hand-written one has neither
    inner = getattr(type(value).__repr__, "__wrapped__", None)
    code = getattr(inner, "__code__", None)
    return code is not None and code.co_filename == "<string>"


def _child_path(path: str, key: str, sep: str, index: int) -> str:
    if not key:
        return f"{path}[{index}]"
    if sep.strip() == "=" and key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{key}]"


def _close(items: Iterator) -> None:
    """Close a ``__pretty_repr__`` generator left unfinished (runs its ``finally``)."""
    close = getattr(items, "close", None)
    if close is not None:
        close()


class _Builder:
    """Values to a document tree; remembers what it printed, to mark shared and cyclic ones."""

    def __init__(self, options: ReprOptions):
        self.options = options
        self.seen: Dict[int, Tuple[Any, str]] = {}  # printed objects: (object kept alive, path)
        self.active: Dict[int, str] = {}  # objects being printed (the ancestors): path

    def build(self, value: Any, path: str, depth: int) -> Union[_Leaf, _Group]:
        if is_pretty(value):
            return self._pretty(value, path, depth)
        if isinstance(value, type):
            return _Leaf(value.__name__)
        if type(value) in (list, tuple, dict) or _generated_dataclass_repr(value):
            if id(value) in self.active:
                return _Leaf(f"<cycle: {self.active[id(value)] or '.'}>", "ref")
            self.active[id(value)] = path
            try:
                return self._container(value, path, depth)
            finally:
                del self.active[id(value)]
        text = format_array_like(value, self.options.short_dtypes)
        if text is not None:
            return _Leaf(text, "array")
        return _Leaf(repr(value))

    def _container(self, value: Any, path: str, depth: int) -> _Group:
        kind = type(value)
        if kind is list:
            return self._items(_Group("", "[", "]"), [("", "", v) for v in value], path, depth)
        if kind is tuple:
            group = _Group("", "(", ")", one_tuple=len(value) == 1)
            return self._items(group, [("", "", v) for v in value], path, depth)
        if kind is dict:
            entries = [(repr(k), ": ", v) for k, v in value.items()]
            return self._items(_Group("", "{", "}"), entries, path, depth)
        fields = [PrettyAttr(f.name, getattr(value, f.name))
                  for f in dataclasses.fields(value) if f.repr]
        return self._items(_Group(kind.__name__, "(", ")"), fields, path, depth, "=", quote=True)

    def _items(self, group: _Group, entries: List[Any], path: str, depth: int,
               attr_sep: str = "", quote: bool = False) -> _Group:
        """Add ``entries`` (PrettyAttrs, or (key, sep, value) triples) to ``group``.

        A PrettyAttr's ``str`` value is inserted as is, unless ``quote`` (dataclass fields).
        """
        limit = self.options.max_items
        for index, entry in enumerate(entries):
            if limit is not None and index >= limit:
                more = _Leaf(f"... (+{len(entries) - limit} more)", "comment")
                group.items.append(_Item("", "", more))
                break
            if isinstance(entry, PrettyAttr):
                item = _Item(entry.key, attr_sep if entry.key else "", None, entry.start,
                             entry.end, comment=entry.comment)
                raw = entry.value
                if isinstance(raw, str) and not quote:
                    item.value = _Leaf(raw)
                    group.items.append(item)
                    continue
            else:
                key, sep, raw = entry
                item = _Item(key, sep)
            item.value = self.build(raw, _child_path(path, item.key, item.sep, index), depth)
            if (item.comment is None and self.options.summary and isinstance(item.value, _Group)
                    and hasattr(raw, "__pretty_repr_summary__")):
                item.comment = _lazy_comment(raw)
            group.items.append(item)
        _add_index_labels(group)
        return group

    def _pretty(self, obj: Any, path: str, depth: int) -> Union[_Leaf, _Group]:
        key = id(obj)
        if key in self.active:
            return _Leaf(f"<cycle: {self.active[key] or '.'}>", "ref")
        if key in self.seen:
            return _Leaf(f"<shared: {self.seen[key][1] or '.'}>", "ref")
        items = iter(obj.__pretty_repr__())
        header = next(items, None)
        if not isinstance(header, PrettyType):
            _close(items)
            raise TypeError(f"First item must be PrettyType: __pretty_repr__ of "
                            f"{type(obj).__name__} yielded {type(header).__name__} first.")
        if header.ref is not None:
            _close(items)
            return _Leaf(header.ref, "ref")
        name = header.type if isinstance(header.type, str) else header.type.__name__
        if name:  # a named object is a level; a bare {...} / [...] wrapper is not
            depth += 1
        max_depth = self.options.max_depth
        if max_depth is not None and depth > max_depth + 1:
            _close(items)
            return _Leaf(f"{name}{header.start}...{header.end}")
        self.seen[key] = (obj, path)
        self.active[key] = path
        try:
            group = _Group(name, header.start, header.end, empty=header.empty_repr,
                           indent=len(header.elem_indent))
            attrs = []
            for elem in items:
                if not isinstance(elem, PrettyAttr):
                    raise TypeError(f"Item must be Elem (a PrettyAttr): __pretty_repr__ of "
                                    f"{type(obj).__name__} yielded {type(elem).__name__} "
                                    f"{elem!r} after its PrettyType.")
                attrs.append(elem)
            return self._items(group, attrs, path, depth, header.value_sep)
        finally:
            del self.active[key]


def _lazy_comment(raw: Any) -> Callable[[], str]:
    """The sub-node's size comment, computed only if its line is printed broken."""
    def comment() -> str:
        summary = summary_of(raw)
        return "" if summary is None else summary.comment()
    return comment


def _add_index_labels(group: _Group) -> None:
    """Number the items (``[0] ``) of a list or tuple of objects, for when it breaks."""
    if group.open not in ("[", "(") or any(item.key for item in group.items):
        return
    if not any(isinstance(it.value, _Group) and it.value.head
               or isinstance(it.value, _Leaf) and it.value.kind == "ref" for it in group.items):
        return
    for i, item in enumerate(group.items):
        if not _is_more_marker(item):
            item.label = f"[{i}] "


# --------------------------------------------------------------------------------------------
# Layout


class _Layout:
    """Lays a document tree out within the width (colour codes take no columns)."""

    def __init__(self, options: ReprOptions, color: bool):
        self.options = options
        self.color = color
        self.widths: Dict[int, float] = {}

    def flat_width(self, doc: Union[_Leaf, _Group]) -> float:
        """Columns of ``doc`` on one line (``inf`` if it holds a line break)."""
        known = self.widths.get(id(doc))
        if known is not None:
            return known
        if isinstance(doc, _Leaf):
            width = math.inf if "\n" in doc.text else len(doc.text)
        elif "\n" in doc.open or "\n" in doc.close:
            width = math.inf
        else:
            width = len(doc.head) + len(doc.open) + len(doc.close)
            if doc.items:
                width += 2 * (len(doc.items) - 1) + doc.one_tuple
                width += sum(it.prefix_width() + self.flat_width(it.value) + len(it.end)
                             for it in doc.items)
            else:
                width += len(doc.empty)
        self.widths[id(doc)] = width
        return width

    def prefix(self, item: _Item) -> str:
        if not item.key:
            return item.start
        return item.start + _style(item.key, "key", self.color) + item.sep

    def flat(self, doc: Union[_Leaf, _Group]) -> str:
        if isinstance(doc, _Leaf):
            return _style(doc.text, doc.kind, self.color)
        head = _style(doc.head, "type", self.color)
        if not doc.items:
            return f"{head}{doc.open}{doc.empty}{doc.close}"
        body = ", ".join(self.prefix(it) + self.flat(it.value) + it.end for it in doc.items)
        return f"{head}{doc.open}{body}{',' if doc.one_tuple else ''}{doc.close}"

    def render(self, doc: Union[_Leaf, _Group], indent: int, room: float) -> str:
        """``doc`` starting at column ``indent``'s line, with ``room`` columns left on it."""
        if isinstance(doc, _Leaf):
            return _style(doc.text, doc.kind, self.color).replace("\n", "\n" + " " * indent)
        if not doc.items or self.flat_width(doc) <= room:
            return self.flat(doc)
        inner = indent + doc.indent
        pad = " " * inner
        lines = [_style(doc.head, "type", self.color) + doc.open]
        for item in doc.items:
            used = inner + len(item.label) + item.prefix_width() + len(item.end) + 1  # the ','
            value = self.render(item.value, inner, self.options.width - used)
            line = f"{pad}{item.label}{self.prefix(item)}{value}{item.end},"
            comment = item.comment() if callable(item.comment) else item.comment
            if comment:
                line += _style(f"  # {comment}", "comment", self.color)
            lines.append(line)
        lines.append(" " * indent + doc.close)
        return "\n".join(lines)
