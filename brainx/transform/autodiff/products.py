"""`vjp` and `jvp`: vector-Jacobian and Jacobian-vector products of stateful functions."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import jax

from brainx.state.state import State
from brainx.transform.autodiff.gradients import StateDifferentiation, _is_state
from brainx.transform.core.value_types import describe_type
from brainx.transform.core.stateful import (
    StaticLeaves, is_array_leaf, peek_state_values, write_state_values,
)

__all__ = ["vjp", "jvp"]


def vjp(fun: Callable, *primals, grad_states=None,
        argnums: Optional[int | Sequence[int]] = 0, has_aux: bool = False):
    """Evaluate a stateful function and return its pullback (reverse mode).

    Parameters
    ----------
    fun : callable
        May read and write states; returns ``(out, aux)`` if ``has_aux``.
    *primals
        The positional arguments to evaluate ``fun`` at.
    grad_states : State, sequence or dict of States, optional
        States to compute cotangents for (each must be read by ``fun``).
    argnums : int, sequence of int or None
        Arguments to compute cotangents for (default ``0``); ``None``, or
        no ``primals``, for states only.
    has_aux : bool
        ``fun`` returns ``(out, aux)``.

    Returns
    -------
    ``(out, vjp_fn)`` or ``(out, vjp_fn, aux)``. ``vjp_fn(cotangent)`` returns
    the argument cotangents, the state cotangents (in the structure of
    ``grad_states``), or ``(state_cotangents, arg_cotangents)`` when both are
    asked for. States written by ``fun`` hold their new values when ``vjp``
    returns; ``vjp_fn`` never touches a state.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array([2.0, 3.0]))
    >>> out, vjp_fn = brainx.transform.vjp(lambda x: w.value * x, jnp.ones(2), grad_states=w)
    >>> w_ct, x_ct = vjp_fn(jnp.array([1.0, 10.0]))
    >>> w_ct.tolist(), x_ct.tolist()
    ([1.0, 10.0], [2.0, 30.0])
    """
    if argnums is None or not primals:
        argnums = None
    if argnums is None and grad_states is None:
        raise ValueError("vjp has nothing to differentiate: pass positional primals (selected "
                         "by argnums) and/or grad_states.")
    diff = StateDifferentiation(fun, grad_states=grad_states, argnums=argnums, has_aux=has_aux,
                                name="vjp")

    def run(sig, key, args, kwargs):
        sig, f, diff_primals = diff.prepare(sig, key, args, kwargs)
        y, pullback, (_, aux, new_values) = jax.vjp(f, *diff_primals, has_aux=True)
        write_state_values(sig.write_states, new_values)

        def vjp_fn(cotangent):
            return diff.arrange(pullback(cotangent))

        return (y, vjp_fn, aux) if has_aux else (y, vjp_fn)

    return diff.stateful.call(run, primals, {})


def jvp(fun: Callable, primals: Sequence, tangents: Sequence, *, has_aux: bool = False,
        grad_states=None, state_tangents=None):
    """Evaluate a stateful function and its directional derivative (forward mode).

    Parameters
    ----------
    fun : callable
        May read and write states; returns ``(out, aux)`` if ``has_aux``.
    primals, tangents : tuple or list
        The positional arguments and a tangent for each.
    has_aux : bool
        ``fun`` returns ``(out, aux)``.
    grad_states, state_tangents : optional
        States to perturb too (a State, a sequence or a dict of States) and
        their tangents, in the same structure (a tangent has its state's
        value's structure, shapes and dtypes; for one State, a 1-tuple
        holding its tangent is accepted too). By default states are
        constants (zero tangent), as in brainstate.

    Returns
    -------
    ``(out, out_tangent)`` or ``(out, out_tangent, aux)``; states written by
    ``fun`` hold their new values.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array([2.0, 3.0]))
    >>> out, t = brainx.transform.jvp(lambda x: w.value * x, (jnp.ones(2),), (jnp.ones(2),))
    >>> t.tolist()
    [2.0, 3.0]
    >>> out, t = brainx.transform.jvp(lambda x: w.value * x, (jnp.ones(2),), (jnp.zeros(2),),
    ...                               grad_states=w, state_tangents=jnp.ones(2))
    >>> t.tolist()
    [1.0, 1.0]
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples or lists of positional "
                        f"arguments, got {type(primals).__name__} and {type(tangents).__name__}.")
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents.")
    if (grad_states is None) != (state_tangents is None):
        raise ValueError("jvp: grad_states and state_tangents go together; pass both or neither.")
    states, state_tangent_list = [], []
    if grad_states is not None:
        states, state_tangent_list = _split_state_tangents(grad_states, state_tangents)
    diff = StateDifferentiation(fun, grad_states=grad_states,
                                argnums=tuple(range(len(primals))), has_aux=has_aux,
                                check_states=True, name="jvp")

    def run(sig, key, args, kwargs):
        sig, f, diff_primals = diff.prepare(sig, key, args, kwargs)
        tangent_values = [_state_tangent(s, v, t)
                          for s, v, t in zip(states, diff_primals[0], state_tangent_list)]
        y, y_dot, (_, aux, new_values) = jax.jvp(
            f, diff_primals, (tangent_values, *tangents), has_aux=True)
        write_state_values(sig.write_states, new_values)
        return (y, y_dot, aux) if has_aux else (y, y_dot)

    return diff.stateful.call(run, tuple(primals), {})


def _split_state_tangents(grad_states, state_tangents):
    """``(states, tangents)``: one tangent per state of ``grad_states``, in its structure."""
    states, tree = jax.tree.flatten(grad_states, is_leaf=_is_state)
    if (isinstance(grad_states, State) and isinstance(state_tangents, (tuple, list))
            and len(state_tangents) == 1):
        value = peek_state_values([grad_states])[0]
        value = value.tree if type(value) is StaticLeaves else value
        if jax.tree.structure(state_tangents) != jax.tree.structure(value):
            state_tangents = state_tangents[0]  # (tangent,) for one state, as for a sequence
    if (isinstance(grad_states, (tuple, list)) and isinstance(state_tangents, (tuple, list))
            and len(grad_states) == len(state_tangents)):
        state_tangents = type(grad_states)(state_tangents)  # a list and a tuple are alike here
    try:
        tangents = tree.flatten_up_to(state_tangents)
    except (ValueError, TypeError):
        raise ValueError(
            f"jvp: state_tangents must have the structure of grad_states, {tree} (one tangent "
            f"per State, a * above), but got {jax.tree.structure(state_tangents)}.") from None
    if any(isinstance(t, State) for t in tangents):
        raise TypeError("jvp: state_tangents must hold tangent values, not States.")
    return states, tangents


def _state_tangent(state: State, value, tangent):
    """``tangent`` checked against ``state``'s value (``value``), in the form JAX is given it."""
    tree = value.tree if type(value) is StaticLeaves else value
    leaves, treedef = jax.tree.flatten(tree)
    t_leaves, t_def = jax.tree.flatten(tangent)
    problem = None
    if t_def != treedef:
        problem = "another tree structure"
    else:
        for a, t in zip(leaves, t_leaves):
            if not is_array_leaf(a):
                continue
            a_type, t_type = jax.typeof(a), jax.typeof(t)
            if a_type.shape != t_type.shape:
                problem = "another shape"
            elif not jax.numpy.issubdtype(a_type.dtype, jax.numpy.inexact):
                problem = "an integer or boolean leaf, which cannot be perturbed"
            elif a_type.dtype != t_type.dtype:
                problem = "another dtype"
    if problem is not None:
        raise ValueError(
            f"jvp: the tangent given for {state!r} is {describe_type(tangent)}, but the state "
            f"holds {describe_type(tree)} ({problem}). A state's tangent has the structure, "
            "shapes and dtypes of its value. No state was changed.")
    if type(value) is StaticLeaves:  # keep the value's non-array leaves in the tangent
        tangent = StaticLeaves(jax.tree.unflatten(
            treedef, [t if is_array_leaf(a) else a for a, t in zip(leaves, t_leaves)]))
    return tangent
