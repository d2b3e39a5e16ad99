"""`make_jaxpr` and `eval_shape`: look at a stateful function without running it."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax

from brainx.transform.core.stateful import StatefulFunction, peek_state_values

__all__ = ["make_jaxpr", "eval_shape"]


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (),
               static_argnames: str | Sequence[str] = (), return_shape: bool = False) -> Callable:
    """The jaxpr of a stateful function, with its states as explicit inputs and outputs.

    Returns a function that, given example arguments, returns
    ``(closed_jaxpr, states)`` (and the output's ``ShapeDtypeStruct`` s when
    ``return_shape``). The jaxpr's inputs are the leaves of the values of
    ``states`` followed by the dynamic arguments; its outputs are the leaves of
    the function's output followed by the new values of the written states.
    No state is changed.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> h = brainx.HiddenState(jnp.zeros(2))
    >>> def step(x):
    ...     h.value = h.value + x
    >>> jaxpr, states = brainx.transform.make_jaxpr(step)(jnp.ones(2))
    >>> states == (h,), len(jaxpr.in_avals), len(jaxpr.out_avals)
    (True, 2, 1)
    """
    sf = StatefulFunction(fun, static_argnums, static_argnames,
                          name=f"make_jaxpr({getattr(fun, '__name__', 'fun')})")

    def make(*args, **kwargs):
        jaxpr, states = _jaxpr_and_states(sf, args, kwargs)
        if not return_shape:
            return jaxpr, states
        return jaxpr, states, _eval_shape_sf(sf, args, kwargs)

    return make


def _jaxpr_and_states(sf: StatefulFunction, args: tuple, kwargs: dict):
    """``(closed_jaxpr, states)``: inputs are the states' values then the dynamic arguments."""
    def run(sig, key, dyn_args, dyn_kwargs):
        values = peek_state_values(sig.states)
        return jax.make_jaxpr(sf.pure(sig, key))(values, *dyn_args, **dyn_kwargs), sig.states

    return sf.call(run, args, kwargs)


def _eval_shape_sf(sf: StatefulFunction, args: tuple, kwargs: dict):
    def run(sig, key, dyn_args, dyn_kwargs):
        values = peek_state_values(sig.states)
        out, _ = jax.eval_shape(sf.pure(sig, key), values, *dyn_args, **dyn_kwargs)
        return out

    return sf.call(run, args, kwargs)


def eval_shape(fun: Callable, *args, **kwargs) -> Any:
    """The shapes and dtypes of a stateful function's output, without running it.

    No state is read for its value or changed; states the function creates
    are not kept.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> h = brainx.HiddenState(jnp.zeros(2))
    >>> def step(x):
    ...     h.value = h.value + x
    ...     return h.value * 2
    >>> brainx.transform.eval_shape(step, jnp.ones(2))
    ShapeDtypeStruct(shape=(2,), dtype=float32)
    """
    return _eval_shape_sf(StatefulFunction(fun, name="eval_shape"), args, kwargs)
