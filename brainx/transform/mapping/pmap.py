"""`pmap2` and `pmap2_new_states`: brainstate's device-parallel mapping, built on ``shard_map``.

``jax.pmap`` is legacy; brainx keeps brainstate's names and runs them on
``jax.shard_map`` over a one-axis mesh of the first ``n`` devices (``n``: the
size of the mapped axis). Each device gets one slice of every mapped argument
(the mapped axis removed, as under ``pmap``), collectives name the axis by
``axis_name``, and the outputs are stacked along ``out_axes``; the result is
a global array whose slices live on their devices.

``pmap2`` is :class:`~brainx.transform.StatefulMapping` (``vmap2``'s states
by filter: ``state_in_axes`` / ``state_out_axes``) with this mapping in place
of ``jax.vmap``. Unlike under ``vmap2``, a write to a state that neither
selects is not detected as per-device: it is written back as one replicated
value, which must then be the same on every device (reduce it with a
collective, or select it in ``state_out_axes``). ``pmap2_new_states``
initialises a module once per device, like ``vmap2_new_states``, and places
each new state's per-device values on their devices.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from brainx.state.state import State
from brainx.transform.core.arguments import function_name, no_function
from brainx.transform.core.stateful import is_array_leaf, write_state_values
from brainx.transform.mapping.module_states import vmap2_new_states
from brainx.transform.mapping.stateful_mapping import StatefulMapping

__all__ = ["pmap2", "pmap2_new_states", "pmap_on_shard_map"]

_AXIS = "_pmap2"  # the mesh axis when the user names none


def _leaf_axes(axes: Any, tree: Any) -> List[Optional[int]]:
    """The mapped axis of every leaf of ``tree``, from an ``in_axes``-style prefix ``axes``."""
    found: List[Optional[int]] = []
    jax.tree.map(lambda a, sub: found.extend([a] * len(jax.tree.leaves(sub))), axes, tree,
                 is_leaf=lambda x: x is None)
    return found


def _mesh(n: int, devices: Optional[Sequence[jax.Device]], name: Hashable, what: str) -> Mesh:
    pool = list(devices) if devices is not None else jax.devices()
    if n > len(pool):
        raise ValueError(f"{what}: the mapped axis has size {n} but only {len(pool)} devices are "
                         "available; map over at most that many (or run with more devices: on "
                         "CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N).")
    return Mesh(np.asarray(pool[:n]), (name,), axis_types=(AxisType.Auto,))


def pmap_on_shard_map(f: Callable, in_axes: Any = 0, out_axes: Any = 0,
                      axis_name: Optional[Hashable] = None, axis_size: Optional[int] = None,
                      devices: Optional[Sequence[jax.Device]] = None) -> Callable:
    """``jax.pmap(f, ...)`` semantics (one slice per device) on ``jax.shard_map``.

    Positional arguments only, as ``jax.pmap``; ``in_axes`` / ``out_axes`` are
    prefixes of the arguments and output (``None``: replicated).
    """
    name = _AXIS if axis_name is None else axis_name

    def mapped(*args):
        leaves, tree = jax.tree.flatten(args)
        axes = _leaf_axes(tuple(in_axes) if isinstance(in_axes, list) else in_axes, args)
        sizes = {np.shape(x)[a] for x, a in zip(leaves, axes) if a is not None}
        if axis_size is not None:
            sizes.add(axis_size)
        if len(sizes) != 1:
            raise ValueError(f"pmap2: the mapped axes have sizes {sorted(sizes)}; they must all "
                             "be the same (pass axis_size when nothing is mapped).")
        mesh = _mesh(sizes.pop(), devices, name, "pmap2")
        moved = [jnp.moveaxis(x, a, 0) if a is not None else x for x, a in zip(leaves, axes)]
        specs = [PartitionSpec(name) if a is not None else PartitionSpec() for a in axes]
        moved = [jax.device_put(x, NamedSharding(mesh, s)) if is_array_leaf(x) else x
                 for x, s in zip(moved, specs)]
        out_specs = jax.tree.map(lambda a: PartitionSpec() if a is None else PartitionSpec(name),
                                 out_axes, is_leaf=lambda x: x is None)

        def block(*flat):
            flat = [x[0] if a is not None else x for x, a in zip(flat, axes)]
            out = f(*jax.tree.unflatten(tree, flat))
            return _map_by_axes(out_axes, out, lambda x: x[None])

        out = jax.shard_map(block, mesh=mesh, in_specs=tuple(specs), out_specs=out_specs,
                            check_vma=False)(*moved)
        return _map_by_axes(out_axes, out, None)

    return mapped


def _map_by_axes(out_axes: Any, out: Any, inside: Optional[Callable]) -> Any:
    """Inside the block: add the device axis; outside: move it to its ``out_axes`` place."""
    def per(a, sub):
        if a is None:
            return sub
        if inside is not None:
            return jax.tree.map(inside, sub)
        return jax.tree.map(lambda x: jnp.moveaxis(x, 0, a), sub) if a != 0 else sub

    return jax.tree.map(per, out_axes, out, is_leaf=lambda x: x is None)


def pmap2(fn: Optional[Callable] = None, axis_name: Optional[Hashable] = None, *,
          in_axes: Any = 0, out_axes: Any = 0, static_broadcasted_argnums: Any = (),
          devices: Optional[Sequence[jax.Device]] = None, backend: Optional[str] = None,
          axis_size: Optional[int] = None, donate_argnums: Any = (),
          global_arg_shapes: Any = None, state_in_axes: Any = None,
          state_out_axes: Any = None, unexpected_out_state_mapping: str = "auto") -> Any:
    """Map a stateful function over devices, one slice of the mapped axis per device.

    brainstate's ``pmap2`` signature, run on ``jax.shard_map`` (see the module
    docstring). States are chosen by filter as in :func:`vmap2`.

    Parameters
    ----------
    fn : callable, optional
        Without it, a decorator.
    axis_name : hashable, optional
        The axis name for collectives (``jax.lax.psum(x, axis_name)``).
    in_axes, out_axes, axis_size
        As in ``jax.pmap``.
    devices : sequence of Device, optional
        The devices to map over (default: ``jax.devices()``; the first
        ``axis_size`` are used).
    state_in_axes, state_out_axes, unexpected_out_state_mapping
        As in :func:`vmap2`.
    static_broadcasted_argnums, donate_argnums, backend, global_arg_shapes
        brainstate's: the first two must be empty (as there), the others are
        not used.

    Returns
    -------
    StatefulMapping

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> n = jax.device_count()
    >>> h = brainx.HiddenState(jnp.zeros((n, 3)))            # one row per device
    >>> @brainx.transform.pmap2(axis_name="i", state_in_axes=brainx.HiddenState)
    ... def step(x):
    ...     h.value = h.value + x
    ...     return jax.lax.psum(x, "i")
    >>> step(jnp.ones(n)).tolist() == [float(n)] * n, h.value.shape == (n, 3)
    (True, True)
    """
    if no_function(fn):  # a functools.partial, as brainstate returns; checked when applied
        return functools.partial(
            pmap2, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
            static_broadcasted_argnums=static_broadcasted_argnums, devices=devices,
            backend=backend, axis_size=axis_size, donate_argnums=donate_argnums,
            global_arg_shapes=global_arg_shapes, state_in_axes=state_in_axes,
            state_out_axes=state_out_axes,
            unexpected_out_state_mapping=unexpected_out_state_mapping)
    for what, value in (("static_broadcasted_argnums", static_broadcasted_argnums),
                        ("donate_argnums", donate_argnums)):
        if isinstance(value, int) or (value is not None and len(tuple(value))):
            raise NotImplementedError(f"pmap2 does not support {what}; use static_argnames "
                                      "on a StatefulMapping, or brainx.transform.jit around it.")
    return StatefulMapping(fn, name=f"pmap2({function_name(fn)})", in_axes=in_axes,
                           out_axes=out_axes, axis_name=axis_name, axis_size=axis_size,
                           state_in_axes=state_in_axes, state_out_axes=state_out_axes,
                           unexpected_out_state_mapping=unexpected_out_state_mapping,
                           mapping_fn=functools.partial(pmap_on_shard_map, devices=devices))


def pmap2_new_states(module: Any, init_kwargs: Optional[Dict[str, Any]] = None,
                     state_tag: Optional[str] = None, axis_size: Optional[int] = None,
                     state_out_axes: Any = None, axis_name: Optional[Hashable] = None
                     ) -> Dict[Optional[int], List[State]]:
    """Initialise ``module``'s states once per device; each device holds its own slice.

    As :func:`vmap2_new_states` (same ``state_out_axes`` rules), then every
    new state with a device axis is placed on a one-axis mesh of
    ``axis_size`` devices, split along that axis; shared states are
    replicated.

    Parameters
    ----------
    module : Module
        Its ``init_all_states(**init_kwargs)`` creates the states.
    init_kwargs : dict, optional
        Keyword arguments of the initialisation.
    state_tag : str, optional
        Tag added to every new state.
    axis_size : int, optional
        The number of devices (default: ``jax.local_device_count()``).
    state_out_axes : optional
        Where each state's device axis goes (see :func:`vmap2_new_states`).
    axis_name : hashable, optional
        The name of the mesh axis the states are split over.

    Returns
    -------
    dict
        ``{axis: [states]}``; ``None`` holds the shared states.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> class Counter(brainx.nn.Module):
    ...     def init_state(self):
    ...         self.count = brainx.ShortTermState(jnp.zeros(2))
    >>> counter = Counter()
    >>> _ = brainx.transform.pmap2_new_states(counter, {})
    >>> counter.count.value.shape == (jax.local_device_count(), 2)
    True
    """
    n = jax.local_device_count() if axis_size is None else axis_size
    mesh = _mesh(n, jax.local_devices(), _AXIS if axis_name is None else axis_name,
                 "pmap2_new_states")
    name = mesh.axis_names[0]
    groups = vmap2_new_states(module, init_kwargs, state_tag=state_tag, axis_size=n,
                              state_out_axes=state_out_axes)
    for axis, states in groups.items():
        spec = PartitionSpec() if axis is None else PartitionSpec(*([None] * axis), name)
        for state in states:
            sharding = NamedSharding(mesh, spec)
            write_state_values([state], [jax.tree.map(
                lambda x: jax.device_put(x, sharding) if is_array_leaf(x) else x, state.value)])
    return groups
