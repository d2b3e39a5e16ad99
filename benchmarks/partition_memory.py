"""Memory per device of the partitioned microcircuit at P = 1, 2, 4, 8 devices (issue 46).

For each device count: the bytes of one device's synapses (indptr, targets, delays,
weights: ``PartitionedDelayedConn.block_bytes``), XLA's memory analysis of the
compiled step (``memory_analysis()`` of ``brainx.transform.jit(net.update)``: the
arguments are the states, per device), the collectives in the compiled step and the
bytes each device receives per step. Prints a Markdown table (docs/distributed.md
has the one measured on this machine).

Run ``python benchmarks/partition_memory.py --scale 0.1`` (on a CPU: 8 fake devices).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")  # CPU only

import brainunit as u  # noqa: E402
import jax  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import partitioned_microcircuit as pm  # noqa: E402

import brainx  # noqa: E402

MIB = 2.0 ** 20


def measure(scale: float, devices: int, every: int = 1, balanced: bool = False) -> dict:
    net = pm.build(scale, devices, every=every, delay_min_ms=0.45 if every > 1 else 0.05,
                   balanced=balanced)
    compiled = brainx.transform.jit(net.update).lower().compile()
    mem = compiled.memory_analysis()
    ops = brainx.distributed.hlo_collectives(compiled)
    return dict(devices=devices, neurons=net.n_padded, synapses=net.recurrent.nnz,
                block_synapses=net.recurrent.block_nnz,
                synapse_bytes=net.recurrent.block_bytes(),
                arguments=int(mem.argument_size_in_bytes), temp=int(mem.temp_size_in_bytes),
                output=int(mem.output_size_in_bytes), alias=int(mem.alias_size_in_bytes),
                collectives=[(op.kind, op.shape) for op in ops],
                exchanged=net.recurrent.exchange_bytes_per_step())


def table(rows) -> str:
    one = rows[0]
    lines = ["| P | synapses per device (largest block) | their MiB | x P / P=1 | step arguments "
             "MiB | step temp MiB | collectives per step | bytes received per step |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["synapse_bytes"] * r["devices"] / one["synapse_bytes"]
        lines.append(f"| {r['devices']} | {r['block_synapses']:,} | {r['synapse_bytes'] / MIB:.1f} "
                     f"| {ratio:.2f} | {r['arguments'] / MIB:.1f} | {r['temp'] / MIB:.2f} | "
                     f"{', '.join(f'{k} {s}' for k, s in r['collectives'])} | "
                     f"{r['exchanged']:.0f} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=0.1)
    p.add_argument("--every", type=int, default=1)
    p.add_argument("--balanced", action="store_true", help="neurons in balanced_order")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    brainx.environ.set(dt=0.1 * u.ms)
    rows = [measure(args.scale, d, args.every, args.balanced)
            for d in (1, 2, 4, 8) if d <= jax.device_count()]
    print(f"microcircuit at scale {args.scale}: {rows[0]['synapses']:,} synapses, "
          f"exchange every {args.every} step(s), {'balanced' if args.balanced else 'contiguous'} "
          "blocks")
    print(table(rows))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
