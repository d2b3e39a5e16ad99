"""Transforms used as method decorators.

``@transform.jit`` on ``def step(self, x)`` must give each instance its own
transform (its own states, its own cache) with ``self`` bound, not passed
through JAX. Argument numbers keep JAX's convention for methods: ``self`` is
argument 0, so ``static_argnums=1`` names ``x``.
"""

from __future__ import annotations

import types
import weakref
from typing import Any, Callable, Dict

__all__ = ["bind_to_instance"]

_ARGNUM_OPTIONS = ("static_argnums", "donate_argnums")
_CACHE_ATTR = "__brainx_bound_transforms__"


def bind_to_instance(transform: Any, instance: Any, factory: Callable[..., Any],
                     options: Dict[str, Any]) -> Any:
    """The transform of ``transform.fun`` bound to ``instance`` (cached per instance).

    The cache lives on the instance, keyed by the transform's identity: it is
    freed with the instance (an ordinary reference cycle), and instances that
    compare equal or are unhashable (``@dataclass``) still get their own.
    """
    cache = getattr(instance, "__dict__", None)
    if cache is not None:
        per_instance = cache.setdefault(_CACHE_ATTR, {})
    else:  # __slots__ without __dict__: a cache on the transform, keyed by the instance's id
        per_instance = _slots_cache(transform, instance)
    bound = per_instance.get(id(transform))
    if bound is None:
        shifted = dict(options)
        for name in _ARGNUM_OPTIONS:
            if name in shifted:
                shifted[name] = _shift(shifted[name])
        bound = per_instance[id(transform)] = factory(
            types.MethodType(transform.fun, instance), **shifted)
    return bound


_SLOTS_LIMIT = 256


def _slots_cache(transform: Any, instance: Any) -> Dict[int, Any]:
    """The bound transforms of an instance with no ``__dict__``, kept on ``transform``.

    A bound transform holds its instance (as a bound method does), so the
    table keeps the instances it holds alive: only the ``_SLOTS_LIMIT`` most
    recently bound are kept (an instance dropped from it and bound again
    traces again). The weak reference drops an entry early when its
    instance dies some other way and frees the id for a new object.
    """
    table = transform.__dict__.setdefault("_slots_bound", {})
    key = id(instance)
    found = table.get(key)
    if found is not None and found[0]() is instance:
        table[key] = table.pop(key)  # the most recently used last
        return found[1]
    per_instance: Dict[int, Any] = {}
    try:
        ref = weakref.ref(instance, lambda _r, key=key: table.pop(key, None))
    except TypeError:  # no __weakref__ slot either
        ref = (lambda obj: (lambda: obj))(instance)
    table.pop(key, None)
    while len(table) >= _SLOTS_LIMIT:
        del table[next(iter(table))]
    table[key] = (ref, per_instance)
    return per_instance


def _shift(argnums):
    if argnums is None:
        return argnums
    if isinstance(argnums, int):
        argnums = (argnums,)
    return tuple(i - 1 if i > 0 else i for i in argnums if i != 0)
