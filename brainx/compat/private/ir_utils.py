"""brainstate's small jaxpr helpers: identity-keyed collections, input checks, literals.

brainstate keeps these in ``brainstate.transform._ir_utils`` and its tests import them
from there (and from ``_ir_optim`` / ``_ir_tocode``, which re-export some). brainx's own
jaxpr tools do not need them: they key variables by ``id`` inline and check their inputs
where they take them. Written here for brainx, with brainstate's meaning; served through
:mod:`brainx.compat.private.ir`.

A jaxpr variable compares by identity, so a collection of variables is a collection by
identity: :class:`IdentitySet` and :class:`IdentityMap` hold any object, hashable or not,
and two equal lists stay two members.
"""

from __future__ import annotations

from collections.abc import MutableMapping, MutableSet
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from jax.extend import core as _core

from brainx.errors import IRError, IRValidationError
from brainx.transform.ir.codegen import UnsupportedPrimitiveError

__all__ = ["IRError", "IRValidationError", "UnsupportedPrimitiveError", "IdentitySet",
           "IdentityMap", "ensure_jaxpr", "check_all_vars", "is_scalar_literal_value",
           "literal_with_dtype", "_canonical_param"]


class IdentitySet(MutableSet):
    """A set whose members are told apart by identity (``id``), not equality.

    Examples
    --------
    >>> s = IdentitySet([[1], [1]])
    >>> len(s)
    2
    """

    def __init__(self, items: Optional[Iterable[Any]] = None) -> None:
        self._items: dict = {}
        if items is not None:
            self.update(items)

    def __contains__(self, item: Any) -> bool:
        return id(item) in self._items

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: Any) -> None:
        self._items[id(item)] = item

    def discard(self, item: Any) -> None:
        self._items.pop(id(item), None)

    def update(self, items: Iterable[Any]) -> None:
        """Add every item of ``items``."""
        for item in items:
            self.add(item)

    def __repr__(self) -> str:
        return f"IdentitySet([{', '.join(repr(x) for x in self._items.values())}])"

    def __str__(self) -> str:
        return f"IdentitySet([{', '.join(str(x) for x in self._items.values())}])"


class IdentityMap(MutableMapping):
    """A mapping whose keys are told apart by identity (``id``); iterating gives the keys.

    Examples
    --------
    >>> a, b = [1], [1]
    >>> m = IdentityMap()
    >>> m[a], m[b] = "first", "second"
    >>> m[a], len(m)
    ('first', 2)
    """

    def __init__(self, items: Any = None) -> None:
        self._items: dict = {}  # id(key) -> (key, value): the key is kept alive and iterable
        if items is not None:
            self.update(items)

    def __getitem__(self, key: Any) -> Any:
        try:
            return self._items[id(key)][1]
        except KeyError:
            raise KeyError(key) from None

    def __setitem__(self, key: Any, value: Any) -> None:
        self._items[id(key)] = (key, value)

    def __delitem__(self, key: Any) -> None:
        try:
            del self._items[id(key)]
        except KeyError:
            raise KeyError(key) from None

    def __contains__(self, key: Any) -> bool:
        return id(key) in self._items

    def __iter__(self) -> Iterator[Any]:
        return iter([key for key, _ in self._items.values()])

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        pairs = ", ".join(f"{k!r}: {v!r}" for k, v in self._items.values())
        return f"IdentityMap({{{pairs}}})"

    def __str__(self) -> str:
        pairs = ", ".join(f"{k}: {v}" for k, v in self._items.values())
        return f"IdentityMap({{{pairs}}})"


def ensure_jaxpr(obj: Any) -> Tuple[Any, List[Any], bool]:
    """``(jaxpr, consts, was_closed)`` of a ``Jaxpr`` or ``ClosedJaxpr``.

    ``jaxpr`` is the inner ``Jaxpr`` of a closed one (on JAX >= 0.11, where the two
    are one class, the object itself), ``consts`` its constants (``[]`` for a bare
    jaxpr).

    Raises
    ------
    IRValidationError
        ``obj`` is neither.
    """
    if isinstance(obj, _core.ClosedJaxpr):
        return obj.jaxpr, list(obj.consts), True
    if isinstance(obj, _core.Jaxpr):
        return obj, [], False
    raise IRValidationError(f"Expected Jaxpr or ClosedJaxpr, got {type(obj).__name__}.")


def check_all_vars(variables: Sequence[Any], name: str) -> None:
    """Raise :class:`IRValidationError` naming ``name`` unless every item is a jaxpr ``Var``."""
    for i, v in enumerate(variables):
        if not isinstance(v, _core.Var):
            raise IRValidationError(
                f"{name} must hold jaxpr variables (Var) only; item {i} is {v!r} "
                f"({type(v).__name__}).")


def is_scalar_literal_value(atom: Any, value: Any) -> bool:
    """Whether ``atom`` is a ``Literal`` holding one number equal to ``value``."""
    if not isinstance(atom, _core.Literal):
        return False
    held = atom.val
    try:
        if isinstance(held, (bool, int, float, complex)):
            return bool(held == value)
        array = np.asarray(held)
        return array.shape == () and bool(array.item() == value)
    except Exception:  # a value numpy cannot read is no match
        return False


def literal_with_dtype(value: Any, aval: Any) -> Any:
    """A ``Literal`` of ``value`` in ``aval``'s dtype (``value`` as given when ``aval`` has none)."""
    dtype = getattr(aval, "dtype", None)
    if dtype is None:
        return _core.Literal(value, aval)
    return _core.Literal(np.asarray(value, dtype=dtype), aval)


def _canonical_param(value: Any) -> Any:
    """brainstate's hashable key of an equation parameter (what its CSE compares).

    Plain scalars and strings are themselves, sequences and dicts are tuples of
    their items' keys (a dict's sorted by key), an array is
    ``('ndarray' | 'array', shape, dtype, bytes)``, anything else (a jaxpr, an array
    that cannot be read) ``('id', id(value))``. brainx's CSE uses its own key, which
    also tells ``1`` from ``1.0`` and ``True``.
    """
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(_canonical_param(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical_param(v)) for k, v in value.items()))
    if isinstance(value, np.ndarray):
        return ("ndarray", value.shape, str(value.dtype), value.tobytes())
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        try:
            array = np.asarray(value)
        except Exception:
            return ("id", id(value))
        return ("array", array.shape, str(array.dtype), array.tobytes())
    return ("id", id(value))
