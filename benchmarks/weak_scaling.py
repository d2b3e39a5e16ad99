"""Weak scaling of a partitioned spiking network: fixed neurons per device, 1, 2, 4, ... devices.

The balanced network of ``examples/brain_scale.py`` with ``--per-device`` neurons on
each device (``k`` synapses each), on the first ``P`` devices for ``P = 1, 2, 4, ...``
up to all of them. For each: the build time, the compiled step's memory per device,
the bytes of spikes exchanged per step, and the wall time per step of a compiled run
of ``--steps`` steps (after a warm-up run of the same length, so compilation is left
out). Ideal weak scaling keeps the time per step flat; the exchange (``n / 8`` bytes
per device per step, growing with ``P``) is what bends it.

Meant for real devices (GPUs: one process per GPU under ``jax.distributed``, or one
process with several); on a CPU it makes 8 fake devices that share the cores, so the
times there only show the bookkeeping, not scaling. On GPUs the delivery runs the
plain-JAX path (the native kernel is CPU-only), whose cost is every synapse per step.

Run ``python benchmarks/weak_scaling.py --per-device 131072 --k 100 --steps 1000``; on a
cluster, one process per GPU: ``srun python benchmarks/weak_scaling.py --distributed ...``
(``jax.distributed.initialize()`` reads SLURM's or Open MPI's environment; process 0 prints).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")  # CPU only

import brainunit as u  # noqa: E402
import jax  # noqa: E402

if "--distributed" in sys.argv:     # before anything touches a device: one process per GPU
    jax.distributed.initialize()
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import brain_scale  # noqa: E402

import brainx  # noqa: E402


def measure(per_device: int, k: int, devices: int, steps: int, every: int) -> dict:
    t0 = time.perf_counter()
    net = brain_scale.build(per_device * devices, k, devices, every)
    build_s = time.perf_counter() - t0
    info = brain_scale.report(net)
    run = brain_scale.counting_run(net)
    ticks = jnp.arange(steps)
    jax.block_until_ready(run(ticks))                       # compile and warm up
    t1 = time.perf_counter()
    counts = _host(jax.block_until_ready(run(ticks)))
    run_s = time.perf_counter() - t1
    rate = counts.sum() / net.recurrent.partition.n / (steps * brain_scale.DT_MS * 1e-3)
    return dict(devices=devices, neurons=net.recurrent.partition.n, synapses=net.recurrent.nnz,
                build_s=build_s, ms_per_step=1e3 * run_s / steps, rate_hz=float(rate), **info)


def _host(x) -> np.ndarray:
    """A replicated result on this host (on several processes, this process's copy)."""
    return np.asarray(x if x.is_fully_addressable else x.addressable_shards[0].data)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--per-device", type=int, default=1 << 15)
    p.add_argument("--k", type=int, default=50)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--every", type=int, default=1)
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--distributed", action="store_true",
                   help="join the other processes (jax.distributed.initialize, done on import)")
    args = p.parse_args(argv)
    brainx.environ.set(dt=brain_scale.DT_MS * u.ms)
    # several processes: every process must hold a block, so only the whole job is measured
    # (run the job on 1, 2, 4, ... nodes for the curve)
    counts = ([jax.device_count()] if args.distributed else
              [d for d in (1, 2, 4, 8, 16, 32, 64) if d <= jax.device_count()])
    rows = [measure(args.per_device, args.k, d, args.steps, args.every) for d in counts]
    if jax.process_index():
        return rows
    print(f"{jax.devices()[0].platform}, {args.per_device:,} neurons and "
          f"{args.per_device * args.k:,} synapses per device, {args.steps} steps")
    print("| devices | neurons | build s | ms per step | synapses MiB per device | "
          "step arguments MiB | bytes received per step | rate Hz |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['devices']} | {r['neurons']:,} | {r['build_s']:.1f} | {r['ms_per_step']:.2f} "
              f"| {r['synapse_mib']:.1f} | {r['arguments_mib']:.1f} | {r['exchanged']:,.0f} | "
              f"{r['rate_hz']:.1f} |")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
