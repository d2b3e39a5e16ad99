"""Frozen dataclasses that are JAX pytrees: :func:`dataclass`, :func:`field`, :class:`PyTreeNode`.

This is brainstate's ``util.struct`` module, so it also offers the frozen dicts
of :mod:`brainx.util.frozen` (:class:`FrozenDict`, :func:`freeze`,
:func:`unfreeze`, :func:`copy`, :func:`pop`, :func:`pretty_repr`).

A JAX transformation (``jax.jit``, ``jax.grad``, ``jax.tree.map``) takes apart
its arguments into leaves (arrays) and a static structure, and puts them back
together. A class decorated with :func:`dataclass` takes part in this: each
field is either

* a **pytree field** (the default): a child that JAX traverses, e.g. the
  arrays of an optimizer state; or
* a **static field**, declared ``field(pytree_node=False)``: part of the
  structure, compared and hashed by ``jax.jit`` (a change recompiles), e.g. a
  learning-rate schedule's name or an activation function.

The classes are frozen (as ``flax.struct.dataclass``): to "change" one, make
a new one with ``obj.replace(name=value)``. Subclassing :class:`PyTreeNode`
does the same as decorating with :func:`dataclass`, and the subclasses of a
subclass are dataclasses too.

Examples
--------
>>> import jax, jax.numpy as jnp
>>> from brainx.util import dataclass, field
>>> @dataclass
... class Adam:
...     mu: jax.Array
...     lr: float = field(pytree_node=False, default=1e-3)
>>> opt = Adam(mu=jnp.zeros(2))
>>> jax.tree.leaves(opt)                 # ``lr`` is static, not a leaf
[Array([0., 0.], dtype=float32)]
>>> new = jax.jit(lambda o: o.replace(mu=o.mu + o.lr))(opt)
>>> new.mu.tolist(), opt.mu.tolist()
([0.0010000000474974513, 0.0010000000474974513], [0.0, 0.0])
>>> opt.lr = 0.1
Traceback (most recent call last):
dataclasses.FrozenInstanceError: cannot assign to field 'lr'
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, List, Optional, Type, TypeVar, Union

import jax

try:
    from typing import dataclass_transform
except ImportError:  # Python 3.10
    from typing_extensions import dataclass_transform

from brainx.util.frozen import FrozenDict, copy, freeze, pop, pretty_repr, unfreeze

__all__ = ["field", "dataclass", "is_dataclass", "PyTreeNode", "FrozenDict", "freeze", "unfreeze",
           "copy", "pop", "pretty_repr"]

T = TypeVar("T")
TNode = TypeVar("TNode", bound="PyTreeNode")

_MARKER = "_brainx_dataclass"


def field(pytree_node: bool = True, **kwargs: Any) -> Any:
    """A dataclass field, marked as a pytree child (default) or as static.

    Parameters
    ----------
    pytree_node : bool
        ``True``: a child that JAX transformations traverse (arrays).
        ``False``: static structure (hashable configuration, functions).
    **kwargs
        What ``dataclasses.field`` takes (``default``, ``default_factory``,
        ``metadata``, ...). ``metadata`` is copied, not modified.

    Raises
    ------
    ValueError
        If ``metadata`` already has a ``'pytree_node'`` entry that disagrees.

    Examples
    --------
    >>> from brainx.util import field
    >>> field(pytree_node=False, default=3).metadata["pytree_node"]
    False
    """
    metadata = dict(kwargs.pop("metadata", None) or {})
    if "pytree_node" in metadata and metadata["pytree_node"] != pytree_node:
        raise ValueError(f"Conflicting pytree_node metadata: metadata has "
                         f"{metadata['pytree_node']!r}, the argument has {pytree_node!r}; "
                         f"give it once, as field(pytree_node=...).")
    metadata["pytree_node"] = pytree_node
    return dataclasses.field(metadata=metadata, **kwargs)


def is_dataclass(cls: Any) -> bool:
    """Whether ``cls`` (a class or an instance) was made by :func:`brainx.util.dataclass`.

    A plain ``dataclasses.dataclass`` is not: it is not a pytree.

    Examples
    --------
    >>> import dataclasses
    >>> from brainx.util import dataclass, is_dataclass
    >>> @dataclass
    ... class A:
    ...     x: int
    >>> @dataclasses.dataclass
    ... class B:
    ...     x: int
    >>> is_dataclass(A), is_dataclass(A(1)), is_dataclass(B)
    (True, True, False)
    """
    klass = cls if isinstance(cls, type) else type(cls)
    return dataclasses.is_dataclass(klass) and klass.__dict__.get(_MARKER, False) is True


def _replace(self: T, **updates: Any) -> T:
    """A copy with the given fields changed (``dataclasses.replace``)."""
    return dataclasses.replace(self, **updates)


@dataclass_transform(field_specifiers=(field,))
def dataclass(cls: Optional[Type[T]] = None, **kwargs: Any) -> Union[Type[T], Callable]:
    """Make ``cls`` a frozen dataclass registered as a JAX pytree.

    Fields made with ``field(pytree_node=False)`` are static; every other
    field (with ``init=True``) is a child. A ``replace(**updates)`` method is
    added. Works as ``@dataclass`` and ``@dataclass(...)``; decorating twice is
    harmless.

    Parameters
    ----------
    cls : type, optional
        The class to convert.
    **kwargs
        What ``dataclasses.dataclass`` takes; ``frozen`` defaults to ``True``.

    Returns
    -------
    type
        ``cls``, now a dataclass and a pytree.

    Examples
    --------
    >>> import jax
    >>> from brainx.util import dataclass, field
    >>> @dataclass
    ... class Pair:
    ...     a: float
    ...     tag: str = field(pytree_node=False, default="p")
    >>> jax.tree.map(lambda v: v * 2, Pair(1.5))
    Pair(a=3.0, tag='p')
    """
    if cls is None:
        return lambda c: dataclass(c, **kwargs)
    if cls.__dict__.get(_MARKER, False) is True:
        return cls
    kwargs.setdefault("frozen", True)
    cls = dataclasses.dataclass(**kwargs)(cls)
    data_fields: List[str] = []
    meta_fields: List[str] = []
    for f in dataclasses.fields(cls):
        if f.init:
            (data_fields if f.metadata.get("pytree_node", True) else meta_fields).append(f.name)
    if "replace" not in cls.__dict__:
        cls.replace = _replace
    jax.tree_util.register_dataclass(cls, data_fields=data_fields, meta_fields=meta_fields)
    setattr(cls, _MARKER, True)
    return cls


@dataclass_transform(field_specifiers=(field,))
class PyTreeNode:
    """Base class: every subclass is a :func:`dataclass` (frozen, a pytree).

    Class keyword arguments go to ``dataclasses.dataclass``
    (``class Cfg(PyTreeNode, frozen=False)``). ``PyTreeNode`` itself cannot be
    instantiated.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.util import PyTreeNode, field
    >>> class Layer(PyTreeNode):
    ...     w: jax.Array
    ...     act: str = field(pytree_node=False, default="relu")
    >>> layer = Layer(jnp.ones(2))
    >>> jax.tree.map(lambda x: x * 3, layer).w.tolist(), layer.replace(act="tanh").act
    ([3.0, 3.0], 'tanh')
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__()
        dataclass(cls, **kwargs)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("PyTreeNode is a base class: subclass it and declare fields "
                                  "(class Params(PyTreeNode): w: jax.Array), then instantiate "
                                  "the subclass.")

    def replace(self: TNode, **updates: Any) -> TNode:
        """A copy with the given fields changed (added to every subclass).

        Called on an object that is not one of the dataclasses (``PyTreeNode.replace(x)``),
        it raises ``NotImplementedError``, as brainstate's stub does.
        """
        if not dataclasses.is_dataclass(self):
            raise NotImplementedError(f"PyTreeNode.replace needs an instance of a PyTreeNode "
                                      f"subclass, got a {type(self).__name__}.")
        return dataclasses.replace(self, **updates)
