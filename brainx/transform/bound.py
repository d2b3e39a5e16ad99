"""Transforms used as method decorators.

``@transform.jit`` on ``def step(self, x)`` must give each instance its own
transform (its own states, its own cache) with ``self`` bound, not passed
through JAX. Argument numbers keep JAX's convention for methods: ``self`` is
argument 0, so ``static_argnums=1`` names ``x``.
"""

from __future__ import annotations

import types
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
    bound = None
    if cache is not None:
        bound = cache.setdefault(_CACHE_ATTR, {}).get(id(transform))
    if bound is None:
        shifted = dict(options)
        for name in _ARGNUM_OPTIONS:
            if name in shifted:
                shifted[name] = _shift(shifted[name])
        bound = factory(types.MethodType(transform.fun, instance), **shifted)
        if cache is not None:
            cache[_CACHE_ATTR][id(transform)] = bound
    return bound


def _shift(argnums):
    if argnums is None:
        return argnums
    if isinstance(argnums, int):
        argnums = (argnums,)
    return tuple(i - 1 if i > 0 else i for i in argnums if i != 0)
