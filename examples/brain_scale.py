"""A million spiking neurons over eight devices: one network, partitioned by neuron.
=================================================================================

A balanced network of ``--neurons`` NEST ``iaf_psc_exp`` neurons (80 % excitatory,
20 % inhibitory), each receiving ``--k`` recurrent synapses (fixed total number,
per-synapse delays of 1.5 +- 0.5 ms) and Poisson background, split over the devices
of a mesh the way NEST splits it over processes:

* :class:`brainx.distributed.NeuronPartition` declares the split (neuron ``i`` on
  device ``i // (n / P)``); every neuron state is sharded along it;
* each device draws, from the seed, only the synapses onto its own neurons
  (:func:`brainx.nn.fixed_total_number_onto` per target block): the whole
  connectivity never exists in one place;
* each step every device sends its spikes as bits: one all-gather of ``n / 8``
  bytes (``--every D``: of ``D n / 8`` bytes every ``D`` steps; the shortest delay
  here is 5 steps).

It prints the build time, the memory per device (the synapses' bytes and XLA's
memory analysis of the compiled step), the collectives of the step and the bytes
exchanged, then the population rates after ``--steps`` steps.

Run ``python examples/brain_scale.py`` (1 M neurons, 50 M synapses, 300 steps; on a
CPU it makes 8 fake devices: on two shared cores, 52 M synapses drawn in 22-34 s, 300 steps
in 12-68 s, 1.7-1.9 GiB at its peak; see docs/distributed.md), or
``--fast`` (65 536 neurons).
"""

# sphinx_gallery_thumbnail_path = "_static/gallery-thumbs/model_parallel_network.svg"

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")  # CPU only

import brainunit as u  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import brainx  # noqa: E402
from brainx import nn  # noqa: E402

DT_MS = 0.1
NEURON = dict(C_m=250.0 * u.pF, tau_m=10.0 * u.ms, tau_syn_ex=0.5 * u.ms, E_L=-65.0 * u.mV,
              V_th=-50.0 * u.mV, V_reset=-65.0 * u.mV, t_ref=2.0 * u.ms)
W_E, G = 175.0, -4.5                  # pA; inhibitory weight G * W_E
BACKGROUND_HZ, W_EXT = 7600.0, 87.75  # per neuron; pA


class BalancedNetwork(nn.Module):
    """``n`` neurons (the first 80 % excitatory), ``k`` recurrent synapses each, Poisson background;
    the recurrent synapses a :class:`brainx.distributed.PartitionedDelayedConn`."""

    def __init__(self, partition: brainx.distributed.NeuronPartition, k: int, seed: int = 0,
                 every: int = 1):
        super().__init__()
        n = partition.n
        self.n_e = int(0.8 * n)
        sizes = [self.n_e, n - self.n_e]
        counts = np.outer(sizes, [0.8 * k, 0.2 * k]).round().astype(np.int64)
        w = np.array([[W_E, G * W_E]] * 2)

        def connect(lo, hi):
            return nn.fixed_total_number_onto(sizes, sizes, counts, w, 0.1 * np.abs(w),
                                              [1.5, 1.5], [0.5, 0.5], dt=DT_MS, delay_min=0.45,
                                              seed=seed, targets=(lo, hi), unit=u.pA)

        rng = np.random.default_rng(seed + 1)
        v0 = rng.uniform(-65.0, -52.0, n).astype(np.float32)
        self.neurons = nn.IafPscExp(n, **NEURON, V_initializer=v0 * u.mV)
        self.recurrent = brainx.distributed.PartitionedDelayedConn(partition, connect,
                                                                   exchange_every=every)
        self.background = nn.PoissonBackground(n, rate=BACKGROUND_HZ * u.Hz,
                                               weight=W_EXT * u.pA, seed=seed + 2)

    def update(self):
        current = self.recurrent.current() + self.background.update()
        spikes = self.neurons.update(current) > 0
        self.recurrent.update(spikes)
        return spikes


def build(neurons: int, k: int, devices: int, every: int = 1, seed: int = 0) -> BalancedNetwork:
    """The network of about ``neurons`` neurons (padded) over the first ``devices`` devices."""
    mesh = brainx.distributed.make_mesh((devices,), ("neurons",), devices=jax.devices()[:devices])
    n = brainx.distributed.NeuronPartition.padded_size(neurons, devices)
    part = brainx.distributed.NeuronPartition(mesh, "neurons", n)
    return part.init_all_states(BalancedNetwork(part, k, seed, every))


def counting_run(net: BalancedNetwork):
    """A compiled run of ``len(ticks)`` steps returning each step's spike count per population."""
    def step(_):
        spikes = net.update()
        return jnp.stack([spikes[:net.n_e].sum(), spikes[net.n_e:].sum()])

    return brainx.transform.jit(lambda ticks: brainx.transform.for_loop(step, ticks))


def report(net: BalancedNetwork) -> dict:
    """Memory per device and what the step exchanges."""
    compiled = brainx.transform.jit(net.update).lower().compile()
    mem = compiled.memory_analysis()
    ops = brainx.distributed.hlo_collectives(compiled)
    return dict(synapse_mib=net.recurrent.block_bytes() / 2**20,
                arguments_mib=mem.argument_size_in_bytes / 2**20,
                temp_mib=mem.temp_size_in_bytes / 2**20,
                collectives=[(op.kind, op.shape, op.in_conditional) for op in ops],
                exchanged=net.recurrent.exchange_bytes_per_step())


def main(args) -> dict:
    brainx.environ.set(dt=DT_MS * u.ms)
    devices = args.devices or jax.device_count()
    t0 = time.perf_counter()
    net = build(args.neurons, args.k, devices, args.every, args.seed)
    t1 = time.perf_counter()
    part = net.recurrent.partition
    print(f"{part.n:,} neurons, {net.recurrent.nnz:,} synapses over {devices} devices "
          f"({part.block:,} neurons each), built in {t1 - t0:.1f} s")
    info = report(net)
    print(f"per device: synapses {info['synapse_mib']:.1f} MiB; compiled step: arguments "
          f"{info['arguments_mib']:.1f} MiB, temporaries {info['temp_mib']:.2f} MiB")
    print(f"collectives of one step: {info['collectives']}; spikes received per step: "
          f"{info['exchanged']:,.0f} bytes per device (bits, every {args.every} step(s))")
    run = counting_run(net)
    t2 = time.perf_counter()
    counts = np.asarray(run(jnp.arange(args.steps)))
    t3 = time.perf_counter()
    seconds = args.steps * DT_MS * 1e-3
    rates = counts.sum(axis=0) / np.array([net.n_e, part.n - net.n_e]) / seconds
    print(f"{args.steps} steps ({args.steps * DT_MS:.0f} ms) in {t3 - t2:.1f} s (compile "
          f"included); rates: excitatory {rates[0]:.2f} Hz, inhibitory {rates[1]:.2f} Hz")
    return dict(info, rates=rates.tolist(), neurons=part.n, synapses=net.recurrent.nnz,
                build_s=t1 - t0, run_s=t3 - t2)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--neurons", type=int, default=1 << 20)
    p.add_argument("--k", type=int, default=50, help="recurrent synapses per neuron")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--devices", type=int, default=0, help="0: all")
    p.add_argument("--every", type=int, default=1, help="exchange the spikes every N steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fast", action="store_true", help="65 536 neurons, 100 steps (tests)")
    args = p.parse_args(argv)
    if args.fast:
        args.neurons, args.steps = 1 << 16, 100
    return args


if __name__ == "__main__":
    main(parse())
