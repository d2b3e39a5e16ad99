"""Saving a partitioned network block by block, and loading it on another number of devices.

A network split by a :class:`~brainx.distributed.NeuronPartition` is too large to
gather on one host, so :func:`save_partitioned` writes a folder with one
:mod:`brainx.io` file per block, each by the process that holds the block:

==========================  =================================================================
file                        holds
==========================  =================================================================
``partition.json``          the neuron count, the blocks' ranges (process 0 writes it)
``block-00003.msgpack``     block 3's slice of every neuron state (last axis: the neurons,
                            e.g. ``V``, the ring buffer), and each
                            :class:`~brainx.distributed.PartitionedDelayedConn`'s synapses
                            onto the block, unpadded (``indptr`` over every source,
                            ``targets``, ``delays``, ``weight``)
``block-00003.json``        the shapes and dtypes of that file's arrays
``replicated.msgpack``      the states every device holds whole (random keys, step counters),
                            if any
==========================  =================================================================

:func:`load_partitioned` fills a network built on *any* partition of the same neurons
(another device count, another padding): each process reads the saved blocks that
overlap its own and re-cuts them. The synapses onto a neuron keep their order within
each source row, so the loaded network adds its inputs in the same order as the saved
one and continues bit for bit. :func:`saved_synapses` gives a projection's saved
synapses as a ``connect(lo, hi)`` for :class:`~brainx.distributed.PartitionedDelayedConn`,
so a network can be rebuilt from a save without drawing it again.

Every file is an ordinary checked :func:`brainx.io.save` file; the folder must be one
that every process can read (a shared file system on a cluster).

Examples
--------
>>> import os, tempfile, jax.numpy as jnp, brainunit as u, brainx
>>> mesh = brainx.distributed.make_mesh((1,), ("neurons",))
>>> part = brainx.distributed.NeuronPartition(mesh, "neurons", n=8)
>>> lif = part.init_all_states(brainx.nn.LIF(8))
>>> lif.V.value = lif.V.value + 1.0 * u.mV
>>> folder = tempfile.mkdtemp()
>>> brainx.io.save_partitioned(folder, lif, part)
>>> sorted(os.listdir(folder))
['block-00000.json', 'block-00000.msgpack', 'partition.json']
>>> fresh = part.init_all_states(brainx.nn.LIF(8))
>>> brainx.io.load_partitioned(folder, fresh, part)
>>> bool((fresh.V.value == lif.V.value).all())
True
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import brainunit as u
import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from brainx.distributed.partition import NeuronPartition
from brainx.distributed.partitioned_conn import PartitionedDelayedConn
from brainx.distributed.placement import shard_states
from brainx.graph import nodes as find_nodes
from brainx.graph import states as find_states
from brainx.io.files import load as io_load
from brainx.io.files import save as io_save
from brainx.nn.connectivity.delayed_csr import DelayedCSR
from brainx.state.state import State

__all__ = ["save_partitioned", "load_partitioned", "saved_synapses"]

_SYNAPSES = ("indptr", "targets", "delays", "weight")


def _name(path) -> str:
    return ".".join(map(str, path))


def _kinds(target: Any, part: NeuronPartition) -> Tuple[dict, dict, dict]:
    """``(neurons, projections, replicated)``: the target's states by kind, by name."""
    projections = {_name(p): m for p, m in find_nodes(target).items()
                   if isinstance(m, PartitionedDelayedConn)}
    owned = {id(getattr(m, k)) for m in projections.values() for k in _SYNAPSES}
    neurons, replicated = {}, {}
    for path, state in find_states(target).items():
        if id(state) in owned:
            continue
        spec = _spec(state)
        if spec is None or all(s is None for s in spec):
            replicated[_name(path)] = state
        elif tuple(spec)[-1] == part.axis and all(s is None for s in tuple(spec)[:-1]):
            neurons[_name(path)] = state
        else:
            raise ValueError(f"save/load_partitioned: state {_name(path)} ({state!r}) is split as "
                             f"{spec}; only the neuron axis (last, {part.axis!r}) or nothing "
                             "can be split. Place the model with partition.shard(model).")
    return neurons, projections, replicated


def _spec(state: State):
    leaves = jax.tree.leaves(state.value)
    sharding = getattr(leaves[0], "sharding", None) if len(leaves) == 1 else None
    return sharding.spec if isinstance(sharding, NamedSharding) else None


def _mantissa(state: State):
    return u.get_mantissa(state.value)


def _shard_on(x: jax.Array, device) -> np.ndarray:
    return next(np.asarray(s.data) for s in x.addressable_shards if s.device == device)


def _with_unit(value: np.ndarray, like: State):
    unit = u.get_unit(like.value)
    return u.maybe_decimal(u.Quantity(value, unit=unit)) if not unit.is_unitless else value


def save_partitioned(directory: str | os.PathLike, target: Any, partition: NeuronPartition) -> None:
    """Write ``target``'s states into ``directory``, one file per block (see the module).

    Parameters
    ----------
    directory : path
        Created if missing; every process of the mesh must call this function.
    target : Module or container
        The partitioned network (placed by ``partition.shard`` / ``init_all_states``).
    partition : NeuronPartition
        How its neurons are split.

    Examples
    --------
    See the module's docstring.
    """
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    neurons, projections, replicated = _kinds(target, partition)
    devices: Dict[int, Any] = {}
    for dev, b in partition.local_blocks().items():
        devices.setdefault(b, dev)
    for b, dev in devices.items():
        out = {f"n::{k}": (_shard_on(_mantissa(s), dev), s) for k, s in neurons.items()}
        for k, proj in projections.items():
            out.update(_block_synapses(proj, dev, k))
        io_save(os.path.join(directory, f"block-{b:05d}.msgpack"),
                {key: State(a) for key, (a, _) in out.items()})
        shapes = {key: [list(a.shape), str(a.dtype), _unit_name(like)]
                  for key, (a, like) in out.items()}
        with open(os.path.join(directory, f"block-{b:05d}.json"), "w") as f:
            json.dump(shapes, f)
    if jax.process_index() == 0:
        whole = {k: State(jax.tree.map(_first_shard, s.value)) for k, s in replicated.items()}
        if whole:
            io_save(os.path.join(directory, "replicated.msgpack"), whole)
        with open(os.path.join(directory, "partition.json"), "w") as f:
            json.dump(dict(n=partition.n, devices=partition.devices, blocks=partition.blocks(),
                           replicated={k: _describe(s) for k, s in whole.items()}), f)


def _first_shard(x):
    return x.addressable_shards[0].data if isinstance(x, jax.Array) else x


def _describe(state: State) -> list:
    leaves = jax.tree.leaves(state.value)
    return [[list(np.shape(leaf)), str(np.asarray(leaf).dtype)] if not _is_key(leaf) else "key"
            for leaf in leaves]


def _is_key(x) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _block_synapses(proj: PartitionedDelayedConn, dev, name: str) -> Dict[str, tuple]:
    """One device's synapses of ``proj``, without the padding (row ``n``'s): ``{key: (array,
    state)}``."""
    indptr = _shard_on(proj.indptr.value, dev)[0]
    nnz = int(indptr[-2])
    arrays = dict(indptr=indptr[:-1], targets=_shard_on(proj.targets.value, dev)[0, :nnz],
                  delays=_shard_on(proj.delays.value, dev)[0, :nnz],
                  weight=_shard_on(_mantissa(proj.weight), dev)[0, :nnz])
    return {f"s::{name}::{k}": (v, getattr(proj, k)) for k, v in arrays.items()}


def _unit_name(state: State) -> str:
    return str(u.get_unit(state.value))


class _Saved:
    """A saved folder, its blocks read on demand (each once)."""

    def __init__(self, directory: str, like: Dict[str, State]):
        self.directory, self.like = os.fspath(directory), like
        with open(os.path.join(self.directory, "partition.json")) as f:
            self.meta = json.load(f)
        self.n = int(self.meta["n"])
        self.blocks: List[Tuple[int, int]] = [tuple(b) for b in self.meta["blocks"]]
        self._read: Dict[int, Dict[str, Any]] = {}
        self.units: Dict[str, str] = {}

    def overlapping(self, lo: int, hi: int) -> List[int]:
        return [b for b, (a, z) in enumerate(self.blocks) if a < hi and z > lo]

    def block(self, b: int) -> Dict[str, Any]:
        if b not in self._read:
            with open(os.path.join(self.directory, f"block-{b:05d}.json")) as f:
                shapes = json.load(f)
            for key, (_, _, unit) in shapes.items():
                self.units.setdefault(key, unit)
                like = self.like.get(key)
                if like is not None and _unit_name(like) != unit:
                    raise ValueError(f"load_partitioned: {key.split('::')[1]} was saved in "
                                     f"{unit!r}, the network's state {like!r} holds "
                                     f"{_unit_name(like)!r}; build the model with the units it "
                                     "was saved with.")
            holders = {k: State(np.zeros(shape, dtype)) for k, (shape, dtype, _) in shapes.items()}
            io_load(os.path.join(self.directory, f"block-{b:05d}.msgpack"), holders)
            self._read[b] = {k: np.asarray(s.value) for k, s in holders.items()}
        return self._read[b]

    def synapses(self, name: str, lo: int, hi: int, n_pre: int) -> Tuple[np.ndarray, ...]:
        """``(indptr, targets, delays, weights)`` onto ``lo .. hi`` (targets from ``lo``), ``n_pre``
        rows: the saved blocks' rows re-cut, each row keeping its synapses' order per target."""
        parts = [(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint8),
                  np.zeros(0, np.float32))]
        for b in self.overlapping(lo, hi):
            got, start = self.block(b), self.blocks[b][0]
            indptr = got[f"s::{name}::indptr"]
            rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
            tgt = got[f"s::{name}::targets"].astype(np.int64) + start
            keep = (tgt >= lo) & (tgt < hi)
            if np.any(rows[keep] >= n_pre):
                raise ValueError(f"load_partitioned: the saved {name} has synapses from neuron "
                                 f">= {n_pre}, the new network's size; build it with as many "
                                 "neurons as were saved.")
            parts.append((rows[keep], tgt[keep] - lo, got[f"s::{name}::delays"][keep],
                          got[f"s::{name}::weight"][keep]))
        rows, tgt, d, w = (np.concatenate(a) for a in zip(*parts))
        conn = DelayedCSR.from_coo(rows, tgt, d, w, n_pre, hi - lo)
        return conn.indptr, conn.targets, conn.delays, conn.weights


def saved_synapses(directory: str | os.PathLike, name: str, n: int,
                   unit: Optional[u.Unit] = None) -> Callable[[int, int], DelayedCSR]:
    """``connect(lo, hi)`` giving the synapses of the projection ``name`` (its path in the saved
    network, e.g. ``"recurrent"``) saved in ``directory``, re-cut for any block of a network of
    ``n`` neurons (the new partition's, padding included), weights in ``unit`` (the one they
    were saved in; checked).

    Examples
    --------
    ``PartitionedDelayedConn(partition, saved_synapses(folder, "recurrent", partition.n, u.pA))``
    rebuilds the projection without drawing it (its weights as saved).
    """
    saved = _Saved(directory, {})

    def connect(lo: int, hi: int) -> DelayedCSR:
        indptr, targets, delays, weights = saved.synapses(name, lo, _clip(lo, hi, saved.n), n)
        got = saved.units.get(f"s::{name}::weight")
        want = str(u.UNITLESS if unit is None else unit)
        if got is not None and got != want:
            raise ValueError(f"saved_synapses: the weights of {name} were saved in {got!r}; pass "
                             f"unit= that unit (got {want!r}).")
        return DelayedCSR(indptr, targets, delays, weights, hi - lo, unit)

    return connect


def _clip(lo: int, hi: int, n: int) -> int:
    """``hi`` cut to the saved neurons (at least ``lo``)."""
    return max(lo, min(hi, n))


def load_partitioned(directory: str | os.PathLike, target: Any,
                     partition: NeuronPartition) -> None:
    """Fill ``target`` (built on ``partition``: any device count) from :func:`save_partitioned`.

    Parameters
    ----------
    directory : path
        What :func:`save_partitioned` wrote.
    target : Module or container
        The network, built and placed as the saved one was, on ``partition`` (its padding
        neurons beyond the saved count keep their own values).
    partition : NeuronPartition
        How ``target``'s neurons are split; every process calls this function.

    Examples
    --------
    See the module's docstring.
    """
    neurons, projections, replicated = _kinds(target, partition)
    like = {f"n::{k}": s for k, s in neurons.items()}
    like.update({f"s::{k}::weight": p.weight for k, p in projections.items()})
    saved = _Saved(directory, like)
    for key, state in neurons.items():
        state.value = _with_unit(_neuron_array(saved, key, state, partition), state)
    for key, proj in projections.items():
        _load_synapses(saved, key, proj, partition)
    _load_replicated(directory, replicated, saved.meta, partition)


def _neuron_array(saved: _Saved, key: str, state: State, part: NeuronPartition) -> jax.Array:
    current = _mantissa(state)
    arrays = []
    for dev, b in part.local_blocks().items():
        lo, hi = part.blocks()[b]
        block = _shard_on(current, dev).copy()
        for s in saved.overlapping(lo, _clip(lo, hi, saved.n)):
            a, z = saved.blocks[s]
            first, last = max(lo, a), min(hi, z, saved.n)
            block[..., first - lo:last - lo] = saved.block(s)[f"n::{key}"][..., first - a:last - a]
        arrays.append(jax.device_put(block, dev))
    return jax.make_array_from_single_device_arrays(current.shape, current.sharding, arrays)


def _load_synapses(saved: _Saved, key: str, proj: PartitionedDelayedConn,
                   part: NeuronPartition) -> None:
    pieces = {name: [] for name in _SYNAPSES}
    for dev, b in part.local_blocks().items():
        lo, hi = part.blocks()[b]
        indptr, targets, delays, weights = saved.synapses(key, lo, _clip(lo, hi, saved.n), part.n)
        extra = proj.block_nnz - targets.size
        if extra < 0:
            raise ValueError(f"load_partitioned: block {b} of {key} gets {targets.size} saved "
                             f"synapses, more than the {proj.block_nnz} its states hold; build "
                             "the network from the same seed (or with saved_synapses).")
        row = dict(indptr=np.concatenate([indptr, [proj.block_nnz]]).astype(np.int32),
                   targets=np.concatenate([targets, np.zeros(extra, np.int32)]),
                   delays=np.concatenate([delays, np.ones(extra, delays.dtype)]),
                   weight=np.concatenate([weights, np.zeros(extra, np.float32)]))
        for name in _SYNAPSES:
            like = _mantissa(getattr(proj, name))
            pieces[name].append(jax.device_put(row[name][None].astype(like.dtype), dev))
    for name in _SYNAPSES:
        state = getattr(proj, name)
        like = _mantissa(state)
        value = jax.make_array_from_single_device_arrays(like.shape, like.sharding, pieces[name])
        state.value = _with_unit(value, state) if name == "weight" else value


def _load_replicated(directory: str, replicated: Dict[str, State], meta: dict,
                     part: NeuronPartition) -> None:
    if set(replicated) != set(meta["replicated"]):
        raise ValueError(f"load_partitioned: the saved network's whole (replicated) states are "
                         f"{sorted(meta['replicated'])}, this one's {sorted(replicated)}; build the "
                         "same model.")
    if not replicated:
        return
    holders = {k: State(jax.tree.map(_first_shard, s.value)) for k, s in replicated.items()}
    io_load(os.path.join(directory, "replicated.msgpack"), holders)
    for k, s in replicated.items():
        s.value = holders[k].value
    shard_states(replicated, {s: PartitionSpec() for s in replicated.values()}, part.mesh)
