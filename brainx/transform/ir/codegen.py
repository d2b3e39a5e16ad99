"""A jaxpr as Python source that runs: ``jaxpr_to_python_code`` and ``fn_to_python_code``.

brainstate's names; libraries use them to show what a function computes
(brainpy prints an integrator's equations with them). Each equation becomes
one statement over ``jax``: arithmetic and comparisons as Python operators,
other primitives as calls of their ``jax.lax`` / ``jax.numpy`` functions, and
a primitive holding inner jaxprs as a nested ``def`` passed to its
transform (``jax.jit``, ``jax.lax.scan``, ``jax.lax.while_loop``,
``jax.lax.switch``, ``jax.checkpoint``). The source needs only ``import jax``
to run, and computes what the jaxpr does:

=====================  =======================================================
equation               generated statement
=====================  =======================================================
``add``/``mul``/``lt``  ``c = a + b``, ``c = a * b``, ``c = a < b``
``sin``, ``cumsum``     ``c = jax.lax.sin(a)``, ``c = jax.lax.cumsum(a, axis=0)``
``reduce_sum``          ``c = jax.numpy.sum(a, axis=(0,))``
``jit``                 a nested ``def``, then ``c = jax.jit(jitted_1)(a)``
``scan``                a nested ``def fn_1(carry_, x_)``, then ``jax.lax.scan``
``while``               nested ``cond_1``/``body_1``, then ``jax.lax.while_loop``
``cond``                one nested ``def`` per branch, then ``jax.lax.switch``
custom JVP/VJP calls    the primal function, nested (the custom rule is dropped)
=====================  =======================================================

A primitive with none of these forms raises :class:`UnsupportedPrimitiveError`
naming it; :func:`register_prim_handler` adds one. Constants an inner jaxpr
closes over are the enclosing function's variables (the nested ``def`` reads
them), so the code is as long as the jaxpr.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Sequence

import jax
from jax.extend import core as _core

from brainx.errors import IRError
from brainx.transform.ir.codegen_rules import RULES, generic_rule, value_code
from brainx.transform.ir.optimize import constant_fold

__all__ = ["jaxpr_to_python_code", "fn_to_python_code", "register_prim_handler",
           "UnsupportedPrimitiveError", "CodeWriter"]


class UnsupportedPrimitiveError(IRError, NotImplementedError):
    """A jaxpr equation whose primitive has no code-generation handler.

    An :class:`~brainx.errors.IRError` (as brainstate's class of this name) and a
    ``NotImplementedError``.
    """


#: ``{primitive name: handler(writer, eqn, operands) -> expression}``
_HANDLERS: Dict[str, Callable] = {}


def register_prim_handler(prim_name: str, handler: Callable) -> None:
    """Generate code for the primitive ``prim_name`` with ``handler``.

    ``handler(writer, eqn, operands)`` gets the :class:`CodeWriter`, the jaxpr
    equation and its operands as source text, and returns the expression whose
    value is the equation's output (a tuple of them for several outputs).
    ``writer.function(jaxpr, ...)`` writes a nested ``def`` first and returns its
    name. A handler of a primitive with several results may return
    ``(expression, sizes)``, the value being nested in groups of those sizes, or
    ``(expression, None)`` when its value is the one result itself. A handler
    given for a name that has one replaces it, with a warning (``Overwriting``).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform import register_prim_handler, fn_to_python_code
    >>> register_prim_handler("cumlogsumexp",
    ...     lambda w, eqn, ops: f"jax.lax.cumlogsumexp({ops[0]}, axis={eqn.params['axis']})")
    ... # doctest: +SKIP
    >>> print(fn_to_python_code(lambda x: jax.lax.cumlogsumexp(x), jnp.ones(3)))  # doctest: +SKIP
    def generated_function(a):
        b = jax.lax.cumlogsumexp(a, axis=0)
        return b
    """
    if prim_name in _HANDLERS or prim_name in RULES:
        warnings.warn(f"register_prim_handler: Overwriting the handler of the primitive "
                      f"{prim_name!r}", stacklevel=2)
    _HANDLERS[prim_name] = handler


class CodeWriter:
    """Writes the statements of one generated function and the ``def``s nested in it.

    Variables are named ``a, b, ..., z, ba, ...`` in the order they appear, one
    name space for the whole source (a nested ``def`` reads its enclosing
    function's variables by their names).
    """

    def __init__(self) -> None:
        self.lines: List[str] = []
        self._names: Dict[Any, str] = {}
        self._indent = 0
        self._functions = 0

    def name(self, var: Any) -> str:
        """The source name of a jaxpr variable (``_`` for a dropped output)."""
        if isinstance(var, _core.DropVar) or type(var).__name__ == "DropVar":
            return "_"
        if var not in self._names:
            self._names[var] = _letters(len(self._names))
        return self._names[var]

    def atom(self, atom: Any) -> str:
        """A variable's name, or a literal's value as source."""
        if isinstance(atom, _core.Literal):
            return value_code(atom.val, weak=getattr(atom.aval, "weak_type", False))
        return self.name(atom)

    def emit(self, line: str) -> None:
        self.lines.append("    " * self._indent + line if line else "")

    def function(self, jaxpr: Any, prefix: str, groups: Sequence[tuple] | None = None,
                 bound: Dict[Any, str] | None = None,
                 returns: Callable[[List[str]], str] | None = None) -> str:
        """Write ``def <prefix>_<n>(...):`` for ``jaxpr`` here; return its name.

        ``bound`` gives invars an expression of the enclosing function (the
        constants it closes over); the other invars are the parameters, or, with
        ``groups`` (``[(parameter, invars), ...]``), each parameter is a tuple
        unpacked into its invars. ``returns`` formats the outputs (default: the
        one output, or a tuple of them).
        """
        closed_consts = getattr(jaxpr, "consts", ())
        inner = jaxpr.jaxpr if isinstance(jaxpr, _core.ClosedJaxpr) else jaxpr
        self._functions += 1
        fn = f"{prefix}_{self._functions}"
        for var, expr in (bound or {}).items():
            self._names[var] = expr
        if groups is None:
            params = [self.name(v) for v in inner.invars if v not in (bound or {})]
        else:
            params = [param for param, _ in groups]
        self.emit("")
        self.emit(f"def {fn}({', '.join(params)}):")
        self._indent += 1
        for param, group in groups or ():
            if group:
                self.emit(f"{_group([self.name(v) for v in group])} = {param}")
        self._body(inner, closed_consts)
        outs = [self.atom(v) for v in inner.outvars]
        self.emit(f"return {(returns or _result)(outs)}")
        self._indent -= 1
        return fn

    def _body(self, jaxpr: Any, consts: Sequence[Any] = ()) -> None:
        for var, value in zip(jaxpr.constvars, consts):
            self.emit(f"{self.name(var)} = {value_code(value)}")
        for eqn in jaxpr.eqns:
            self.equation(eqn)

    def equation(self, eqn: Any) -> None:
        """Write the statement of one equation."""
        name = eqn.primitive.name
        handler = _HANDLERS.get(name) or RULES.get(name) or generic_rule(eqn)
        if handler is None:
            raise UnsupportedPrimitiveError(
                f"fn_to_python_code: no code for the primitive {eqn.primitive.name!r} (params "
                f"{sorted(eqn.params)}). Give it one with brainx.transform.register_prim_handler("
                f"{eqn.primitive.name!r}, handler).")
        expr = handler(self, eqn, [self.atom(v) for v in eqn.invars])
        outs = [self.name(v) for v in eqn.outvars]
        if isinstance(expr, tuple) and expr[1] is None:  # (expression, None): the one output
            self.emit(f"{outs[0]} = {expr[0]}")
        elif isinstance(expr, tuple):  # (expression, sizes): its value is nested, one group a size
            expr, sizes = expr
            groups, start = [], 0
            for size in sizes:
                groups.append(_group(outs[start:start + size]))
                start += size
            self.emit(f"{', '.join(groups)} = {expr}")
        elif not outs:
            self.emit(expr)
        elif len(outs) == 1 and not eqn.primitive.multiple_results:
            self.emit(f"{outs[0]} = {expr}")
        else:
            self.emit(f"{_target(outs)} = {expr}")

    def top(self, jaxpr: Any, fn_name: str, pytree_args: bool = False) -> str:
        """The source of ``def fn_name``: its parameters are the jaxpr's inputs, or, with
        ``pytree_args``, ``(*args, **kwargs)`` whose leaves are the inputs.

        Inputs at the end that nothing reads are optional parameters (``=None``).
        """
        consts = getattr(jaxpr, "consts", ())
        inner = jaxpr.jaxpr if isinstance(jaxpr, _core.ClosedJaxpr) else jaxpr
        params = [self.name(v) for v in inner.invars]
        if pytree_args:
            self.emit(f"def {fn_name}(*args, **kwargs):")
            self.emit(f"    {_group(params)} = jax.tree_util.tree_leaves((args, kwargs))")
        else:
            unread = _unread_tail(inner)
            if unread:
                params[-unread:] = [f"{p}=None" for p in params[-unread:]]
            self.emit(f"def {fn_name}({', '.join(params)}):")
        self._indent += 1
        self._body(inner, consts)
        self.emit(f"return {_result([self.atom(v) for v in inner.outvars])}")
        return "\n".join(self.lines)


def _unread_tail(jaxpr: Any) -> int:
    """How many of the last inputs of ``jaxpr`` no equation and no output reads."""
    read = {id(v) for e in jaxpr.eqns for v in e.invars if not isinstance(v, _core.Literal)}
    read.update(id(v) for v in jaxpr.outvars if not isinstance(v, _core.Literal))
    count = 0
    for v in reversed(jaxpr.invars):
        if id(v) in read:
            break
        count += 1
    return count


def _result(outs: List[str]) -> str:
    return outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ("," if not outs else "") + ")"


def _target(names: List[str]) -> str:
    """An assignment target for a sequence of values: ``a, b`` or ``(a,)`` or ``[]``."""
    if not names:
        return "[]"
    return "(" + names[0] + ",)" if len(names) == 1 else ", ".join(names)


def _group(names: List[str]) -> str:
    """A nested assignment target: ``(a, b)``, ``(a,)``, ``[]``."""
    return "[]" if not names else "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"


def _letters(i: int) -> str:
    """a, b, ..., z, ba, bb, ... (jax's own jaxpr printer names variables the same way)."""
    out = ""
    while True:
        out = chr(ord("a") + i % 26) + out
        i //= 26
        if i == 0:
            break
    return out + "_" if out in _KEYWORDS else out


_KEYWORDS = frozenset({"as", "if", "in", "is", "or", "and", "def", "del", "for", "not", "try",
                       "jax"})


def fn_to_python_code(fn: Callable, *args: Any, **kwargs: Any) -> str:
    """Python source of what ``fn(*args, **kwargs)`` computes, constants folded; it runs.

    ``fn`` is traced with :func:`jax.make_jaxpr` (a function of JAX operations;
    for one that reads states, trace it with :func:`brainx.transform.make_jaxpr`
    and give the jaxpr to :func:`jaxpr_to_python_code`), its scalar constant
    computations are folded (:func:`~brainx.transform.constant_fold`), and the
    result is written by :func:`jaxpr_to_python_code` under ``fn``'s name
    (``generated_function`` for a lambda). The generated function takes what
    ``fn`` takes: given pytree arguments (a dict, keywords), it reads their
    leaves; it returns the leaves of ``fn``'s result, a tuple for several.
    Arguments at the end that the result does not depend on (after folding) are
    optional, ``=None``: brainstate's generated function drops them, so it is
    called without them, and brainx's is called either way.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform import fn_to_python_code
    >>> def scaled(x):
    ...     return x * (2.0 * 3.0) + jnp.sin(x)
    >>> print(fn_to_python_code(scaled, 1.0))
    def scaled(a):
        b = a * 6.0
        c = jax.lax.sin(a)
        d = b + c
        return d
    >>> namespace = {"jax": jax}
    >>> exec(fn_to_python_code(scaled, 1.0), namespace)
    >>> bool(jnp.allclose(namespace["scaled"](0.5), scaled(0.5)))
    True
    >>> print(fn_to_python_code(lambda x, unused: x + 1.0, 1.0, 2.0))
    def generated_function(a, b=None):
        c = a + 1.0
        return c
    """
    jaxpr = constant_fold(jax.make_jaxpr(fn)(*args, **kwargs))
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        name = "generated_function"
    leaves = jax.tree.leaves(args)
    pytree_args = bool(kwargs) or len(leaves) != len(args) or any(
        a is not leaf for a, leaf in zip(args, leaves))
    return CodeWriter().top(jaxpr, name, pytree_args)


def jaxpr_to_python_code(jaxpr: Any, fn_name: str = "generated_function") -> str:
    """Python source of ``jaxpr`` (a ``Jaxpr`` or ``ClosedJaxpr``) as a function ``fn_name``.

    Inner jaxprs (of ``jit``, ``scan``, ``while``, ``cond``) are nested
    ``def``s; the source runs with ``jax`` in its namespace.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform import jaxpr_to_python_code
    >>> closed = jax.make_jaxpr(
    ...     lambda c, xs: jax.lax.scan(lambda c, x: (c * x, c + x), c, xs))(
    ...     jnp.float32(1.0), jnp.ones(3))
    >>> print(jaxpr_to_python_code(closed, "f"))
    def f(a, b):
    <BLANKLINE>
        def fn_1(carry_, x_):
            (c,) = carry_
            (d,) = x_
            e = c * d
            f = c + d
            return (e,), (f,)
        (g,), (h,) = jax.lax.scan(fn_1, (a,), (b,), length=3, reverse=False, unroll=1)
        return (g, h)
    """
    return CodeWriter().top(jaxpr, fn_name)
