"""Spike exchange by indices: when few neurons fire, send who fired instead of one bit per neuron.

:func:`~brainx.distributed.exchange_spikes` sends ``n / (8 P)`` bytes per device and
step whatever the activity. A cortical network at a few Hz and 0.1 ms steps has a
few spikes per thousand neurons per step, so the indices of the spikes are smaller:
:func:`exchange_spike_indices` sends, per device, a fixed-size record of
``capacity + 1`` int32 (the number of spikes, then their indices in the block, the
rest ``-1``), one ``all_gather``, and every device rebuilds the whole spike vector.

=================  =========================  =============================================
exchange           bytes per device and step  collectives per step
=================  =========================  =============================================
bits               ``n / (8 P)``              one all-gather
indices            ``4 (capacity + 1)``       one all-gather; where a device had more than
                                              ``capacity`` spikes, a second (the bits),
                                              inside a conditional: exact in every step
=================  =========================  =============================================

Indices win when ``capacity < n / (32 P) - 1``; the capacity should cover the busiest
device's usual step (a burst falls back to bits, still exact). The counts travel with
the indices, so every device sees the same overflow and takes the same branch. The
rebuilt spikes are booleans: the exchange has no derivative (train with bits).

Examples
--------
>>> import jax, jax.numpy as jnp, brainx
>>> from jax.sharding import PartitionSpec as P
>>> mesh = brainx.distributed.make_mesh((1,), ("neurons",))
>>> gather = jax.shard_map(
...     lambda s: brainx.distributed.exchange_spike_indices(s, "neurons", capacity=2),
...     mesh=mesh, in_specs=P("neurons"), out_specs=P(), check_vma=False)
>>> few, many = jnp.zeros(16, bool).at[3].set(True), jnp.ones(16, bool)
>>> bool((gather(few) == few).all()), bool((gather(many) == many).all())   # many: by bits
(True, True)
"""

from __future__ import annotations

from typing import Any, Hashable

import jax
import jax.numpy as jnp

from brainx.distributed.spike_exchange import exchange_spikes

__all__ = ["exchange_spike_indices"]


def exchange_spike_indices(spikes: Any, axis_name: Hashable, capacity: int) -> jax.Array:
    """All devices' spikes from each device's block, sent as indices (inside ``shard_map``).

    Parameters
    ----------
    spikes : array
        ``(m,)``: this device's neurons (nonzero is a spike); ``m`` a multiple of 8.
    axis_name : hashable
        The mesh axis the neurons are split over.
    capacity : int
        The most spikes a device sends as indices in one step; a step in which a device
        has more is exchanged as bits (exact either way).

    Returns
    -------
    jax.Array
        ``(m * P,)`` bool: every device's block, in the axis' order.

    Examples
    --------
    See the module's docstring.
    """
    spikes = jnp.asarray(spikes) != 0
    if spikes.ndim != 1:
        raise ValueError(f"exchange_spike_indices: one step's spikes, (m,), got shape "
                         f"{spikes.shape}; exchange several steps with exchange_spikes.")
    capacity = int(capacity)
    if capacity < 1:
        raise ValueError(f"exchange_spike_indices: capacity must be >= 1, got {capacity}.")
    m = spikes.shape[0]
    count = jnp.sum(spikes, dtype=jnp.int32)
    (where,) = jnp.nonzero(spikes, size=capacity, fill_value=-1)
    record = jnp.concatenate([count[None], where.astype(jnp.int32)])
    records = jax.lax.all_gather(record, axis_name)                # (P, capacity + 1)
    devices = records.shape[0]

    def from_indices(_):
        offsets = (jnp.arange(devices, dtype=jnp.int32) * m)[:, None]
        local = records[:, 1:]
        index = jnp.where(local >= 0, local + offsets, m * devices)  # -1: dropped
        return jnp.zeros(m * devices, jnp.bool_).at[index.ravel()].set(True, mode="drop")

    def from_bits(_):
        return exchange_spikes(spikes, axis_name)

    overflow = jnp.any(records[:, 0] > capacity)
    return jax.lax.cond(overflow, from_bits, from_indices, None)
