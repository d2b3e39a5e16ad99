""":func:`pretty_format`: a nested value (dicts, lists, dataclasses, arrays) laid out for reading.

Containers that fit in the width stay on one line; longer ones get one item per line,
indented. Arrays are shown by :func:`~brainx.util.format_array_like`, so as summaries
(``float32[2,3]``) unless the repr options say otherwise.
"""

from __future__ import annotations

import dataclasses
from typing import Any, List, Optional, Tuple

from brainx.util.repr_options import (
    ReprOptions, format_array_like, get_repr_options, is_array_like, repr_options,
)

__all__ = ["pretty_format"]


def pretty_format(obj: Any, options: Optional[ReprOptions] = None, **changes: Any) -> str:
    """A nested value as a readable, possibly multi-line string.

    Parameters
    ----------
    obj : object
        A dict (or other mapping), list, tuple, set, named tuple, dataclass instance, array
        or anything else (shown by its ``repr``), nested in any way.
    options : ReprOptions, optional
        Options to use instead of those in force (see :class:`~brainx.util.ReprOptions`).
    **changes
        Options to change for this call only (``width=40``, ``max_items=3``, ...).

    Returns
    -------
    str
        The text. A container stays on one line when that line fits in ``width`` columns
        (counting its indentation) and no item takes several lines; otherwise each item gets
        a line of its own, indented by ``indent`` spaces, and the closing bracket a line at
        the container's indentation. At most ``max_items`` items of a container are shown,
        then ``...``; containers deeper than ``max_depth`` are shown as ``[...]``,
        ``{...}``, ``Name(...)``. A container met again inside itself is shown as ``...``.

    Raises
    ------
    TypeError
        If an option name is unknown.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.util import pretty_format
    >>> print(pretty_format({"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}))
    {'w': float32[2,3], 'b': float32[3]}
    >>> print(pretty_format({"layers": [1, 2, 3], "name": "net"}, width=30))
    {
      'layers': [1, 2, 3],
      'name': 'net'
    }
    >>> pretty_format(list(range(10)), max_items=3)
    '[0, 1, 2, ...]'
    """
    if options is None:
        options = get_repr_options()
    if changes:
        options = options.replace(**changes)
    with repr_options(options):
        return _Formatter(options).format(obj, 0, 0, 0)


class _Formatter:
    def __init__(self, options: ReprOptions):
        self.options = options
        self.seen: set = set()

    def format(self, obj: Any, depth: int, margin: int, column: int) -> str:
        """``obj``'s text: ``margin`` is the indentation of its first line, ``column`` where
        on that line it starts."""
        if is_array_like(obj):  # values of several lines: the later ones indented to match
            return format_array_like(obj, self.options).replace("\n", "\n" + " " * column)
        parts = _parts(obj)
        if parts is None:
            return repr(obj)
        open_, close, items, empty = parts
        if not items:
            return empty
        if id(obj) in self.seen:
            return "..."
        max_depth = self.options.max_depth
        if max_depth is not None and depth >= max_depth:
            return f"{open_}...{close}"
        self.seen.add(id(obj))
        try:
            return self._layout(open_, close, items, depth, margin, column,
                                one_tuple=isinstance(obj, tuple) and len(items) == 1
                                and not _is_namedtuple(obj))
        finally:
            self.seen.discard(id(obj))

    def _layout(self, open_: str, close: str, items: List[Tuple[str, Any]], depth: int,
                margin: int, column: int, one_tuple: bool) -> str:
        opts = self.options
        shown = items if opts.max_items is None else items[:opts.max_items]
        more = len(shown) < len(items)
        inner = margin + opts.indent  # where items start when laid out one per line
        texts = [prefix + self.format(value, depth + 1, inner, inner + len(prefix))
                 for prefix, value in shown]
        if more:
            texts.append("...")
        one_line = open_ + ", ".join(texts) + ("," if one_tuple else "") + close
        if "\n" not in one_line and column + len(one_line) <= opts.width:
            return one_line
        pad = " " * inner
        body = ",\n".join(pad + text for text in texts)
        return f"{open_}\n{body}\n{' ' * margin}{close}"


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def _parts(obj: Any) -> Optional[Tuple[str, str, List[Tuple[str, Any]], str]]:
    """(opening, closing, [(prefix, value)], text when empty) of a container, else None."""
    kind = type(obj)
    if isinstance(obj, dict) or (hasattr(obj, "items") and hasattr(obj, "keys")
                                 and hasattr(obj, "__getitem__") and kind.__repr__ in
                                 (object.__repr__, dict.__repr__)):
        items = [(f"{k!r}: ", v) for k, v in obj.items()]
        if kind is dict:
            return "{", "}", items, "{}"
        return f"{kind.__name__}({{", "})", items, f"{kind.__name__}({{}})"
    if _is_namedtuple(obj):
        return (f"{kind.__name__}(", ")", [(f"{f}=", v) for f, v in zip(kind._fields, obj)],
                f"{kind.__name__}()")
    if kind is list:
        return "[", "]", [("", v) for v in obj], "[]"
    if kind is tuple:
        return "(", ")", [("", v) for v in obj], "()"
    if kind in (set, frozenset):
        try:
            values = sorted(obj)
        except TypeError:
            values = list(obj)
        if kind is set:
            return "{", "}", [("", v) for v in values], "set()"
        return "frozenset({", "})", [("", v) for v in values], "frozenset()"
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and _dataclass_repr(kind):
        fields = [(f"{f.name}=", getattr(obj, f.name)) for f in dataclasses.fields(obj)
                  if f.repr]
        return f"{kind.__name__}(", ")", fields, f"{kind.__name__}()"
    return None


def _dataclass_repr(kind: type) -> bool:
    """Whether the dataclass's repr is the one ``dataclasses`` wrote (not the class's own)."""
    params = getattr(kind, "__dataclass_params__", None)
    if params is None or not params.repr:
        return False
    inner = getattr(kind.__repr__, "__wrapped__", kind.__repr__)
    code = getattr(inner, "__code__", None)
    return code is not None and (code.co_filename == "<string>"
                                 or "__create_fn__" in getattr(inner, "__qualname__", ""))
