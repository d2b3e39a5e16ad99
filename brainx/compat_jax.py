"""brainstate's JAX shim, ``brainstate._compatible_import``, served from JAX.

Compatibility layer between brainstate's clients and the JAX they run on.
brainstate re-exports a set of JAX names, many of them JAX internals
(``ClosedJaxpr``, ``BatchTracer``, ``trace_ctx``, ...), from one private module,
and its client libraries import them from there (braintools its ``safe_zip``,
braintrace its ``Jaxpr``/``JaxprEqn``/``new_jaxpr_eqn``, brainpy its
``get_backend``). Once :func:`brainx.compat.install_as_brainstate` ran,
``brainstate._compatible_import`` is this module.

What it holds:

* :data:`JAX_NAMES`, a table from each name brainstate's shim exports to where
  JAX keeps it, public paths (``jax.extend.core``) before private ones
  (``jax._src.core``). A name is looked up in JAX at its first use, so a JAX
  that lacks one fails only where it is used, with an ``AttributeError`` that
  names it and the JAX version;
* small functions brainstate spells its own way, written here: ``wrap_init``
  (with a debug info), ``make_debug_info``, ``get_aval``, ``to_concrete_aval``,
  ``is_jit_primitive``, ``scan_num_consts_carry``, the length-checked
  ``safe_map``/``safe_zip``/``unzip2``, ``wraps`` and ``fun_name``, and
  ``jax_shard_map`` with its ``SHARD_MAP_CHECK_KW``.

``__all__`` is the list of names brainstate 0.6.0's shim exports; a client
that uses one of them gets it here. It is the one place where brainx's
compatibility touches JAX's private modules by name: when JAX moves one, this
table is what changes.

Examples
--------
>>> import jax, jax.numpy as jnp
>>> from brainx import compat_jax
>>> compat_jax.ClosedJaxpr is jax.extend.core.ClosedJaxpr
True
>>> closed = jax.make_jaxpr(lambda c, xs: jax.lax.scan(lambda c, x: (c + x, x), c, xs))(
...     0.0, jnp.arange(3.0))
>>> compat_jax.scan_num_consts_carry(closed.jaxpr.eqns[0].params)
(0, 1)
>>> compat_jax.make_debug_info("my_pass", "f").func_src_info
'f'
"""

from __future__ import annotations

import importlib
import inspect
from functools import partial
from typing import Any, Callable, Dict, Iterable, Sequence, Tuple, TypeVar

import jax

T = TypeVar("T")
T1 = TypeVar("T1")
T2 = TypeVar("T2")
T3 = TypeVar("T3")

#: ``{name: (module, ...)}``: where JAX keeps each name of brainstate's shim, first match wins.
JAX_NAMES: dict = {
    # jaxpr IR
    **{name: ("jax.extend.core", "jax._src.core") for name in (
        "ClosedJaxpr", "Jaxpr", "JaxprEqn", "Var", "Literal", "DropVar", "Primitive",
        "jaxpr_as_fun", "mapped_aval", "DebugInfo", "CallPrimitive", "Effect", "Effects",
        "JaxprTypeError", "check_jaxpr", "concrete_or_error", "find_top_trace", "gensym",
        "get_opaque_trace_state", "jaxprs_in_params", "new_jaxpr_eqn", "no_effects",
        "valid_jaxtype")},
    "Tracer": ("jax.core", "jax._src.core"),
    "trace_ctx": ("jax._src.core",),                       # no public path in JAX
    # batching internals (brainstate's vmap reads them)
    **{name: ("jax._src.interpreters.batching",) for name in (
        "make_iota", "to_elt", "BatchTracer", "BatchTrace")},
    # devices and backends
    "Device": ("jax",),
    "get_backend": ("jax.extend.backend",),
    # pre-0.4.38 JAX names that 0.5.4's shim also carried
    "extend_axis_env_nd": ("jax._src.core",),
}

#: The functions written here (not looked up in JAX).
_OWN = ("safe_map", "safe_zip", "unzip2", "wraps", "fun_name", "wrap_init", "get_aval",
        "to_concrete_aval", "make_debug_info", "is_jit_primitive", "scan_num_consts_carry",
        "jax_shard_map", "SHARD_MAP_CHECK_KW")

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
    """Look ``name`` up in JAX by :data:`JAX_NAMES` (at its first use) and keep it."""
    for module_name in JAX_NAMES.get(name, ()):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            value = getattr(module, name)
            globals()[name] = value
            return value
    if name in _REBUILT:
        value = globals()[name] = _REBUILT[name]()
        return value
    if name in JAX_NAMES:
        raise AttributeError(
            f"brainstate._compatible_import.{name}: JAX {jax.__version__} has no {name!r} in "
            f"{', '.join(JAX_NAMES[name])} (brainx.compat_jax.JAX_NAMES says where to look).")
    raise AttributeError(f"module {__name__!r} (brainstate's JAX shim) has no attribute {name!r}")


def _call_primitive() -> type:
    """``CallPrimitive`` where JAX (>= 0.11.1) removed it: a ``Primitive`` given the standard
    call rules (impl, abstract eval, jvp, transpose, batching) when made, as
    ``jax.extend.core.create_call_primitive`` does (and, as its result, not flagged
    ``call_primitive``: JAX's old call machinery is gone)."""
    from jax.extend.core import Primitive, register_call_primitive_rules

    class CallPrimitive(Primitive):
        def __init__(self, name: str):
            super().__init__(name)
            register_call_primitive_rules(self)

    return CallPrimitive


#: Names brainstate's shim exports that newer JAX dropped: built here from their replacement.
_REBUILT: Dict[str, Callable[[], Any]] = {"CallPrimitive": _call_primitive}


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

def wrap_init(fun: Callable, args: tuple = (), kwargs: dict | None = None,
              name: str = "wrapped") -> Any:
    """brainstate's ``wrap_init(fun, args, kwargs, name)``: a JAX ``WrappedFun`` with debug info."""
    from jax._src import api_util, linear_util
    kwargs = {} if kwargs is None else kwargs
    return linear_util.wrap_init(fun, kwargs,
                                 debug_info=api_util.debug_info(name, fun, args, kwargs))


def make_debug_info(traced_for: str, name: str = "<unknown>") -> Any:
    """A ``DebugInfo`` for a jaxpr built from equations: argument and result names unknown.

    ``traced_for`` names the pass that built it, ``name`` the function
    (``func_src_info``). JAX warns about a ``Jaxpr`` made without one.
    """
    return __getattr__("DebugInfo")(traced_for, name, None, None)


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
    assert isinstance(eqn, __getattr__("JaxprEqn")), f"not a jaxpr equation: {eqn!r}"
    return eqn.primitive.name in ("jit", "pjit", "xla_call")


def scan_num_consts_carry(params: dict) -> Tuple[int, int]:
    """``(number of constants, number of carries)`` of a ``scan`` equation's ``params``.

    JAX up to 0.10 keeps them as ``num_consts``/``num_carry``; later ones keep a
    flat tree ``ft_in`` of three groups (constants, carry, scanned inputs).
    """
    if "num_consts" in params:
        return params["num_consts"], params["num_carry"]
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts), len(carry)


# -- shard_map -----------------------------------------------------------------------------

def _find_shard_map() -> Callable:
    if hasattr(jax, "shard_map"):          # JAX >= 0.8
        return jax.shard_map
    from jax.experimental.shard_map import shard_map  # JAX 0.6 and 0.7
    return shard_map


jax_shard_map = _find_shard_map()
#: The name of ``jax_shard_map``'s replication-check flag (``None`` if it has none).
SHARD_MAP_CHECK_KW = next((kw for kw in ("check_vma", "check_rep")
                           if kw in inspect.signature(jax_shard_map).parameters), None)
