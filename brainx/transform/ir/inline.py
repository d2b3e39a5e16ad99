"""Inline ``jit`` calls of a jaxpr: ``inline_jit`` (brainstate's name).

A function that calls jitted helpers traces to a jaxpr with one ``jit``
equation per call, its body a jaxpr of its own. ``inline_jit`` puts the
equations of those bodies in place of the calls (all of them, or those a
predicate ``should_expand(eqn)`` picks), with fresh variables for each call,
so a pass or a reader sees one flat list. Calls inside an inlined body are
inlined by the same rule. The result computes what the jaxpr computes.

Examples
--------
>>> import jax, jax.numpy as jnp
>>> from brainx.transform import inline_jit
>>> square = jax.jit(lambda v: v * v)
>>> closed = jax.make_jaxpr(lambda x: square(x) + square(x + 1.0))(2.0)
>>> [e.primitive.name for e in closed.eqns]
['jit', 'add', 'jit', 'add']
>>> flat = inline_jit(closed)
>>> [e.primitive.name for e in flat.eqns]
['mul', 'add', 'mul', 'add']
>>> float(jax.extend.core.jaxpr_as_fun(flat)(2.0)[0])
13.0
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from jax.extend import core as _core

from brainx.errors import IRValidationError

__all__ = ["inline_jit"]

_JIT = ("jit", "pjit")


def inline_jit(jaxpr: Any, should_expand: Optional[Callable[[Any], bool]] = None) -> Any:
    """``jaxpr`` (a ``Jaxpr`` or ``ClosedJaxpr``) with its ``jit`` calls inlined.

    ``should_expand(eqn)`` (default: every call) picks the ``jit`` equations to
    inline; the others stay calls. Constants of an inlined body become
    constants of the result, so a plain ``Jaxpr`` keeps a call whose body has
    constants. Returns the same kind it was given.

    Raises
    ------
    brainx.errors.IRValidationError
        ``jaxpr`` is neither a ``Jaxpr`` nor a ``ClosedJaxpr``.
    """
    if not isinstance(jaxpr, (_core.Jaxpr, _core.ClosedJaxpr)):
        raise IRValidationError(
            f"inline_jit: Expected Jaxpr or ClosedJaxpr, got {type(jaxpr).__name__}.")
    closed = isinstance(jaxpr, _core.ClosedJaxpr)
    inner = jaxpr.jaxpr if closed else jaxpr
    consts: List[Any] = list(jaxpr.consts) if closed else []
    constvars = list(inner.constvars)
    subst: Dict[int, Any] = {}
    eqns: List[Any] = []

    def atom(v: Any) -> Any:
        return subst.get(id(v), v) if isinstance(v, _core.Var) else v

    for eqn in inner.eqns:
        eqn = eqn.replace(invars=[atom(v) for v in eqn.invars])
        body = eqn.params.get("jaxpr") if eqn.primitive.name in _JIT else None
        if body is None or (should_expand is not None and not should_expand(eqn)):
            eqns.append(eqn)
            continue
        body = inline_jit(body, should_expand)
        body_consts = list(getattr(body, "consts", ()))
        if body_consts and not closed:
            eqns.append(eqn)
            continue
        code = body.jaxpr if isinstance(body, _core.ClosedJaxpr) else body
        local: Dict[int, Any] = {id(v): a for v, a in zip(code.invars, eqn.invars)}
        for v, value in zip(code.constvars, body_consts):
            local[id(v)] = fresh = _core.Var(v.aval)
            constvars.append(fresh)
            consts.append(value)
        for e in code.eqns:
            outs = []
            for v in e.outvars:
                if isinstance(v, _core.DropVar):
                    outs.append(v)
                else:
                    local[id(v)] = fresh = _core.Var(v.aval)
                    outs.append(fresh)
            eqns.append(e.replace(invars=[local.get(id(a), a) if isinstance(a, _core.Var)
                                          else a for a in e.invars], outvars=outs))
        for out, result in zip(eqn.outvars, code.outvars):
            subst[id(out)] = local.get(id(result), result) if isinstance(
                result, _core.Var) else result
    new = inner.replace(constvars=constvars, eqns=eqns,
                        outvars=[atom(v) for v in inner.outvars])
    return _core.ClosedJaxpr(new, consts) if closed else new
