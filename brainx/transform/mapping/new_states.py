"""`vmap_new_states`: run a function once per lane and keep the states it creates, batched.

The typical use is initialising a batch of models: each lane builds its own
states (drawing its own random numbers), and afterwards each new state holds
the stacked values of all lanes.

Some new states are *shared* instead: built once, unbatched. They are the
:class:`~brainx.state.NonBatchState` s, the states tagged ``INIT_NO_BATCHING`` and
those ``state_to_exclude`` selects. Their value must be the same in every
lane; one that depends on the lane (a random draw, a mapped argument, another
new state) is a :class:`~brainx.errors.BatchAxisError` (a ``ValueError``)
naming the state, and no state is changed.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Hashable, Optional

import jax
import numpy as np

from brainx.transform.core.arguments import no_function
from brainx.errors import BatchAxisError
from brainx._jax.traces import is_batched_along
from brainx.state.state import NonBatchState, State
from brainx.state.trace import _THREAD, catch_new_states
from brainx.util.filter import to_predicate
from brainx.transform.mapping.vmap import VmappedFunction

__all__ = ["vmap_new_states", "INIT_NO_BATCHING"]

#: The tag of states a module creates once, shared by all lanes.
INIT_NO_BATCHING = "INIT_NO_BATCHING"

_ARRAY_TYPES = (jax.Array, np.ndarray, np.generic, int, float, complex)


def _takes_one_argument(fn: Callable) -> bool:
    """Whether ``fn`` is called as ``fn(state)`` rather than as a filter ``fn(path, state)``."""
    try:
        inspect.signature(fn).bind(None, None)
        return False
    except TypeError:
        return True
    except ValueError:  # no signature (a builtin): a filter, as brainstate's are
        return False


def _exclusion(state_to_exclude: Any) -> Callable[[State], bool]:
    """``state -> bool``: the new states built once, shared by all lanes."""
    if callable(state_to_exclude) and not isinstance(state_to_exclude, type) \
            and _takes_one_argument(state_to_exclude):
        user = state_to_exclude
    else:
        try:
            predicate = to_predicate(state_to_exclude)
        except TypeError as e:
            raise TypeError(f"vmap_new_states: state_to_exclude must be a filter (a State class, "
                            f"a tag, a predicate (path, state) -> bool, a tuple of these) or a "
                            f"predicate state -> bool; got {state_to_exclude!r}.") from e
        user = functools.partial(predicate, ())
    return lambda s: (isinstance(s, NonBatchState) or INIT_NO_BATCHING in (s.tag or ())
                      or bool(user(s)))


def vmap_new_states(fun: Optional[Callable] = None, *, in_axes: Any = 0, out_axes: Any = 0,
                    axis_name: Optional[Hashable] = None, axis_size: Optional[int] = None,
                    spmd_axis_name: Any = None, state_tag: Optional[str] = None,
                    state_to_exclude: Any = None, in_states: Any = None,
                    out_states: Any = None) -> Any:
    """Vectorise ``fun`` and keep the states it creates, batched along axis 0.

    ``fun`` runs as under :func:`vmap` (same arguments, same rules for the
    states that already exist; an undeclared random generator gives each
    lane its own key). Every state it creates then holds the values of all
    lanes stacked along a new leading axis, except the shared ones
    (:class:`~brainx.state.NonBatchState`, the tag ``INIT_NO_BATCHING``,
    ``state_to_exclude``): created once, unbatched, their value must be the
    same in every lane (else :class:`~brainx.errors.BatchAxisError`).

    Parameters
    ----------
    fun : callable, optional
        Without it, ``vmap_new_states(**options)`` returns a decorator.
    in_axes, out_axes, axis_name, axis_size, spmd_axis_name, in_states, out_states
        As in :func:`vmap` (keyword arguments of the call are mapped over
        axis 0; brainstate refuses both them and ``in_states`` /
        ``out_states``).
    state_tag : str, optional
        Passed to the :func:`~brainx.catch_new_states` that collects the new states.
    state_to_exclude : filter, optional
        More new states to share rather than batch: a filter as in
        :mod:`brainx.util.filter` (a State class, a tag, ``OfType(...)``, a
        predicate ``(path, state) -> bool``, a tuple of these) or a predicate
        ``state -> bool``.

    Raises
    ------
    BatchAxisError
        A shared new state got a different value in each lane.
    ValueError
        ``axis_size`` is not a positive int, or conflicts with the size of a
        mapped argument.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> brainx.random.seed(0)
    >>> def init():
    ...     w = brainx.ParamState(brainx.random.normal(size=3))
    ...     scale = brainx.state.NonBatchState(jnp.ones(()))      # shared by all lanes
    ...     return w, scale
    >>> w, scale = brainx.transform.vmap_new_states(init, axis_size=5)()
    >>> w.value.shape, scale.value.shape, bool(w.value[0, 0] != w.value[1, 0])
    ((5, 3), (), True)
    """
    options = dict(in_axes=in_axes, out_axes=out_axes, axis_name=axis_name,
                   axis_size=axis_size, spmd_axis_name=spmd_axis_name, state_tag=state_tag,
                   state_to_exclude=state_to_exclude, in_states=in_states, out_states=out_states)
    if no_function(fun):
        return functools.partial(vmap_new_states, **options)
    excluded = _exclusion(state_to_exclude)
    if out_axes is not None and not isinstance(out_axes, int):
        raise TypeError(f"vmap_new_states: out_axes must be an int or None (it applies to every "
                        f"array in the output), got {out_axes!r}.")
    created: list = []  # the states of the last trace (earlier traces' states are discarded)
    output: list = []  # [treedef, leaves, is_array] of the last trace's output
    name = f"vmap_new_states({getattr(fun, '__name__', 'fun')})"

    def lane(*args, **kwargs):
        with catch_new_states(state_tag) as catcher:
            out = fun(*args, **kwargs)
        created[:] = catcher.get_states()
        # Arrays in the output are batched; other objects (a model, its states) are
        # returned as built by this (the last) trace.
        leaves, treedef = jax.tree.flatten(out, is_leaf=lambda x: isinstance(x, State))
        arrays = [isinstance(leaf, _ARRAY_TYPES) for leaf in leaves]
        output[:] = [treedef, leaves, arrays]
        shared = [s for s in created if excluded(s)]
        return ([leaf for leaf, a in zip(leaves, arrays) if a],
                [s._value for s in created if not excluded(s)], [s._value for s in shared])

    def check_shared(out, trace):
        bad = [s for s, v in zip([s for s in created if excluded(s)], out[2])
               if is_batched_along(v, trace)]
        if bad:
            raise BatchAxisError(
                f"{name}: {', '.join(map(repr, bad))} is shared by all lanes (a NonBatchState, "
                "tagged INIT_NO_BATCHING or excluded by state_to_exclude) but was given a "
                "different value in each lane (it depends on a random draw, a mapped argument "
                "or another new state). Build it from lane-independent values, or let it be "
                "batched. No state was changed.")

    lane.__name__ = getattr(fun, "__name__", "fun")  # errors say vmap(<fun>)
    mapped = VmappedFunction(lane, in_axes=in_axes, out_axes=(out_axes, 0, None),
                             axis_name=axis_name, axis_size=axis_size,
                             spmd_axis_name=spmd_axis_name, in_states=in_states,
                             out_states=out_states, check_output=check_shared,
                             write_advice=(
                                 f"{name} batches the states created inside it; this one is a "
                                 "pre-existing state (created before the call). Create it inside "
                                 "the function, declare it in out_states (or in_states, if it "
                                 "holds one value per lane already), or write a value that is "
                                 "the same in every lane."))

    @functools.wraps(fun)
    def vmapped(*args, **kwargs):
        # Only the states of the final trace survive: hide the discovery's from outer catchers.
        outer_catchers = list(_THREAD.catchers)
        _THREAD.catchers.clear()
        try:
            out_arrays, batched, shared = mapped(*args, **kwargs)
        finally:
            _THREAD.catchers[:] = outer_catchers
        kept = [s for s in created if not excluded(s)] + [s for s in created if excluded(s)]
        for s, v in zip(kept, list(batched) + list(shared)):
            s._value = v
            s.stack_level = _THREAD.depth  # it lives here now, not in the trace that built it
        for s in kept:
            for catcher in outer_catchers:
                catcher.append(s)
        if _THREAD.frames:  # created inside an enclosing transform: expire with its trace
            for s in kept:
                _THREAD.frames[-1].record_created(s)
        treedef, leaves, arrays = output
        batched_leaves = iter(out_arrays)
        return jax.tree.unflatten(treedef, [next(batched_leaves) if a else leaf
                                            for leaf, a in zip(leaves, arrays)])

    return vmapped
