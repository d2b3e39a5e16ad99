"""brainstate's partial evaluation of a jaxpr: ``partial_eval_jaxpr`` and ``constant_fold_jaxpr``.

brainstate's code generator folds a jaxpr before writing it, and its tests call the
folding engine directly (``brainstate.transform._ir_utils.partial_eval_jaxpr``,
``_ir_tocode.constant_fold_jaxpr``). What it does differs from brainx's
:func:`~brainx.transform.constant_fold`, which keeps the jaxpr's interface:

* ``env`` binds input variables to values (or to other variables, a renaming);
* every equation whose inputs are all known is evaluated now, arrays included (but
  not a broadcast, which would make a constant the size of its result, nor an equation
  with no inputs, nor one in :data:`CONSTANT_FOLD_BLACKLIST`), and a ``closed_call``
  with known inputs is evaluated by folding its body into the caller;
* the inputs nothing reads any more are dropped (``keep_invars=False``) or only those
  ``env`` bound (``keep_invars=True``).

An equation brainx would not evaluate ahead of time (effects, callbacks, random keys:
:func:`brainx.transform.ir.passes.is_pure_eqn`) is kept whatever its inputs.
The result keeps the jaxpr's ``DebugInfo`` (its source, the names of the inputs kept),
so JAX does not warn about a jaxpr without one, under ``jax_enable_checks`` too.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import jax
import numpy as np
from jax.extend import core as _core

from brainx._jax.names import make_debug_info
from brainx.errors import IRError
from brainx.transform.ir.passes import is_pure_eqn

__all__ = ["CONSTANT_FOLD_BLACKLIST", "constant_fold_blacklist", "partial_eval_jaxpr",
           "constant_fold_jaxpr", "_eval_eqn"]

#: primitives never evaluated ahead of time: a broadcast (a constant as large as its
#: result), random and I/O primitives, callbacks, and control flow
CONSTANT_FOLD_BLACKLIST = {
    "broadcast_in_dim", "broadcast",
    "rng_uniform", "rng_bit_generator", "random_seed", "random_bits", "random_fold_in",
    "random_split", "random_wrap", "random_unwrap", "random_gamma_grad",
    "while", "scan", "cond",
    "debug_callback", "io_callback", "pure_callback", "debug_print",
}
constant_fold_blacklist = CONSTANT_FOLD_BLACKLIST  # (brainstate's _ir_tocode name)

_UNKNOWN = object()


def _foldable(eqn: Any) -> bool:
    return (eqn.primitive.name not in CONSTANT_FOLD_BLACKLIST and bool(eqn.invars)
            and is_pure_eqn(eqn))


def _eval_eqn(eqn: Any, values: List[Any]) -> Any:
    """The outputs of ``eqn`` on the known ``values`` of its inputs.

    A ``closed_call`` gives its body partially evaluated on those values (a
    ``Jaxpr``: its equations go into the caller, its outputs are the call's); any
    other primitive is bound on them and gives a value or a list of values.
    """
    if eqn.primitive.name == "closed_call":
        body = eqn.params["call_jaxpr"]
        inner = getattr(body, "jaxpr", body)
        bound = dict(zip(inner.constvars, getattr(body, "consts", ())))
        bound.update(zip(inner.invars, values))
        return partial_eval_jaxpr(inner, bound)
    with jax.ensure_compile_time_eval():
        return eqn.primitive.bind(*values, **eqn.params)


def _as_value(x: Any) -> Any:
    """A Literal's value; a jax array as a numpy one (a literal should not hold a device array)."""
    if isinstance(x, _core.Literal):
        return x.val
    if isinstance(x, jax.Array):
        return np.asarray(x)
    return x


def _debug_info(jaxpr: Any, invars: List[Any]) -> Any:
    info = jaxpr.debug_info
    if info is None:
        return make_debug_info("partial_eval_jaxpr")
    if len(invars) == len(jaxpr.invars):
        return info
    names = info.arg_names
    if names is None or len(names) != len(jaxpr.invars):
        return info._replace(arg_names=None)
    kept = {id(v) for v in invars}
    return info._replace(arg_names=tuple(n for v, n in zip(jaxpr.invars, names) if id(v) in kept))


def partial_eval_jaxpr(jaxpr: Any, env: Dict[Any, Any], keep_invars: bool = False) -> Any:
    """``jaxpr`` with what ``env`` and its literals make known evaluated now.

    Parameters
    ----------
    jaxpr : Jaxpr
        The jaxpr (on JAX >= 0.11 a closed one is one too; its constants stay unknown).
    env : dict
        ``{variable: value}``: a value (array, number, ``Literal``) the variable
        holds, or another variable to read instead.
    keep_invars : bool
        Keep every input ``env`` does not bind (a nested jaxpr whose callers pass them
        all); by default an input nothing reads any more is dropped too.

    Returns
    -------
    Jaxpr
        The equations left, reading literals for what became known.

    Examples
    --------
    >>> import jax, numpy as np
    >>> closed = jax.make_jaxpr(lambda x, y: x * y + 1.0)(2.0, 3.0)
    >>> folded = partial_eval_jaxpr(closed.jaxpr, {closed.jaxpr.invars[0]: np.float32(4.0)})
    >>> len(folded.invars), [e.primitive.name for e in folded.eqns]
    (1, ['mul', 'add'])
    """
    known: Dict[int, Any] = {}
    for var, value in env.items():
        known[id(var)] = value if isinstance(value, _core.Var) else _as_value(value)
    held = list(env)  # keeps the keys of `known` alive
    eqns: List[Any] = []

    def read(atom: Any) -> Any:
        if isinstance(atom, _core.Literal):
            return atom.val
        return known.get(id(atom), _UNKNOWN)

    for eqn in jaxpr.eqns:
        values = [read(v) for v in eqn.invars]
        if not _foldable(eqn) or any(v is _UNKNOWN or isinstance(v, _core.Var) for v in values):
            eqns.append(eqn)
            continue
        out = _eval_eqn(eqn, values)
        if isinstance(out, _core.Jaxpr):  # a folded call: its equations come here
            eqns.extend(out.eqns)
            out = out.outvars
        elif not isinstance(out, (tuple, list)):
            out = (out,)
        for var, value in zip(eqn.outvars, out):
            if isinstance(value, _core.Jaxpr):
                raise IRError(f"partial_eval_jaxpr: the equation {eqn.primitive.name!r} gave a "
                              "jaxpr as a value; this is a bug in brainx.")
            held.append(var)
            known[id(var)] = value if isinstance(value, _core.Var) else _as_value(value)

    def atom(var: Any) -> Any:
        value = read(var)
        if value is _UNKNOWN or isinstance(var, _core.Literal):
            return var
        if isinstance(value, _core.Var):
            return value
        return _core.Literal(value, var.aval)

    eqns = [e.replace(invars=[atom(v) for v in e.invars]) for e in eqns]
    outvars = [atom(v) for v in jaxpr.outvars]
    if keep_invars:
        bound = {id(k) for k in env}
        invars = [v for v in jaxpr.invars if id(v) not in bound]
    else:
        read_now = {id(v) for e in eqns for v in e.invars if isinstance(v, _core.Var)}
        read_now.update(id(v) for v in outvars if isinstance(v, _core.Var))
        invars = [v for v in jaxpr.invars if id(v) in read_now]
    del held
    return jaxpr.replace(eqns=eqns, invars=invars, outvars=outvars,
                         debug_info=_debug_info(jaxpr, invars))


def constant_fold_jaxpr(jaxpr: Any, keep_invars: bool = False) -> Any:
    """``jaxpr`` with its constant equations evaluated and its unread inputs dropped.

    :func:`partial_eval_jaxpr` with nothing bound. brainx's
    :func:`~brainx.transform.constant_fold` keeps the jaxpr's inputs instead.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> f = lambda x, y: x + jax.lax.integer_pow(jnp.float32(2.0), 3)
    >>> closed = jax.make_jaxpr(f)(jnp.float32(1.0), jnp.float32(2.0))
    >>> [e.primitive.name for e in closed.eqns]
    ['integer_pow', 'add']
    >>> folded = constant_fold_jaxpr(closed.jaxpr)
    >>> len(folded.invars), [e.primitive.name for e in folded.eqns]
    (1, ['add'])
    """
    return partial_eval_jaxpr(jaxpr, {}, keep_invars=keep_invars)
