"""The cortical microcircuit partitioned over devices: the same spikes on one device and on eight.
===============================================================================================

The model of ``examples/microcircuit_model.py`` (Potjans & Diesmann 2014, NEST's
``iaf_psc_exp``, fixed-total-number connectivity with per-synapse delays, Poisson
background), with its neurons split over the devices of a mesh
(:class:`brainx.distributed.NeuronPartition`): each device holds the states of
``n / P`` neurons and draws, from the seed, only the synapses onto them
(:func:`brainx.nn.fixed_total_number_onto`); the spikes are exchanged as packed
bits, once a step or once every ``--every`` steps
(:class:`brainx.distributed.PartitionedDelayedConn`).

To compare spike for spike, the weights (recurrent and background) are rounded to
multiples of ``2**-4`` pA, so every sum of them is exact in float32 and the order
in which synapses are added cannot matter. The network is padded with silent
neurons to a multiple of ``8 P`` (7717 -> 7744 at scale 0.1 on 8 devices).

Run ``python examples/partitioned_microcircuit.py`` (scale 0.1, 1000 steps, one
device against all of them; on a CPU it makes 8 fake devices), ``--every 5
--delay-min 0.45`` to exchange every 5 steps (the model's shortest delay is one
step, 0.1 ms; with delays redrawn below 0.45 ms it is 5), ``--balanced`` to store the
neurons in :func:`brainx.distributed.balanced_order`: every device then holds a share of every
population and about as many synapses (3.3 MiB each on 8 devices at scale 0.1, against 4.6 MiB
for the largest of the contiguous blocks).
"""

# sphinx_gallery_thumbnail_path = "_static/gallery-thumbs/model_parallel_network.svg"

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")  # CPU only

import brainunit as u  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

_HERE = pathlib.Path(globals().get("__file__", "partitioned_microcircuit.py")).resolve().parent
sys.path.insert(0, str(_HERE))
import microcircuit_model as model  # noqa: E402

import brainx  # noqa: E402
from brainx import nn  # noqa: E402

QUANTUM = 2.0 ** -4          # pA: weights are multiples of it, so sums of them are exact


def exact_parameters(scale: float, background: str = "poisson") -> dict:
    """The model's parameters with the background weight rounded to ``QUANTUM``."""
    params = model.network_parameters(scale, background)
    params["w_ext"] = float(np.round(params["w_ext"] / QUANTUM) * QUANTUM)
    return params


def connector(params: dict, n_pre: int, seed: int, delay_min_ms: float = 0.05, position=None):
    """``connect(lo, hi)``: the synapses onto neurons ``lo .. hi``, weights rounded to ``QUANTUM``
    (``position``: where each neuron is stored, see ``brainx.distributed.balanced_order``)."""
    def connect(lo: int, hi: int) -> nn.DelayedCSR:
        conn = nn.fixed_total_number_onto(
            params["sizes"], params["sizes"], params["counts"], params["weight_mean"] * u.pA,
            params["weight_sd"] * u.pA, params["delay_mean"] * u.ms, params["delay_sd"] * u.ms,
            dt=model.DT_MS * u.ms, delay_min=delay_min_ms * u.ms, seed=seed, targets=(lo, hi),
            n_pre=n_pre, position=position)
        conn.weights = (np.round(conn.weights / QUANTUM) * QUANTUM).astype(np.float32)
        return conn
    return connect


class PartitionedMicrocircuit(nn.Module):
    """``model.Microcircuit`` over a ``NeuronPartition``: the same neurons, initial potentials
    and background, silent padding neurons at the end, the recurrent synapses split by target.
    ``balanced``: the neurons stored in ``balanced_order`` (every device holds a share of every
    population, so the blocks hold about as many synapses each)."""

    def __init__(self, params: dict, partition: brainx.distributed.NeuronPartition,
                 seed: int = 55, exchange_every: int = 1, delay_min_ms: float = 0.05,
                 balanced: bool = False, spike_capacity=None):
        super().__init__()
        sizes = params["sizes"]
        self.n, self.n_padded = int(sizes.sum()), partition.n
        pad = self.n_padded - self.n
        self.position = brainx.distributed.balanced_order(sizes) if balanced else None

        def stored(values):                           # population order -> storage order
            if self.position is None:
                return values
            out = np.empty_like(values)
            out[self.position] = values
            return out

        per_neuron = lambda v, fill: np.concatenate(                          # noqa: E731
            [stored(np.repeat(np.asarray(v, np.float64), sizes)), np.full(pad, fill)])
        rng = np.random.default_rng(seed + 1)        # the draw of model.Microcircuit
        v0 = rng.normal(np.repeat(model.V0_MEAN, sizes), np.repeat(model.V0_SD, sizes))
        v0 = np.concatenate([stored(v0), np.full(pad, -65.0)]).astype(np.float32)  # padding: E_L
        self.neurons = nn.IafPscExp(self.n_padded, **model.NEURON,
                                    I_e=per_neuron(params["I_e"], 0.0) * u.pA,
                                    V_initializer=v0 * u.mV)
        self.recurrent = brainx.distributed.PartitionedDelayedConn(
            partition, connector(params, self.n_padded, seed, delay_min_ms, self.position),
            exchange_every=exchange_every, spike_capacity=spike_capacity)
        self.background = (nn.PoissonBackground(
            self.n_padded, rate=per_neuron(params["k_ext"], 0.0) * model.BG_RATE_HZ * u.Hz,
            weight=params["w_ext"] * u.pA, seed=seed + 2)
            if params["background"] == "poisson" else None)

    def update(self):
        """One step (``model.Microcircuit.update``'s): arrivals in, this step's spikes out."""
        current = self.recurrent.current()
        if self.background is not None:
            current = current + self.background.update()
        spikes = self.neurons.update(current) > 0
        self.recurrent.update(spikes)
        return spikes


def partition_of(n: int, devices: int) -> brainx.distributed.NeuronPartition:
    """``n`` neurons (padded) over the first ``devices`` devices, mesh axis ``"neurons"``."""
    mesh = brainx.distributed.make_mesh((devices,), ("neurons",), devices=jax.devices()[:devices])
    return brainx.distributed.NeuronPartition(
        mesh, "neurons", brainx.distributed.NeuronPartition.padded_size(n, devices))


def simulate(net: nn.Module, steps: int, n: int) -> np.ndarray:
    """The spikes of ``steps`` steps, ``(steps, n)`` bool (the first ``n`` neurons)."""
    run = brainx.transform.jit(lambda ticks: brainx.transform.for_loop(
        lambda _: nn.pack_spikes(net.update()), ticks))
    packed = np.asarray(run(jnp.arange(steps)))
    return np.unpackbits(packed, axis=-1)[:, :n].astype(bool)


def build(scale: float, devices: int, seed: int = 55, every: int = 1,
          delay_min_ms: float = 0.05, background: str = "poisson",
          balanced: bool = False, spike_capacity=None) -> PartitionedMicrocircuit:
    params = exact_parameters(scale, background)
    part = partition_of(int(params["sizes"].sum()), devices)
    net = PartitionedMicrocircuit(params, part, seed, every, delay_min_ms, balanced,
                                  spike_capacity)
    part.init_all_states(net)
    return net


def main(args) -> dict:
    brainx.environ.set(dt=model.DT_MS * u.ms)
    results = {}
    for devices in sorted({1, args.devices or jax.device_count()}):
        t0 = time.perf_counter()
        net = build(args.scale, devices, args.seed, args.every, args.delay_min,
                    balanced=args.balanced, spike_capacity=args.capacity)
        t1 = time.perf_counter()
        spikes = simulate(net, args.steps, net.n)
        t2 = time.perf_counter()
        results[devices] = spikes
        print(f"{devices} device(s): {net.n} neurons (+{net.n_padded - net.n} padding), "
              f"{net.recurrent.nnz} synapses, {net.recurrent.block_bytes() / 2**20:.1f} MiB of "
              f"them per device; built in {t1 - t0:.1f} s, {args.steps} steps in {t2 - t1:.1f} s, "
              f"{spikes.sum()} spikes; spikes exchanged every {args.every} step(s), "
              f"{net.recurrent.exchange_bytes_per_step():.0f} bytes per step")
    if len(results) == 2:
        (_, one), (p, many) = sorted(results.items())
        print(f"same spikes on 1 and {p} devices: {np.array_equal(one, many)} "
              f"({int((one != many).sum())} differ)")
    return results


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--devices", type=int, default=0, help="devices to compare with one (0: all)")
    p.add_argument("--every", type=int, default=1, help="exchange the spikes every N steps")
    p.add_argument("--delay-min", type=float, default=0.05, help="delays redrawn below (ms)")
    p.add_argument("--seed", type=int, default=55)
    p.add_argument("--capacity", type=int, default=None,
                   help="exchange the spikes as indices, at most this many per device and step")
    p.add_argument("--balanced", action="store_true",
                   help="store the neurons in balanced_order (equal synapses per device)")
    p.add_argument("--fast", action="store_true", help="scale 0.05, 300 steps (tests)")
    args = p.parse_args(argv)
    if args.fast:
        args.scale, args.steps = 0.05, 300
    return args


if __name__ == "__main__":
    main(parse())
