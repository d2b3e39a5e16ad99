"""Whether two jaxprs compute the same thing: what lets ``jit`` keep a compiled function.

After something that might change a function's trace (a module's State
attribute rebound, a hook registered anywhere), ``jit`` traces the function
again. Often the new trace is the old one (the hook was on another state, the
rebinding elsewhere): then the function compiled for the old trace is kept,
and nothing is compiled again.

The comparison is structural and errs on the side of "different": the same
primitives in the same order, on the same variables (matched by position),
literals and constants equal by type and value, equal parameters, and equal
equation contexts (``eqn.ctx``: the random-bits mode of
``jax.threefry_partitionable``, the compute type, the mesh an equation was
traced under).
Parameters are compared by value only for plain data (numbers, strings,
dtypes, shapes, tuples, nested jaxprs); a Python function among them (a
``custom_jvp`` rule, a callback) must be the very same object.
"""

from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy as np
from brainx._jax.internals import linear_util as _lu
from jax.extend import core as _core

from brainx.util.equality import same_value

__all__ = ["jaxprs_equal"]

_PLAIN = (bool, int, float, complex, str, bytes, type(None), np.dtype)


def jaxprs_equal(a: Any, a_consts: Sequence[Any], b: Any, b_consts: Sequence[Any], *,
                 functions_by_name: bool = False) -> bool:
    """Whether jaxpr ``a`` with ``a_consts`` computes what ``b`` with ``b_consts`` does.

    ``functions_by_name``: a function among the parameters (a ``custom_jvp``
    rule, which JAX wraps anew on every trace) is taken as equal to one of
    the same name, instead of only to itself. That is a weaker test, for
    checking a cache against a fresh trace (:mod:`.cache_check`), never for
    deciding to reuse one.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> f = lambda x: jnp.sin(x) * 2.0
    >>> one, two = jax.make_jaxpr(f)(1.0), jax.make_jaxpr(f)(1.0)
    >>> jaxprs_equal(one.jaxpr, one.consts, two.jaxpr, two.consts)
    True
    >>> three = jax.make_jaxpr(lambda x: jnp.sin(x) * 3.0)(1.0)
    >>> jaxprs_equal(one.jaxpr, one.consts, three.jaxpr, three.consts)
    False
    """
    if a is b and len(a_consts) == len(b_consts) and all(
            x is y for x, y in zip(a_consts, b_consts)):
        return True
    try:
        return _Matcher(functions_by_name).jaxpr(a, a_consts, b, b_consts)
    except Exception:  # anything unexpected: not provably equal
        return False


class _Matcher:
    def __init__(self, functions_by_name: bool = False):
        self.functions_by_name = functions_by_name
        self.vars: Dict[Any, Any] = {}  # a's variables -> b's

    def jaxpr(self, a: Any, a_consts: Sequence[Any], b: Any, b_consts: Sequence[Any]) -> bool:
        if (len(a.constvars) != len(b.constvars) or len(a.invars) != len(b.invars)
                or len(a.eqns) != len(b.eqns) or len(a.outvars) != len(b.outvars)
                or a.effects != b.effects):
            return False
        if not all(same_value(x, y) for x, y in zip(a_consts, b_consts)):
            return False
        if not self.bind(list(a.constvars) + list(a.invars), list(b.constvars) + list(b.invars)):
            return False
        for ea, eb in zip(a.eqns, b.eqns):
            if (ea.primitive is not eb.primitive or ea.effects != eb.effects
                    or getattr(ea, "ctx", None) != getattr(eb, "ctx", None)
                    or not self.atoms(ea.invars, eb.invars)
                    or not self.params(ea.params, eb.params)
                    or not self.bind(ea.outvars, eb.outvars)):
                return False
        return self.atoms(a.outvars, b.outvars)

    def bind(self, xs: Sequence[Any], ys: Sequence[Any]) -> bool:
        if len(xs) != len(ys):
            return False
        for x, y in zip(xs, ys):
            if x.aval != y.aval:
                return False
            self.vars[x] = y
        return True

    def atoms(self, xs: Sequence[Any], ys: Sequence[Any]) -> bool:
        if len(xs) != len(ys):
            return False
        for x, y in zip(xs, ys):
            if isinstance(x, _core.Literal) or isinstance(y, _core.Literal):
                if not (type(x) is type(y) and x.aval == y.aval and same_value(x.val, y.val)):
                    return False
            elif self.vars.get(x) is not y:
                return False
        return True

    def params(self, a: Dict[str, Any], b: Dict[str, Any]) -> bool:
        return a.keys() == b.keys() and all(self.param(a[k], b[k]) for k in a)

    def param(self, x: Any, y: Any) -> bool:
        if x is y:
            return True
        if type(x) is not type(y):
            return False
        if isinstance(x, _core.ClosedJaxpr):
            return _Matcher(self.functions_by_name).jaxpr(x.jaxpr, x.consts, y.jaxpr, y.consts)
        if isinstance(x, _core.Jaxpr):
            return _Matcher(self.functions_by_name).jaxpr(x, (), y, ())
        if isinstance(x, (tuple, list)):
            return len(x) == len(y) and all(self.param(p, q) for p, q in zip(x, y))
        if isinstance(x, dict):
            return self.params(x, y)
        if isinstance(x, _PLAIN) or isinstance(x, (np.ndarray, np.generic)):
            return same_value(x, y)
        if self.functions_by_name and (callable(x) or isinstance(x, _lu.WrappedFun)):
            return _function_name(x) == _function_name(y)
        if callable(x):
            return False  # a function (a custom rule, a callback): only the same object
        try:  # an aval, a sharding, a NamedTuple of options: by their own equality
            return bool(x == y)
        except Exception:
            return False


def _function_name(f: Any) -> tuple:
    f = getattr(f, "f", f)  # a WrappedFun: the function it wraps
    f = getattr(f, "func", f)  # a functools.partial
    return (type(f).__qualname__, getattr(f, "__module__", None), getattr(f, "__qualname__", None))
