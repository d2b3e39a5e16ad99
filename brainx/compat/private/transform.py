"""brainstate's private helpers of ``brainstate.transform`` (see :mod:`brainx.compat.private`).

Serves ``brainstate.transform._make_jaxpr`` and ``brainstate.transform._mapping_core``.
"""

from __future__ import annotations

from typing import Any, Hashable

import jax

from brainx.compat.private import public_fallback
from brainx.transform.core.stateful_api import CacheKey

__all__ = ["CacheKey", "_make_hashable"]

__getattr__ = public_fallback(__name__, "brainx.transform")


def _make_hashable(obj: Any) -> Hashable:
    """A hashable stand-in for a static argument: lists and tuples become tuples, dicts a
    tuple of ``(key, value)`` pairs sorted by key, sets a frozenset (recursively); a hashable
    object is itself; another pytree is ``(treedef, leaves)``.

    Raises ``TypeError`` naming the type when none of these applies.

    Examples
    --------
    >>> _make_hashable({"b": [1, 2], "a": {3}})
    (('a', frozenset({3})), ('b', (1, 2)))
    """
    if isinstance(obj, (list, tuple)):
        return tuple(_make_hashable(x) for x in obj)
    if isinstance(obj, dict):
        return tuple(sorted((k, _make_hashable(v)) for k, v in obj.items()))
    if isinstance(obj, (set, frozenset)):
        return frozenset(_make_hashable(x) for x in obj)
    try:
        hash(obj)
        return obj
    except TypeError:
        pass
    try:
        leaves, treedef = jax.tree.flatten(obj)
    except (TypeError, ValueError) as error:
        raise TypeError(f"cannot make a {type(obj).__name__} hashable for a cache key: it is "
                        f"neither hashable nor a pytree ({error})") from None
    if len(leaves) == 1 and leaves[0] is obj:
        raise TypeError(f"cannot make a {type(obj).__name__} hashable for a cache key: it is "
                        "neither hashable nor a pytree with hashable leaves")
    return treedef, tuple(_make_hashable(x) for x in leaves)
