"""`vjp` and `jvp`: vector-Jacobian and Jacobian-vector products of stateful functions."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import jax

from brainx.state.state import State
from brainx.transform.autodiff import StateDifferentiation, _is_state
from brainx.transform.stateful import write_state_values

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
        their tangents, in the same structure. By default states are
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
    state_tangent_list = []
    if grad_states is not None:
        states, tree = jax.tree.flatten(grad_states, is_leaf=_is_state)
        try:
            state_tangent_list = tree.flatten_up_to(state_tangents)
        except (ValueError, TypeError) as e:
            raise ValueError(f"jvp: state_tangents must have the structure of grad_states "
                             f"({tree}): {e}") from None
        if any(isinstance(t, State) for t in state_tangent_list):
            raise TypeError("jvp: state_tangents must hold tangent values, not States.")
    diff = StateDifferentiation(fun, grad_states=grad_states,
                                argnums=tuple(range(len(primals))), has_aux=has_aux,
                                check_states=True, name="jvp")

    def run(sig, key, args, kwargs):
        sig, f, diff_primals = diff.prepare(sig, key, args, kwargs)
        y, y_dot, (_, aux, new_values) = jax.jvp(
            f, diff_primals, (list(state_tangent_list), *tangents), has_aux=True)
        write_state_values(sig.write_states, new_values)
        return (y, y_dot, aux) if has_aux else (y, y_dot)

    return diff.stateful.call(run, tuple(primals), {})
