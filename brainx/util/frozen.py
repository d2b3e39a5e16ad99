"""``FrozenDict``: an immutable, hashable mapping that is a JAX pytree.

A :class:`FrozenDict` cannot be changed after it is made (item assignment and
deletion raise ``TypeError``); "changing" one means making a new one:
:func:`copy` (add or replace keys) and :func:`pop` (remove one) return the
new mapping and leave the old one as it was, the way ``flax.core`` frozen
dicts work. Nested dicts are frozen too, so the whole tree is read-only.
Because it never changes, a ``FrozenDict`` of hashable values is hashable: it
can be a ``dict`` key, a static argument of ``jax.jit``, or a field of a
frozen :func:`~brainx.util.dataclass`.

It is a JAX pytree: the values are the children, the keys (sorted, as JAX
does for ``dict``) the static structure, so ``jax.tree.map`` over a
``FrozenDict`` returns a ``FrozenDict``.

:func:`freeze` and :func:`unfreeze` convert between ``dict`` and
``FrozenDict`` (deeply); :func:`copy` and :func:`pop` work on both, so code
can stay agnostic of which one it got. :func:`pretty_repr` prints either
one key per line.

Examples
--------
>>> import jax
>>> from brainx.util import FrozenDict, freeze, unfreeze, copy, pop
>>> params = freeze({"dense": {"w": 1.0, "b": 0.0}})
>>> params["dense"]["w"]
1.0
>>> params2 = copy(params, {"scale": 2.0})          # a new mapping; params is unchanged
>>> sorted(params2), sorted(params)
(['dense', 'scale'], ['dense'])
>>> rest, scale = pop(params2, "scale")
>>> scale, rest == params
(2.0, True)
>>> jax.tree.map(lambda x: x + 1, params) == {"dense": {"w": 2.0, "b": 1.0}}
True
>>> unfreeze(params)
{'dense': {'w': 1.0, 'b': 0.0}}
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any, Dict, Generic, Optional, Tuple, TypeVar, Union, overload

import jax

__all__ = ["FrozenDict", "freeze", "unfreeze", "copy", "pop", "pretty_repr"]

K = TypeVar("K")
V = TypeVar("V")


def _sort_keys(keys: Any) -> list:
    """Keys in a deterministic order: sorted, or sorted by type then repr when they are mixed."""
    try:
        return sorted(keys)
    except TypeError:
        return sorted(keys, key=lambda k: (type(k).__module__, type(k).__qualname__, repr(k)))


@jax.tree_util.register_pytree_with_keys_class
class FrozenDict(Mapping, Generic[K, V]):
    """An immutable, hashable mapping; nested dicts are frozen too.

    Takes what ``dict`` takes. It compares equal to a ``FrozenDict`` or a
    ``dict`` with the same items, and is hashable when its values are.

    Examples
    --------
    >>> from brainx.util import FrozenDict
    >>> fd = FrozenDict(a=1, b={"c": 2})
    >>> type(fd["b"]).__name__, fd == {"a": 1, "b": {"c": 2}}
    ('FrozenDict', True)
    >>> fd["a"] = 5
    Traceback (most recent call last):
    TypeError: FrozenDict does not support item assignment (it is immutable); ...
    >>> hash(fd) == hash(FrozenDict(b={"c": 2}, a=1))
    True
    """

    __slots__ = ("_data", "_hash")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._data: Dict[K, V] = {k: _freeze_value(v) for k, v in dict(*args, **kwargs).items()}
        self._hash: Optional[int] = None

    def __getitem__(self, key: K) -> V:
        return self._data[key]

    def __setitem__(self, key: K, value: V) -> None:
        raise TypeError("FrozenDict does not support item assignment (it is immutable); "
                        "make a new one with brainx.util.copy(d, {key: value}).")

    def __delitem__(self, key: K) -> None:
        raise TypeError("FrozenDict does not support item deletion (it is immutable); "
                        "make a new one with brainx.util.pop(d, key).")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in FrozenDict.__slots__ and not hasattr(self, "_hash"):
            object.__setattr__(self, name, value)   # during __init__ only
        elif name == "_hash":
            object.__setattr__(self, name, value)   # the cached hash
        else:
            raise AttributeError(f"FrozenDict is immutable: cannot set attribute {name!r}.")

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return self.pretty_repr()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenDict):
            return self._data == other._data
        if isinstance(other, dict):
            return self._data == other
        return NotImplemented

    def __reduce__(self):
        return FrozenDict, (self.unfreeze(),)

    def keys(self) -> KeysView:
        """A view of the keys."""
        return FrozenKeysView(self)

    def values(self) -> ValuesView:
        """A view of the values."""
        return FrozenValuesView(self)

    def items(self) -> ItemsView:
        """A view of the ``(key, value)`` pairs."""
        return ItemsView(self)

    def get(self, key: K, default: Optional[V] = None) -> Optional[V]:
        """``self[key]``, or ``default`` when the key is absent."""
        return self._data.get(key, default)

    def copy(self, add_or_replace: Optional[Mapping] = None) -> "FrozenDict[K, V]":
        """A new ``FrozenDict`` with the items of ``add_or_replace`` added or replaced."""
        data = dict(self._data)
        data.update(add_or_replace or {})
        return type(self)(data)

    def pop(self, key: K) -> Tuple["FrozenDict[K, V]", V]:
        """``(a FrozenDict without key, the value that was under it)``; ``self`` is unchanged.

        Raises
        ------
        KeyError
            If ``key`` is absent.
        """
        if key not in self._data:
            raise KeyError(key)
        data = dict(self._data)
        value = data.pop(key)
        return type(self)(data), value

    def unfreeze(self) -> Dict[K, V]:
        """A deep, mutable copy made of plain ``dict`` s (see :func:`unfreeze`)."""
        return unfreeze(self)

    def pretty_repr(self, indent: int = 2) -> str:
        """``FrozenDict({...})`` with one key per line, nested mappings indented by ``indent``."""
        if not self._data:
            return "FrozenDict({})"
        return f"FrozenDict({_format_mapping(self, indent, 0)})"

    def tree_flatten_with_keys(self):
        """JAX pytree protocol: the values (by sorted key) are the children."""
        keys = _sort_keys(self._data)
        return [(jax.tree_util.DictKey(k), self._data[k]) for k in keys], tuple(keys)

    def tree_flatten(self):
        """JAX pytree protocol: the values (by sorted key) are the children."""
        keys = _sort_keys(self._data)
        return [self._data[k] for k in keys], tuple(keys)

    @classmethod
    def tree_unflatten(cls, keys: Tuple[Any, ...], values: Any) -> "FrozenDict":
        """JAX pytree protocol: rebuild from the keys and the children."""
        return cls(zip(keys, values))


class FrozenKeysView(KeysView):
    """The keys of a :class:`FrozenDict`."""

    def __repr__(self) -> str:
        return f"FrozenDict.keys({list(self)})"


class FrozenValuesView(ValuesView):
    """The values of a :class:`FrozenDict`."""

    def __repr__(self) -> str:
        return f"FrozenDict.values({list(self)})"


def _freeze_value(value: Any) -> Any:
    return FrozenDict(value) if isinstance(value, dict) else value


def _format_mapping(mapping: Mapping, indent: int, level: int) -> str:
    if not mapping:
        return "{}"
    pad = " " * (level + 1) * indent
    lines = []
    for key, value in mapping.items():
        text = _format_mapping(value, indent, level + 1) if isinstance(
            value, (dict, FrozenDict)) else repr(value)
        lines.append(f"{pad}{key!r}: {text}")
    return "{\n" + ",\n".join(lines) + "\n" + " " * level * indent + "}"


def freeze(x: Mapping) -> FrozenDict:
    """A :class:`FrozenDict` of ``x`` (nested dicts frozen too); ``x`` itself if it is one.

    Examples
    --------
    >>> from brainx.util import freeze
    >>> fd = freeze({"a": {"b": 1}})
    >>> freeze(fd) is fd
    True
    """
    if isinstance(x, FrozenDict):
        return x
    if not isinstance(x, Mapping):
        raise TypeError(f"freeze expects a mapping (dict or FrozenDict), got {type(x).__name__}.")
    return FrozenDict(x)


def unfreeze(x: Any) -> Any:
    """A deep copy of ``x`` with every ``FrozenDict`` and ``dict`` made a plain ``dict``.

    Anything that is not a mapping is returned as is.

    Examples
    --------
    >>> from brainx.util import freeze, unfreeze
    >>> d = unfreeze(freeze({"a": {"b": 1}}))
    >>> d["a"]["b"] = 2; d
    {'a': {'b': 2}}
    """
    if isinstance(x, (FrozenDict, dict)):
        return {key: unfreeze(value) for key, value in x.items()}
    return x


@overload
def copy(x: FrozenDict, add_or_replace: Optional[Mapping] = None) -> FrozenDict: ...
@overload
def copy(x: dict, add_or_replace: Optional[Mapping] = None) -> dict: ...


def copy(x: Union[FrozenDict, dict], add_or_replace: Optional[Mapping] = None
         ) -> Union[FrozenDict, dict]:
    """A new mapping of the same kind as ``x`` with ``add_or_replace`` merged in (shallow).

    Parameters
    ----------
    x : FrozenDict or dict
        Left unchanged.
    add_or_replace : Mapping, optional
        Items to add or replace.

    Examples
    --------
    >>> from brainx.util import copy, freeze
    >>> copy({"a": 1}, {"b": 2})
    {'a': 1, 'b': 2}
    >>> type(copy(freeze({"a": 1}), {"a": 3})).__name__
    'FrozenDict'
    """
    if isinstance(x, FrozenDict):
        return x.copy(add_or_replace)
    if isinstance(x, dict):
        result = dict(x)
        result.update(add_or_replace or {})
        return result
    raise TypeError(f"copy expects a FrozenDict or dict, got {type(x).__name__}.")


@overload
def pop(x: FrozenDict, key: Any) -> Tuple[FrozenDict, Any]: ...
@overload
def pop(x: dict, key: Any) -> Tuple[dict, Any]: ...


def pop(x: Union[FrozenDict, dict], key: Any) -> Tuple[Union[FrozenDict, dict], Any]:
    """``(a new mapping like x without key, the removed value)``; ``x`` is unchanged.

    Raises
    ------
    KeyError
        If ``key`` is absent.

    Examples
    --------
    >>> from brainx.util import pop
    >>> d = {"a": 1, "b": 2}
    >>> pop(d, "a"), d
    (({'b': 2}, 1), {'a': 1, 'b': 2})
    """
    if isinstance(x, FrozenDict):
        return x.pop(key)
    if isinstance(x, dict):
        result = dict(x)
        value = result.pop(key)
        return result, value
    raise TypeError(f"pop expects a FrozenDict or dict, got {type(x).__name__}.")


def pretty_repr(x: Any, indent: int = 2) -> str:
    """One key per line for a ``FrozenDict`` or ``dict`` (nested ones indented); else ``repr``.

    Examples
    --------
    >>> from brainx.util import pretty_repr
    >>> print(pretty_repr({"a": {"b": 1}}))
    {
      'a': {
        'b': 1
      }
    }
    """
    if isinstance(x, FrozenDict):
        return x.pretty_repr(indent)
    if isinstance(x, dict):
        return _format_mapping(x, indent, 0)
    return repr(x)
