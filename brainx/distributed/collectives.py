"""Collectives over states: reduce a state's value across a mapped axis, in place.

Inside :func:`brainx.transform.shard_map` (or ``pmap2``) every device runs the
function on its shard. A data-parallel step reduces its gradients with
``jax.lax.pmean(grads, "data")`` like any pytree; what is specific to states
is keeping a *replicated* state the same on every device after each shard
changed it (running statistics, spike counters): :func:`pmean_states` and
:func:`psum_states` replace the value of each given state by its mean or sum
over the axis.
"""

from __future__ import annotations

from typing import Any, Hashable, Iterable

import jax

from brainx.state.state import State

__all__ = ["pmean_states", "psum_states"]


def _reduce(states: Any, axis_name: Hashable, op) -> None:
    for state in _states_of(states):
        state.value = jax.tree.map(lambda x: op(x, axis_name), state.value)


def _states_of(states: Any) -> Iterable[State]:
    found = jax.tree.leaves(states, is_leaf=lambda x: isinstance(x, State))
    for s in found:
        if not isinstance(s, State):
            raise TypeError(f"expected States (a State, or a container of States); found {s!r}.")
    return found


def pmean_states(states: Any, axis_name: Hashable) -> None:
    """Replace each state's value by its mean over the mapped axis ``axis_name``.

    Parameters
    ----------
    states : State or container of States
        The states to reduce (read and written).
    axis_name : hashable
        A mesh axis bound by :func:`brainx.transform.shard_map` (or a ``pmap2``
        / ``vmap`` axis name).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from jax.sharding import PartitionSpec as P
    >>> mesh = brainx.distributed.make_mesh((1,), ("data",))
    >>> rate = brainx.State(jnp.zeros(()))
    >>> def count(spikes):
    ...     rate.value = spikes.mean()
    ...     brainx.distributed.pmean_states(rate, "data")
    >>> brainx.transform.shard_map(count, mesh, in_specs=P("data"), out_specs=P())(
    ...     jnp.array([0.0, 1.0, 1.0, 1.0]))
    >>> float(rate.value)
    0.75
    """
    _reduce(states, axis_name, jax.lax.pmean)


def psum_states(states: Any, axis_name: Hashable) -> None:
    """Replace each state's value by its sum over the mapped axis ``axis_name``.

    Parameters
    ----------
    states : State or container of States
        The states to reduce (read and written).
    axis_name : hashable
        A mesh axis bound by :func:`brainx.transform.shard_map`.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from jax.sharding import PartitionSpec as P
    >>> mesh = brainx.distributed.make_mesh((1,), ("data",))
    >>> total = brainx.State(jnp.zeros(()))
    >>> def count(spikes):
    ...     total.value = spikes.sum()
    ...     brainx.distributed.psum_states(total, "data")
    >>> brainx.transform.shard_map(count, mesh, in_specs=P("data"), out_specs=P())(
    ...     jnp.array([0.0, 1.0, 1.0, 1.0]))
    >>> float(total.value)
    3.0
    """
    _reduce(states, axis_name, jax.lax.psum)
