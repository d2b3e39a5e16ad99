"""Filters: which states (or nodes) of a model tree to pick.

A *filter* is anything :func:`to_predicate` turns into a predicate
``(path, x) -> bool``, where ``path`` is the tuple of keys leading to ``x``
(``("layers", 0, "weight")``) and ``x`` the state or node. The functions that
collect states (``Module.states``, :func:`brainx.graph.states`,
``FlattedDict.filter``), ``catch_new_states(state_to_exclude=...)``, the state
axes of ``vmap``/``map`` (``in_states``, ``out_states``, ``state_out_axes``),
``StateFinder`` and ``jit(donate_states=...)`` accept them: one filter language.
For a state found by tracing a function the path is ``()``.

=====================  ==================================================
filter                 picks
=====================  ==================================================
a ``State`` subclass   states of that type (:class:`OfType`)
a string ``s``         states tagged ``s`` (a :class:`WithTag`, as in
                       brainstate) *or* whose dotted path matches the glob
                       ``s`` (:class:`PathGlob`, as brainx always did):
                       :class:`TagOrPathGlob`
``...`` / ``True``     everything (:class:`Everything`)
``None`` / ``False``   nothing (:class:`Nothing`)
a ``State``            that state itself (:class:`IsState`)
a tuple, list or set   any of its filters (:class:`Any`); of states only:
                       those states (:class:`IsState`)
a callable             itself: ``f(path, x) -> bool``
=====================  ==================================================

Combine with :class:`Any` (or), :class:`All` (and) and :class:`Not`; select
by path with :class:`PathContains` (one key anywhere in the path),
:class:`PathGlob` (shell pattern on the dotted path) and :class:`PathRegex`.
"""

from __future__ import annotations

import builtins
import dataclasses
import fnmatch
import re
import typing
from typing import Callable, Tuple

from brainx.util.path import dotted
from brainx.util.state_like import StateLike

__all__ = [
    "to_predicate", "IsState", "WithTag", "TagOrPathGlob", "PathContains", "PathGlob", "PathRegex", "OfType",
    "Any", "All", "Not", "Everything", "Nothing", "Filter", "Predicate",
]

Predicate = Callable[[Tuple, typing.Any], bool]
Filter = typing.Union[type, str, Predicate, bool, None, type(Ellipsis), tuple, list]


def to_predicate(the_filter: Filter) -> Predicate:
    """The predicate ``(path, x) -> bool`` a filter stands for (see the module's table).

    Examples
    --------
    >>> import brainx
    >>> from brainx.util import to_predicate
    >>> w = brainx.ParamState(1.0, tag="fast")
    >>> to_predicate(brainx.ParamState)(("w",), w), to_predicate("fast")(("w",), w)
    (True, True)
    >>> to_predicate("layers.*")(("layers", 0, "w"), w), to_predicate(None)(("w",), w)
    (True, False)
    """
    if isinstance(the_filter, StateLike):
        return IsState(the_filter)
    if isinstance(the_filter, str):
        return TagOrPathGlob(the_filter)
    if isinstance(the_filter, type):
        return OfType(the_filter)
    if isinstance(the_filter, bool):
        return Everything() if the_filter else Nothing()
    if the_filter is Ellipsis:
        return Everything()
    if the_filter is None:
        return Nothing()
    if callable(the_filter):
        return the_filter
    if isinstance(the_filter, (list, tuple, set, frozenset)):
        items = list(the_filter)
        if items and builtins.all(isinstance(s, StateLike) for s in items):
            return IsState(*items)
        return Any(*items)
    raise TypeError(f"Invalid collection filter. Unsupported filter {the_filter!r}: use a State "
                    "type, a string (tag or path glob), a State or a collection of States, a "
                    "predicate f(path, x) -> bool, ..., True/False/None, or a tuple of these.")


class IsState:
    """These states themselves (by identity, not by equal values).

    Examples
    --------
    >>> import brainx
    >>> from brainx.util import IsState
    >>> w, h = brainx.ParamState(0.0), brainx.HiddenState(0.0)
    >>> IsState(w)((), w), IsState(w)((), brainx.ParamState(0.0)), IsState(w, h)((), h)
    (True, False, True)
    """

    def __init__(self, *states: typing.Any):
        self.states = states
        self._ids = frozenset(map(id, states))

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        return id(x) in self._ids

    def __repr__(self) -> str:
        return f"IsState({', '.join(map(repr, self.states))})"


@dataclasses.dataclass(frozen=True)
class WithTag:
    """States whose ``tag`` is ``tag`` or contains it.

    Examples
    --------
    >>> import brainx
    >>> from brainx.util import WithTag
    >>> WithTag("fast")((), brainx.State(0.0, tag={"fast", "x"})), WithTag("fast")((), 1.0)
    (True, False)
    """

    tag: str

    def __post_init__(self):
        if not isinstance(self.tag, str):
            raise TypeError(f"WithTag: the tag must be a string, got {self.tag!r}.")

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        tag = getattr(x, "tag", None)
        if isinstance(tag, str):
            return tag == self.tag
        if isinstance(tag, (set, frozenset, list, tuple)):
            return self.tag in tag
        return False

    def __repr__(self) -> str:
        return f"WithTag({self.tag!r})"


class TagOrPathGlob(WithTag):
    """What a string filter stands for: states tagged ``tag``, or whose dotted path matches it.

    A :class:`WithTag` (brainstate's meaning of a string, with its ``tag``) that also
    picks by :class:`PathGlob` (``"layers.*.w"``), brainx's meaning.

    Examples
    --------
    >>> import brainx
    >>> from brainx.util import to_predicate
    >>> f = to_predicate("fast")
    >>> f.tag, f((), brainx.State(0.0, tag="fast")), f(("fast",), brainx.State(0.0))
    ('fast', True, True)
    """

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        return WithTag.__call__(self, path, x) or PathGlob(self.tag)(path, x)

    def __repr__(self) -> str:
        return f"TagOrPathGlob({self.tag!r})"


def _part(part: typing.Any) -> typing.Any:
    """A path part as a plain key (JAX key-path entries carry it in key/name/idx)."""
    for attr in ("key", "name", "idx"):
        if hasattr(part, attr) and not isinstance(part, (str, int)):
            return getattr(part, attr)
    return part


@dataclasses.dataclass(frozen=True)
class PathContains:
    """Objects with ``key`` among their path's parts (``0`` and ``"0"`` both match index 0).

    Examples
    --------
    >>> from brainx.util import PathContains
    >>> PathContains("enc")(("enc", "lif", "V"), None), PathContains(1)(("blocks", 1), None)
    (True, True)
    >>> PathContains("V")(("enc", "Vth"), None)
    False
    """

    key: typing.Any

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        key = str(self.key)
        return builtins.any(p == self.key or str(p) == key for p in map(_part, path))

    def __repr__(self) -> str:
        return f"PathContains({self.key!r})"


@dataclasses.dataclass(frozen=True)
class PathGlob:
    """Objects whose dotted path (``"layers.0.weight"``) matches a shell pattern (brainx).

    ``*`` matches any run of characters, dots included; ``?`` one character;
    ``[seq]`` one of ``seq`` (``fnmatch``, case-sensitive).

    Examples
    --------
    >>> from brainx.util import PathGlob
    >>> PathGlob("heads.*.h")(("heads", "left", "h"), None), PathGlob("*.w")(("w",), None)
    (True, False)
    """

    pattern: str

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        return fnmatch.fnmatchcase(dotted(map(_part, path)), self.pattern)

    def __repr__(self) -> str:
        return f"PathGlob({self.pattern!r})"


@dataclasses.dataclass(frozen=True)
class PathRegex:
    """Objects whose whole dotted path matches a regular expression (``re.fullmatch``, brainx).

    Examples
    --------
    >>> from brainx.util import PathRegex
    >>> f = PathRegex(r"blocks\\.\\d+\\.w")
    >>> f(("blocks", 12, "w"), None), f(("blocks", "x", "w"), None), f(("blocks", 1, "w2"), None)
    (True, False, False)
    """

    pattern: str

    def __post_init__(self):
        re.compile(self.pattern)  # a bad pattern fails here, not at the first state

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        return re.fullmatch(self.pattern, dotted(map(_part, path))) is not None

    def __repr__(self) -> str:
        return f"PathRegex({self.pattern!r})"


@dataclasses.dataclass(frozen=True)
class OfType:
    """Instances of ``type`` (or snapshots whose ``.type`` is a subclass, like ``TreefyState``).

    Examples
    --------
    >>> import brainx
    >>> from brainx.util import OfType
    >>> OfType(brainx.ShortTermState)((), brainx.HiddenState(0.0))
    True
    """

    type: type

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        x_type = getattr(x, "type", None)
        return isinstance(x, self.type) or (isinstance(x_type, type)
                                            and issubclass(x_type, self.type))

    def __repr__(self) -> str:
        return f"OfType({self.type!r})"


class _Combined:
    """Shared equality, hashing and repr of the filters built from other filters."""

    predicates: tuple

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self.predicates == other.predicates

    def __hash__(self) -> int:
        try:
            return hash((type(self), self.predicates))
        except TypeError:  # an unhashable user predicate
            return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self.predicates))})"


class Any(_Combined):
    """Objects matched by any of ``filters`` (logical or; a tuple filter means the same).

    Examples
    --------
    >>> import brainx
    >>> from brainx.util import Any
    >>> f = Any(brainx.ParamState, "fast")
    >>> f((), brainx.ParamState(0.0)), f((), brainx.State(0.0, tag="fast")), f((), brainx.State(0.0))
    (True, True, False)
    """

    def __init__(self, *filters: Filter):
        self.predicates = tuple(map(to_predicate, filters))

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        return builtins.any(p(path, x) for p in self.predicates)


class All(_Combined):
    """Objects matched by every one of ``filters`` (logical and).

    Examples
    --------
    >>> import brainx
    >>> from brainx.util import All, PathContains
    >>> f = All(brainx.ParamState, PathContains("enc"))
    >>> f(("enc", "w"), brainx.ParamState(0.0)), f(("dec", "w"), brainx.ParamState(0.0))
    (True, False)
    """

    def __init__(self, *filters: Filter):
        self.predicates = tuple(map(to_predicate, filters))

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        return builtins.all(p(path, x) for p in self.predicates)


class Not(_Combined):
    """Objects that ``filter`` does not match.

    Examples
    --------
    >>> import brainx
    >>> from brainx.util import Not
    >>> Not(brainx.ParamState)((), brainx.HiddenState(0.0))
    True
    """

    def __init__(self, filter: Filter, /):
        self.predicates = (to_predicate(filter),)

    @property
    def predicate(self) -> Predicate:
        """The negated predicate."""
        return self.predicates[0]

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        return not self.predicates[0](path, x)


class Everything:
    """Every object (what ``...`` and ``True`` stand for)."""

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        return True

    def __eq__(self, other) -> bool:
        return isinstance(other, Everything)

    def __hash__(self) -> int:
        return hash(Everything)

    def __repr__(self) -> str:
        return "Everything()"


class Nothing:
    """No object (what ``None`` and ``False`` stand for)."""

    def __call__(self, path: Tuple, x: typing.Any) -> bool:
        return False

    def __eq__(self, other) -> bool:
        return isinstance(other, Nothing)

    def __hash__(self) -> int:
        return hash(Nothing)

    def __repr__(self) -> str:
        return "Nothing()"
