"""Where each JAX version keeps a name, and helpers that read JAX's structures across versions.

:data:`JAX_NAMES` says where JAX keeps each name brainstate's JAX shim exports
(:mod:`brainx.compat.jax_shim`), public paths (``jax.extend.core``) before
private ones (``jax._src.core``); :func:`lookup` finds one at its first use, so
a JAX that lacks a name fails only where it is used. The helpers below
(:func:`make_debug_info`, :func:`scan_num_consts_carry`, :func:`wrap_init`,
``jax_shard_map``) are what brainx's own jaxpr tools use where JAX changed
between the versions brainx supports.

Examples
--------
>>> import jax, jax.numpy as jnp
>>> from brainx._jax import names
>>> names.lookup("ClosedJaxpr") is jax.extend.core.ClosedJaxpr
True
>>> closed = jax.make_jaxpr(lambda c, xs: jax.lax.scan(lambda c, x: (c + x, x), c, xs))(
...     0.0, jnp.arange(3.0))
>>> names.scan_num_consts_carry(closed.jaxpr.eqns[0].params)
(0, 1)
>>> names.make_debug_info("my_pass", "f").func_src_info
'f'
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Dict, Tuple

import jax

from brainx._jax.internals import api_util, linear_util

__all__ = ["JAX_NAMES", "lookup", "make_debug_info", "wrap_init", "scan_num_consts_carry",
           "jax_shard_map", "SHARD_MAP_CHECK_KW"]

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

_FOUND: Dict[str, Any] = {}


def lookup(name: str) -> Any:
    """``name`` from JAX by :data:`JAX_NAMES` (kept after the first look), or rebuilt.

    Raises ``AttributeError`` naming the places looked in and the JAX version.
    """
    if name in _FOUND:
        return _FOUND[name]
    for module_name in JAX_NAMES.get(name, ()):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            _FOUND[name] = getattr(module, name)
            return _FOUND[name]
    if name in _REBUILT:
        _FOUND[name] = _REBUILT[name]()
        return _FOUND[name]
    if name in JAX_NAMES:
        raise AttributeError(
            f"JAX {jax.__version__} has no {name!r} in {', '.join(JAX_NAMES[name])} "
            "(brainx._jax.names.JAX_NAMES says where to look).")
    raise AttributeError(f"{name!r} is not a JAX name brainx knows (brainx._jax.names.JAX_NAMES)")


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


def wrap_init(fun: Callable, args: tuple = (), kwargs: dict | None = None,
              name: str = "wrapped") -> Any:
    """brainstate's ``wrap_init(fun, args, kwargs, name)``: a JAX ``WrappedFun`` with debug info."""
    kwargs = {} if kwargs is None else kwargs
    return linear_util.wrap_init(fun, kwargs,
                                 debug_info=api_util.debug_info(name, fun, args, kwargs))


def make_debug_info(traced_for: str, name: str = "<unknown>") -> Any:
    """A ``DebugInfo`` for a jaxpr built from equations: argument and result names unknown.

    ``traced_for`` names the pass that built it, ``name`` the function
    (``func_src_info``). JAX warns about a ``Jaxpr`` made without one.
    """
    return lookup("DebugInfo")(traced_for, name, None, None)


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
