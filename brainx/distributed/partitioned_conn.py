"""`PartitionedDelayedConn`: per-synapse delays over a partitioned network, each synapse on its target's device.

The projection of :class:`~brainx.nn.DelayedEventConn` (a ring buffer of
``max_delay + 1`` slots per neuron, filled by the native kernel), split by
target the way NEST and NEST GPU split it. With a
:class:`~brainx.distributed.NeuronPartition` of ``P`` blocks, device ``d``
holds:

=================  ===================================  =====================================
state              global shape (spec)                  on device ``d``
=================  ===================================  =====================================
``indptr``         ``(P, n + 2)`` (``P(axis)``)         the rows of every source, onto its block
``targets``        ``(P, S)``                           each synapse's target in the block
``delays``         ``(P, S)``                           delays in steps
``weight``         ``(P, S)`` (a ``ParamState``)        weights
``buffer``         ``(slots, n)`` (``P(None, axis)``)   the ring buffer of its neurons
``arriving``       ``(n,)`` (``P(axis)``)               this step's input of its neurons
=================  ===================================  =====================================

``S`` is the largest block's synapse count; the shorter blocks are padded with
synapses of weight 0 on an extra source row that never fires (row ``n``).
Each block is drawn by ``connect(lo, hi)`` (a seeded connector such as
:func:`~brainx.nn.fixed_total_number_onto`) on the process that owns it, and
copied to its device before the next is drawn.

A step's :meth:`~PartitionedDelayedConn.update` runs inside
:func:`brainx.transform.shard_map`: the device's spikes are exchanged
(:func:`~brainx.distributed.exchange_spikes`, ``n / 8`` bytes per device), then
its kernel delivers every spike of the network into its own buffer. With
``exchange_every=D`` (at most the shortest delay) the spikes of ``D`` steps
are kept on each device and exchanged together once every ``D`` steps; a spike
of step ``k`` then still arrives in step ``k + d``, because ``d >= D``.

Examples
--------
>>> import jax.numpy as jnp, brainunit as u, brainx
>>> from brainx.nn import DelayedCSR
>>> mesh = brainx.distributed.make_mesh((1,), ("neurons",))
>>> part = brainx.distributed.NeuronPartition(mesh, "neurons", n=8)
>>> def connect(lo, hi):              # neuron 0 -> neuron 1 (delay 2); 1 -> 0 (delay 1)
...     pre, post, d = [0, 1], [1, 0], [2, 1]
...     keep = [i for i, t in enumerate(post) if lo <= t < hi]
...     return DelayedCSR.from_coo([pre[i] for i in keep], [post[i] - lo for i in keep],
...                                [d[i] for i in keep], [1.0] * len(keep), 8, hi - lo, u.pA)
>>> proj = part.init_all_states(brainx.distributed.PartitionedDelayedConn(part, connect))
>>> def step(k):
...     now = proj.current().to_decimal(u.pA)[:2]
...     proj.update(jnp.zeros(8, bool).at[0].set(k == 0))
...     return now
>>> brainx.transform.jit(lambda: brainx.transform.for_loop(step, jnp.arange(4)))().tolist()
[[0.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
"""

from __future__ import annotations

from typing import Callable, Optional

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import PartitionSpec

from brainx.distributed.partition import NeuronPartition
from brainx.distributed.spike_exchange import exchange_spikes
from brainx.distributed.spike_indices import exchange_spike_indices
from brainx.nn.connectivity.delayed_csr import DelayedCSR, smallest_delay_dtype
from brainx.nn.connectivity.native import build
from brainx.nn.connectivity.native.delivery import DelayedRows, deliver
from brainx.nn.modules.module import Module
from brainx.state.state import HiddenState, LongTermState, ParamState
from brainx.transform.mapping.shard_map import shard_map

__all__ = ["PartitionedDelayedConn"]


class _BlockRows(DelayedRows):
    """A device's rows inside ``shard_map`` (traced arrays). Each synapse's source, which the
    derivative and the plain-JAX path read, is found from the traced ``indptr`` (one scatter of
    the row starts and a cumulative sum: linear in the synapses, nothing stored)."""

    def with_arrays(self, indptr, post, delay) -> "_BlockRows":
        return _BlockRows(self.n_pre, self.n_post, indptr, post, delay, self.max_delay)

    def pre_of_synapse(self) -> jax.Array:
        starts = jnp.zeros(self.nnz, jnp.int32).at[self.indptr[1:-1]].add(1, mode="drop")
        return jnp.cumsum(starts, dtype=jnp.int32)


class PartitionedDelayedConn(Module):
    """A recurrent projection with per-synapse delays, its synapses split by target over a mesh.

    Parameters
    ----------
    partition : NeuronPartition
        The neurons (sources and targets) and how they are split.
    connect : callable
        ``connect(lo, hi) -> DelayedCSR``: the synapses onto neurons ``lo .. hi`` (targets
        numbered from ``lo``, ``partition.n`` source rows), the same whichever process asks.
    exchange_every : int
        Exchange the spikes once every this many steps (at most the shortest delay;
        default 1: every step).
    spike_capacity : int, optional
        Exchange each step's spikes as indices, at most this many per device (a busier step
        goes as bits): :func:`~brainx.distributed.exchange_spike_indices`. Default: bits.
        Only with ``exchange_every=1``; the indices have no derivative (train with bits).
    native : bool, optional
        The native kernel (default where it builds) or the plain-JAX path.
    param_type : type
        The State class of the weights.
    name : str, optional
        A label.

    Examples
    --------
    See the module's docstring.
    """

    def __init__(self, partition: NeuronPartition, connect: Callable[[int, int], DelayedCSR],
                 exchange_every: int = 1, spike_capacity: Optional[int] = None,
                 native: Optional[bool] = None,
                 param_type: type = ParamState, name: Optional[str] = None):
        super().__init__(name=name)
        if not isinstance(partition, NeuronPartition):
            raise TypeError(f"PartitionedDelayedConn: partition must be a NeuronPartition, got "
                            f"{type(partition).__name__}.")
        self.partition, self.native = partition, native
        self.n = partition.n
        self.in_size = self.out_size = (self.n,)
        blocks, stats = self._draw(connect)
        self.nnz, self.max_delay, self.min_delay, self.unit = stats
        self.exchange_every = int(exchange_every)
        self.spike_capacity = None if spike_capacity is None else int(spike_capacity)
        if self.spike_capacity is not None and self.exchange_every != 1:
            raise ValueError(f"PartitionedDelayedConn {name or ''}: spike_capacity (indices) "
                             f"is for an exchange every step, not every {exchange_every}; "
                             "batched steps go as bits.")
        if not 1 <= self.exchange_every <= self.min_delay:
            raise ValueError(f"PartitionedDelayedConn {name or ''}: exchange_every="
                             f"{exchange_every}, but the shortest delay is {self.min_delay} "
                             f"steps; spikes can be exchanged at most every {self.min_delay} "
                             "steps (the shortest delay) and at least every step.")
        self.block_nnz = _global_max(max(len(b[1]) for b in blocks.values()), partition.mesh)
        self._place(blocks)

    # -- construction ---------------------------------------------------------------------------
    def _draw(self, connect):
        """Draw this process's blocks (host arrays: with one device per process, its one block)."""
        part, blocks, stats = self.partition, {}, []
        if not part.local_blocks():
            raise ValueError(f"PartitionedDelayedConn: process {jax.process_index()} holds no "
                             f"device of the partition's mesh, so it has no block to draw; build "
                             "the projection only on the processes of its mesh (a mesh over "
                             "jax.devices() spans them all).")
        for b in sorted(set(part.local_blocks().values())):
            lo, hi = part.blocks()[b]
            conn = connect(lo, hi)
            if not isinstance(conn, DelayedCSR) or conn.n_pre != part.n or conn.n_post != hi - lo:
                got = (f"{type(conn).__name__} of {conn.n_pre} x {conn.n_post}"
                       if isinstance(conn, DelayedCSR) else type(conn).__name__)
                raise ValueError(f"PartitionedDelayedConn: connect({lo}, {hi}) gave {got}; it "
                                 f"must give a DelayedCSR of {part.n} source rows and {hi - lo} "
                                 "targets (numbered from lo).")
            stats.append((conn.nnz, conn.max_delay, int(conn.delays.min()) if conn.nnz else 1 << 30,
                          conn.unit))
            blocks[b] = (conn.indptr.astype(np.int32), conn.targets, conn.delays,
                         np.broadcast_to(conn.weights, conn.targets.shape).astype(np.float32))
            del conn
        mesh = part.mesh
        nnz = _global_sum(sum(s[0] for s in stats), mesh)
        max_delay = _global_max(max(s[1] for s in stats), mesh)
        min_delay = -_global_max(-min(s[2] for s in stats), mesh)
        return blocks, (nnz, max(max_delay, 1), max(min(min_delay, max_delay), 1), stats[0][3])

    def _place(self, blocks) -> None:
        """The blocks padded to one length and assembled into sharded states (each host array
        dropped once on its device)."""
        part, size = self.partition, self.block_nnz
        delay_type = smallest_delay_dtype(self.max_delay)

        def padded(b, which):
            indptr, targets, delays, weights = blocks[b]
            extra = size - targets.shape[0]
            if which == 0:          # the padding synapses are row n's, a source that never fires
                return np.concatenate([indptr, [size]]).astype(np.int32)
            if which == 1:
                return np.concatenate([targets, np.zeros(extra, np.int32)])
            if which == 2:
                return np.concatenate([delays.astype(delay_type), np.ones(extra, delay_type)])
            return np.concatenate([weights, np.zeros(extra, np.float32)])

        arrays = [part.from_blocks(lambda b: padded(b, which)) for which in range(4)]
        blocks.clear()
        sharding = part.sharding(PartitionSpec(part.axis, None))
        indptr, targets, delays, weights = arrays
        self.indptr = LongTermState(indptr, name="indptr", sharding=sharding)
        self.targets = LongTermState(targets, name="targets", sharding=sharding)
        self.delays = LongTermState(delays, name="delays", sharding=sharding)
        self.weight = ParamState(u.maybe_decimal(u.Quantity(weights, unit=self.unit)),
                                 sharding=sharding)

    def _native_delivery(self) -> bool:
        """Whether the step runs the native kernel (CPU, where it builds) or the plain-JAX
        scatter (other platforms, or ``native=False``)."""
        if self.native is not None:
            return bool(self.native)
        platforms = {d.platform for d in self.partition.mesh.devices.flat}
        return platforms == {"cpu"} and build.load() is not None

    @property
    def slots(self) -> int:
        """The ring buffer's length, ``max_delay + 1``."""
        return self.max_delay + 1

    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        if batch_size is not None:
            raise ValueError("PartitionedDelayedConn: batch_size is not supported (the neurons "
                             "are what is split over the devices).")
        part = self.partition

        def zeros(shape, spec, dtype=jnp.float32, unit=None):
            # made in place on every device, also on a mesh of several processes
            value = jax.jit(lambda: jnp.zeros(shape, dtype), out_shardings=part.sharding(spec))()
            return u.maybe_decimal(u.Quantity(value, unit=unit)) if unit is not None else value

        neurons, slots = part.spec(1), part.spec(2)
        self.buffer = HiddenState(zeros((self.slots, self.n), slots, unit=self.unit),
                                  sharding=part.sharding(slots))
        self.arriving = HiddenState(zeros((self.n,), neurons, unit=self.unit),
                                    sharding=part.sharding(neurons))
        self.step = HiddenState(jnp.zeros((), jnp.int32))
        if self.exchange_every > 1:
            self.history = HiddenState(zeros((self.exchange_every, self.n), slots),
                                       sharding=part.sharding(slots))

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self.init_state(batch_size)

    # -- the step -------------------------------------------------------------------------------
    def current(self):
        """What arrives in this step, ``(n,)`` (split over the devices), in the weights' unit."""
        self._require_state()
        if self.exchange_every == 1:
            return self.arriving.value
        k = self.step.value % self.slots
        now = jax.lax.dynamic_index_in_dim(u.get_mantissa(self.buffer.value), k, axis=0,
                                           keepdims=False)
        return u.maybe_decimal(u.Quantity(now, unit=self.unit))

    def update(self, spikes):
        """Send this step's ``spikes`` (``(n,)``, split over the devices) on; advance one step."""
        self._require_state()
        spikes = u.get_mantissa(spikes)
        if jnp.shape(spikes) != (self.n,):
            raise ValueError(f"PartitionedDelayedConn {self.name or ''}: the spikes must be "
                             f"({self.n},) (the partition's neurons), got {jnp.shape(spikes)}.")
        part = self.partition
        run = shard_map(self._block_step, part.mesh, in_specs=part.spec(1),
                        out_specs=part.spec(1))
        return run(spikes)

    def _block_step(self, spikes):
        """One device's step: exchange (now, or every ``exchange_every`` steps), deliver."""
        step = self.step.value
        buffer = u.get_mantissa(self.buffer.value)
        weights = u.get_mantissa(self.weight.value)[0]
        rows = _BlockRows(self.n + 1, self.partition.block, self.indptr.value[0],
                          self.targets.value[0], self.delays.value[0], self.max_delay)
        every = self.exchange_every
        if every == 1 and self.spike_capacity is not None:
            everyone = exchange_spike_indices(spikes, self.partition.axis, self.spike_capacity)
            buffer, arriving = self._deliver(buffer, everyone, weights, rows, step)
            self.arriving.value = u.maybe_decimal(u.Quantity(arriving, unit=self.unit))
        elif every == 1:
            everyone = exchange_spikes(spikes, self.partition.axis)
            buffer, arriving = self._deliver(buffer, everyone, weights, rows, step)
            self.arriving.value = u.maybe_decimal(u.Quantity(arriving, unit=self.unit))
        else:
            history = self.history.value.at[step % every].set(spikes.astype(jnp.float32))
            self.history.value = history

            def exchange(buffer):
                everyone = exchange_spikes(history, self.partition.axis)
                for j in range(every):
                    buffer, _ = self._deliver(buffer, everyone[j], weights, rows,
                                              step - (every - 1) + j)
                return buffer

            buffer = jax.lax.cond(step % every == every - 1, exchange, lambda b: b, buffer)
            arriving = jax.lax.dynamic_index_in_dim(buffer, (step + 1) % self.slots, axis=0,
                                                    keepdims=False)
        self.buffer.value = u.maybe_decimal(u.Quantity(buffer, unit=self.unit))
        self.step.value = step + 1
        return arriving

    def _deliver(self, buffer, everyone, weights, rows, step):
        silent = jnp.zeros(everyone.shape[:-1] + (1,), everyone.dtype)    # row n: the padding
        return deliver(buffer, jnp.concatenate([everyone, silent], axis=-1), weights, rows, step,
                       event=True, native=self._native_delivery())

    # -- reports --------------------------------------------------------------------------------
    def exchange_bytes_per_step(self) -> float:
        """Bytes of spikes each device receives per step: ``n / 8`` (the whole packed vector,
        its own block included), in one all-gather every ``exchange_every`` steps; with
        ``spike_capacity``, ``4 (capacity + 1) P`` (and ``n / 8`` more in a step that overflows)."""
        if self.spike_capacity is not None:
            return 4.0 * (self.spike_capacity + 1) * self.partition.devices
        return self.n / 8

    def block_bytes(self) -> int:
        """Bytes of one device's synapses (indptr, targets, delays and weights)."""
        held = (self.indptr, self.targets, self.delays, self.weight)
        return int(sum(u.get_mantissa(s.value).addressable_shards[0].data.nbytes for s in held))

    def _require_state(self) -> None:
        if not hasattr(self, "buffer"):
            raise AttributeError(f"PartitionedDelayedConn {self.name or ''}: no ring buffer yet; "
                                 "call init_state() (or partition.init_all_states(model)) first.")


def _spans_processes(mesh) -> bool:
    return len({d.process_index for d in mesh.devices.flat}) > 1


def _global_max(x: int, mesh) -> int:
    """The largest ``x`` over the processes of ``mesh`` (``jax.distributed``; every process
    calls it), or ``x`` when the mesh is on this process alone."""
    if not _spans_processes(mesh):
        return int(x)
    return int(np.max(multihost_utils.process_allgather(np.asarray(x, np.int64))))


def _global_sum(x: int, mesh) -> int:
    """The sum of ``x`` over the processes of ``mesh``."""
    if not _spans_processes(mesh):
        return int(x)
    return int(np.sum(multihost_utils.process_allgather(np.asarray(x, np.int64))))
