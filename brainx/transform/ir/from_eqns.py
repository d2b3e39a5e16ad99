"""A jaxpr from a list of equations: ``eqns_to_jaxpr`` and ``eqns_to_closed_jaxpr`` (brainstate's names).

Tools that cut a jaxpr into pieces (a segment of equations to compile apart,
the equations that touch one state) make a jaxpr of each piece. The inputs,
outputs and constants a piece needs follow from its equations when they are
not given:

* inputs: the variables its equations read but none of them writes, in the
  order they are first read;
* outputs: the variables its equations write that no later equation of the
  piece reads, in the order they are written;
* constants: none, unless given (``constvars`` with their ``consts``).

Examples
--------
>>> import jax, jax.numpy as jnp
>>> from brainx.transform import eqns_to_closed_jaxpr
>>> closed = jax.make_jaxpr(lambda x, y: jnp.sin(x) * y + 1.0)(1.0, 2.0)
>>> piece = eqns_to_closed_jaxpr(closed.eqns[1:])      # (sin x) * y + 1
>>> len(piece.jaxpr.invars), len(piece.jaxpr.outvars)
(2, 1)
>>> float(jax.extend.core.jaxpr_as_fun(piece)(3.0, 2.0)[0])
7.0
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from jax.extend import core as _core

from brainx._jax.names import make_debug_info
from brainx.errors import IRValidationError

__all__ = ["eqns_to_jaxpr", "eqns_to_closed_jaxpr"]


def _check_vars(vars_: Sequence[Any], what: str) -> List[Any]:
    vars_ = list(vars_)
    bad = [v for v in vars_ if not isinstance(v, _core.Var)]
    if bad:
        raise IRValidationError(f"eqns_to_jaxpr: {what} must be jaxpr variables (Var), got "
                                f"{bad[0]!r} ({type(bad[0]).__name__}).")
    return vars_


def _binders(eqns: Sequence[Any], invars: Optional[Sequence[Any]],
             outvars: Optional[Sequence[Any]], constvars: Optional[Sequence[Any]]):
    written = {id(v) for e in eqns for v in e.outvars}
    read: List[Any] = []
    seen = set()
    for e in eqns:
        for v in e.invars:
            if isinstance(v, _core.Var) and id(v) not in seen:
                seen.add(id(v))
                read.append(v)
    constvars = [] if constvars is None else _check_vars(constvars, "constvars")
    if invars is None:
        consts = {id(v) for v in constvars}
        invars = [v for v in read if id(v) not in written and id(v) not in consts]
    else:
        invars = _check_vars(invars, "invars")
    if outvars is None:
        outvars = [v for e in eqns for v in e.outvars
                   if id(v) not in seen and not isinstance(v, _core.DropVar)]
    else:
        outvars = _check_vars(outvars, "outvars")
    return constvars, invars, outvars


def eqns_to_jaxpr(eqns: Sequence[Any], invars: Optional[Sequence[Any]] = None,
                  outvars: Optional[Sequence[Any]] = None,
                  constvars: Optional[Sequence[Any]] = None) -> Any:
    """A ``Jaxpr`` of ``eqns``; inputs and outputs not given follow from the equations.

    See the module's description for the rule. Constants (``constvars``) come
    before the inputs.

    Raises
    ------
    brainx.errors.IRValidationError
        ``invars``, ``outvars`` or ``constvars`` hold something that is not a
        jaxpr variable (a literal, a number).
    """
    eqns = list(eqns)
    constvars, invars, outvars = _binders(eqns, invars, outvars, constvars)
    return _core.Jaxpr(constvars, invars, outvars, eqns,
                       debug_info=make_debug_info("eqns_to_jaxpr"))


def eqns_to_closed_jaxpr(eqns: Sequence[Any], invars: Optional[Sequence[Any]] = None,
                         outvars: Optional[Sequence[Any]] = None,
                         constvars: Optional[Sequence[Any]] = None,
                         consts: Optional[Sequence[Any]] = None) -> Any:
    """A ``ClosedJaxpr`` of ``eqns`` with ``consts`` the values of ``constvars``.

    Raises
    ------
    brainx.errors.IRValidationError
        ``consts`` and ``constvars`` differ in length, or a variable list holds
        something that is not a jaxpr variable (a ``ValueError`` and a ``TypeError``).
    """
    eqns = list(eqns)
    constvars, invars, outvars = _binders(eqns, invars, outvars, constvars)
    consts = [] if consts is None else list(consts)
    if len(consts) != len(constvars):
        raise IRValidationError(f"eqns_to_closed_jaxpr: {len(consts)} consts for {len(constvars)} "
                                "constvars; give one value per constant variable.")
    jaxpr = _core.Jaxpr(constvars, invars, outvars, eqns,
                        debug_info=make_debug_info("eqns_to_closed_jaxpr"))
    return _core.ClosedJaxpr(jaxpr, consts)
