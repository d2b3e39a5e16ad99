"""A jaxpr as Python source to read: ``jaxpr_to_python_code`` and ``fn_to_python_code`` (brainstate's names).

brainstate turns a jaxpr into runnable Python over ``jax.lax``; libraries use
it to show what a function computes (brainpy prints an integrator's equations
with it). brainx gives the readable part: one line per equation, the
primitive called as ``lax.<name>`` on the variables, its parameters as
keywords (nested jaxprs shown by their size). The text is for reading and
comparing, not for ``exec``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

import jax
import numpy as np
from jax.extend import core as _core

__all__ = ["jaxpr_to_python_code", "fn_to_python_code"]


def fn_to_python_code(fn: Callable, *args: Any, **kwargs: Any) -> str:
    """Python-like source of what ``fn(*args, **kwargs)`` computes, constants folded.

    ``fn`` is traced with :func:`jax.make_jaxpr` (a function of JAX operations;
    for one that reads states, trace it with :func:`brainx.transform.make_jaxpr`
    and give the jaxpr to :func:`jaxpr_to_python_code`), its scalar constant
    computations are folded (:func:`~brainx.transform.constant_fold`), and the
    result is printed by :func:`jaxpr_to_python_code` under ``fn``'s name
    (``generated_function`` for a lambda).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.transform import fn_to_python_code
    >>> def scaled(x):
    ...     return x * (2.0 * 3.0) + jnp.sin(x)
    >>> print(fn_to_python_code(scaled, 1.0))
    def scaled(a):
        b = lax.mul(a, 6.0, out_dtype=None)
        c = lax.sin(a, accuracy=None)
        d = lax.add(b, c)
        return d
    """
    from brainx.transform.core.ir_optimize import constant_fold  # the passes import jax.extend

    jaxpr = constant_fold(jax.make_jaxpr(fn)(*args, **kwargs))
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        name = "generated_function"
    return jaxpr_to_python_code(jaxpr, name)


def jaxpr_to_python_code(jaxpr: Any, fn_name: str = "generated_function") -> str:
    """Python-like source of ``jaxpr`` (a ``Jaxpr`` or ``ClosedJaxpr``), one line per equation.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform import jaxpr_to_python_code
    >>> closed = jax.make_jaxpr(lambda x, y: jnp.sin(x) * y + 1.0)(1.0, 2.0)
    >>> print(jaxpr_to_python_code(closed, "f"))
    def f(a, b):
        c = lax.sin(a, accuracy=None)
        d = lax.mul(c, b, out_dtype=None)
        e = lax.add(d, 1.0)
        return e
    """
    if isinstance(jaxpr, _core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    names: Dict[Any, str] = {}

    def name(v: Any) -> str:
        if isinstance(v, _core.Literal):
            value = np.asarray(v.val)
            return repr(value.item()) if value.ndim == 0 else f"np.array({value.tolist()!r})"
        if v not in names:
            names[v] = _letters(len(names))
        return names[v]

    lines = [f"def {fn_name}({', '.join(name(v) for v in [*jaxpr.constvars, *jaxpr.invars])}):"]
    for eqn in jaxpr.eqns:
        operands = [name(x) for x in eqn.invars]
        operands += [f"{k}={_param(v)}" for k, v in sorted(eqn.params.items())]
        outs = ", ".join(name(v) for v in eqn.outvars) or "_"
        lines.append(f"    {outs} = lax.{eqn.primitive.name}({', '.join(operands)})")
    lines.append(f"    return {', '.join(name(v) for v in jaxpr.outvars)}")
    return "\n".join(lines)


def _letters(i: int) -> str:
    """a, b, ..., z, ba, bb, ... (jax's own jaxpr printer names variables the same way)."""
    out = ""
    while True:
        out = chr(ord("a") + i % 26) + out
        i //= 26
        if i == 0:
            return out


def _param(value: Any) -> str:
    if isinstance(value, (_core.ClosedJaxpr, _core.Jaxpr)):
        inner = value.jaxpr if isinstance(value, _core.ClosedJaxpr) else value
        return f"<jaxpr of {len(inner.eqns)} equations>"
    if isinstance(value, (tuple, list)) and any(
            isinstance(v, (_core.ClosedJaxpr, _core.Jaxpr)) for v in value):
        return "(" + ", ".join(_param(v) for v in value) + ")"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
