"""`DottedPath`: the key under which a state or node is found in a model tree.

brainstate keys what ``states()`` and ``nodes()`` return by *path tuples*:
``("layers", 0, "weight")``, an attribute name, a list index (an ``int``) or
a dict key per level. Programs index them (``path[-1] == "weight"``), join
them, and nest them back (``to_nest()``). brainx printed and looked them up
as dotted strings (``"layers.0.weight"``).

A :class:`DottedPath` is both: a tuple of the path's parts that hashes as
that tuple (so ``{path} == {("layers", 0, "weight")}``, as with brainstate's
keys) and prints and compares as its dotted string. So ``path[-1]``,
``len(path)`` and iteration see the parts, and ``path == "layers.0.weight"``
is true. Looking one up by its dotted string needs a mapping that converts
it, as :class:`~brainx.util.FlattedDict` does (a string hashes differently).
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["DottedPath", "dotted"]


def dotted(parts: Iterable[Any]) -> str:
    """The parts of a path joined by dots: ``("layers", 0, "w")`` -> ``"layers.0.w"``."""
    return ".".join(map(str, parts))


class DottedPath(tuple):
    """A path tuple that hashes as a tuple and prints and compares as its dotted string.

    Examples
    --------
    >>> from brainx.util import DottedPath
    >>> p = DottedPath(("layers", 0, "weight"))
    >>> p, p[-1], p[1] + 1, len(p)
    ('layers.0.weight', 'weight', 1, 3)
    >>> p == "layers.0.weight", p == ("layers", 0, "weight"), {p: 1}[("layers", 0, "weight")]
    (True, True, 1)
    """

    __slots__ = ()

    def __new__(cls, parts: Iterable[Any] = ()) -> "DottedPath":
        if isinstance(parts, str):
            parts = parts.split(".") if parts else ()
        return super().__new__(cls, parts)

    @property
    def dotted(self) -> str:
        """The dotted string, ``"layers.0.weight"``."""
        return dotted(self)

    def __str__(self) -> str:
        return self.dotted

    def __repr__(self) -> str:
        return repr(self.dotted)

    def __format__(self, spec: str) -> str:
        return format(self.dotted, spec)

    def __hash__(self) -> int:
        return tuple.__hash__(self)   # as brainstate's path tuples: {("w",)} == {path}

    def _other(self, other: Any):
        if isinstance(other, str):
            return other
        if isinstance(other, tuple):
            return dotted(other)
        return None

    def __eq__(self, other: Any) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self.dotted == o

    def __ne__(self, other: Any) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self.dotted != o

    def __lt__(self, other: Any) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self.dotted < o

    def __le__(self, other: Any) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self.dotted <= o

    def __gt__(self, other: Any) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self.dotted > o

    def __ge__(self, other: Any) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self.dotted >= o

    def __add__(self, other: Any) -> "DottedPath":
        return DottedPath(tuple(self) + tuple(other))

    def __getnewargs__(self):
        return (tuple(self),)
