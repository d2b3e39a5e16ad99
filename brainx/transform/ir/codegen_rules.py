"""The code :func:`~brainx.transform.fn_to_python_code` writes for each primitive.

A rule is ``rule(writer, eqn, operands) -> expression`` (see
:func:`~brainx.transform.register_prim_handler`). Three kinds:

* operators: ``add`` is ``a + b``, ``lt`` is ``a < b``, ``neg`` is ``-a``;
* renamed calls: ``reduce_sum`` is ``jax.numpy.sum(a, axis=...)``,
  ``convert_element_type`` is ``jax.lax.convert_element_type(a, dtype)``;
* primitives holding jaxprs (``jit``, ``scan``, ``while``, ``cond``, custom
  derivative calls, ``remat``): a nested ``def`` and the transform that runs it.

Any other primitive whose ``jax.lax`` function of the same name takes its
parameters as keywords (``sin``, ``cumsum``, ``transpose``, ``select_n``, ...)
is called so (:func:`generic_rule`); parameters that are ``None`` or sharding
metadata are left out.
"""

from __future__ import annotations

import enum
import inspect
import math
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence

import jax
import numpy as np

from brainx._jax.names import scan_num_consts_carry

__all__ = ["RULES", "value_code", "generic_rule", "Writer"]


class Writer(Protocol):
    """What a rule asks of the writer (:class:`brainx.transform.ir.codegen.CodeWriter`):
    write a nested ``def`` for a sub-jaxpr and give its name. The writer reads the rules;
    the rules know the writer only by this."""

    def function(self, jaxpr: Any, prefix: str, groups: Optional[Sequence[tuple]] = None,
                 bound: Optional[Dict[Any, str]] = None,
                 returns: Optional[Callable[[List[str]], str]] = None) -> str: ...


#: brainx's own rules, by primitive name; a handler given to register_prim_handler comes first
RULES: Dict[str, Callable] = {}

#: parameters that place or lay out values, not what they compute: left out
_PLACEMENT = frozenset({"sharding", "out_sharding", "out_shardings", "in_shardings",
                        "in_layouts", "out_layouts", "ctx_mesh", "compiler_options_kvs",
                        "donated_invars", "keep_unused", "inline", "accuracy"})


def value_code(value: Any, weak: bool = False) -> str:
    """Source text for a parameter or literal value, using only ``jax``."""
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, enum.Enum):
        return _enum_code(value)
    if isinstance(value, (int, float)) and not hasattr(value, "dtype"):
        return _number(value)
    if isinstance(value, (np.dtype, type)) and _is_dtype(value):
        return f"jax.numpy.{np.dtype(value).name}"
    if isinstance(value, tuple) and hasattr(value, "_fields"):      # a NamedTuple of jax.lax
        fields = ", ".join(f"{f}={value_code(getattr(value, f))}" for f in value._fields)
        return f"{_lax_class(type(value))}({fields})"
    if isinstance(value, (tuple, list)):
        items = [value_code(v) for v in value]
        if isinstance(value, list):
            return "[" + ", ".join(items) + "]"
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if hasattr(value, "dtype") and (hasattr(value, "__array__") or isinstance(value, (int, float))):
        return _array_code(np.asarray(value, dtype=value.dtype), weak)
    if isinstance(value, np.generic):
        return _array_code(np.asarray(value), weak)
    raise TypeError(f"fn_to_python_code: no source for the value {value!r} "
                    f"({type(value).__name__})")


def _number(x: Any) -> str:
    if isinstance(x, bool):
        return repr(bool(x))
    if isinstance(x, int):
        return repr(int(x))
    if isinstance(x, float) and not math.isfinite(x):
        return f"float({str(float(x))!r})"
    if isinstance(x, complex):
        return f"complex({x.real!r}, {x.imag!r})"
    return repr(float(x))


def _is_dtype(value: Any) -> bool:
    try:
        np.dtype(value)
    except TypeError:
        return False
    return True


def _array_code(a: np.ndarray, weak: bool) -> str:
    dtype = f"jax.numpy.{a.dtype.name}"
    if a.ndim == 0:
        item = a.item()
        if weak and isinstance(item, (bool, int, float)):
            return _number(item)
        return f"jax.numpy.array({_number(item)}, dtype={dtype})"
    if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
        return f"jax.numpy.array({_nonfinite_list(a.tolist())}, dtype={dtype})"
    return f"jax.numpy.array({a.tolist()!r}, dtype={dtype})"


def _nonfinite_list(x: Any) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(_nonfinite_list(v) for v in x) + "]"
    return _number(x)


def _enum_code(value: enum.Enum) -> str:
    return f"{_lax_class(type(value))}.{value.name}"


def _lax_class(cls: type) -> str:
    if getattr(jax.lax, cls.__name__, None) is cls:
        return f"jax.lax.{cls.__name__}"
    raise TypeError(f"fn_to_python_code: {cls.__name__} is not a jax.lax name")


def _kwargs(params: dict, drop: tuple = ()) -> str:
    return ", ".join(f"{k}={value_code(v)}" for k, v in sorted(params.items())
                     if v is not None and k not in _PLACEMENT and k not in drop)


# -- the generic rule ------------------------------------------------------------------

_LAX_NAMES = {"and": "bitwise_and", "or": "bitwise_or", "not": "bitwise_not",
              "xor": "bitwise_xor"}


def generic_rule(eqn: Any) -> Optional[Callable]:
    """``jax.lax.<name>(*operands, **params)`` where that function takes those parameters."""
    name = _LAX_NAMES.get(eqn.primitive.name, eqn.primitive.name)
    fn = getattr(jax.lax, name, None)
    if not callable(fn):
        return None
    try:
        accepted = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    wanted = [k for k, v in eqn.params.items() if v is not None and k not in _PLACEMENT]
    if not all(k in accepted for k in wanted):
        return None

    def rule(w: Writer, eqn: Any, ops: list) -> str:
        return _call(f"jax.lax.{name}", ops, _kwargs(eqn.params))
    return rule


def _call(fn: str, ops: list, kwargs: str = "") -> str:
    return f"{fn}({', '.join([*ops, kwargs] if kwargs else ops)})"


# -- operators and renamed calls -------------------------------------------------------

def _binary(op: str) -> Callable:
    return lambda w, eqn, ops: f"{ops[0]} {op} {ops[1]}"


for _name, _op in {"add": "+", "sub": "-", "mul": "*", "lt": "<", "le": "<=", "gt": ">",
                   "ge": ">=", "eq": "==", "ne": "!="}.items():
    RULES.setdefault(_name, _binary(_op))
RULES.setdefault("add_any", _binary("+"))
RULES.setdefault("neg", lambda w, eqn, ops: f"-{ops[0]}")
RULES.setdefault("copy", lambda w, eqn, ops: _call("jax.numpy.array", ops, "copy=True"))
RULES.setdefault("copy_p", RULES["copy"])

_REDUCTIONS = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min",
               "reduce_prod": "prod", "reduce_and": "all", "reduce_or": "any"}


def _reduction(fn: str) -> Callable:
    def rule(w: Writer, eqn: Any, ops: list) -> str:
        out = eqn.outvars[0].aval.dtype
        extra = f", dtype=jax.numpy.{out.name}" if fn in ("sum", "prod") else ""
        return f"jax.numpy.{fn}({ops[0]}, axis={value_code(tuple(eqn.params['axes']))}{extra})"
    return rule


for _name, _fn in _REDUCTIONS.items():
    RULES.setdefault(_name, _reduction(_fn))


def _convert(w: Writer, eqn: Any, ops: list) -> str:
    return f"jax.lax.convert_element_type({ops[0]}, {value_code(eqn.params['new_dtype'])})"


def _broadcast_in_dim(w: Writer, eqn: Any, ops: list) -> str:
    p = eqn.params
    return (f"jax.lax.broadcast_in_dim({ops[0]}, {value_code(tuple(p['shape']))}, "
            f"{value_code(tuple(p['broadcast_dimensions']))})")


def _reshape(w: Writer, eqn: Any, ops: list) -> str:
    dims = eqn.params.get("dimensions")
    extra = "" if dims is None else f", dimensions={value_code(tuple(dims))}"
    return f"jax.lax.reshape({ops[0]}, {value_code(tuple(eqn.params['new_sizes']))}{extra})"


def _arg_reduction(fn: str) -> Callable:
    def rule(w: Writer, eqn: Any, ops: list) -> str:
        (axis,) = eqn.params["axes"]
        return f"jax.lax.{fn}({ops[0]}, {axis}, {value_code(eqn.params['index_dtype'])})"
    return rule


def _dot_general(w: Writer, eqn: Any, ops: list) -> str:
    p = eqn.params
    extra = ""
    if p.get("precision") is not None:
        extra += f", precision={value_code(p['precision'])}"
    if p.get("preferred_element_type") is not None:
        extra += f", preferred_element_type={value_code(p['preferred_element_type'])}"
    return (f"jax.lax.dot_general({ops[0]}, {ops[1]}, "
            f"{value_code(p['dimension_numbers'])}{extra})")


def _concatenate(w: Writer, eqn: Any, ops: list) -> str:
    return f"jax.lax.concatenate([{', '.join(ops)}], {eqn.params['dimension']})"


def _dynamic_slice(w: Writer, eqn: Any, ops: list) -> str:
    sizes = value_code(tuple(eqn.params["slice_sizes"]))
    return f"jax.lax.dynamic_slice({ops[0]}, {value_code_list(ops[1:])}, slice_sizes={sizes})"


def _dynamic_update_slice(w: Writer, eqn: Any, ops: list) -> str:
    return f"jax.lax.dynamic_update_slice({ops[0]}, {ops[1]}, {value_code_list(ops[2:])})"


def value_code_list(ops: list) -> str:
    return "(" + ", ".join(ops) + ("," if len(ops) == 1 else "") + ")"


def _iota(w: Writer, eqn: Any, ops: list) -> str:
    p = eqn.params
    return (f"jax.lax.broadcasted_iota({value_code(p['dtype'])}, {value_code(tuple(p['shape']))}, "
            f"{p['dimension']})")


def _sort(w: Writer, eqn: Any, ops: list) -> str:
    p = eqn.params
    return (f"jax.lax.sort({value_code_list(ops)}, dimension={p['dimension']}, "
            f"is_stable={p['is_stable']}, num_keys={p['num_keys']})")


def _split(w: Writer, eqn: Any, ops: list) -> str:
    return (f"jax.lax.split({ops[0]}, {value_code(tuple(eqn.params['sizes']))}, "
            f"axis={eqn.params['axis']})")


def _squeeze(w: Writer, eqn: Any, ops: list) -> str:
    return f"jax.lax.squeeze({ops[0]}, {value_code(tuple(eqn.params['dimensions']))})"


def _scatter(fn: str) -> Callable:
    def rule(w: Writer, eqn: Any, ops: list) -> str:
        p = eqn.params
        return _call(f"jax.lax.{fn}", ops, _kwargs(
            {k: p.get(k) for k in ("dimension_numbers", "indices_are_sorted",
                                   "unique_indices", "mode")}))
    return rule


for _kind in ("", "_add", "_mul", "_min", "_max", "_sub"):
    RULES.setdefault("scatter" + _kind, _scatter("scatter" + _kind))
    RULES.setdefault("scatter" + _kind.replace("_", "-"), _scatter("scatter" + _kind))

for _name, _rule in {"convert_element_type": _convert, "broadcast_in_dim": _broadcast_in_dim,
                     "reshape": _reshape, "argmax": _arg_reduction("argmax"),
                     "argmin": _arg_reduction("argmin"), "dot_general": _dot_general,
                     "concatenate": _concatenate, "dynamic_slice": _dynamic_slice,
                     "dynamic_update_slice": _dynamic_update_slice, "iota": _iota,
                     "sort": _sort, "split": _split, "squeeze": _squeeze}.items():
    RULES.setdefault(_name, _rule)


def _debug_print(w: Writer, eqn: Any, ops: list) -> str:
    p = eqn.params
    if p.get("static_args"):
        raise TypeError("fn_to_python_code: a jax.debug.print with static arguments")
    args, kwargs = jax.tree.unflatten(p["in_tree"], ops) if "in_tree" in p else (ops, {})
    items = [repr(p["fmt"]), *args, *(f"{k}={v}" for k, v in kwargs.items())]
    return f"jax.debug.print({', '.join(items)}, ordered={p.get('ordered', False)})"


RULES.setdefault("debug_print", _debug_print)


# -- primitives holding jaxprs ---------------------------------------------------------

def _inner(params: dict, *keys: str) -> Any:
    for key in keys:
        if params.get(key) is not None:
            return params[key]
    raise KeyError(keys)


def _jit(w: Writer, eqn: Any, ops: list) -> str:
    fn = w.function(eqn.params["jaxpr"], "jitted")
    return _one_or_many(eqn, f"jax.jit({fn})({', '.join(ops)})")


def _one_or_many(eqn: Any, expr: str) -> Any:
    """A call of a nested function: its value is the one output, or a tuple of them."""
    return (expr, None) if len(eqn.outvars) == 1 else expr


def _nested_call(prefix: str, keys: tuple, wrap: str = "") -> Callable:
    def rule(w: Writer, eqn: Any, ops: list) -> str:
        jaxpr = _inner(eqn.params, *keys)
        fn = w.function(jaxpr, prefix)
        call = f"{wrap}({fn})({', '.join(ops)})" if wrap else f"{fn}({', '.join(ops)})"
        return _one_or_many(eqn, call)
    return rule


def _invars(jaxpr: Any) -> list:
    return list(getattr(jaxpr, "jaxpr", jaxpr).invars)


def _scan(w: Writer, eqn: Any, ops: list):
    p = eqn.params
    n_consts, n_carry = scan_num_consts_carry(p)
    invars = _invars(p["jaxpr"])
    consts, carry, xs = (invars[:n_consts], invars[n_consts:n_consts + n_carry],
                         invars[n_consts + n_carry:])
    n_ys = len(eqn.outvars) - n_carry
    fn = w.function(p["jaxpr"], "fn", [("carry_", carry), ("x_", xs)],
                    bound=dict(zip(consts, ops[:n_consts])),
                    returns=lambda outs: f"{_tuple(outs[:n_carry])}, {_tuple(outs[n_carry:])}")
    init, scanned = ops[n_consts:n_consts + n_carry], ops[n_consts + n_carry:]
    expr = (f"jax.lax.scan({fn}, {_tuple(init)}, {_tuple(scanned)}, length={p['length']}, "
            f"reverse={p['reverse']}, unroll={value_code(p['unroll'])})")
    return expr, (n_carry, n_ys)


def _while(w: Writer, eqn: Any, ops: list):
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cond_consts, body_consts, init = ops[:nc], ops[nc:nc + nb], ops[nc + nb:]
    cv, bv = _invars(p["cond_jaxpr"]), _invars(p["body_jaxpr"])
    cond = w.function(p["cond_jaxpr"], "cond", [("carry_", cv[nc:])],
                      bound=dict(zip(cv[:nc], cond_consts)))
    body = w.function(p["body_jaxpr"], "body", [("carry_", bv[nb:])],
                      bound=dict(zip(bv[:nb], body_consts)), returns=_tuple)
    return f"jax.lax.while_loop({cond}, {body}, {_tuple(init)})", (len(init),)


def _cond(w: Writer, eqn: Any, ops: list):
    index, operands = ops[0], ops[1:]
    names = []
    for branch in eqn.params["branches"]:
        names.append(w.function(branch, "branch", returns=_tuple))
    return (f"jax.lax.switch({index}, [{', '.join(names)}], {', '.join(operands)})".replace(
        ", )", ")"), (len(eqn.outvars),))


def _tuple(items: list) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


for _name, _rule in {
        "jit": _jit, "pjit": _jit, "scan": _scan, "while": _while, "cond": _cond,
        "closed_call": _nested_call("call", ("call_jaxpr",)),
        "core_call": _nested_call("call", ("call_jaxpr",)),
        "custom_jvp_call": _nested_call("primal", ("call_jaxpr",)),
        "custom_vjp_call": _nested_call("primal", ("call_jaxpr", "fun_jaxpr")),
        "custom_vjp_call_jaxpr": _nested_call("primal", ("fun_jaxpr", "call_jaxpr")),
        "remat": _nested_call("remat", ("jaxpr",), "jax.checkpoint"),
        "checkpoint": _nested_call("remat", ("jaxpr",), "jax.checkpoint"),
        "remat2": _nested_call("remat", ("jaxpr",), "jax.checkpoint")}.items():
    RULES.setdefault(_name, _rule)
