r"""Reading the affine form ``f(x) = a * x + b`` of a right-hand side off its jaxpr.

Most right-hand sides a neuron or synapse integrates are affine in the state:
a leaky membrane ``(V_rest - V + R I) / tau``, a conductance-based input
``g (E - V)``, a decaying synapse ``-g / tau``. For those one step of
exponential Euler has a closed form (see :mod:`brainx.nn.dynamics.exp_euler`)
that needs ``a`` and ``b``, not the derivative machinery of the general
scheme.

:func:`affine_form` traces ``f`` once to a jaxpr and walks it, carrying every
value either as *known* (it does not depend on ``x``) or as a pair
``(a, b)`` meaning ``a * x + b``. Known equations are bound as they are (into
the enclosing trace); the pairs go through the rules below, which are the
whole of the analysis. A pair also carries a known scale, ``scale * (a * x + b)``
(a Python number), so that ``E - V`` and ``-(g + 1)`` cost no negation and
``(E - V) / tau`` no division: the caller folds the scale into its constants
(``exp(a * scale * dt)`` multiplies by one number, and ``x_inf = -b / a`` needs
no scale at all), as a hand-written step computes it. The part of ``b`` known
when the step is traced is kept apart too and summed there: ``V_rest`` plus a
constant drive is one constant of the step, not two additions.

=========================================  ====================================
equation                                   result
=========================================  ====================================
``add``, ``sub`` of pairs and known values  the pairs added / subtracted
``mul`` by a known value                   the scale multiplied (a uniform
                                           value), else both parts
``div`` by a known value                   the scale divided (a uniform
                                           value), else both parts
``neg``                                    the scale negated
float ``convert_element_type``             applied to both parts
``broadcast_in_dim``, ``reshape``,         applied to both parts (each element
``squeeze``                                still depends on one element of x)
``select_n`` with a known predicate        selected part by part
a nested ``jit`` / ``closed_call``         walked the same way
anything else touching ``x``               not affine: ``None``
=========================================  ====================================

``a`` is therefore ``df/dx`` along the tangent of ones, as the general scheme's
``jax.jvp`` gives it, and ``b`` is what remains. Equations whose inputs are all
concrete (parameters, literals) are evaluated at trace time, so a coefficient
that depends only on parameters (``-1 / tau``) is a concrete array: the caller
can test it for zeros and fold ``exp(a dt)`` into a constant.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, List, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jex_core

__all__ = ["AffineForm", "affine_form", "is_concrete"]


class AffineForm(NamedTuple):
    """``f(x) = scale * (coef * x + offset)``.

    ``offset`` ``None``: zero; ``coef`` ``None``: ``f`` does not depend on ``x``;
    ``scale`` is a nonzero Python number known when the step is traced.
    """

    coef: Any
    offset: Any
    scale: float = 1.0


class _NotAffine(Exception):
    """Raised inside the walk when an equation is not affine in ``x``."""


class _Pair:
    """A value ``scale * (coef * x + offset + known)`` inside the walk (``None`` parts: zero).

    ``known`` is the part of the offset known when the step is traced, kept apart
    so that the constants a right-hand side adds one by one (``V_rest``, a constant
    drive) are summed at trace time: the step adds one number, not each of them.
    """

    __slots__ = ("coef", "offset", "scale", "known")

    def __init__(self, coef, offset, scale: float = 1.0, known=None):
        if known is not None and not is_concrete(known):  # times a traced value: no longer known
            offset, known = _plus(offset, known, False), None
        self.coef, self.offset, self.scale, self.known = coef, offset, scale, known

    def parts(self) -> tuple:
        return self.coef, self.offset, self.known

    def with_offset(self) -> "_Pair":
        """The same value with ``known`` added into ``offset`` (one addition in the step)."""
        if self.known is None:
            return self
        return _Pair(self.coef, _plus(self.offset, self.known, False), self.scale)


def is_concrete(*values) -> bool:
    """Whether no value is a tracer (Python numbers, NumPy arrays, concrete ``jax.Array``)."""
    return not any(isinstance(v, jax.core.Tracer) for v in values)


def _now(*values):
    """Evaluate at trace time when every value is concrete (parameters, literals)."""
    if is_concrete(*values):
        return jax.ensure_compile_time_eval()
    return contextlib.nullcontext()


def _op(fn: Callable, *values):
    with _now(*values):
        return fn(*values)


def affine_form(fn: Callable[[Any], Any], x: Any) -> tuple:
    """Trace ``fn`` at ``x`` once; return ``(form, jaxpr)``.

    Arguments
    ---------
    fn : callable
        ``x -> f(x)``, arrays in and out (it is traced once, with ``jax.make_jaxpr``).
    x : array
        The state (its shape and dtype are traced).

    Returns
    -------
    ``(AffineForm or None, ClosedJaxpr)``: the form when ``f`` is affine in ``x``
    element by element, else ``None``; the jaxpr, for the general method (``fn``
    itself must not be called again: calling it may consume one-shot inputs).

    Example
    -------
    >>> import jax.numpy as jnp
    >>> from brainx.nn.dynamics.affine import affine_form
    >>> form, _ = affine_form(lambda v: (3.0 - v) / 2.0, jnp.zeros(2))
    >>> float(form.scale * form.coef), float(form.scale * form.offset)  # f = -0.5 v + 1.5
    (-0.5, 1.5)
    >>> affine_form(lambda v: v * v, jnp.zeros(2))[0] is None
    True
    """
    closed = jax.make_jaxpr(fn)(x)
    try:
        with jax.named_scope("affine_form"):
            (out,) = _walk(closed.jaxpr, closed.consts, [_Pair(1.0, None)])
    except _NotAffine:
        return None, closed
    if isinstance(out, _Pair):
        out = out.with_offset()
        return AffineForm(out.coef, out.offset, out.scale), closed
    return AffineForm(None, out), closed


def _walk(jaxpr, consts, args) -> List[Any]:
    env = {}

    def read(v):
        return v.val if isinstance(v, jex_core.Literal) else env[v]

    for var, value in zip(jaxpr.constvars, consts):
        env[var] = value
    for var, value in zip(jaxpr.invars, args):
        env[var] = value
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        if any(isinstance(v, _Pair) for v in invals):
            rule = _RULES.get(eqn.primitive.name)
            if rule is None:
                raise _NotAffine(eqn.primitive.name)
            outs = rule(eqn, *invals)
        else:
            outs = _bind(eqn, invals)
        for var, value in zip(eqn.outvars, outs):
            env[var] = value
    return [read(v) for v in jaxpr.outvars]


def _bind(eqn, invals) -> list:
    params = eqn.primitive.get_bind_params(eqn.params)
    subfuns = ()
    if isinstance(params, tuple):       # JAX before 0.7: (subfuns, params)
        subfuns, params = params
    context = _now(*invals) if not eqn.effects else contextlib.nullcontext()
    with context, eqn.ctx.manager:
        out = eqn.primitive.bind(*subfuns, *invals, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


# -- the rules: one per primitive that keeps a value affine in x ---------------------------------
def _as_pair(v) -> _Pair:
    if isinstance(v, _Pair):
        return v
    return _Pair(None, None, known=v) if is_concrete(v) else _Pair(None, v)


def _constant(value) -> Optional[float]:
    """The scalar a concrete value holds in every element (``None``: traced or not uniform)."""
    if value is None or not is_concrete(value) or jnp.size(value) == 0:
        return None
    flat = np.ravel(np.asarray(value))
    return float(flat[0]) if (flat == flat[0]).all() else None


def _plus(p, q, subtract: bool) -> Optional[Any]:
    """``p + q`` or ``p - q`` where either may be ``None`` (zero)."""
    if q is None or _constant(q) == 0.0:
        return p
    if p is None or _constant(p) == 0.0:
        return _op(jnp.negative, q) if subtract else q
    return _op(jnp.subtract if subtract else jnp.add, p, q)


def _add_rule(subtract: bool):
    """``a + b`` (``a - b``) as ``s (L + r O)``: ``L`` the pair that depends on ``x`` (its
    scale ``s`` is kept, so its coefficient is never rescaled), ``O`` the other, ``r`` the
    ratio of their scales (``+-1`` costs an addition or a subtraction, nothing more)."""
    def rule(eqn, a, b):
        a, b = _as_pair(a), _as_pair(b)
        scale_a, scale_b = a.scale, (-b.scale if subtract else b.scale)   # scales in the result
        if a.coef is None and b.coef is not None:
            lead, other, scale, ratio = b, a, scale_b, scale_a / scale_b
        else:
            lead, other, scale, ratio = a, b, scale_a, scale_b / scale_a
        minus = ratio < 0
        if abs(ratio) != 1.0:
            other = _Pair(*_scaled(other, abs(ratio)))
        coef, offset, known = (_plus(p, q, minus) for p, q in zip(lead.parts(), other.parts()))
        return [_Pair(coef, offset, scale, known)]
    return rule


def _times(p, k, fn):
    """``fn(p, k)`` (multiply or divide) for a part ``p`` of a pair and a known ``k``.

    Products by a constant 1 or 0 are folded: ``g (E - V)`` with ``E = 0``
    contributes no offset, ``R I`` with ``R = 1`` no multiplication.
    """
    if p is None:
        return None
    k_value, p_value = _constant(k), _constant(p)
    if k_value == 1.0:
        return p
    if fn is jnp.multiply and (k_value == 0.0 or p_value == 0.0):
        return None
    if fn is jnp.multiply and p_value == 1.0 and jnp.ndim(p) == 0:
        return k
    return _op(fn, p, k)


def _scale_rule(fn):
    """``mul`` / ``div`` by a known value: a uniform one goes into the scale, others into the parts."""
    def rule(eqn, a, b):
        if isinstance(b, _Pair) and (fn is jnp.divide or isinstance(a, _Pair)):
            raise _NotAffine(f"{eqn.primitive.name} of two values that depend on x")
        pair, k = (a, b) if isinstance(a, _Pair) else (b, a)
        k_value = _constant(k)
        if k_value is not None and k_value != 0.0 and np.isfinite(k_value):
            scale = pair.scale * k_value if fn is jnp.multiply else pair.scale / k_value
            if scale != 0.0 and np.isfinite(scale):
                return [_Pair(pair.coef, pair.offset, scale, pair.known)]
        coef, offset, known = (_times(p, k, fn) for p in pair.parts())
        return [_Pair(coef, offset, pair.scale, known)]
    return rule


def _neg_rule(eqn, a):
    return [_Pair(a.coef, a.offset, -a.scale, a.known)]


def _map_both(fn: Callable):
    """A rule applying ``fn(part, eqn)`` to the coefficient and the offset."""
    def rule(eqn, a):
        coef, offset, known = (None if p is None else fn(p, eqn) for p in a.parts())
        return [_Pair(coef, offset, a.scale, known)]
    return rule


def _convert(part, eqn):
    dtype = eqn.params["new_dtype"]
    if not jnp.issubdtype(dtype, jnp.floating):
        raise _NotAffine("conversion to a non-float dtype")
    return _op(lambda p: jnp.asarray(p, dtype), part)


def _structural(apply: Callable):
    """Shape operations: a scalar part broadcasts anyway; others take the operand's shape first."""
    def fn(part, eqn):
        if jnp.ndim(part) == 0:
            return part
        shape = eqn.invars[0].aval.shape
        return _op(lambda p: apply(jnp.broadcast_to(p, shape), eqn), part)
    return fn


def _broadcast(p, eqn):
    return lax.broadcast_in_dim(p, eqn.params["shape"], eqn.params["broadcast_dimensions"])


def _reshape(p, eqn):
    return jnp.reshape(p, eqn.params["new_sizes"])


def _squeeze(p, eqn):
    return lax.squeeze(p, eqn.params["dimensions"])


def _select_rule(eqn, pred, *cases):
    if isinstance(pred, _Pair):
        raise _NotAffine("select on a predicate that depends on x")
    shape, dtype = eqn.outvars[0].aval.shape, eqn.outvars[0].aval.dtype
    pairs = [_unscaled(_as_pair(c).with_offset()) for c in cases]

    def pick(parts):
        if all(p is None for p in parts):
            return None
        full = [jnp.zeros(shape, dtype) if p is None else
                jnp.broadcast_to(jnp.asarray(p, dtype), shape) for p in parts]
        return lax.select_n(pred, *full)
    return [_Pair(_op(lambda *ps: pick(ps), *[p.coef for p in pairs]),
                  _op(lambda *ps: pick(ps), *[p.offset for p in pairs]))]


def _unscaled(pair: _Pair) -> _Pair:
    """The same value with scale 1 (the parts multiplied by the scale)."""
    if pair.scale == 1.0:
        return pair
    return _Pair(*_scaled(pair, pair.scale))


def _scaled(pair: _Pair, k: float) -> tuple:
    """``(coef, offset, 1.0, known)`` of ``k`` times ``pair``'s parts (its scale left aside)."""
    coef, offset, known = (_times(p, k, jnp.multiply) for p in pair.parts())
    return coef, offset, 1.0, known


def _call_rule(key: str):
    def rule(eqn, *args):
        closed = eqn.params[key]
        jaxpr, consts = (closed.jaxpr, closed.consts) if hasattr(closed, "consts") else (closed, ())
        return _walk(jaxpr, consts, args)
    return rule


def _identity(eqn, a):
    return [a]


_RULES = {
    "add": _add_rule(False),
    "add_any": _add_rule(False),
    "sub": _add_rule(True),
    "mul": _scale_rule(jnp.multiply),
    "div": _scale_rule(jnp.divide),
    "neg": _neg_rule,
    "convert_element_type": _map_both(_convert),
    "broadcast_in_dim": _map_both(_structural(_broadcast)),
    "reshape": _map_both(_structural(_reshape)),
    "squeeze": _map_both(_structural(_squeeze)),
    "select_n": _select_rule,
    "copy": _identity,
    "copy_p": _identity,
    "jit": _call_rule("jaxpr"),
    "pjit": _call_rule("jaxpr"),
    "closed_call": _call_rule("call_jaxpr"),
}
