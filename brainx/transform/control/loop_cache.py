"""Compile a loop (or a branch) once per function when it is called outside every transform.

``jax.lax.scan`` called eagerly caches its trace per body function and
compiles once. A stateful loop has to do more work (find the states, build a
pure body), and done naively it retraces and recompiles on every call. Here,
a loop (or ``cond``/``switch``) called outside every brainx transform becomes
a :class:`~brainx.transform.jit` of the whole loop, cached per
``(function(s), static configuration)``: the second call with the same shapes
only reads the states, runs the compiled loop and writes the states back.

The cache holds its functions weakly: an entry disappears when a function
(or, for a bound method, its instance) is garbage collected, so a model that
is deleted does not stay alive through the loop cache. A lambda created anew
on every call is a new function each time and compiles each time, as with
``jax.jit``.
"""

from __future__ import annotations

import types
import weakref
from typing import Any, Callable, Dict, Hashable, Optional, Sequence, Tuple

from brainx._jax.traces import jax_is_tracing
from brainx.state.trace import inside_transform
from brainx.transform.compiled.jit import JittedFunction

__all__ = ["compile_once", "run_compiled_once", "clear_loop_cache", "loop_cache_size",
           "WeakFunction"]

_MAX_ENTRIES = 512
_CACHE: Dict[Hashable, Tuple[tuple, JittedFunction]] = {}


class WeakFunction:
    """A callable that calls ``fun`` through a weak reference.

    For a bound method the instance is held weakly and the underlying
    function strongly (it belongs to the class).
    """

    __slots__ = ("_ref", "_func", "__name__", "__qualname__", "__weakref__")

    def __init__(self, fun: Callable, ref: Optional[weakref.ref] = None):
        if isinstance(fun, types.MethodType):
            self._func = fun.__func__
            self._ref = ref or weakref.ref(fun.__self__)
        else:
            self._func = None
            self._ref = ref or weakref.ref(fun)
        self.__name__ = getattr(fun, "__name__", type(fun).__name__)
        self.__qualname__ = getattr(fun, "__qualname__", self.__name__)

    def __call__(self, *args, **kwargs):
        target = self._ref()
        if target is None:  # pragma: no cover - the cache entry dies with its target
            raise ReferenceError(f"{self.__qualname__} was garbage collected.")
        if self._func is not None:
            return self._func(target, *args, **kwargs)
        return target(*args, **kwargs)


def _identity(fun: Callable) -> Tuple[Hashable, Any]:
    """``(key, referent)``: what identifies ``fun`` and the object to hold weakly."""
    if isinstance(fun, types.MethodType):
        return (id(fun.__self__), fun.__func__), fun.__self__
    return id(fun), fun


def compile_once(funs: Sequence[Callable], config: Hashable,
                build: Callable[[Sequence[Callable]], Callable]) -> Optional[JittedFunction]:
    """The compiled loop (or branch) for ``funs`` and ``config``, built on first use.

    ``build(weak_funs)`` returns the loop as a function of its dynamic
    arguments (traced with the states found by ``brainx.transform.jit``);
    ``weak_funs`` call ``funs`` through weak references. Returns ``None``
    when a function cannot be cached (not weakly referenceable, or the
    configuration is not hashable); the caller then runs the loop uncached.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.transform.control.loop_cache import compile_once
    >>> def double(x):
    ...     return 2 * x
    >>> build = lambda funs: (lambda x: funs[0](x))
    >>> loop = compile_once([double], ("example",), build)
    >>> loop is compile_once([double], ("example",), build), float(loop(jnp.ones(())))
    (True, 2.0)
    """
    try:
        idents = [_identity(f) for f in funs]
        key = (tuple(k for k, _ in idents), config)
        hash(key)
    except TypeError:
        return None
    entry = _CACHE.get(key)
    if entry is not None:
        refs, loop = entry
        if all(r() is obj for r, (_, obj) in zip(refs, idents)):
            return loop
        del _CACHE[key]  # pragma: no cover - an id reused before the callback ran

    def forget(_ref, key=key):
        _CACHE.pop(key, None)

    try:
        refs = tuple(weakref.ref(obj, forget) for _, obj in idents)
    except TypeError:
        return None
    weak = [WeakFunction(f, ref) for f, ref in zip(funs, refs)]
    loop = JittedFunction(build(weak))
    if len(_CACHE) >= _MAX_ENTRIES:
        del _CACHE[next(iter(_CACHE))]
    _CACHE[key] = (refs, loop)
    return loop


def run_compiled_once(funs: Sequence[Callable], config: Hashable,
                      build: Callable[[Sequence[Callable]], Callable], *args) -> Any:
    """``build(funs)(*args)``, through the cached compiled loop when outside every transform.

    Outside every transform this calls :func:`compile_once`'s loop for
    ``(funs, config)``. Inside a brainx transform, or inside a raw JAX one
    (``jax.jit``, ``jax.grad``, ``jax.make_jaxpr``: the enclosing trace
    compiles, and its jaxpr then holds the ``scan`` / ``cond`` itself, not
    a ``jit`` around it), or when ``funs`` cannot be cached, it builds the
    loop and runs it uncached.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.transform.control.loop_cache import run_compiled_once
    >>> def double(x):
    ...     return 2 * x
    >>> build = lambda funs: (lambda x: funs[0](x))
    >>> float(run_compiled_once([double], ("example",), build, jnp.ones(())))
    2.0
    """
    if not inside_transform() and not jax_is_tracing():
        loop = compile_once(funs, config, build)
        if loop is not None:
            return loop(*args)
    return build(list(funs))(*args)


def clear_loop_cache() -> None:
    """Forget every compiled loop (they are rebuilt and recompiled on their next call)."""
    _CACHE.clear()


def loop_cache_size() -> int:
    """The number of cached compiled loops."""
    return len(_CACHE)
