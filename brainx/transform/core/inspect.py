"""`make_jaxpr` and `eval_shape`: look at a stateful function without running it."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax

from brainx.state.state import State
from brainx.state.trace import catch_new_states
from brainx.transform.core.arguments import function_name
from brainx.transform.core.stateful import (
    StatefulFunction, StaticLeaves, as_input, is_array_leaf, peek_state_values,
)

__all__ = ["make_jaxpr", "eval_shape"]


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (),
               static_argnames: str | Sequence[str] = (), axis_env: Any = None,
               return_shape: bool = False, return_only_write: bool = False) -> Callable:
    """The jaxpr of a stateful function, with its states as explicit inputs and outputs.

    Returns a function that, given example arguments, returns
    ``(closed_jaxpr, states)`` (and the output's ``ShapeDtypeStruct`` s when
    ``return_shape``). The layout is brainstate's: the jaxpr's inputs are the
    leaves of the dynamic arguments followed by the leaves of the values of
    ``states``; its outputs are the leaves of the function's output followed by
    the new values of every state (only the written ones with
    ``return_only_write``). No state is changed.

    Parameters
    ----------
    fun : callable
        The function; it may read and write states.
    static_argnums, static_argnames : int or str, or a sequence of them
        Arguments that are Python values (not traced).
    axis_env : sequence of tuple, optional
        ``(axis name, size)`` pairs to bind while tracing (for collectives such as ``psum``).
    return_shape : bool
        Also return the output's shapes.
    return_only_write : bool
        Output only the written states' new values.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> h = brainx.HiddenState(jnp.zeros(2))
    >>> def step(x):
    ...     h.value = h.value + x
    ...     return h.value.sum()
    >>> jaxpr, states = brainx.transform.make_jaxpr(step)(jnp.ones(2))
    >>> states == (h,), len(jaxpr.in_avals), len(jaxpr.out_avals)
    (True, 2, 2)
    >>> out, new_h = jax.core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, jnp.ones(2), h.value)
    >>> float(out), new_h.tolist(), h.value.tolist()     # the state is untouched
    (2.0, [1.0, 1.0], [0.0, 0.0])
    """
    sf = StatefulFunction(fun, static_argnums, static_argnames,
                          name=f"make_jaxpr({getattr(fun, '__name__', 'fun')})",
                          return_only_write=return_only_write, axis_env=axis_env)

    @functools.wraps(fun)
    def make_jaxpr_f(*args, **kwargs):
        sf.make_jaxpr(*args, **kwargs)
        cache_key = sf.get_arg_cache_key(*args, **kwargs)
        jaxpr, states = sf.get_jaxpr_by_cache(cache_key), sf.get_states_by_cache(cache_key)
        if not return_shape:
            return jaxpr, states
        return jaxpr, states, sf.get_out_shapes_by_cache(cache_key)[0]

    return make_jaxpr_f


def eval_shape(f: Callable, *args, return_state_shapes: bool = False, **kwargs) -> Any:
    """The shapes and dtypes of a stateful function's output, without running it.

    Parameters
    ----------
    f : callable
        May read and write states; it is traced, not run.
    *args, **kwargs
        Example arguments (arrays, or ``jax.ShapeDtypeStruct`` s).
    return_state_shapes : bool
        Also return ``{state: shapes}`` for every state ``f`` touches: the
        shapes of its value after the call (the new value for a written
        state), a tree of ``jax.ShapeDtypeStruct`` in the value's structure.

    Returns
    -------
    ``out_shapes``, or ``(state_shapes, out_shapes)`` with
    ``return_state_shapes`` (brainstate's order). No existing state is read
    for its value or changed. Objects ``f`` returns that are not arrays (a
    model it builds, say) come back as built, and the states ``f`` created
    hold the ``jax.ShapeDtypeStruct`` s of their values: an abstract model,
    with no memory allocated.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> h = brainx.HiddenState(jnp.zeros(2))
    >>> def step(x):
    ...     h.value = h.value + x        # broadcasts: h becomes (3, 2)
    ...     return h.value * 2
    >>> brainx.transform.eval_shape(step, jnp.ones((3, 1)))
    ShapeDtypeStruct(shape=(3, 2), dtype=float32)
    >>> states, out = brainx.transform.eval_shape(step, jnp.ones((3, 1)),
    ...                                           return_state_shapes=True)
    >>> states[h].shape, h.value.shape
    ((3, 2), (2,))
    >>> layer = brainx.transform.eval_shape(lambda: brainx.nn.Linear(3, 4))
    >>> layer.weight.value["weight"]
    ShapeDtypeStruct(shape=(3, 4), dtype=float32)
    """
    built: list = []  # [created states, output treedef, output leaves, array mask]

    def traced(*inner_args, **inner_kwargs):
        with catch_new_states() as catcher:
            out = f(*inner_args, **inner_kwargs)
        created = catcher.get_states()
        leaves, treedef = jax.tree.flatten(out, is_leaf=lambda x: isinstance(x, State))
        mask = [is_array_leaf(x) for x in leaves]
        built[:] = [created, treedef, leaves, mask]
        return ([x for x, m in zip(leaves, mask) if m],
                [as_input(s._value) for s in created])

    sf = StatefulFunction(traced, name=f"eval_shape({function_name(f)})")

    def run(sig, key, dyn_args, dyn_kwargs):
        values = peek_state_values(sig.states)
        (out_arrays, created_shapes), new_values = jax.eval_shape(
            sf.pure(sig, key), values, *dyn_args, **dyn_kwargs)
        created, treedef, leaves, mask = built
        for s, shapes in zip(created, created_shapes):  # built inside: keep them, abstract
            s._value = _unwrapped(shapes)
        arrays = iter(out_arrays)
        out = jax.tree.unflatten(treedef, [next(arrays) if m else x for x, m in zip(leaves, mask)])
        if not return_state_shapes:
            return out
        new = iter(new_values)
        after = [next(new) if w else jax.eval_shape(lambda v: v, v)
                 for v, w in zip(values, sig.written)]
        return {s: _unwrapped(v) for s, v in zip(sig.states, after)}, out

    return sf.call(run, args, kwargs)


def _unwrapped(value: Any) -> Any:
    """A state's value shapes, with leaves JAX cannot trace kept as they are."""
    return value.tree if type(value) is StaticLeaves else value
