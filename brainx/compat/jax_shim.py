"""brainstate's JAX shim, ``brainstate._compatible_import``, served from JAX.

brainstate re-exports a set of JAX names, many of them JAX internals
(``ClosedJaxpr``, ``BatchTracer``, ``trace_ctx``, ...), from one private module,
and its client libraries import them from there (braintools its ``safe_zip``,
braintrace its ``Jaxpr``/``JaxprEqn``/``new_jaxpr_eqn``, brainpy its
``get_backend``). Once :func:`brainx.compat.install_as_brainstate` ran,
``brainstate._compatible_import`` is this module.

``__all__`` is the list of names brainstate 0.6.0's shim exports. A JAX name
is looked up at its first use by :func:`brainx._jax.names.lookup` (the table of
where each JAX version keeps it is :data:`brainx._jax.names.JAX_NAMES`), so a
JAX that lacks one fails only where it is used, with an ``AttributeError`` that
names it and the JAX version. The small functions brainstate spells its own
way are here (``get_aval``, ``to_concrete_aval``, ``is_jit_primitive``, the
length-checked ``safe_map``/``safe_zip``/``unzip2``, ``wraps``, ``fun_name``) or
in :mod:`brainx._jax.names` (``wrap_init``, ``make_debug_info``,
``scan_num_consts_carry``, ``jax_shard_map`` and ``SHARD_MAP_CHECK_KW``).

Examples
--------
>>> import jax
>>> from brainx.compat import jax_shim
>>> jax_shim.ClosedJaxpr is jax.extend.core.ClosedJaxpr
True
>>> jax_shim.safe_zip("ab", [1, 2])
[('a', 1), ('b', 2)]
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Iterable, Sequence, Tuple, TypeVar

import jax

from brainx._jax.names import (  # noqa: F401  (brainstate's shim exports them)
    JAX_NAMES, SHARD_MAP_CHECK_KW, jax_shard_map, lookup, make_debug_info, scan_num_consts_carry,
    wrap_init,
)

T = TypeVar("T")
T1 = TypeVar("T1")
T2 = TypeVar("T2")

__all__ = [
    # IR
    "DropVar", "ClosedJaxpr", "Var", "JaxprEqn", "Jaxpr", "Literal", "Tracer",
    # batching
    "make_iota", "to_elt", "BatchTracer", "BatchTrace",
    # utilities
    "safe_map", "safe_zip", "unzip2", "wraps",
    # others
    "is_jit_primitive", "scan_num_consts_carry", "Primitive", "jaxpr_as_fun", "get_aval",
    "mapped_aval", "to_concrete_aval", "Device", "wrap_init", "get_backend", "trace_ctx",
    "DebugInfo", "make_debug_info", "CallPrimitive", "Effect", "Effects", "JaxprTypeError",
    "check_jaxpr", "concrete_or_error", "find_top_trace", "gensym", "get_opaque_trace_state",
    "jaxprs_in_params", "new_jaxpr_eqn", "no_effects", "valid_jaxtype",
    # shard_map
    "jax_shard_map", "SHARD_MAP_CHECK_KW",
]


def __getattr__(name: str) -> Any:
    """A JAX name of brainstate's shim, looked up at its first use and kept."""
    if name in JAX_NAMES:
        try:
            value = lookup(name)
        except AttributeError as e:
            raise AttributeError(f"brainstate._compatible_import.{name}: {e}") from None
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} (brainstate's JAX shim) has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(JAX_NAMES))


# -- sequences -----------------------------------------------------------------------------

def _check_lengths(who: str, args: Sequence[list]) -> None:
    lengths = [len(a) for a in args]
    assert len(set(lengths)) <= 1, f"{who}: length mismatch: {lengths}"


def safe_map(f: Callable, *args: Iterable) -> list:
    """``list(map(f, *args))`` that asserts the sequences have one length."""
    lists = [list(a) for a in args]
    _check_lengths("safe_map", lists)
    return list(map(f, *lists))


def safe_zip(*args: Iterable) -> list:
    """``list(zip(*args))`` that asserts the sequences have one length."""
    lists = [list(a) for a in args]
    _check_lengths("safe_zip", lists)
    return list(zip(*lists))


def unzip2(pairs: Iterable[Tuple[T1, T2]]) -> Tuple[Tuple[T1, ...], Tuple[T2, ...]]:
    """Split pairs into a tuple of firsts and a tuple of seconds (``((), ())`` for none)."""
    firsts, seconds = [], []
    for first, second in pairs:
        firsts.append(first)
        seconds.append(second)
    return tuple(firsts), tuple(seconds)


# -- function metadata ---------------------------------------------------------------------

def fun_name(fun: Callable) -> str:
    """The name of ``fun``, looking through ``functools.partial``; ``"<unnamed function>"``."""
    name = getattr(fun, "__name__", None)
    if name is not None:
        return name
    if isinstance(fun, partial):
        return fun_name(fun.func)
    return "<unnamed function>"


def wraps(wrapped: Callable, namestr: str | None = None, docstr: str | None = None,
          **kwargs: Any) -> Callable[[T], T]:
    """Like :func:`functools.wraps`, with ``namestr``/``docstr`` format strings.

    ``namestr`` may use ``{fun}`` (the wrapped function's name), ``docstr``
    ``{fun}``, ``{doc}`` and ``kwargs``. Each piece of metadata is copied on its
    own: one that cannot be read or set is skipped, the others are still copied.
    """
    def copy(fun: T) -> T:
        try:
            name = fun_name(wrapped)
        except Exception:
            name = "<unknown>"
        steps = (
            ("__dict__", lambda: fun.__dict__.update(getattr(wrapped, "__dict__", {}))),
            ("__annotations__", lambda: getattr(wrapped, "__annotations__", {})),
            ("__name__", lambda: name if namestr is None else namestr.format(fun=name)),
            ("__module__", lambda: getattr(wrapped, "__module__", "<unknown module>")),
            ("__doc__", lambda: _doc(wrapped, name, docstr, kwargs)),
            ("__qualname__", lambda: getattr(wrapped, "__qualname__", name)),
            ("__wrapped__", lambda: wrapped),
        )
        for attribute, value in steps:
            try:
                new = value()
                if attribute != "__dict__":
                    setattr(fun, attribute, new)
            except Exception:
                continue
        return fun
    return copy


def _doc(wrapped: Callable, name: str, docstr: str | None, kwargs: dict) -> str:
    doc = getattr(wrapped, "__doc__", "") or ""
    return doc if docstr is None else docstr.format(fun=name, doc=doc, **kwargs)


# -- tracing -------------------------------------------------------------------------------

def get_aval(x: Any) -> Any:
    """The abstract value (JAX type) of ``x``: ``jax.typeof(x)``."""
    return jax.typeof(x)


def to_concrete_aval(x: Any) -> Any:
    """A tracer as it is; anything else as its abstract value (``jax.typeof``)."""
    if isinstance(x, jax.core.Tracer):
        return x
    return jax.typeof(x)


def is_jit_primitive(eqn: Any) -> bool:
    """Whether a jaxpr equation is a ``jit`` call (``pjit`` on older JAX, ``xla_call``)."""
    assert isinstance(eqn, lookup("JaxprEqn")), f"not a jaxpr equation: {eqn!r}"
    return eqn.primitive.name in ("jit", "pjit", "xla_call")


