"""``DictManager``: a ``dict`` of named objects with set-like and by-identity operations.

Collections of model parts (states, layers, callbacks) are naturally dicts
from a name to an object, and the questions asked of them are about *which
objects*: "the ones of this type", "each object once, even if it is under two
names", "all but these". :class:`DictManager` is a ``dict`` that answers them:

* select: :meth:`~DictManager.subset`, :meth:`~DictManager.not_subset`,
  :meth:`~DictManager.split` (by type), :meth:`~DictManager.filter_by_predicate`;
* identity: :meth:`~DictManager.unique` (each object once),
  :meth:`~DictManager.add_unique_key`, :meth:`~DictManager.add_unique_value`;
* set operations by key or by value (identity by default):
  ``difference_by_*``, ``intersection_by_*``, ``pop_by_*``;
* ``a + b`` and ``a | b`` merge into a new manager, ``a |= b`` in place.

Operations that return a manager return one of the *same class*, so a
subclass (a manager of states that checks what is put in it by overriding
``_check_elem``) keeps its type through them. A ``DictManager`` is a JAX
pytree whose children are its values, in insertion order.

Examples
--------
>>> from brainx.util import DictManager
>>> w = [1.0]
>>> m = DictManager(w=w, also_w=w, n=3)
>>> list(m.unique())                    # ``w`` is the same object under two names
['w', 'n']
>>> ints, rest = m.split(int)
>>> dict(ints), list(rest)
({'n': 3}, ['w', 'also_w'])
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Dict, Tuple, Type, TypeVar, Union

import jax

__all__ = ["DictManager"]

K = TypeVar("K")
V = TypeVar("V")
DM = TypeVar("DM", bound="DictManager")


def _taken(key: Any, existing: Any, new: Any) -> str:
    return (f"Key {key!r} already exists with a different value: it already holds another "
            f"object ({existing!r}, not {new!r}). Use another key, or assign with "
            "m[key] = val to replace it.")


def _values_test(values: Iterable[Any], by: str) -> Callable[[Any], bool]:
    """``v -> v is among values``, by identity (``by='id'``) or equality (``by='value'``)."""
    if by == "id":
        ids = {id(v) for v in values}
        return lambda v: id(v) in ids
    if by == "value":
        pool = values if isinstance(values, (set, frozenset)) else list(values)
        return lambda v: v in pool
    raise ValueError(f"Invalid comparison method: by={by!r}. Use by='id' (the same object) "
                     f"or by='value' (an equal value).")


Selector = Union[Type, Tuple[Type, ...], Callable[[Any], bool]]


def selects(selector: Selector) -> Callable[[Any], bool]:
    """A predicate on values from a type, a tuple of types, or a predicate ``f(value) -> bool``."""
    if isinstance(selector, (type, tuple)):
        return lambda value: isinstance(value, selector)
    if callable(selector):
        return selector
    raise TypeError(f"Select with a type, a tuple of types, or a predicate `f(value) -> bool`; "
                    f"got {selector!r}.")


@jax.tree_util.register_pytree_with_keys_class
class DictManager(dict):
    """A ``dict`` of named objects with selection and by-identity set operations.

    Takes what ``dict`` takes. See the module docstring for an overview.

    Examples
    --------
    >>> from brainx.util import DictManager
    >>> m = DictManager(a=1, b="x", c=2.0)
    >>> dict(m.subset(int)), dict(m.not_subset(int))
    ({'a': 1}, {'b': 'x', 'c': 2.0})
    >>> m.map_values(str)
    DictManager({'a': '1', 'b': 'x', 'c': '2.0'})
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._val_id_to_key: Dict[int, Any] = {}

    def _new(self: DM, items: Any = ()) -> DM:
        return type(self)(items)

    def _check_elem(self, elem: Any) -> None:
        """Hook for subclasses: raise if ``elem`` may not be added. Accepts anything here."""

    # -- selection -------------------------------------------------------------------------
    def subset(self: DM, sep: Selector) -> DM:
        """The items whose value matches ``sep``: an instance of a type (or of one of a tuple
        of types), or, when ``sep`` is a function (not a class), for which ``sep(value)`` is true."""
        return self.split(sep)[0]

    def not_subset(self: DM, sep: Selector) -> DM:
        """The items whose value does *not* match ``sep`` (as :meth:`subset` reads it)."""
        return self.split(sep)[1]

    def split(self: DM, *selectors: Selector) -> Tuple[DM, ...]:
        """One manager per selector (a type, a tuple of types or a predicate), plus one for the
        rest; each item goes to its first match."""
        tests = [selects(s) for s in selectors]
        groups = tuple(self._new() for _ in range(len(tests) + 1))
        for k, v in self.items():
            index = next((i for i, test in enumerate(tests) if test(v)), len(tests))
            dict.__setitem__(groups[index], k, v)
        return groups

    def filter_by_predicate(self: DM, predicate: Callable[[Any, Any], bool]) -> DM:
        """The items for which ``predicate(key, value)`` is true."""
        return self._new((k, v) for k, v in self.items() if predicate(k, v))

    def map_values(self: DM, func: Callable[[Any], Any]) -> DM:
        """A manager with ``func(value)`` under each key."""
        return self._new((k, func(v)) for k, v in self.items())

    def map_keys(self: DM, func: Callable[[Any], Any]) -> DM:
        """A manager with each value under ``func(key)``.

        Raises
        ------
        ValueError
            If two keys map to the same new key.
        """
        result = self._new()
        for k, v in self.items():
            new_key = func(k)
            if new_key in result:
                raise ValueError(f"map_keys: key transformation created duplicate {new_key!r} "
                                 f"(from {k!r} and an earlier key); make func one-to-one.")
            dict.__setitem__(result, new_key, v)
        return result

    # -- identity --------------------------------------------------------------------------
    def unique(self: DM) -> DM:
        """A manager holding each object once, under the first key it appears with."""
        seen: set = set()
        result = self._new()
        for k, v in self.items():
            if id(v) not in seen:
                seen.add(id(v))
                dict.__setitem__(result, k, v)
        return result

    def unique_(self: DM) -> DM:
        """Like :meth:`unique` but in place; returns ``self``."""
        seen: set = set()
        repeated = []
        for k, v in self.items():
            if id(v) in seen:
                repeated.append(k)
            seen.add(id(v))
        for k in repeated:
            del self[k]
        return self

    def add_unique_key(self, key: Any, val: Any) -> None:
        """Add ``val`` under ``key``; adding the same object again under ``key`` is a no-op.

        Raises
        ------
        ValueError
            If ``key`` already holds a different object.
        """
        self._check_elem(val)
        if key not in self:
            self[key] = val
        elif self[key] is not val:
            raise ValueError(_taken(key, self[key], val))

    def add_unique_value(self, key: Any, val: Any) -> bool:
        """Add ``val`` under ``key`` unless the manager already holds that object.

        Returns
        -------
        bool
            ``True`` if it was added, ``False`` if the object was already
            there (under any key).

        Raises
        ------
        ValueError
            If ``key`` already holds a different object.
        """
        self._check_elem(val)
        if key in self and self[key] is not val:
            raise ValueError(_taken(key, self[key], val))
        self._val_id_to_key = {id(v): k for k, v in self.items()}
        if id(val) in self._val_id_to_key:
            return False
        self._val_id_to_key[id(val)] = key
        self[key] = val
        return True

    # -- set operations --------------------------------------------------------------------
    def assign(self, *args: Dict[Any, Any], **kwargs: Any) -> None:
        """``update`` with each dict in ``args``, then with ``kwargs``.

        Raises
        ------
        TypeError
            If an argument is not a ``dict``.
        """
        for arg in args:
            if not isinstance(arg, dict):
                raise TypeError(f"assign: arguments must be dict instances, got "
                                f"{type(arg).__name__}; pass keyword arguments or dicts.")
            self.update(arg)
        self.update(kwargs)

    def pop_by_keys(self, keys: Iterable[Any]) -> None:
        """Remove the given keys (those absent are ignored)."""
        for k in set(keys) & set(self):
            del self[k]

    def pop_by_values(self, values: Iterable[Any], by: str = "id") -> None:
        """Remove the items whose value is among ``values`` (by ``'id'`` or ``'value'``)."""
        hit = _values_test(values, by)
        for k in [k for k, v in self.items() if hit(v)]:
            del self[k]

    def difference_by_keys(self: DM, keys: Iterable[Any]) -> DM:
        """The items whose key is not in ``keys``."""
        keys = set(keys)
        return self._new((k, v) for k, v in self.items() if k not in keys)

    def difference_by_values(self: DM, values: Iterable[Any], by: str = "id") -> DM:
        """The items whose value is not among ``values`` (by ``'id'`` or ``'value'``)."""
        hit = _values_test(values, by)
        return self._new((k, v) for k, v in self.items() if not hit(v))

    def intersection_by_keys(self: DM, keys: Iterable[Any]) -> DM:
        """The items whose key is in ``keys``."""
        keys = set(keys)
        return self._new((k, v) for k, v in self.items() if k in keys)

    def intersection_by_values(self: DM, values: Iterable[Any], by: str = "id") -> DM:
        """The items whose value is among ``values`` (by ``'id'`` or ``'value'``)."""
        hit = _values_test(values, by)
        return self._new((k, v) for k, v in self.items() if hit(v))

    def __add__(self: DM, other: Mapping) -> DM:
        if not isinstance(other, Mapping):
            return NotImplemented
        result = self._new(self)
        result.update(other)
        return result

    __or__ = __add__

    def __ior__(self: DM, other: Mapping) -> DM:
        if not isinstance(other, Mapping):
            return NotImplemented
        self.update(other)
        return self

    # -- conversion, copying, pytree ---------------------------------------------------------
    def to_dict(self) -> Dict[Any, Any]:
        """A plain ``dict`` with the same items."""
        return dict(self)

    def __copy__(self: DM) -> DM:
        return self._new(self)

    def __deepcopy__(self: DM, memo: Dict[int, Any]) -> DM:
        result = self._new()
        memo[id(self)] = result
        for k, v in self.items():
            dict.__setitem__(result, _copy.deepcopy(k, memo), _copy.deepcopy(v, memo))
        return result

    def __reduce__(self):
        return type(self), (dict(self),)

    def __repr__(self) -> str:
        items = ", ".join(f"{k!r}: {v!r}" for k, v in self.items())
        return f"{type(self).__name__}({{{items}}})"

    def tree_flatten_with_keys(self):
        """JAX pytree protocol: the values are the children (keyed by ``DictKey``)."""
        return [(jax.tree_util.DictKey(k), v) for k, v in self.items()], tuple(self)

    def tree_flatten(self):
        """JAX pytree protocol: the values are the children, the keys the static data."""
        return tuple(self.values()), tuple(self)

    @classmethod
    def tree_unflatten(cls, keys: Tuple[Any, ...], values: Iterable[Any]) -> "DictManager":
        """JAX pytree protocol: rebuild from the keys and the children."""
        return cls(zip(keys, values))
