"""``dict``, ``list`` and plain-object classes that print with the pretty-repr layout.

* :class:`PrettyDict`: a ``dict`` that prints one ``key: value`` per line,
  nested dicts and lists indented, and whose keys are readable as attributes
  (``d.w`` for ``d['w']``);
* :class:`PrettyList`: a ``list`` that prints one item per line; a JAX pytree
  (``jax.tree.map`` returns a ``PrettyList``);
* :class:`PrettyObject`: a base class for ordinary objects whose ``repr``
  lists their public attributes; override ``__pretty_repr_item__`` to hide or
  transform an attribute in the printout.

All three reuse :mod:`brainx.util.pretty`, so an object that appears
twice in one printout (or contains itself) prints as ``Type(...)`` the second
time.

Examples
--------
>>> from brainx.util import PrettyDict, PrettyList
>>> d = PrettyDict({"w": 1, "layers": [2, 3]})
>>> d.w
1
>>> d
{
  'w': 1,
  'layers': [
    2,
    3
  ]
}
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union

import jax

from brainx.util.pretty import (
    PrettyAttr, PrettyRepr, PrettyType, pretty_repr_object, yield_unique_pretty_repr_items,
)

__all__ = ["PrettyDict", "PrettyList", "PrettyObject", "NestedStateRepr"]


class MissingKeyError(KeyError, AttributeError):
    """A key read as an attribute (``d.name``) that the mapping does not hold.

    Both a ``KeyError`` (what brainstate raises, so ``except KeyError`` keeps
    working) and an ``AttributeError`` (so ``hasattr`` and ``getattr(d, name,
    default)`` work as for any object).
    """


def _pretty_value(value: Any) -> Any:
    """Wrap a plain list or dict so that it prints in the pretty layout inside a parent."""
    if isinstance(value, list) and not isinstance(value, PrettyList):
        value = PrettyList(value)
    if isinstance(value, dict) and not isinstance(value, PrettyDict):
        value = PrettyDict(value)
    if isinstance(value, PrettyDict):
        value = NestedStateRepr(value)
    return value


class PrettyDict(dict, PrettyRepr):
    """A ``dict`` with a multi-line repr whose keys can be read as attributes.

    Reading a missing key as an attribute raises an error that is both a
    ``KeyError`` and an ``AttributeError`` (brainstate raises a bare
    ``KeyError``, which breaks ``hasattr``).

    Examples
    --------
    >>> from brainx.util import PrettyDict
    >>> d = PrettyDict(a=1, b={"c": 2})
    >>> d.a, d.b["c"], hasattr(d, "z")
    (1, 2, False)
    >>> d.to_dict() == {"a": 1, "b": {"c": 2}}
    True
    """

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__") and key.endswith("__"):
            raise AttributeError(key)
        try:
            return self[key]
        except KeyError:
            raise MissingKeyError(f"{type(self).__name__} has no key or attribute {key!r}; "
                                  f"its keys are {list(self)}.") from None

    def to_dict(self) -> Dict[Any, Any]:
        """A plain ``dict`` with the same items (nested values are not converted)."""
        return dict(self)

    def __repr__(self) -> str:
        return pretty_repr_object(self)

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield from yield_unique_pretty_repr_items(self, _dict_header, _dict_items)

    def split(self, *filters: Any) -> Any:
        """Partition by filters; implemented by subclasses (``NestedDict``, ``FlattedDict``)."""
        raise NotImplementedError(f"{type(self).__name__}.split: PrettyDict does not know how "
                                  "its keys are paths; use brainx.util.FlattedDict or NestedDict.")

    def filter(self, *filters: Any) -> Any:
        """Select by filters; implemented by subclasses (``NestedDict``, ``FlattedDict``)."""
        raise NotImplementedError(f"{type(self).__name__}.filter: PrettyDict does not know how "
                                  "its keys are paths; use brainx.util.FlattedDict or NestedDict.")

    def merge(self, *others: Any) -> Any:
        """Merge mappings; implemented by subclasses (``NestedDict``, ``FlattedDict``)."""
        raise NotImplementedError(f"{type(self).__name__}.merge: use brainx.util.FlattedDict "
                                  "or NestedDict, or dict.update.")

    def subset(self, *filters: Any) -> Any:
        """The same as :meth:`filter`."""
        return self.filter(*filters)


class NestedStateRepr(PrettyRepr):
    """Prints a :class:`PrettyDict` nested in another printout as a bare ``{...}`` block."""

    def __init__(self, state: PrettyDict) -> None:
        self.state = state

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield PrettyType("", value_sep=": ", start="{", end="}")
        for item in self.state.__pretty_repr__():
            if not isinstance(item, PrettyType):
                yield item

    def __treescope_repr__(self, path: Any, subtree_renderer: Callable) -> Any:
        children = {k: NestedStateRepr(v) if isinstance(v, PrettyDict) else v
                    for k, v in self.state.items()}
        return subtree_renderer(children, path=path)


def _dict_header(node: PrettyDict) -> Iterator[PrettyType]:
    yield PrettyType("", value_sep=": ", start="{", end="}")


def _dict_items(node: PrettyDict) -> Iterator[PrettyAttr]:
    for key, value in node.items():
        yield PrettyAttr(repr(key), _pretty_value(value))


@jax.tree_util.register_pytree_node_class
class PrettyList(list, PrettyRepr):
    """A ``list`` with a multi-line repr; a JAX pytree whose children are its items.

    Examples
    --------
    >>> import jax
    >>> from brainx.util import PrettyList
    >>> jax.tree.map(lambda x: x * 10, PrettyList([1, 2]))
    [
      10,
      20
    ]
    """

    def __repr__(self) -> str:
        return pretty_repr_object(self)

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield from yield_unique_pretty_repr_items(self, _list_header, _list_items)

    def tree_flatten(self) -> Tuple[list, Tuple]:
        """JAX pytree protocol: the items are the children, no static data."""
        return list(self), ()

    @classmethod
    def tree_unflatten(cls, aux_data: Tuple, children: Any) -> "PrettyList":
        """JAX pytree protocol: rebuild from the children."""
        return cls(children)


def _list_header(node: PrettyList) -> Iterator[PrettyType]:
    yield PrettyType("", value_sep="", start="[", end="]")


def _list_items(node: PrettyList) -> Iterator[PrettyAttr]:
    for value in node:
        yield PrettyAttr("", _pretty_value(value))


class PrettyObject(PrettyRepr):
    """Base class for objects whose repr lists their attributes, one per line.

    Every entry of ``vars(self)`` is printed (private ones too), through
    ``__pretty_repr_item__(name, value)``: return ``(name, value)`` to print
    it (possibly changed), or ``None`` to leave it out.

    Examples
    --------
    >>> from brainx.util import PrettyObject
    >>> class Layer(PrettyObject):
    ...     def __init__(self):
    ...         self.size = 3
    ...         self.cache = object()
    ...     def __pretty_repr_item__(self, name, value):
    ...         return None if name == "cache" else (name, value)
    >>> Layer()
    Layer(
      size=3
    )
    """

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield from yield_unique_pretty_repr_items(self, _object_header, _object_items)

    def __pretty_repr_item__(self, key: Any, value: Any) -> Optional[Tuple[Any, Any]]:
        """``(key, value)`` to print for an attribute, or ``None`` to skip it."""
        return key, value


PrettyReprTree = PrettyObject


def _object_header(node: Any) -> Iterator[PrettyType]:
    yield PrettyType(type(node), value_sep="=", start="(", end=")")


def _object_items(node: Any) -> Iterator[PrettyAttr]:
    hook = getattr(type(node), "__pretty_repr_item__", None)
    for key, value in vars(node).items():
        if hook is not None:
            item = hook(node, key, value)
            if item is None:
                continue
            key, value = item
        if key is not None:
            yield PrettyAttr(key, _pretty_value(value))
