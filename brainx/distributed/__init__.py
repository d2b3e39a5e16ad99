"""Distributed states: meshes, shardings on states, collectives (see :doc:`/distributed`).

The transforms that run over a mesh are in :mod:`brainx.transform`:
``jit`` (with ``in_shardings`` / ``out_shardings`` / ``donate_states``),
``shard_map``, ``pmap2`` and ``pmap2_new_states``.
"""

from brainx.distributed.collectives import pmean_states, psum_states
from brainx.distributed.mesh import make_mesh
from brainx.distributed.placement import check_spec_fits, shard_states
from brainx.distributed.partition import NeuronPartition, balanced_order
from brainx.distributed.partitioned_conn import PartitionedDelayedConn
from brainx.distributed.spike_indices import exchange_spike_indices
from brainx.distributed.spike_exchange import (
    Collective, collectives_per_step, exchange_spikes, hlo_collectives,
)
from brainx.transform.compiled.device_sharding import state_sharding

__all__ = ["make_mesh", "shard_states", "check_spec_fits", "state_sharding", "pmean_states",
           "psum_states", "NeuronPartition", "balanced_order", "PartitionedDelayedConn", "exchange_spikes",
           "hlo_collectives", "collectives_per_step", "Collective", "exchange_spike_indices"]
