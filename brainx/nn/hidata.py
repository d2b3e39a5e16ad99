"""Hierarchical data: :class:`HiData`, named children reached as attributes or items, a JAX pytree.

A composed model (a neuron made of channels, an optimiser made of parts)
often carries one value per part, and parts of parts. ``HiData`` holds them
by name, ``data.sodium`` or ``data["sodium"]``, nests (a child may be another
``HiData``), and is a JAX pytree whose leaves are the children (its ``name``
is static), so it goes through ``jax.jit``, ``jax.tree.map`` and
``brainx.transform`` like a dict: as a dict's, its children are flattened in
the sorted order of their names, so two ``HiData`` with the same names combine
(``jax.tree.map(f, a, b)``, a ``for_loop`` carry) whatever order their
children were added in, and a rebuilt one lists them in that sorted order
(brainstate's rule). It is immutable: :meth:`~HiData.replace`,
:meth:`~HiData.add` and :meth:`~HiData.pop` return new objects.

It is brainstate's ``brainstate.nn.HiData`` (0.5 and 0.6), printed as 0.6
prints it. One difference on purpose: a subclass of ``HiData`` is a pytree
too (brainstate registers ``HiData`` itself only, so a subclass is one opaque
leaf there).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterator, Optional, Union

import jax

from brainx.util import PrettyAttr, PrettyRepr, PrettyType, format_array_like

__all__ = ["HiData"]

_LONG = 60  # a child's repr longer than this is cut, with "..."


def _sorted_names(children: Dict[Any, Any]) -> tuple:
    try:
        return tuple(sorted(children))
    except TypeError:  # names of several types: sorted by type, then text
        return tuple(sorted(children, key=lambda k: (type(k).__name__, repr(k))))


def _flatten_with_keys(data: "HiData"):
    keys = _sorted_names(data.children)
    children = tuple((jax.tree_util.DictKey(k), data.children[k]) for k in keys)
    return children, (data.name, keys)


def _unflatten(cls, aux, values) -> "HiData":
    name, keys = aux
    return cls(children=dict(zip(keys, values)), name=name)


def _register(cls) -> None:
    jax.tree_util.register_pytree_with_keys(
        cls, _flatten_with_keys, lambda aux, values: _unflatten(cls, aux, values))


@dataclasses.dataclass(init=False, repr=False, eq=True)  # immutable: see __setattr__
class HiData(PrettyRepr):
    """Named children (any values, arrays, or other ``HiData``), read as attributes or items.

    Parameters
    ----------
    children : dict, optional
        The children by name.
    name : str, optional
        A label, kept by every copy (static in the pytree).
    **kwargs
        More children (they win over ``children`` on the same name).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.nn import HiData
    >>> data = HiData(name="cell", v=jnp.zeros(3), na=HiData(m=jnp.ones(3), h=jnp.ones(3)))
    >>> data.v.shape, data["na"].m.shape, len(data), data.state_size
    ((3,), (3,), 2, 3)
    >>> doubled = jax.tree.map(lambda x: 2 * x, data)
    >>> doubled.name, float(doubled.na.h[0])
    ('cell', 2.0)
    >>> HiData(name="config", lr=0.01, batch_size=32)
    HiData(name='config', lr=0.01, batch_size=32)
    """

    name: Optional[str] = dataclasses.field(default=None, metadata={"static": True})
    children: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def __init__(self, children: Optional[Dict[str, Any]] = None, name: Optional[str] = None,
                 **kwargs: Any):
        merged = dict(children) if children is not None else {}
        merged.update(kwargs)
        object.__setattr__(self, "children", merged)
        object.__setattr__(self, "name", name)

    def __setattr__(self, key: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(
            f"cannot assign to {key!r}: a {type(self).__name__} is immutable; use "
            f".replace({key}=...) for a copy with that child.")

    def __delattr__(self, key: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete {key!r}: a {type(self).__name__} "
                                              "is immutable; use .pop(name) for a copy without it.")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _register(cls)

    # -- reading ----------------------------------------------------------------------------
    def __getattr__(self, key: str) -> Any:
        if key.startswith("__") or key in ("children", "name"):
            raise AttributeError(key)
        try:
            return self.children[key]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} {self.name!r} has no child {key!r}; "
                                 f"its children are {list(self.children)}.") from None

    def __getitem__(self, key: str) -> Any:
        return self.children[key]

    def __contains__(self, key: object) -> bool:
        return key in self.children

    def __len__(self) -> int:
        return len(self.children)

    def keys(self):
        """The children's names."""
        return self.children.keys()

    def values(self):
        """The children."""
        return self.children.values()

    def items(self):
        """``(name, child)`` pairs."""
        return self.children.items()

    @property
    def state_size(self) -> int:
        """The number of children that are not ``None``, counted through nested ``HiData``."""
        return sum(v.state_size if isinstance(v, HiData) else 1
                   for v in self.children.values() if v is not None)

    @property
    def dtype(self) -> Any:
        """The dtype of the first child that has one (nested ``HiData`` searched in order).

        Raises ``ValueError`` when no child has a dtype.
        """
        for value in self.children.values():
            if isinstance(value, HiData):
                try:
                    return value.dtype
                except ValueError:
                    continue
            if value is not None and hasattr(value, "dtype"):
                return value.dtype
        raise ValueError(f"{type(self).__name__} {self.name!r} has no array child to take a "
                         "dtype from.")

    # -- new objects ------------------------------------------------------------------------
    def _new(self, children: Dict[str, Any]) -> "HiData":
        return type(self)(children=children, name=self.name)

    def clone(self) -> "HiData":
        """A copy whose children are cloned where they can be (``child.clone()``)."""
        return self._new({k: v.clone() if v is not None and hasattr(v, "clone") else v
                          for k, v in self.children.items()})

    def replace(self, **updates: Any) -> "HiData":
        """A copy with the children ``updates`` set (new names added)."""
        return self._new({**self.children, **updates})

    def add(self, *others: Union["HiData", Dict[str, Any]], **updates: Any) -> "HiData":
        """A copy with the children of ``others`` (``HiData`` or dicts) and ``updates`` merged in."""
        children = dict(self.children)
        for other in others:
            if not isinstance(other, (HiData, dict)):
                raise AssertionError(f"HiData.add merges HiData or dicts, got {type(other).__name__}.")
            children.update(other.items())
        children.update(updates)
        return self._new(children)

    def pop(self, *keys: str) -> "HiData":
        """A copy without the children ``keys`` (``KeyError`` for a missing one)."""
        children = dict(self.children)
        for key in keys:
            children.pop(key)
        return self._new(children)

    def to_dict(self) -> Dict[str, Any]:
        """Nested plain dicts (a nested ``HiData`` becomes a dict)."""
        return {k: v.to_dict() if isinstance(v, HiData) else v for k, v in self.children.items()}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "HiData":
        """The inverse of :meth:`to_dict` (nested dicts become ``HiData``; names are not kept)."""
        return cls(children={k: cls.from_dict(v) if isinstance(v, dict) else v
                             for k, v in d.items()})

    # -- printing ---------------------------------------------------------------------------
    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield PrettyType(type(self))
        yield PrettyAttr("name", repr(self.name))
        for key, value in self.children.items():
            yield PrettyAttr(key, _shown(value))


def _shown(value: Any) -> Any:
    """What the repr engine gets for a child: containers and arrays as they are, else a short repr."""
    if isinstance(value, (PrettyRepr, list, tuple, dict)) or format_array_like(value) is not None:
        return value
    text = repr(value)
    return text if len(text) <= _LONG else text[:_LONG - 3] + "..."


_register(HiData)
