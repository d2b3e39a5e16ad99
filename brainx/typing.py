"""Type aliases for annotating brainx programs (brainstate's ``brainstate.typing``).

These names exist for type hints and documentation: ``ArrayLike`` for anything
JAX turns into an array (brainunit Quantities included), ``Size`` for a layer's
shape argument, ``SeedOrKey`` for what a :class:`~brainx.random.RandomState`
takes, ``Filter`` for the state filters of :mod:`brainx.util.filter`, and two
subscriptable markers, ``Array["batch, n"]`` and ``PyTree[float]``, that carry a
shape or leaf description for a reader without checking anything at run time.

Examples
--------
>>> import jax.numpy as jnp
>>> from brainx.typing import Array, ArrayLike, Size
>>> def scale(x: Array["batch, n"], gain: ArrayLike = 1.0) -> Array["batch, n"]:
...     return x * gain
>>> scale(jnp.ones((2, 3)), 2.0).shape
(2, 3)
>>> Array["batch, n"]
Array['batch, n']
"""

from __future__ import annotations

from typing import Any, Hashable, Protocol, Sequence, Tuple, TypeVar, Union, runtime_checkable

import brainunit as u
import jax
import numpy as np

from brainx.util.filter import Filter, Predicate

__all__ = [
    "PathParts", "Predicate", "Filter", "FilterLiteral",
    "Array", "ArrayLike", "Shape", "Size", "Axes", "DType", "DTypeLike", "SupportsDType",
    "PyTree", "SeedOrKey", "Key", "Missing", "K", "_T", "_Annotation",
]


@runtime_checkable
class Key(Hashable, Protocol):
    """A path element: hashable and ordered (a string, an integer, ...)."""

    def __lt__(self, value: Any, /) -> bool:
        ...


K = TypeVar("K", bound=Key)
_T = TypeVar("_T")                    # brainstate exports these two type variables too
_Annotation = TypeVar("_Annotation")

#: A state's path in a module tree, e.g. ``("layers", 0, "weight")``.
PathParts = Tuple[Key, ...]

#: One filter (a type, a tag string, a predicate, ``True``/``False``/``...``/``None``).
FilterLiteral = Union[type, str, Predicate, bool, type(Ellipsis), None]

#: Anything ``jnp.asarray`` (or brainunit) takes: JAX/NumPy arrays, scalars, Quantities.
ArrayLike = Union[jax.Array, np.ndarray, np.bool_, np.number, bool, int, float, complex,
                  u.Quantity]

#: An array's shape.
Shape = Sequence[int]

#: A size argument: an integer or a sequence of integers.
Size = Union[int, Sequence[int], np.integer, Sequence[np.integer]]

#: An axis or several axes.
Axes = Union[int, Sequence[int]]

#: A NumPy dtype.
DType = np.dtype


@runtime_checkable
class SupportsDType(Protocol):
    """Anything with a ``dtype`` attribute (an array, a ``jax.ShapeDtypeStruct``)."""

    @property
    def dtype(self) -> DType:
        ...


#: What ``jnp.dtype`` accepts: a name, a type, a dtype or an object with ``.dtype``.
DTypeLike = Union[str, type, np.dtype, SupportsDType, None]

#: A seed or a key: what :class:`brainx.random.RandomState` and ``seed`` take.
SeedOrKey = Union[int, jax.Array, np.ndarray]


class _Described:
    """A marker type that only carries a description (its ``repr``), for hints."""

    def __init__(self, kind: str, description: str):
        self.kind, self.description = kind, description

    def __repr__(self) -> str:
        return f"{self.kind}[{self.description}]"

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, _Described)
                and (self.kind, self.description) == (other.kind, other.description))

    def __hash__(self) -> int:
        return hash((self.kind, self.description))


def _describe(item: Any) -> str:
    if isinstance(item, tuple):
        return ", ".join(_describe(i) for i in item) if item else "()"
    if isinstance(item, str):
        return repr(item)
    if isinstance(item, slice) or item is Ellipsis:
        return "..." if item is Ellipsis else repr(item)
    return getattr(item, "__name__", repr(item))


class _Subscriptable(type):
    def __getitem__(cls, item: Any) -> _Described:
        return _Described(cls.__name__, _describe(item))

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{cls.__name__} is a type annotation; it cannot be instantiated. "
                        f"Write it in a hint, e.g. {cls.__name__}[...].")


class Array(metaclass=_Subscriptable):
    """An array annotation; ``Array["batch, n"]`` documents the shape (not checked).

    Examples
    --------
    >>> from brainx.typing import Array
    >>> def matmul(a: Array["m, k"], b: Array["k, n"]) -> Array["m, n"]:
    ...     return a @ b
    >>> Array["m, k"] == Array["m, k"]
    True
    """


class PyTree(metaclass=_Subscriptable):
    """A pytree annotation; ``PyTree[float]`` documents the leaves (not checked).

    Examples
    --------
    >>> from brainx.typing import PyTree
    >>> PyTree[float]
    PyTree[float]
    >>> PyTree[float, "T"]
    PyTree[float, 'T']
    """


class Missing:
    """A sentinel default for "not given" where ``None`` is a meaningful value.

    Examples
    --------
    >>> from brainx.typing import Missing
    >>> MISSING = Missing()
    >>> def f(x=MISSING):
    ...     return "not given" if x is MISSING else x
    >>> f(), f(None)
    ('not given', None)
    """
