"""Configuration-style dicts: ``DotDict``, and flattening, unflattening and merging.

* :class:`DotDict`: a ``dict`` whose keys read and write as attributes
  (``cfg.lr = 1e-3``; ``cfg.model.width``), with nested dicts (also inside
  lists and tuples) turned into ``DotDict`` s; a JAX pytree, so a config of
  arrays can go through ``jax.jit`` and ``jax.tree.map``;
* :func:`flatten_dict` / :func:`unflatten_dict`: ``{"a": {"b": 1}}`` to
  ``{"a.b": 1}`` and back (e.g. for logging or command-line overrides);
* :func:`merge_dicts`: later dicts win, nested dicts are merged key by key.

Examples
--------
>>> from brainx.util import DotDict, flatten_dict, unflatten_dict, merge_dicts
>>> cfg = DotDict({"model": {"width": 64}, "lr": 0.1})
>>> cfg.model.width
64
>>> cfg.model.depth = 2
>>> flatten_dict(cfg.to_dict())
{'model.width': 64, 'model.depth': 2, 'lr': 0.1}
>>> unflatten_dict({"model.width": 32}) == {"model": {"width": 32}}
True
>>> merge_dicts({"model": {"width": 64, "depth": 2}}, {"model": {"width": 32}})
{'model': {'width': 32, 'depth': 2}}
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Mapping
from typing import Any, Dict, List, Tuple

import jax

__all__ = ["DotDict", "flatten_dict", "unflatten_dict", "merge_dicts"]


@jax.tree_util.register_pytree_with_keys_class
class DotDict(dict):
    """A ``dict`` whose items are also attributes; nested dicts become ``DotDict`` s.

    Takes what ``dict`` takes (a mapping, ``(key, value)`` pairs, keyword
    arguments). Every value stored, at construction or later, is converted:
    a plain ``dict`` becomes a ``DotDict``, and lists and tuples (named tuples
    included) are rebuilt with their dicts converted.

    An attribute name that the class itself defines (``keys``, ``update``,
    ``copy``, ...) cannot be set as an attribute; use ``d["keys"] = ...``.

    It is a JAX pytree: the values are the children, the keys (in insertion
    order) the static structure.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.util import DotDict
    >>> p = DotDict(w=jnp.ones(2), sub={"b": jnp.zeros(2)})
    >>> type(p.sub).__name__
    'DotDict'
    >>> doubled = jax.jit(lambda t: jax.tree.map(lambda x: 2 * x + 1, t))(p)
    >>> doubled.w.tolist(), doubled.sub.b.tolist()
    ([3.0, 3.0], [1.0, 1.0])
    >>> del p.w; list(p)
    ['sub']
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        for arg in args:
            if not arg:
                continue
            if isinstance(arg, Mapping):
                pairs = arg.items()
            elif isinstance(arg, tuple) and len(arg) == 2 and not isinstance(arg[0], tuple):
                pairs = [arg]   # brainstate accepts a single (key, value) pair
            else:
                try:
                    pairs = [(k, v) for k, v in arg]
                except (TypeError, ValueError) as e:
                    raise TypeError(f"Invalid argument type for DotDict: {type(arg).__name__}. "
                                    f"Pass a mapping or an iterable of (key, value) pairs.") from e
            for key, value in pairs:
                self[key] = value
        for key, value in kwargs.items():
            self[key] = value

    @classmethod
    def _hook(cls, item: Any) -> Any:
        """Convert ``item`` for storage: dicts to ``DotDict``, recursing into lists and tuples."""
        if isinstance(item, dict) and not isinstance(item, cls):
            return cls(item)
        if isinstance(item, tuple):
            converted = [cls._hook(x) for x in item]
            return type(item)(*converted) if hasattr(item, "_fields") else type(item)(converted)
        if isinstance(item, list):
            return type(item)(cls._hook(x) for x in item)
        return item

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, self._hook(value))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r} "
                                 f"(and no such key; keys: {list(self)})") from None

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(type(self), name):
            raise AttributeError(f"Cannot set attribute {name!r}: it's a built-in method of "
                                 f"{type(self).__name__}; set it as an item: d[{name!r}] = ...")
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute "
                                 f"{name!r}") from None

    def __dir__(self) -> List[str]:
        return [k for k in self if isinstance(k, str)] + dir(type(self))

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Like ``dict.update``, but a dict value merges into an existing dict value
        instead of replacing it (``{'a': {'x': 1}}`` updated with ``{'a': {'y': 2}}``
        holds both ``x`` and ``y``)."""
        if len(args) > 1:
            raise TypeError(f"update expected at most 1 argument, got {len(args)}")
        try:
            other = dict(args[0]) if args else {}
        except (TypeError, ValueError) as e:
            raise TypeError(f"update expected a mapping or iterable of key/value pairs, got "
                            f"{type(args[0]).__name__}") from e
        other.update(kwargs)
        for key, value in other.items():
            current = self.get(key)
            if isinstance(current, dict) and isinstance(value, dict):
                if not isinstance(current, DotDict):
                    current = DotDict(current)
                    self[key] = current
                current.update(value)
            else:
                self[key] = value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        """``d[key]``, after storing ``default`` (converted) there if the key was absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def copy(self) -> "DotDict":
        """A shallow copy (nested ``DotDict`` s are shared)."""
        return type(self)(self)

    def deepcopy(self) -> "DotDict":
        """A deep copy (``copy.deepcopy``)."""
        return _copy.deepcopy(self)

    def __copy__(self) -> "DotDict":
        return self.copy()

    def __deepcopy__(self, memo: Dict[int, Any]) -> "DotDict":
        result = type(self)()
        memo[id(self)] = result
        for key, value in self.items():
            result[_copy.deepcopy(key, memo)] = _copy.deepcopy(value, memo)
        return result

    def to_dict(self) -> Dict[Any, Any]:
        """Plain ``dict`` s all the way down (also inside lists and tuples)."""
        def plain(x: Any) -> Any:
            if isinstance(x, DotDict):
                return {k: plain(v) for k, v in x.items()}
            if isinstance(x, tuple):
                items = [plain(v) for v in x]
                return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
            if isinstance(x, list):
                return type(x)(plain(v) for v in x)
            return x
        return plain(self)

    @classmethod
    def from_dict(cls, d: Mapping) -> "DotDict":
        """The same as ``DotDict(d)``."""
        return cls(d)

    def __or__(self, other: Mapping) -> "DotDict":
        if not isinstance(other, Mapping):
            return NotImplemented
        result = type(self)(self)
        result.update(other)
        return result

    def __ror__(self, other: Mapping) -> "DotDict":
        if not isinstance(other, Mapping):
            return NotImplemented
        result = type(self)(other)
        result.update(self)
        return result

    def __ior__(self, other: Mapping) -> "DotDict":
        if not isinstance(other, Mapping):
            return NotImplemented
        self.update(other)
        return self

    def __reduce__(self):
        return type(self), (dict(self),)

    def __repr__(self) -> str:
        items = ", ".join(f"{k!r}: {v!r}" for k, v in self.items())
        return f"DotDict({{{items}}})"

    def tree_flatten_with_keys(self):
        """JAX pytree protocol: the values are the children (keyed by ``DictKey``)."""
        return [(jax.tree_util.DictKey(k), v) for k, v in self.items()], tuple(self)

    def tree_flatten(self) -> Tuple[Tuple[Any, ...], Tuple[Any, ...]]:
        """JAX pytree protocol: the values are the children, the keys the static data."""
        return tuple(self.values()), tuple(self)

    @classmethod
    def tree_unflatten(cls, keys: Tuple[Any, ...], values: Any) -> "DotDict":
        """JAX pytree protocol: rebuild from the keys and the children."""
        return cls(zip(keys, values))


def merge_dicts(*dicts: Dict[Any, Any], recursive: bool = True) -> Dict[Any, Any]:
    """Merge dicts left to right into a new ``dict``; later values win.

    Parameters
    ----------
    *dicts : dict
        The dicts to merge; none is modified.
    recursive : bool
        Where both sides hold a dict under the same key, merge those too
        (default); otherwise the later dict replaces the earlier one.

    Returns
    -------
    dict
        The merged dict.

    Examples
    --------
    >>> from brainx.util import merge_dicts
    >>> merge_dicts({"a": {"x": 1}}, {"a": {"y": 2}}, {"b": 3})
    {'a': {'x': 1, 'y': 2}, 'b': 3}
    >>> merge_dicts({"a": {"x": 1}}, {"a": {"y": 2}}, recursive=False)
    {'a': {'y': 2}}
    """
    result: Dict[Any, Any] = {}
    for d in dicts:
        if not isinstance(d, dict):
            raise TypeError(f"merge_dicts: all arguments must be dicts, got "
                            f"{type(d).__name__}.")
        for key, value in d.items():
            if recursive and isinstance(result.get(key), dict) and isinstance(value, dict):
                result[key] = merge_dicts(result[key], value, recursive=True)
            else:
                result[key] = value
    return result


def flatten_dict(d: Dict[str, Any], parent_key: str = "", sep: str = ".") -> Dict[str, Any]:
    """Nested dicts to one level, keys joined with ``sep``: ``{'a': {'b': 1}}`` to ``{'a.b': 1}``.

    Parameters
    ----------
    d : dict
        The nested dict. Keys below the top level must be strings.
    parent_key : str
        A prefix for every key (joined with ``sep``).
    sep : str
        The separator between key parts.

    Returns
    -------
    dict
        The flat dict. An empty nested dict stays as a ``{}`` value.

    Raises
    ------
    ValueError
        If two paths join to the same key (``{'a.b': 1, 'a': {'b': 2}}``).

    Examples
    --------
    >>> from brainx.util import flatten_dict
    >>> flatten_dict({"a": {"b": 1, "c": {}}, "d": 2}, sep="/")
    {'a/b': 1, 'a/c': {}, 'd': 2}
    """
    if not isinstance(d, dict):
        raise TypeError(f"flatten_dict: d must be a dict, got {type(d).__name__}.")
    flat: Dict[str, Any] = {}

    def put(key: str, value: Any) -> None:
        if key in flat:
            raise ValueError(f"flatten_dict produced duplicate key {key!r}: two paths join to "
                             f"it; use another sep.")
        flat[key] = value

    for key, value in d.items():
        if parent_key and not isinstance(key, str):
            raise TypeError(f"flatten_dict requires string keys for nested levels, got "
                            f"{type(key).__name__} key {key!r}.")
        full = f"{parent_key}{sep}{key}" if parent_key else key
        if isinstance(value, dict) and value:
            for sub_key, sub_value in flatten_dict(value, full, sep).items():
                put(sub_key, sub_value)
        else:
            put(full, {} if isinstance(value, dict) else value)
    return flat


def unflatten_dict(d: Dict[str, Any], sep: str = ".") -> Dict[str, Any]:
    """The inverse of :func:`flatten_dict`: ``{'a.b': 1}`` to ``{'a': {'b': 1}}``.

    Parameters
    ----------
    d : dict
        A flat dict with ``sep``-joined string keys.
    sep : str
        The separator between key parts.

    Returns
    -------
    dict
        The nested dict (plain ``dict`` s).

    Raises
    ------
    ValueError
        If a key has an empty part (``'a..b'``), or a key is both a value and
        a prefix of another key (``{'a': 1, 'a.b': 2}``).

    Examples
    --------
    >>> from brainx.util import unflatten_dict
    >>> unflatten_dict({"a/b": 1, "a/c": 2}, sep="/")
    {'a': {'b': 1, 'c': 2}}
    """
    if not isinstance(d, dict):
        raise TypeError(f"unflatten_dict: d must be a dict, got {type(d).__name__}.")
    result: Dict[str, Any] = {}
    for key, value in d.items():
        if not isinstance(key, str):
            raise TypeError(f"unflatten_dict needs string keys, got {type(key).__name__} "
                            f"key {key!r}.")
        parts = key.split(sep)
        if any(part == "" for part in parts):
            raise ValueError(f"Invalid flattened key {key!r}: it has an empty part "
                             f"(separator {sep!r} at an end or doubled).")
        node = result
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"Cannot expand scalar key prefix {part!r} in {key!r}: "
                                 f"{part!r} already holds a value.")
        if isinstance(node.get(parts[-1]), dict):
            raise ValueError(f"Cannot overwrite mapping at key {key!r} with a scalar value: "
                             f"other keys start with {key + sep!r}.")
        node[parts[-1]] = dict(value) if isinstance(value, dict) else value
    return result
