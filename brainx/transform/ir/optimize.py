"""Jaxpr optimisation passes (brainstate's ``optimize_jaxpr`` and its five passes).

Every pass takes a ``Jaxpr`` or a ``ClosedJaxpr`` and gives back the same kind,
computing the same function: the same input and output variables (the very
objects), the same constants and effects, every effectful equation kept in its
place. The rewriting itself is in :mod:`brainx.transform.ir.passes`.

XLA makes these rewrites again when a function is compiled; the passes are for
reading a jaxpr (``jaxpr_to_python_code``), counting its equations, and for
tools that interpret jaxprs themselves.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence, Tuple, TypeVar, Union

from jax.extend import core as jcore

from brainx.errors import IRValidationError
from brainx.transform.ir import passes as ir_passes

__all__ = [
    "constant_fold", "dead_code_elimination", "common_subexpression_elimination",
    "copy_propagation", "algebraic_simplification", "optimize_jaxpr",
]

J = TypeVar("J", jcore.Jaxpr, jcore.ClosedJaxpr)
_Pass = Callable[[jcore.Jaxpr], Tuple[jcore.Jaxpr, bool]]


def _split(jaxpr: Union[jcore.Jaxpr, jcore.ClosedJaxpr],
           caller: str) -> Tuple[jcore.Jaxpr, Optional[jcore.ClosedJaxpr]]:
    if isinstance(jaxpr, jcore.ClosedJaxpr):
        return jaxpr.jaxpr, jaxpr
    if isinstance(jaxpr, jcore.Jaxpr):
        return jaxpr, None
    raise IRValidationError(f"{caller}: Expected Jaxpr or ClosedJaxpr, got {type(jaxpr).__name__}.")


def _join(new: jcore.Jaxpr, closed: Optional[jcore.ClosedJaxpr], changed: bool):
    if closed is None:
        return new
    return jcore.ClosedJaxpr(new, closed.consts) if changed else closed


def _apply(run: _Pass, jaxpr: J, caller: str) -> J:
    inner, closed = _split(jaxpr, caller)
    new, changed = run(inner)
    return _join(new, closed, changed)


def constant_fold(jaxpr: J) -> J:
    """Evaluate the equations whose inputs are all literals, now; their results become literals.

    Only equations with scalar results of a numeric dtype are folded (a folded
    array would be a constant the size of the array), and only pure ones
    without nested jaxprs (those are folded inside instead). Effects,
    callbacks and random-key operations are never evaluated ahead of time.

    Parameters
    ----------
    jaxpr : Jaxpr or ClosedJaxpr
        The jaxpr to rewrite.

    Returns
    -------
    Jaxpr or ClosedJaxpr
        The same kind as given, with the same input and output variables.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform import constant_fold
    >>> closed = jax.make_jaxpr(lambda x: x * jnp.exp(jnp.float32(2.0)))(jnp.ones(3))
    >>> print(closed)
    { lambda ; a:f32[3]. let b:f32[] = exp 2.0:f32[]; c:f32[3] = mul a b in (c,) }
    >>> print(constant_fold(closed))
    { lambda ; a:f32[3]. let b:f32[3] = mul a 7.389056205749512:f32[] in (b,) }
    """
    return _apply(ir_passes.run_constant_fold, jaxpr, "constant_fold")


def dead_code_elimination(jaxpr: J) -> J:
    """Remove the pure equations none of whose results is used.

    An equation with effects (``jax.debug.print``, ``io_callback``, state
    writes) or a callback is kept even when nothing reads its results. Nested
    jaxprs lose their dead equations too, keeping their inputs and outputs.

    Parameters
    ----------
    jaxpr : Jaxpr or ClosedJaxpr
        The jaxpr to rewrite.

    Returns
    -------
    Jaxpr or ClosedJaxpr
        The same kind as given, with the same input and output variables.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform import dead_code_elimination
    >>> def f(x):
    ...     unused = jnp.sin(x)
    ...     return x + 1.0
    >>> closed = jax.make_jaxpr(f)(1.0)
    >>> [e.primitive.name for e in dead_code_elimination(closed).eqns]
    ['add']
    """
    return _apply(ir_passes.run_dce, jaxpr, "dead_code_elimination")


def common_subexpression_elimination(jaxpr: J) -> J:
    """Compute a repeated pure equation once (same primitive, inputs, parameters and context).

    Later uses read the first result. An output of the jaxpr that was a repeat
    is defined at the end as an identity (``convert_element_type`` to its own
    dtype) of the first result. Effectful equations and callbacks are never
    merged.

    Parameters
    ----------
    jaxpr : Jaxpr or ClosedJaxpr
        The jaxpr to rewrite.

    Returns
    -------
    Jaxpr or ClosedJaxpr
        The same kind as given, with the same input and output variables.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform import common_subexpression_elimination
    >>> closed = jax.make_jaxpr(lambda x: jnp.sin(x) * jnp.sin(x))(1.0)
    >>> [e.primitive.name for e in common_subexpression_elimination(closed).eqns]
    ['sin', 'mul']
    """
    return _apply(ir_passes.run_cse, jaxpr, "common_subexpression_elimination")


def copy_propagation(jaxpr: J) -> J:
    """Read through copies: ``copy``, ``device_put`` with no device, same-type ``convert_element_type``.

    Uses of a copy read its input instead and the copy goes; a copy that
    defines an output of the jaxpr stays.

    Parameters
    ----------
    jaxpr : Jaxpr or ClosedJaxpr
        The jaxpr to rewrite.

    Returns
    -------
    Jaxpr or ClosedJaxpr
        The same kind as given, with the same input and output variables.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform import copy_propagation
    >>> closed = jax.make_jaxpr(lambda x: jnp.array(x, copy=True) + 1.0)(jnp.ones(2))
    >>> [e.primitive.name for e in copy_propagation(closed).eqns]
    ['add']
    """
    return _apply(ir_passes.run_copy_propagation, jaxpr, "copy_propagation")


def algebraic_simplification(jaxpr: J) -> J:
    """Drop arithmetic that gives back its operand, exactly, in every dtype it applies to.

    * ``x * 1``, ``1 * x``, ``x / 1``, ``x - 0``, ``integer_pow(x, 1)``: ``x``
      (``* 1`` and ``/ 1`` not for complex numbers: ``(inf+0j) * (1+0j)`` is
      ``inf+nanj``);
    * ``x + 0``, ``0 + x``: ``x`` for integers and bool, for floats only with
      ``-0.0`` (``-0.0 + 0.0`` is ``+0.0``, so ``x + 0.0`` stays);
    * integers only, scalar results: ``x * 0`` and ``x - x`` are ``0``.

    ``x * 0``, ``x - x`` and ``0 / x`` stay for floats (``inf`` and ``nan``).
    A rewrite applies only when the result has the operand's shape, dtype and
    weak type.

    Parameters
    ----------
    jaxpr : Jaxpr or ClosedJaxpr
        The jaxpr to rewrite.

    Returns
    -------
    Jaxpr or ClosedJaxpr
        The same kind as given, with the same input and output variables.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform import algebraic_simplification
    >>> closed = jax.make_jaxpr(lambda x: jnp.tanh(x * 1.0) / 1.0 + x * 0.0)(jnp.ones(2))
    >>> [e.primitive.name for e in algebraic_simplification(closed).eqns]
    ['tanh', 'mul', 'add']
    """
    return _apply(ir_passes.run_algebraic, jaxpr, "algebraic_simplification")


_PASSES: Dict[str, _Pass] = {
    "constant_fold": ir_passes.run_constant_fold,
    "algebraic_simplification": ir_passes.run_algebraic,
    "copy_propagation": ir_passes.run_copy_propagation,
    "cse": ir_passes.run_cse,
    "dce": ir_passes.run_dce,
}
_ALIASES = {"common_subexpression_elimination": "cse", "dead_code_elimination": "dce"}
_DEFAULT = ("constant_fold", "algebraic_simplification", "copy_propagation", "cse", "dce")


def _pipeline(optimizations: Union[str, Sequence[str], None]) -> Tuple[str, ...]:
    if optimizations is None or optimizations == "all":
        return _DEFAULT
    names = (optimizations,) if isinstance(optimizations, str) else tuple(optimizations)
    names = tuple(_ALIASES.get(n, n) for n in names)
    unknown = [n for n in names if n not in _PASSES]
    if unknown:
        raise IRValidationError(f"optimize_jaxpr: Invalid optimization name(s) {unknown}; the "
                                f"passes are {sorted(_PASSES)} (or 'all').")
    return names


def optimize_jaxpr(
    jaxpr: J,
    max_iterations: int = 3,
    optimizations: Union[str, Sequence[str], None] = None,
    verbose: bool = False,
) -> J:
    """Run optimisation passes over a jaxpr, in order, again until none changes it.

    Parameters
    ----------
    jaxpr : Jaxpr or ClosedJaxpr
        The jaxpr to rewrite; a ``ClosedJaxpr`` keeps its constants.
    max_iterations : int
        At most this many rounds of the whole pipeline (default 3). The rounds
        stop early at a fixed point: a round in which no pass changed anything.
    optimizations : sequence of str, or str, optional
        The passes, in order: ``'constant_fold'``, ``'algebraic_simplification'``,
        ``'copy_propagation'``, ``'cse'`` (or ``'common_subexpression_elimination'``)
        and ``'dce'`` (or ``'dead_code_elimination'``). ``None`` or ``'all'``:
        all five in that order.
    verbose : bool
        Print the equation count after each pass that changed it, and a summary.

    Returns
    -------
    Jaxpr or ClosedJaxpr
        The same kind as given, computing the same function with the same
        input and output variables, constants and effects.

    Raises
    ------
    brainx.errors.IRValidationError
        ``jaxpr`` is neither a ``Jaxpr`` nor a ``ClosedJaxpr``, a pass name is
        unknown, or ``max_iterations`` is not a positive integer (a ``TypeError``
        and a ``ValueError``).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform import optimize_jaxpr
    >>> def f(x):
    ...     a = x + 1.0
    ...     unused = x * 999.0
    ...     return a * 1.0 + (x + 1.0)
    >>> closed = jax.make_jaxpr(f)(jnp.ones(2))
    >>> len(closed.eqns), len(optimize_jaxpr(closed).eqns)
    (5, 2)
    >>> print(optimize_jaxpr(closed))
    { lambda ; a:f32[2]. let
        b:f32[2] = add a 1.0:f32[]
        c:f32[2] = add b b
      in (c,) }
    """
    names = _pipeline(optimizations)
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
        raise IRValidationError(
            f"optimize_jaxpr: max_iterations must be a positive integer, got {max_iterations!r}.")
    inner, closed = _split(jaxpr, "optimize_jaxpr")
    start = len(inner.eqns)
    if verbose:
        print(f"optimize_jaxpr: {start} equations; passes {' -> '.join(names)}; "
              f"at most {max_iterations} round(s)")
    any_change = False
    for round_ in range(1, max_iterations + 1):
        round_change = False
        for name in names:
            before = len(inner.eqns)
            inner, changed = _PASSES[name](inner)
            round_change |= changed
            if verbose and changed:
                print(f"  round {round_}: {name}: {before} -> {len(inner.eqns)} equations")
        any_change |= round_change
        if not round_change:
            if verbose:
                print(f"  fixed point after {round_} round(s)")
            break
    else:
        if verbose:
            print(f"  stopped after max_iterations={max_iterations} round(s)")
    original = _split(jaxpr, "optimize_jaxpr")[0]
    if (tuple(inner.invars) != tuple(original.invars)
            or tuple(inner.constvars) != tuple(original.constvars)
            or any(a is not b for a, b in zip(inner.outvars, original.outvars))):
        raise RuntimeError("optimize_jaxpr changed the jaxpr's interface; this is a bug in brainx.")
    if verbose:
        end = len(inner.eqns)
        share = 100.0 * (start - end) / start if start else 0.0
        print(f"optimize_jaxpr: {start} -> {end} equations ({share:.1f}% fewer)")
    return _join(inner, closed, any_change)
