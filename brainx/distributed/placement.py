"""Sharding as state metadata: which part of a mesh holds each state's value.

A state carries its layout in its ``sharding`` attribute: a
``jax.sharding.NamedSharding`` (a mesh and a ``PartitionSpec``), or a bare
``PartitionSpec`` given at creation (``ParamState(w, sharding=P(None,
"model"))``) that gets its mesh when the model is placed. The transforms read
it: :func:`brainx.transform.jit` uses it as the state's input and output
sharding, :func:`brainx.transform.shard_map` as the state's default spec.

:func:`shard_states` places a model on a mesh: it picks a spec for each state
(by filter, by the state's own spec, or replicated), checks that the spec fits
the state's shape, records the sharding on the state and moves the value
there. Compiled functions trace again afterwards, so they pick the new layout
up.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from brainx.graph import states as find_states
from brainx.state.state import State, structure_changed
from brainx.util.filter import to_predicate
from brainx.transform.compiled.device_sharding import check_spec_fits
from brainx.util.mappings import FlattedDict

__all__ = ["shard_states"]


def shard_states(target: Any, specs: Optional[Dict[Any, PartitionSpec]] = None,
                 mesh: Optional[Mesh] = None) -> FlattedDict:
    """Give every state of ``target`` a sharding on ``mesh`` and move its value there.

    Parameters
    ----------
    target : Module, State or container
        Where the states are found (as :func:`brainx.graph.states` finds them).
    specs : dict, optional
        ``{filter: PartitionSpec}``. A state takes the spec of the first
        filter that selects it (a State class, a tag or path glob, a state, a
        predicate: see :mod:`brainx.util.filter`); otherwise the spec it was
        created with (``sharding=P(...)``); otherwise it is replicated (``P()``).
    mesh : jax.sharding.Mesh, optional
        The device mesh (needed unless every state holds a ``NamedSharding``).

    Returns
    -------
    FlattedDict
        The placed states, by path.

    Raises
    ------
    ValueError
        Naming the state, when a spec does not fit its shape: more axes than
        the value, a mesh axis the mesh lacks, a dimension the axes do not divide.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from jax.sharding import PartitionSpec as P
    >>> mesh = brainx.distributed.make_mesh((1,), ("data",))
    >>> h = brainx.HiddenState(jnp.zeros((4, 3)))
    >>> _ = brainx.distributed.shard_states({"h": h}, {brainx.HiddenState: P("data")}, mesh)
    >>> h.sharding.spec, h.value.sharding.spec
    (P('data',), P('data',))
    """
    rules = [(_predicate(f), spec) for f, spec in (specs or {}).items()]
    placed = find_states(target)
    for path, state in placed.items():
        spec = next((spec for selects, spec in rules if selects(path, state)), None)
        sharding = _sharding_for(state, spec, mesh, path)
        state.sharding = sharding
        state.value = jax.tree.map(lambda x: _put(x, sharding), state.value)
    structure_changed()  # compiled functions read the new shardings on their next call
    return placed


def _put(x: Any, sharding: NamedSharding) -> jax.Array:
    """``x`` on ``sharding``; on a mesh of several processes (``jax.distributed``) a value
    local to this process (the same on every process, as a model built from one seed is) is
    cut into this process's shards (``device_put`` only reaches this process's devices)."""
    if sharding.is_fully_addressable or (isinstance(x, jax.Array)
                                         and not x.is_fully_addressable):
        return jax.device_put(x, sharding)
    if jax.dtypes.issubdtype(jax.numpy.result_type(x), jax.dtypes.prng_key):   # typed keys
        return jax.random.wrap_key_data(_put(jax.random.key_data(x), sharding),
                                        impl=jax.random.key_impl(x))
    host = np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def _predicate(the_filter: Any):
    if isinstance(the_filter, State):
        return lambda path, state: state is the_filter
    return to_predicate(the_filter)


def _sharding_for(state: State, spec: Optional[PartitionSpec], mesh: Optional[Mesh],
                  path: Iterable[Any]) -> NamedSharding:
    own = getattr(state, "sharding", None)
    if spec is None and isinstance(own, NamedSharding) and (mesh is None or own.mesh == mesh):
        check_spec_fits(state, own.spec, own.mesh, tuple(path))
        return own
    if spec is None:
        spec = own if isinstance(own, PartitionSpec) else (
            own.spec if isinstance(own, NamedSharding) else PartitionSpec())
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"shard_states: the spec for {state!r} at {'.'.join(map(str, path))} is "
                        f"{spec!r}; expected a jax.sharding.PartitionSpec.")
    if mesh is None:
        raise ValueError(f"shard_states: {state!r} needs a mesh for its spec {spec}; pass mesh=.")
    check_spec_fits(state, spec, mesh, tuple(path))
    return NamedSharding(mesh, spec)
