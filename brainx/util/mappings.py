"""`FlattedDict` and `NestedDict`: the mappings that states and nodes are collected into.

``Module.states()`` and :func:`brainx.graph.states` return a
:class:`FlattedDict`: one level, keyed by :class:`~brainx.util.DottedPath`
(a path tuple that prints and compares as ``"layers.0.weight"``), in the
order the states were found. :func:`brainx.graph.treefy_states` returns a
:class:`NestedDict`: the same paths as nested dicts
(``{"layers": {0: {"weight": ...}}}``). ``to_nest()`` and ``to_flat()`` go
from one to the other; ``filter`` and ``split`` partition either by filters
(see :mod:`brainx.util.filter`); ``merge`` and ``|`` join them back.

Both are JAX pytrees whose children are the values (keys are sorted, as for
a ``dict``), so ``jax.tree.map`` over them keeps the keys, and
``transform.grad(f, grad_states=net.states(ParamState))`` returns gradients
in a ``FlattedDict`` keyed like the states.
"""

from __future__ import annotations

from collections import abc
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, Union

import jax

from brainx.util.state_like import StateLike
from brainx.util.filter import Filter, to_predicate
from brainx.util.path import DottedPath, dotted

__all__ = ["FlattedDict", "NestedDict", "flat_mapping", "nest_mapping", "partition", "select",
           "empty_node", "MissingKeyError"]


def _path(key: Any) -> Any:
    if isinstance(key, DottedPath):
        return key
    if isinstance(key, (tuple, str)):
        return DottedPath(key)
    return DottedPath((key,))


def _by_dotted(mapping: Any) -> dict:
    return {k if isinstance(k, str) else _path(k).dotted: v for k, v in mapping.items()}


def _predicates(filters: Tuple[Filter, ...]):
    for i, f in enumerate(filters[:-1]):
        if (f is ... or f is True) and not all(g is ... or g is True for g in filters[i + 1:]):
            raise ValueError(f"`...` or `True` matches everything, so it can only be the last "
                             f"filter; got it at position {i} of {filters!r}.")
    return tuple(map(to_predicate, filters))


def partition(items: Iterable[Tuple[Any, Any]], filters: Tuple[Filter, ...]):
    """One list of ``(path, value)`` per filter, plus the rest; each item goes to its first match."""
    predicates = _predicates(filters)
    groups = tuple([] for _ in range(len(predicates) + 1))
    for path, value in items:
        for group, predicate in zip(groups, predicates):
            if predicate(path, value):
                group.append((path, value))
                break
        else:
            groups[-1].append((path, value))
    return groups


def select(items: Iterable[Tuple[Any, Any]], filters: Tuple[Filter, ...]
           ) -> Union["FlattedDict", Tuple["FlattedDict", ...]]:
    """``items`` (``(path, x)`` pairs) in a FlattedDict; with filters, one per filter.

    What ``states(*filters)`` returns: no filter, every item; one, the items
    it matches; several, a tuple, each item in the first that matches it.
    """
    if not filters:
        return FlattedDict(items)
    groups = tuple(FlattedDict(g) for g in partition(items, tuple(filters))[:-1])
    return groups[0] if len(groups) == 1 else groups


def _exhaustive(groups, what: str):
    if groups[-1]:
        rest = ", ".join(str(p) for p, _ in groups[-1][:5])
        raise ValueError(f"{what}: the filters leave out {len(groups[-1])} item(s) ({rest}"
                         f"{', ...' if len(groups[-1]) > 5 else ''}). Add `...` as the last "
                         "filter to collect the rest, or use filter() to drop them.")


class MissingKeyError(KeyError, AttributeError):
    """A key read as an attribute (``d.name``) that the mapping does not hold.

    Both a ``KeyError`` (what brainstate raises, so ``except KeyError`` keeps
    working) and an ``AttributeError`` (so ``hasattr`` and ``getattr(d, name,
    default)`` work as for any object).
    """


class _KeysAsAttributes:
    """``mapping.name`` reads ``mapping["name"]`` (brainstate's dicts allow it)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise MissingKeyError(f"{type(self).__name__} has no key or attribute {name!r}; "
                                  f"keys: {list(self)}") from None


def _same_kind(op: str, mine: Any, other: Any) -> None:
    """``FlattedDict | x`` and ``- x`` take a FlattedDict or NestedDict only (as brainstate)."""
    if not isinstance(other, (FlattedDict, NestedDict)):
        raise TypeError(f"{type(mine).__name__} {op} {type(other).__name__}: the other operand "
                        f"must be a FlattedDict or a NestedDict (wrap a plain dict: "
                        f"{type(mine).__name__}(d)).")


class FlattedDict(_KeysAsAttributes, dict):
    """A one-level mapping from paths to states (or nodes, or values).

    Keys are :class:`~brainx.util.DottedPath`\\ s; a key may be given or
    looked up as a tuple (``("enc", "w")``) or as a dotted string
    (``"enc.w"``). Items are also readable as attributes when the key is a
    plain name (``flat.w``).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.util import FlattedDict
    >>> flat = FlattedDict({("enc", "w"): brainx.ParamState(jnp.ones(2)),
    ...                     ("enc", "h"): brainx.HiddenState(jnp.zeros(2))})
    >>> list(flat), flat["enc", "w"] is flat["enc.w"]
    (['enc.w', 'enc.h'], True)
    >>> flat.filter(brainx.HiddenState)
    FlattedDict({'enc.h': HiddenState(f32[2])})
    >>> flat.to_nest()["enc"]["w"] is flat["enc.w"]
    True
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__()
        self.update(*args, **kwargs)

    # -- keys as tuples or dotted strings -----------------------------------------
    def _key(self, key: Any) -> DottedPath:
        """The stored key for ``key``: a path hashes as its tuple, so a key not found so
        (a dotted string ``"layers.0.w"``, whose ``"0"`` is a str) is matched by its dotted form."""
        path = _path(key)
        # only a path with a number in it can be spelled two ways (the int 0 or the str "0")
        if dict.__contains__(self, path) or not any(str(p).isdigit() for p in path):
            return path
        stored = self._dotted_keys().get(path.dotted)
        return path if stored is None else stored

    def _dotted_keys(self) -> Dict[str, DottedPath]:
        """``{dotted string: first stored key}``, so that ``_key`` is one lookup, not a scan
        of every key (which made building a mapping of n numbered paths take n^2 steps).

        Kept in step by the methods below; rebuilt when the dict's size says it is not
        (a dict filled by ``dict`` methods, an unpickled one)."""
        index = vars(self).get("_index")
        if index is None or index[0] != dict.__len__(self):
            keys: Dict[str, DottedPath] = {}
            for k in dict.keys(self):
                keys.setdefault(dotted(k), k)
            index = vars(self)["_index"] = [dict.__len__(self), keys, len(keys) != len(self)]
        return index[1]

    def __getstate__(self) -> dict:
        """A copy or pickle leaves the index out: each mapping builds its own."""
        state = dict(vars(self))
        state.pop("_index", None)
        return state

    def _indexed(self, key: DottedPath, added: bool) -> None:
        """Tell the index that ``key`` was added or removed (a no-op before it is built)."""
        index = vars(self).get("_index")
        if index is None:
            return
        text = dotted(key)
        if added:
            if text in index[1]:
                index[2] = True  # two keys with one dotted form: a removal rebuilds
            else:
                index[1][text] = key
            index[0] += 1
        elif index[2]:
            vars(self)["_index"] = None
        else:
            index[1].pop(text, None)
            index[0] -= 1

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._key(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        key = self._key(key)
        added = not dict.__contains__(self, key)
        super().__setitem__(key, value)
        if added:
            self._indexed(key, True)

    def __delitem__(self, key: Any) -> None:
        key = self._key(key)
        super().__delitem__(key)
        self._indexed(key, False)

    def __contains__(self, key: Any) -> bool:
        return super().__contains__(self._key(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(self._key(key), default)

    def pop(self, key: Any, *default: Any) -> Any:
        key = self._key(key)
        if not dict.__contains__(self, key):
            return super().pop(key, *default)
        value = super().pop(key)
        self._indexed(key, False)
        return value

    def popitem(self) -> Tuple[DottedPath, Any]:
        key, value = super().popitem()
        self._indexed(key, False)
        return key, value

    def clear(self) -> None:
        super().clear()
        vars(self)["_index"] = None

    def setdefault(self, key: Any, default: Any = None) -> Any:
        key = self._key(key)
        if not dict.__contains__(self, key):
            self[key] = default
        return super().__getitem__(key)

    def __ior__(self, other: Any) -> "FlattedDict":
        self.update(other)
        return self

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __eq__(self, other: Any) -> bool:
        """Equal to a mapping with the same items, its keys given as tuples or dotted strings."""
        if not isinstance(other, abc.Mapping):
            return NotImplemented
        return _by_dotted(self) == _by_dotted(other)

    def __ne__(self, other: Any) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # a mutable mapping

    def copy(self) -> "FlattedDict":
        return FlattedDict(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict.__repr__(self)})"

    def __or__(self, other: Any) -> "FlattedDict":
        """The items of both (``other``'s win); ``self`` itself when ``other`` is empty."""
        _same_kind("|", self, other)
        return self if not other else FlattedDict.merge(self, other)

    def __sub__(self, other: Any) -> "FlattedDict":
        """The items whose path ``other`` lacks; ``self`` itself when ``other`` is empty."""
        _same_kind("-", self, other)
        if not other:
            return self
        other = other.to_flat() if isinstance(other, NestedDict) else other
        return FlattedDict((k, v) for k, v in self.items() if k not in other)

    # -- brainstate's API ---------------------------------------------------------------
    def to_dict(self) -> Dict[DottedPath, Any]:
        """A plain ``dict`` with the same keys and values."""
        return dict(self)

    def to_nest(self) -> "NestedDict":
        """The same items as nested dicts, one level per part of the path."""
        return nest_mapping(self)

    @classmethod
    def from_nest(cls, nested: Union[abc.Mapping, Iterable]) -> "FlattedDict":
        """The flat mapping of a nested one."""
        return flat_mapping(dict(nested))

    def split(self, first: Filter, /, *filters: Filter) -> Union["FlattedDict", Tuple["FlattedDict", ...]]:
        """One mapping per filter (each item to the first it matches); every item must match one."""
        groups = partition(self.items(), (first, *filters))
        _exhaustive(groups, "FlattedDict.split")
        out = tuple(FlattedDict(g) for g in groups[:-1])
        return out[0] if len(out) == 1 else out

    def filter(self, first: Filter, /, *filters: Filter) -> Union["FlattedDict", Tuple["FlattedDict", ...]]:
        """As :meth:`split`, but items no filter matches are dropped."""
        groups = partition(self.items(), (first, *filters))
        out = tuple(FlattedDict(g) for g in groups[:-1])
        return out[0] if len(out) == 1 else out

    subset = filter

    @staticmethod
    def merge(*states: Union["FlattedDict", "NestedDict"]) -> "FlattedDict":
        """One mapping with the items of all ``states`` (later ones win on a shared path)."""
        out = FlattedDict()
        for s in states:
            if isinstance(s, NestedDict):
                s = s.to_flat()
            elif not isinstance(s, FlattedDict):
                raise TypeError(f"merge: expected FlattedDict or NestedDict, got {type(s).__name__}.")
            out.update(s)
        return out

    def to_dict_values(self) -> Dict[DottedPath, Any]:
        """``{path: state.value}`` (non-state values as they are)."""
        return {k: v.value if isinstance(v, StateLike) else v for k, v in self.items()}

    def assign_dict_values(self, data: abc.Mapping) -> None:
        """Write ``data[path]`` into each state (or item); every path must be in ``data``."""
        data = FlattedDict(data)
        missing = [k for k in self if k not in data]
        if missing:
            raise KeyError(f"assign_dict_values: no value given for {missing}.")
        for k, v in list(self.items()):
            if isinstance(v, StateLike):
                v.value = data[k]
            else:
                self[k] = data[k]


class NestedDict(_KeysAsAttributes, dict):
    """A nested mapping: one level per part of the path (attribute, index or dict key).

    Inner levels are ``NestedDict`` too, readable as attributes
    (``nested.enc.w``) or by key (``nested["enc"]["w"]``).

    Examples
    --------
    >>> from brainx.util import NestedDict
    >>> nested = NestedDict({"enc": {"w": 1, "b": 2}, "out": {0: 3}})
    >>> nested.enc.w, list(nested.to_flat().items())
    (1, [('enc.w', 1), ('enc.b', 2), ('out.0', 3)])
    >>> NestedDict.from_flat(nested.to_flat()) == nested
    True
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__()
        for key, value in dict(*args, **kwargs).items():
            dict.__setitem__(self, key, _nested(value))

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, _nested(value))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_dict()!r})"

    def __or__(self, other: Any) -> "NestedDict":
        """The leaves of both (``other``'s win); ``self`` itself when ``other`` is empty."""
        _same_kind("|", self, other)
        return self if not other else NestedDict.merge(self, other)

    def __sub__(self, other: Any) -> "NestedDict":
        """The leaves whose path ``other`` lacks; ``self`` itself when ``other`` is empty."""
        _same_kind("-", self, other)
        return self if not other else NestedDict.from_flat(self.to_flat() - other)

    def replace_by_pure_dict(self, pure_dict: abc.Mapping,
                             replace_fn: Optional[Callable[[Any, Any], Any]] = None) -> None:
        """Put the values of the plain nested ``pure_dict`` in place, leaf by leaf.

        A State leaf gets the new value (``state.value = new``; the State object stays);
        another leaf is replaced. ``replace_fn(old, new)``, when given, makes the new leaf
        instead. Every path of ``pure_dict`` must be a leaf here (``ValueError`` naming it).

        Examples
        --------
        >>> import brainx
        >>> from brainx.util import NestedDict
        >>> nested = NestedDict({"w": brainx.ParamState(1.0), "n": 2})
        >>> nested.replace_by_pure_dict({"w": 3.0, "n": 5})
        >>> float(nested["w"].value), nested["n"]
        (3.0, 5)
        """
        mine = self.to_flat()
        for path, new in flat_mapping(dict(pure_dict)).items():
            if path not in mine:
                raise ValueError(f"replace_by_pure_dict: {path} is not a leaf of this "
                                 f"NestedDict; its leaves are {list(mine)}.")
            node = self
            for key in tuple(path)[:-1]:
                node = node[key]
            old = node[tuple(path)[-1]]
            if replace_fn is not None:
                dict.__setitem__(node, tuple(path)[-1], replace_fn(old, new))
            elif isinstance(old, StateLike):
                old.value = new
            else:
                dict.__setitem__(node, tuple(path)[-1], new)

    def to_dict(self) -> Dict[Any, Any]:
        """Plain nested ``dict``\\ s."""
        return {k: v.to_dict() if isinstance(v, NestedDict) else v for k, v in self.items()}

    to_pure_dict = to_dict

    def to_flat(self) -> FlattedDict:
        """The flat mapping: one item per leaf, keyed by its path."""
        return flat_mapping(self)

    @classmethod
    def from_flat(cls, flat: Union[abc.Mapping, Iterable]) -> "NestedDict":
        """The nested mapping of a flat one (keys: path tuples or dotted strings)."""
        return nest_mapping(FlattedDict(flat))

    def split(self, *filters: Filter) -> Union["NestedDict", Tuple["NestedDict", ...]]:
        """One nested mapping per filter; every leaf must match one (see ``FlattedDict.split``)."""
        if not filters:
            return self
        groups = partition(self.to_flat().items(), filters)
        _exhaustive(groups, "NestedDict.split")
        out = tuple(NestedDict.from_flat(g) for g in groups[:-1])
        return out[0] if len(out) == 1 else out

    def filter(self, *filters: Filter) -> Union["NestedDict", Tuple["NestedDict", ...]]:
        """As :meth:`split`, but leaves no filter matches are dropped."""
        if not filters:
            return self
        groups = partition(self.to_flat().items(), filters)
        out = tuple(NestedDict.from_flat(g) for g in groups[:-1])
        return out[0] if len(out) == 1 else out

    subset = filter

    @staticmethod
    def merge(*states: Union[FlattedDict, "NestedDict"]) -> "NestedDict":
        """One nested mapping with the leaves of all ``states`` (later ones win)."""
        return nest_mapping(FlattedDict.merge(*states))


def _nested(value: Any) -> Any:
    if isinstance(value, dict) and not isinstance(value, (NestedDict, FlattedDict)):
        return NestedDict(value)
    return value


class _EmptyNode:
    """Stands for an empty mapping in :func:`flat_mapping` (``keep_empty_nodes=True``)."""

    def __repr__(self) -> str:
        return "empty_node"

    def __reduce__(self):
        return "empty_node"


#: The leaf ``flat_mapping(..., keep_empty_nodes=True)`` puts where a mapping was empty;
#: :func:`nest_mapping` turns it back into an empty mapping.
empty_node = _EmptyNode()


def flat_mapping(xs: abc.Mapping, /, *, keep_empty_nodes: bool = False,
                 is_leaf: Optional[Callable[[tuple, Any], bool]] = None,
                 sep: str | None = None) -> FlattedDict:
    """Flatten nested mappings to ``{path: leaf}`` (``sep``: string keys joined by it).

    Parameters
    ----------
    xs : mapping
        Nested mappings.
    keep_empty_nodes : bool
        Keep an empty mapping as the leaf :data:`empty_node` (else it is left out).
    is_leaf : callable, optional
        ``is_leaf(path, mapping) -> bool``: a mapping for which it is true is a leaf.
    sep : str, optional
        Join the keys of each path with ``sep`` into one string (a plain dict).

    Examples
    --------
    >>> from brainx.util import flat_mapping
    >>> flat_mapping({"a": {"b": 1, "c": {0: 2}}})
    FlattedDict({'a.b': 1, 'a.c.0': 2})
    >>> flat_mapping({"a": {"b": 1}}, sep="/")
    {'a/b': 1}
    >>> flat_mapping({"a": {}, "b": {"c": 1}}, keep_empty_nodes=True,
    ...              is_leaf=lambda path, m: path == ("b",))
    FlattedDict({'a': empty_node, 'b': {'c': 1}})
    """
    if not isinstance(xs, abc.Mapping):
        raise TypeError(f"flat_mapping: expected a mapping, got {type(xs).__name__}.")
    items = []

    def walk(node: Any, prefix: tuple) -> None:
        if (isinstance(node, abc.Mapping) and not isinstance(node, FlattedDict)
                and not (is_leaf is not None and prefix and is_leaf(prefix, node))):
            if not node and keep_empty_nodes and prefix:
                items.append((prefix, empty_node))
            for k, v in node.items():
                walk(v, prefix + (k,))
        elif isinstance(node, FlattedDict):
            for k, v in node.items():
                items.append((prefix + tuple(k), v))
        else:
            items.append((prefix, node))

    walk(xs, ())
    if sep is not None:
        return {sep.join(map(str, p)): v for p, v in items}
    return FlattedDict(items)


def nest_mapping(xs: abc.Mapping, /, *, sep: str | None = None) -> NestedDict:
    """Nest ``{path: leaf}`` back into nested mappings (``sep``: split string keys by it).

    Examples
    --------
    >>> from brainx.util import nest_mapping
    >>> nest_mapping({("a", "b"): 1, ("a", "c"): 2, ("d",): 3}).to_dict()
    {'a': {'b': 1, 'c': 2}, 'd': 3}
    """
    if not isinstance(xs, abc.Mapping):
        raise TypeError(f"nest_mapping: expected a mapping, got {type(xs).__name__}.")
    out = NestedDict()
    for path, value in xs.items():
        if sep is not None:
            path = path.split(sep)
        elif isinstance(path, str) and not isinstance(path, DottedPath):
            path = DottedPath(path)
        path = tuple(path)
        if not path:
            raise ValueError("nest_mapping: cannot nest an item with an empty path.")
        node = out
        for key in path[:-1]:
            child = node.get(key)
            if child is None:
                child = NestedDict()
                dict.__setitem__(node, key, child)
            elif not isinstance(child, NestedDict):
                raise ValueError(f"nest_mapping: {DottedPath(path)} goes through "
                                 f"{key!r}, which holds a leaf, not a mapping.")
            node = child
        if isinstance(node.get(path[-1]), NestedDict):
            raise ValueError(f"nest_mapping: {DottedPath(path)} would replace a whole subtree "
                             "with a leaf.")
        dict.__setitem__(node, path[-1], NestedDict() if value is empty_node else value)
    return out


# -- JAX pytrees: the values are the children, the (sorted) keys the structure ----------------
def _sorted_items(d: dict):
    return sorted(d.items(), key=lambda kv: str(kv[0]))


def _flat_flatten(d: FlattedDict):
    items = _sorted_items(d)
    return [(jax.tree_util.DictKey(k), v) for k, v in items], tuple(k for k, _ in items)


def _nest_flatten(d: NestedDict):
    items = _sorted_items(d)
    return [(jax.tree_util.DictKey(k), v) for k, v in items], tuple(k for k, _ in items)


jax.tree_util.register_pytree_with_keys(
    FlattedDict, _flat_flatten, lambda keys, values: FlattedDict(zip(keys, values)))
jax.tree_util.register_pytree_with_keys(
    NestedDict, _nest_flatten, lambda keys, values: _unflatten_nested(keys, values))


def _unflatten_nested(keys, values) -> NestedDict:
    out = NestedDict()
    for k, v in zip(keys, values):
        dict.__setitem__(out, k, v)
    return out
