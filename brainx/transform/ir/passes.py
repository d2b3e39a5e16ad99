"""The rewriting engine behind ``brainx.transform.optimize_jaxpr`` and its passes.

Each pass here is a function ``Jaxpr -> (Jaxpr, changed)`` that keeps the jaxpr's
interface: the same ``constvars``, ``invars`` and ``outvars`` objects, the same
``effects``. An output variable whose equation a pass removes is defined again at
the end by an identity ``convert_element_type`` (the pinned identity), so a
caller that zips ``outvars`` with something keeps working.

What no pass does, whatever the equation:

* remove, merge, evaluate or move an *impure* equation: one with effects
  (``jax.debug.print``, ``io_callback``, state and ref operations), a callback
  (``pure_callback`` included), ``rng_uniform``, one on refs or tokens, or one
  whose nested jaxprs hold any of these;
* reorder equations: a pass only drops equations or replaces one by another in
  place, and pinned identities go last;
* change a floating-point result: ``x*0``, ``x-x`` and ``0/x`` are left alone for
  inexact dtypes, ``x+0`` only goes for integers (``-0.0 + 0.0`` is ``+0.0``), and
  ``x*1``, ``x/1`` stay for complex dtypes (an infinite part makes a nan);
* evaluate a collective (``psum``, ``axis_index``): its value depends on the mapped axis.

Nested jaxprs (``jit``, ``scan``, ``while``, ``cond`` branches, ``remat``,
custom derivative rules) are rewritten by the same pass with their own interface
kept, so the equation that holds them stays valid. A jaxpr shared by several
equations is rewritten once and stays shared.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import jax
import numpy as np
from jax import lax
from jax.extend import core as jcore

__all__ = ["run_constant_fold", "run_algebraic", "run_copy_propagation", "run_cse", "run_dce",
           "is_pure_eqn"]

Atom = Any
PassResult = Tuple[jcore.Jaxpr, bool]

#: Primitives never removed, merged or evaluated, whatever their effects say.
_UNTOUCHABLE = frozenset({"rng_uniform", "debug_print", "optimization_barrier"})


# ----------------------------------------------------------------------------- purity

def _is_plain_aval(aval: Any) -> bool:
    return isinstance(aval, jax.core.ShapedArray)


def _eqn_pure(eqn: jcore.JaxprEqn, memo: Dict[int, bool]) -> bool:
    """Whether ``eqn`` may be removed, merged with a twin or evaluated ahead of time."""
    name = eqn.primitive.name
    if eqn.effects or name in _UNTOUCHABLE or "callback" in name:
        return False
    for v in (*eqn.invars, *eqn.outvars):
        if not _is_plain_aval(v.aval):
            return False
    return all(_jaxpr_pure(sub, memo) for sub in _subjaxprs(eqn.params))


def is_pure_eqn(eqn: jcore.JaxprEqn) -> bool:
    """Whether ``eqn`` may be removed, merged with a twin or evaluated ahead of time.

    ``False`` for an equation with effects, a callback, ``rng_uniform``, refs or
    tokens, or any of these in its nested jaxprs (see the module's description).
    """
    return _eqn_pure(eqn, {})


def _jaxpr_pure(jaxpr: Any, memo: Dict[int, bool]) -> bool:
    inner = jaxpr.jaxpr if isinstance(jaxpr, jcore.ClosedJaxpr) else jaxpr
    key = id(inner)
    if key not in memo:
        memo[key] = True  # a recursive reference (none in practice) counts as pure
        memo[key] = not inner.effects and all(_eqn_pure(e, memo) for e in inner.eqns)
    return memo[key]


# ----------------------------------------------------------------------------- nested jaxprs

def _subjaxprs(params: Dict[str, Any]):
    for value in params.values():
        if isinstance(value, (jcore.Jaxpr, jcore.ClosedJaxpr)):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, (jcore.Jaxpr, jcore.ClosedJaxpr)):
                    yield item


class _Rewriter:
    """Applies one pass to a jaxpr and, first, to every jaxpr nested in its equations."""

    def __init__(self, body: Callable[["_Rewriter", jcore.Jaxpr], PassResult]):
        self.body = body
        self.purity: Dict[int, bool] = {}
        self._done: Dict[int, Tuple[Any, Any, bool]] = {}  # id -> (original, result, changed)

    def jaxpr(self, jaxpr: jcore.Jaxpr) -> PassResult:
        return self.body(self, jaxpr)

    def pure(self, eqn: jcore.JaxprEqn) -> bool:
        return _eqn_pure(eqn, self.purity)

    def _nested(self, value: Any) -> Tuple[Any, bool]:
        if id(value) in self._done:
            _, result, changed = self._done[id(value)]
            return result, changed
        if isinstance(value, jcore.ClosedJaxpr):
            new, changed = self.jaxpr(value.jaxpr)
            result = jcore.ClosedJaxpr(new, value.consts) if changed else value
        else:
            result, changed = self.jaxpr(value)
        self._done[id(value)] = (value, result, changed)
        return result, changed

    def params(self, eqn: jcore.JaxprEqn) -> Tuple[jcore.JaxprEqn, bool]:
        """``eqn`` with its nested jaxprs rewritten (the same object when nothing changed)."""
        new_params, changed = {}, False
        for key, value in eqn.params.items():
            if isinstance(value, (jcore.Jaxpr, jcore.ClosedJaxpr)):
                value, c = self._nested(value)
                changed |= c
            elif isinstance(value, (tuple, list)) and any(
                    isinstance(x, (jcore.Jaxpr, jcore.ClosedJaxpr)) for x in value):
                items = []
                for x in value:
                    if isinstance(x, (jcore.Jaxpr, jcore.ClosedJaxpr)):
                        x, c = self._nested(x)
                        changed |= c
                    items.append(x)
                value = type(value)(items)
            new_params[key] = value
        return (eqn.replace(params=new_params), True) if changed else (eqn, False)


# ----------------------------------------------------------------------------- atoms and literals

def _is_literal(x: Atom) -> bool:
    return isinstance(x, jcore.Literal)


def _same_type(a: Any, b: Any) -> bool:
    return (_is_plain_aval(a) and _is_plain_aval(b) and a.shape == b.shape
            and a.dtype == b.dtype and a.weak_type == b.weak_type)


def _scalar_value(x: Atom) -> Optional[np.ndarray]:
    """The value of a scalar literal of a plain numeric dtype, else ``None``."""
    if not _is_literal(x) or not _is_plain_aval(x.aval) or x.aval.shape != ():
        return None
    if jax.numpy.issubdtype(x.aval.dtype, jax.dtypes.extended):
        return None
    try:
        value = np.asarray(x.val)
    except Exception:  # a literal of a type numpy does not know
        return None
    return value if value.shape == () else None


def _literal(value: Any, aval: Any) -> jcore.Literal:
    return jcore.Literal(np.asarray(value, dtype=aval.dtype), aval)


def _kind(dtype: Any) -> str:
    """'i' for integers and bool, 'f' for inexact dtypes, '' for anything else."""
    if jax.numpy.issubdtype(dtype, jax.dtypes.extended):
        return ""
    if jax.numpy.issubdtype(dtype, np.integer) or jax.numpy.issubdtype(dtype, np.bool_):
        return "i"
    return "f" if jax.numpy.issubdtype(dtype, np.inexact) else ""


def _literal_key(x: jcore.Literal) -> Any:
    value = _scalar_value(x)
    if value is None:
        return ("literal-id", id(x))
    return ("literal", str(x.aval.dtype), x.aval.weak_type, value.tobytes())


# ----------------------------------------------------------------------------- the forward walk

def _identity_eqn(out: jcore.Var, src: Atom, like: Sequence[jcore.JaxprEqn]) -> jcore.JaxprEqn:
    params = {"new_dtype": out.aval.dtype, "weak_type": out.aval.weak_type, "sharding": None}
    source = like[-1].source_info if like else None
    return jcore.new_jaxpr_eqn([src], [out], lax.convert_element_type_p, params, set(), source)


def _is_pinned_identity(eqn: jcore.JaxprEqn, pinned: set) -> bool:
    """An identity ``convert_element_type`` that defines an output of the jaxpr."""
    return (eqn.primitive is lax.convert_element_type_p and len(eqn.outvars) == 1
            and id(eqn.outvars[0]) in pinned and eqn.params.get("sharding") is None
            and _same_type(eqn.invars[0].aval, eqn.outvars[0].aval))


Visit = Callable[[jcore.JaxprEqn, set], Optional[List[Atom]]]


def _forward(rw: _Rewriter, jaxpr: jcore.Jaxpr, visit: Visit) -> PassResult:
    """Walk the equations in order; ``visit`` gives an equation's replacement atoms or ``None``.

    A replaced equation is dropped and its outputs read as the atoms given; the
    jaxpr's outputs among them get pinned identities at the end.
    """
    subst: Dict[jcore.Var, Atom] = {}
    pinned = {id(v) for v in jaxpr.outvars if not _is_literal(v)}
    eqns: List[jcore.JaxprEqn] = []
    changed = False

    def read(x: Atom) -> Atom:
        return x if _is_literal(x) else subst.get(x, x)

    for eqn in jaxpr.eqns:
        invars = [read(x) for x in eqn.invars]
        if any(a is not b for a, b in zip(invars, eqn.invars)):
            eqn = eqn.replace(invars=invars)
        eqn, nested_changed = rw.params(eqn)
        changed |= nested_changed
        replacement = visit(eqn, pinned)
        if replacement is None:
            eqns.append(eqn)
            continue
        changed = True
        for out, atom in zip(eqn.outvars, replacement):
            subst[out] = atom
    if not changed:
        return jaxpr, False
    done = set()
    for out in jaxpr.outvars:
        if not _is_literal(out) and out in subst and id(out) not in done:
            done.add(id(out))
            eqns.append(_identity_eqn(out, subst[out], eqns))
    return jaxpr.replace(eqns=eqns), True


# ----------------------------------------------------------------------------- constant folding

def _names_an_axis(params: Dict[str, Any]) -> bool:
    """Whether a collective's parameters name a mapped axis (``psum``, ``axis_index``...).

    Its value depends on the axis it runs under, which evaluating it here would not see
    (or would see wrongly, when this runs inside a trace that binds the same name).
    """
    for key in ("axis_name", "axes"):
        value = params.get(key)
        for item in (value if isinstance(value, (tuple, list)) else (value,)):
            if item is not None and not isinstance(item, int):
                return True
    return False


def _fold_body(rw: _Rewriter, jaxpr: jcore.Jaxpr) -> PassResult:
    def visit(eqn: jcore.JaxprEqn, pinned: set) -> Optional[List[Atom]]:
        if (not all(_scalar_value(x) is not None for x in eqn.invars)
                or not eqn.outvars or any(o.aval.shape != () or not _kind(o.aval.dtype)
                                          for o in eqn.outvars if _is_plain_aval(o.aval))
                or _is_pinned_identity(eqn, pinned) or any(True for _ in _subjaxprs(eqn.params))
                or not rw.pure(eqn) or getattr(eqn.ctx, "compute_type", None) is not None
                or _names_an_axis(eqn.params)):
            return None
        try:
            with jax.ensure_compile_time_eval():
                outs = eqn.primitive.bind(*(x.val for x in eqn.invars), **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            values = [np.asarray(v) for v in outs]
        except Exception:  # the primitive cannot run here: leave it to run later
            return None
        if len(values) != len(eqn.outvars) or any(
                v.shape != () or v.dtype != o.aval.dtype for v, o in zip(values, eqn.outvars)):
            return None
        return [_literal(v, o.aval) for v, o in zip(values, eqn.outvars)]

    return _forward(rw, jaxpr, visit)


# ----------------------------------------------------------------------------- algebra

def _is_value(x: Atom, value: float, negative_zero: Optional[bool] = None) -> bool:
    v = _scalar_value(x)
    if v is None or not _kind(v.dtype):     # _kind, not dtype.kind: bfloat16's kind is 'V'
        return False
    if v != value:
        return False
    if negative_zero is None:
        return True
    parts = (np.real(v), np.imag(v)) if v.dtype.kind == "c" else (v,)
    return all(bool(np.signbit(part)) == negative_zero for part in parts)


def _algebraic_body(rw: _Rewriter, jaxpr: jcore.Jaxpr) -> PassResult:
    def keep_if_same(x: Atom, out: jcore.Var) -> Optional[List[Atom]]:
        return [x] if not _is_literal(x) and _same_type(x.aval, out.aval) else None

    def visit(eqn: jcore.JaxprEqn, pinned: set) -> Optional[List[Atom]]:
        name = eqn.primitive.name
        if len(eqn.outvars) != 1 or not _is_plain_aval(eqn.outvars[0].aval):
            return None
        out = eqn.outvars[0]
        kind = _kind(out.aval.dtype)
        if name == "integer_pow" and eqn.params.get("y") == 1:
            return keep_if_same(eqn.invars[0], out)
        if len(eqn.invars) != 2 or not kind or eqn.params.get("out_dtype") is not None:
            return None
        a, b = eqn.invars
        zero = None if kind == "i" else True  # floats: only -0.0 is the additive identity
        # complex z * (1+0j) computes a*1 - b*0 and a*0 + b*1: an infinite part gives nan
        # and a -0.0 part can turn +0.0, so `* 1` and `/ 1` are identities only for reals
        exact_one = not jax.numpy.issubdtype(out.aval.dtype, np.complexfloating)
        if name in ("add", "add_any"):
            if _is_value(a, 0, zero):
                return keep_if_same(b, out)
            if _is_value(b, 0, zero):
                return keep_if_same(a, out)
        elif name == "sub":
            if _is_value(b, 0, None if kind == "i" else False):
                return keep_if_same(a, out)
            if kind == "i" and a is b and out.aval.shape == ():
                return [_literal(0, out.aval)]
        elif name == "mul":
            if exact_one and _is_value(a, 1):
                return keep_if_same(b, out)
            if exact_one and _is_value(b, 1):
                return keep_if_same(a, out)
            if kind == "i" and out.aval.shape == () and (_is_value(a, 0) or _is_value(b, 0)):
                return [_literal(0, out.aval)]
        elif name == "div" and exact_one and _is_value(b, 1):
            return keep_if_same(a, out)
        return None

    return _forward(rw, jaxpr, visit)


# ----------------------------------------------------------------------------- copies

def _copy_body(rw: _Rewriter, jaxpr: jcore.Jaxpr) -> PassResult:
    def visit(eqn: jcore.JaxprEqn, pinned: set) -> Optional[List[Atom]]:
        name = eqn.primitive.name
        if name == "convert_element_type":
            if eqn.params.get("sharding") is not None:
                return None
        elif name == "device_put":
            if any(d is not None for d in (*eqn.params.get("devices", ()),
                                           *eqn.params.get("srcs", ()))):
                return None
        elif name != "copy":
            return None
        if len(eqn.invars) != len(eqn.outvars) or any(id(o) in pinned for o in eqn.outvars):
            return None
        if not all(_same_type(i.aval, o.aval) for i, o in zip(eqn.invars, eqn.outvars)):
            return None
        return list(eqn.invars)

    return _forward(rw, jaxpr, visit)


# ----------------------------------------------------------------------------- common subexpressions

def _param_key(value: Any) -> Any:
    """A hashable stand-in for an equation parameter that compares by value where it can."""
    if isinstance(value, (jcore.Jaxpr, jcore.ClosedJaxpr)):
        return ("jaxpr", id(value))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_param_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), _param_key(v)) for k, v in value.items())))
    if isinstance(value, np.ndarray):
        return ("array", value.shape, str(value.dtype), value.tobytes())
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return ("value", type(value).__name__, value)


def _cse_body(rw: _Rewriter, jaxpr: jcore.Jaxpr) -> PassResult:
    seen: Dict[Any, List[jcore.Var]] = {}
    alive: List[Any] = []  # keeps what ids in the keys refer to alive for the walk

    def visit(eqn: jcore.JaxprEqn, pinned: set) -> Optional[List[Atom]]:
        if (not eqn.outvars or _is_pinned_identity(eqn, pinned) or not rw.pure(eqn)
                or eqn.params.get("prevent_cse") is True):  # a remat asks to be recomputed
            return None
        try:
            key = (eqn.primitive, eqn.ctx,
                   tuple(_literal_key(x) if _is_literal(x) else ("var", id(x)) for x in eqn.invars),
                   tuple(sorted((k, _param_key(v)) for k, v in eqn.params.items())))
            hash(key)
        except Exception:  # a parameter that cannot take part in a key: keep the equation
            return None
        alive.append(eqn)
        previous = seen.get(key)
        if previous is None or not all(_same_type(p.aval, o.aval)
                                       for p, o in zip(previous, eqn.outvars)):
            previous = None
        if previous is None or any(isinstance(p, jcore.DropVar) for p in previous):
            seen[key] = list(eqn.outvars)  # a dropped result cannot be read: the twin is kept
            return None
        return list(previous)

    return _forward(rw, jaxpr, visit)


# ----------------------------------------------------------------------------- dead code

def _dce_body(rw: _Rewriter, jaxpr: jcore.Jaxpr) -> PassResult:
    live = {id(v) for v in jaxpr.outvars if not _is_literal(v)}
    kept: List[jcore.JaxprEqn] = []
    changed = False
    for eqn in reversed(jaxpr.eqns):
        if not any(id(o) in live for o in eqn.outvars) and rw.pure(eqn):
            changed = True
            continue
        eqn, nested_changed = rw.params(eqn)
        changed |= nested_changed
        kept.append(eqn)
        live.update(id(x) for x in eqn.invars if not _is_literal(x))
    if not changed:
        return jaxpr, False
    return jaxpr.replace(eqns=kept[::-1]), True


# ----------------------------------------------------------------------------- entry points

def _entry(body: Callable[[_Rewriter, jcore.Jaxpr], PassResult]) -> Callable[[jcore.Jaxpr], PassResult]:
    def run(jaxpr: jcore.Jaxpr) -> PassResult:
        return _Rewriter(body).jaxpr(jaxpr)
    run.__name__ = body.__name__.replace("_body", "").lstrip("_")
    return run


run_constant_fold = _entry(_fold_body)
run_algebraic = _entry(_algebraic_body)
run_copy_propagation = _entry(_copy_body)
run_cse = _entry(_cse_body)
run_dce = _entry(_dce_body)
