"""``dict``, ``list`` and plain-object classes that print with the pretty-repr layout.

* :class:`PrettyDict`: a ``dict`` that prints in the pretty layout and whose
  keys are readable as attributes (``d.w`` for ``d['w']``);
* :class:`PrettyList`: a ``list`` that prints in the pretty layout; a JAX
  pytree (``jax.tree.map`` returns a ``PrettyList``);
* :class:`PrettyObject`: a base class for ordinary objects whose ``repr``
  lists their public attributes; override ``__pretty_repr_item__`` to hide or
  transform an attribute in the printout.

All three print through the engine of :mod:`brainx.util.pretty`: on one line
when it fits, one item per line otherwise; an object that appears twice in one
printout prints as ``<shared: .path>`` the second time, one that contains
itself as ``<cycle: .path>``. String values print quoted (``name='w'``).

Examples
--------
>>> from brainx.util import PrettyDict, PrettyList, repr_options
>>> d = PrettyDict({"w": 1, "layers": [2, 3]})
>>> d.w
1
>>> d
{'w': 1, 'layers': [2, 3]}
>>> with repr_options(width=12):
...     print(repr(d))
{
  'w': 1,
  'layers': [
    2,
    3,
  ],
}
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union

import jax

from brainx.util.state_like import StateLike
from brainx.util.mappings import FlattedDict, MissingKeyError, NestedDict
from brainx.util.pretty import (
    PrettyAttr, PrettyRepr, PrettyType, pretty_repr_object, yield_unique_pretty_repr_items,
)

__all__ = ["PrettyDict", "PrettyList", "PrettyObject", "NestedStateRepr"]


def _state_ref(value: Any) -> Any:
    if isinstance(value, StateLike):
        return value.to_state_ref()
    if isinstance(value, dict):
        return type(value)({k: _state_ref(v) for k, v in value.items()})
    return value


def _quote_str(value: Any) -> Any:
    """A string value as its repr: the protocol prints a ``str`` as is, data must show quoted."""
    return repr(value) if isinstance(value, str) else value


def _pretty_value(value: Any) -> Any:
    """A value as it prints inside a pretty container: lists and dicts in the pretty layout,
    strings quoted."""
    if isinstance(value, list) and not isinstance(value, PrettyList):
        value = PrettyList(value)
    if isinstance(value, dict) and not isinstance(value, PrettyDict):
        value = PrettyDict(value)
    if isinstance(value, PrettyDict):
        value = NestedStateRepr(value)
    return _quote_str(value)


def _state_mapping(value: Any) -> bool:
    """Whether ``value`` is a mapping of states that nests as a ``{...}`` block."""
    return isinstance(value, (PrettyDict, NestedDict, FlattedDict))


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

    def treefy_state(self) -> "PrettyDict":
        """The same mapping with each :class:`~brainx.State` (nested dicts too) replaced by
        its snapshot, :meth:`State.to_state_ref <brainx.State.to_state_ref>`.

        Examples
        --------
        >>> import brainx
        >>> from brainx.util import PrettyDict
        >>> refs = PrettyDict(w=brainx.ParamState(1.0), n=2).treefy_state()
        >>> type(refs["w"]).__name__, refs["n"]
        ('TreefyState', 2)
        """
        return type(self)({k: _state_ref(v) for k, v in self.items()})

    def __repr__(self) -> str:
        return pretty_repr_object(self)

    __repr__._uses_pretty_repr = True  # type: ignore[attr-defined]

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
    """Prints a mapping of states nested in another printout as a bare ``{...}`` block.

    Parameters
    ----------
    state : Mapping
        A :class:`PrettyDict`, or brainx's :class:`~brainx.util.NestedDict` /
        :class:`~brainx.util.FlattedDict`.

    Examples
    --------
    >>> from brainx.util import NestedDict, NestedStateRepr
    >>> NestedStateRepr(NestedDict({"a": 1, "b": {"c": "x"}}))
    {'a': 1, 'b': {'c': 'x'}}
    """

    def __init__(self, state: Any) -> None:
        self.state = state

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield PrettyType("", value_sep=": ", start="{", end="}")
        yield from _dict_items(self.state)

    def __treescope_repr__(self, path: Any, subtree_renderer: Callable) -> Any:
        children = {k: NestedStateRepr(v) if _state_mapping(v) else v
                    for k, v in self.state.items()}
        return subtree_renderer(children, path=path)


def _dict_header(node: PrettyDict) -> Iterator[PrettyType]:
    yield PrettyType("", value_sep=": ", start="{", end="}")


def _dict_items(node: Any) -> Iterator[PrettyAttr]:
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
    [10, 20]
    """

    def __repr__(self) -> str:
        return pretty_repr_object(self)

    __repr__._uses_pretty_repr = True  # type: ignore[attr-defined]

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
    Layer(size=3)
    """

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield from yield_unique_pretty_repr_items(self, _repr_object_general,
                                                  _repr_attribute_general)

    def __pretty_repr_item__(self, key: Any, value: Any) -> Optional[Tuple[Any, Any]]:
        """``(key, value)`` to print for an attribute, or ``None`` to skip it."""
        return key, value


PrettyReprTree = PrettyObject


def _repr_object_general(node: Any) -> Iterator[PrettyType]:
    """The header of an object: its class name in parentheses."""
    yield PrettyType(type(node), value_sep="=", start="(", end=")")


def _repr_attribute_general(node: Any) -> Iterator[PrettyAttr]:
    """The items of an object: ``vars(node)``, through its ``__pretty_repr_item__`` if any."""
    hook = getattr(type(node), "__pretty_repr_item__", None)
    for key, value in vars(node).items():
        if hook is not None:
            item = hook(node, key, value)
            if item is None:
                continue
            key, value = item
        if key is not None:
            yield PrettyAttr(key, _pretty_value(value))
