"""`NeuronPartition`: a network's neurons split into equal blocks over one axis of a device mesh.

A spiking network too large for one device is split the way NEST and NEST GPU
split it: by neuron. Device ``d`` of the mesh axis holds neurons
``d * n / P .. (d + 1) * n / P`` (``P`` devices on the axis): their states and
every synapse *onto* them. The model code does not change; it is partitioned by
declaration:

* the neuron count ``n`` is a multiple of ``8 P`` (each block a whole number of
  bytes of packed spikes); :meth:`NeuronPartition.padded_size` says how many
  neurons to have, the extra ones being silent padding;
* :meth:`NeuronPartition.shard` (or :meth:`NeuronPartition.init_all_states`)
  gives every state whose last axis has ``n`` entries the spec ``P(..., axis)``,
  keeps the specs that states declare themselves (a partitioned projection's
  synapses) and replicates the rest (random keys, step counters), then moves the
  values there (:func:`~brainx.distributed.shard_states`);
* arrays too large for one host are made block by block on the processes that
  own the blocks (:meth:`NeuronPartition.from_blocks`), never whole.

``brainx.transform.jit`` then compiles the step for that layout: the neuron
updates are elementwise, so XLA runs each device on its block with no
communication; the only exchange is the spikes, done by
:class:`~brainx.distributed.PartitionedDelayedConn`.

Examples
--------
>>> import brainx
>>> mesh = brainx.distributed.make_mesh((1,), ("neurons",))
>>> part = brainx.distributed.NeuronPartition(mesh, "neurons", n=16)
>>> part.devices, part.block, part.blocks()
(1, 16, [(0, 16)])
>>> brainx.distributed.NeuronPartition.padded_size(7717, devices=8)
7744
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from brainx.distributed.placement import shard_states
from brainx.graph import nodes as find_nodes
from brainx.graph import states as find_states
from brainx.nn.modules.collective import init_all_states
from brainx.util.mappings import FlattedDict

__all__ = ["NeuronPartition", "balanced_order"]


class NeuronPartition:
    """``n`` neurons split into equal blocks along the mesh axis ``axis``.

    Parameters
    ----------
    mesh : jax.sharding.Mesh
        The devices (:func:`~brainx.distributed.make_mesh`); other axes, if any, replicate.
    axis : str
        The mesh axis the neurons are split over.
    n : int
        The neuron count (padding included): a multiple of ``8 *`` the axis size.

    Examples
    --------
    See the module's docstring.
    """

    def __init__(self, mesh: Mesh, axis: str, n: int):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"NeuronPartition: mesh must be a jax.sharding.Mesh, got {mesh!r}; "
                            "make one with brainx.distributed.make_mesh.")
        if axis not in mesh.shape:
            raise ValueError(f"NeuronPartition: the mesh has axes {tuple(mesh.shape)}, not "
                             f"{axis!r}; name the axis the neurons are split over.")
        self.mesh, self.axis, self.n = mesh, axis, int(n)
        self.devices = int(mesh.shape[axis])
        if self.n % (8 * self.devices):
            raise ValueError(
                f"NeuronPartition: {self.n} neurons do not split into {self.devices} blocks of "
                f"whole bytes of spikes (a multiple of {8 * self.devices} is needed); give the "
                f"network {self.padded_size(self.n, self.devices)} neurons "
                "(NeuronPartition.padded_size), the extra ones silent padding.")
        self.block = self.n // self.devices

    @staticmethod
    def padded_size(n: int, devices: int) -> int:
        """The smallest neuron count ``>= n`` that splits into ``devices`` blocks of whole bytes."""
        unit = 8 * int(devices)
        return -(-int(n) // unit) * unit

    def blocks(self) -> List[Tuple[int, int]]:
        """Each device's neurons ``(lo, hi)``, in the order of the mesh axis."""
        return [(d * self.block, (d + 1) * self.block) for d in range(self.devices)]

    def spec(self, ndim: int = 1) -> PartitionSpec:
        """The spec of an array whose last axis is the neurons (``ndim`` axes)."""
        return PartitionSpec(*([None] * (ndim - 1)), self.axis)

    def sharding(self, spec: PartitionSpec) -> NamedSharding:
        return NamedSharding(self.mesh, spec)

    # -- states -------------------------------------------------------------------------------
    def neuron_states(self, target: Any) -> FlattedDict:
        """The states of ``target`` whose last axis has ``n`` entries and no declared sharding."""
        found = find_states(target)
        return FlattedDict({path: s for path, s in found.items()
                            if getattr(s, "sharding", None) is None and _last_dim(s) == self.n})

    def shard(self, target: Any) -> FlattedDict:
        """Place ``target``'s states: neuron states split, declared specs kept, the rest replicated.

        Returns the placed states by path (as :func:`~brainx.distributed.shard_states`).
        """
        specs = {s: self.spec(len(_shape(s))) for s in self.neuron_states(target).values()}
        placed = shard_states(target, specs, self.mesh)
        # modules that draw per neuron without a state of n (a Poisson background) are told
        for node in find_nodes(target).values():
            hook = getattr(node, "partition_neurons", None)
            if callable(hook):
                hook(self)
        return placed

    def init_all_states(self, target: Any, *args, **kwargs) -> Any:
        """:func:`brainx.nn.init_all_states` and then :meth:`shard`; returns ``target``."""
        init_all_states(target, *args, **kwargs)
        self.shard(target)
        return target

    # -- arrays made block by block -------------------------------------------------------------
    def local_blocks(self) -> Dict[jax.Device, int]:
        """The block index of each device of this process (devices on other processes are
        another process's business)."""
        spec = PartitionSpec(self.axis)
        index = self.sharding(spec).addressable_devices_indices_map((self.devices,))
        return {dev: int(idx[0].start or 0) for dev, idx in index.items()}

    def from_blocks(self, make: Callable[[int], np.ndarray]) -> jax.Array:
        """A ``(devices, *shape)`` array, sharded by its first axis, from ``make(block) ->
        (*shape)`` called only for this process's blocks, one at a time, each host array
        dropped once it is on its devices (every block must have one shape)."""
        by_block: Dict[int, list] = {}
        for dev, b in self.local_blocks().items():
            by_block.setdefault(b, []).append(dev)
        arrays, shape = [], None
        for b, devs in by_block.items():
            host = np.asarray(make(b))[None]
            if shape is not None and host.shape[1:] != shape:
                raise ValueError(f"NeuronPartition.from_blocks: block {b} has shape "
                                 f"{host.shape[1:]}, another {shape}; pad the blocks to one shape.")
            shape = host.shape[1:]
            arrays += [jax.block_until_ready(jax.device_put(host, dev)) for dev in devs]
            del host
        sharding = self.sharding(PartitionSpec(self.axis))
        return jax.make_array_from_single_device_arrays((self.devices, *shape), sharding, arrays)

    def __repr__(self) -> str:
        return (f"NeuronPartition({self.n} neurons over {self.devices} devices of axis "
                f"{self.axis!r}, {self.block} each)")


def balanced_order(sizes) -> np.ndarray:
    """Where to store each neuron so that every block of consecutive neurons holds every population
    in proportion (``position[i]``, ``i`` numbered population after population).

    Populations with different in-degrees, stored one after the other, give the blocks of a
    :class:`NeuronPartition` unequal synapse counts, and every block is padded to the largest.
    Stored in this order (neuron ``j`` of population ``y`` at the rank of ``(j + 1/2) / N_y``),
    any block of any partition holds the same share of each population, whatever the device
    count, so a model stored this way is balanced on every mesh and gives the same results on all.
    Per-neuron arrays go into storage order as ``stored[position] = values``; pass ``position`` to
    :func:`brainx.nn.fixed_total_number_onto`.

    Examples
    --------
    >>> import brainx
    >>> brainx.distributed.balanced_order([4, 2]).tolist()     # stored as E I E E I E
    [0, 2, 3, 5, 1, 4]
    """
    sizes = np.asarray(sizes, np.int64)
    population = np.repeat(np.arange(sizes.size), sizes)
    local = np.concatenate([np.arange(k) for k in sizes]) if sizes.size else np.zeros(0)
    fraction = (local + 0.5) / np.repeat(np.maximum(sizes, 1), sizes)
    stored = np.lexsort((population, fraction))          # stored[k]: the neuron at place k
    position = np.empty(stored.size, np.int64)
    position[stored] = np.arange(stored.size)
    return position


def _shape(state) -> tuple:
    leaves = jax.tree.leaves(state.value)
    return tuple(np.shape(leaves[0])) if len(leaves) == 1 else ()


def _last_dim(state) -> int:
    shape = _shape(state)
    return shape[-1] if shape else -1
