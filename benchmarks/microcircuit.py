"""brainx's microcircuit (``examples/microcircuit.py``) beside NEST's, in interleaved rounds (issue 43).

Each round runs brainx's example, then (with ``--nest PYTHON``) ``benchmarks/nest_microcircuit.py``
under that Python, each in a fresh process, at the same scale, background, times and seed
(the seed changes from round to round: ``--seed``, ``--seed + 1``, ...). It prints each
population's rate and ISI CV side by side, the ratios brainx / NEST of the real-time factor
(wall time of the measured part / model time) and of the build time, and both peak memories.
Interleaving puts both simulators under the same load of a shared machine.

Without ``--nest``, or in addition to it, ``--reference FILE`` (default
``benchmarks/data/nest_microcircuit_<scale>_<background>.json`` when it exists) holds the
brainx statistics to NEST's stored seed-to-seed spread: the table marks a rate outside the
reference's tolerance (or a CV more than 0.05 away) with ``!``.

Examples::

    python benchmarks/microcircuit.py --scale 0.1 --t-sim 2000 --rounds 3 \\
        --nest /tmp/nest-venv/bin/python
    # NEST at full scale needs ~14 GiB: once, short, after checking free memory
    python benchmarks/microcircuit.py --scale 1 --t-presim 100 --t-sim 100 --rounds 1 \\
        --nest /tmp/nest-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
POPS = ["L23E", "L23I", "L4E", "L4I", "L5E", "L5I", "L6E", "L6I"]
NEST_FULL_GIB = 16          # what NEST's full-scale run needs free (it peaks at ~14 GiB) ...
NEST_FULL_HPC_GIB = 11      # ... and with its compact static_synapse_hpc (~9.6 GiB)


def available_gib() -> float:
    """``MemAvailable`` of /proc/meminfo in GiB (inf where it cannot be read)."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2 ** 20
    except OSError:
        pass
    return float("inf")


def run_one(cmd: list, out: str, timeout: float) -> dict:
    """Run ``cmd`` (which writes its JSON to ``out``) and return the JSON, with the wall time."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed ({done.returncode}):\n"
                           f"{done.stderr[-3000:]}")
    with open(out) as fh:
        result = json.load(fh)
    result["process_wall_s"] = wall
    return result


def brainx_cmd(a, seed: int, out: str) -> list:
    return [sys.executable, "examples/microcircuit.py", "--scale", str(a.scale), "--background",
            a.background, "--t-presim", str(a.t_presim), "--t-sim", str(a.t_sim), "--seed",
            str(seed), "--json", out, "--plot", "none"] + (["--cache", a.cache] if a.cache else [])


def nest_cmd(a, seed: int, out: str) -> list:
    return [a.nest, "benchmarks/nest_microcircuit.py", "--scale", str(a.scale), "--background",
            a.background, "--t-presim", str(a.t_presim), "--t-sim", str(a.t_sim), "--seed",
            str(seed), "--threads", str(a.threads), "--synapse-model", a.synapse_model,
            "--json", out]


def mean_of(runs: list, key: str, pop: str) -> float:
    v = np.array([r[key][pop] for r in runs], float)
    return float(np.nanmean(v)) if np.any(~np.isnan(v)) else float("nan")


def report(bx: list, ne: list, ref: dict | None) -> str:
    lines = []
    head = f"{'population':10s} {'brainx Hz':>10s} {'NEST Hz':>9s}"
    if ref:
        head += f" {'ref Hz (tol)':>16s}"
    head += f" {'brainx CV':>10s} {'NEST CV':>8s}" + (f" {'ref CV':>7s}" if ref else "")
    lines.append(head)
    for pop in POPS:
        r_b, c_b = mean_of(bx, "rates_hz", pop), mean_of(bx, "cv_isi", pop)
        r_n = mean_of(ne, "rates_hz", pop) if ne else float("nan")
        c_n = mean_of(ne, "cv_isi", pop) if ne else float("nan")
        line = f"{pop:10s} {r_b:10.3f} {r_n:9.3f}"
        if ref:
            rr, rc = ref["rates_hz"][pop], ref["cv_isi"][pop]
            tol = rr["tolerance"]
            bad = tol is not None and abs(r_b - rr["mean"]) > tol
            line += f" {rr['mean']:8.3f} ({'-' if tol is None else f'{tol:.3f}'}){'!' if bad else ' '}"
        line += f" {c_b:10.3f} {c_n:8.3f}"
        if ref and rc["mean"] is not None:
            bad = not np.isnan(c_b) and abs(c_b - rc["mean"]) > (rc["tolerance"] or 0.05)
            line += f" {rc['mean']:7.3f}{'!' if bad else ''}"
        lines.append(line)
    med = lambda runs, k: float(np.median([r[k] for r in runs]))
    lines.append(f"brainx: build {med(bx, 'build_s'):.1f} s, real-time factor "
                 f"{med(bx, 'rtf'):.2f} (median of {len(bx)}; min {min(r['rtf'] for r in bx):.2f}), "
                 f"peak RSS {max(r['peak_rss_mib'] for r in bx):.0f} MiB")
    if ne:
        lines.append(f"NEST:   build {med(ne, 'build_s'):.1f} s, real-time factor "
                     f"{med(ne, 'rtf'):.2f} (median of {len(ne)}; min {min(r['rtf'] for r in ne):.2f}), "
                     f"peak RSS {max(r['peak_rss_mib'] for r in ne):.0f} MiB")
        rtf = [b["rtf"] / n["rtf"] for b, n in zip(bx, ne)]
        build = [b["build_s"] / n["build_s"] for b, n in zip(bx, ne)]
        lines.append(f"brainx / NEST, round by round: real-time factor "
                     f"{', '.join(f'{x:.3f}' for x in rtf)} (median {np.median(rtf):.3f}); "
                     f"build {', '.join(f'{x:.2f}' for x in build)}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--background", choices=["poisson", "dc"], default="poisson")
    ap.add_argument("--t-presim", type=float, default=500.0)
    ap.add_argument("--t-sim", type=float, default=1000.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--nest", default=None, metavar="PYTHON", help="a Python with NEST")
    ap.add_argument("--threads", type=int, default=2, help="NEST's threads (default 2)")
    ap.add_argument("--synapse-model", default="static_synapse",
                    help="NEST's synapse model (static_synapse_hpc: its compact one, at most "
                         "134 M synapses per thread)")
    ap.add_argument("--reference", default=None, help="stored NEST statistics (JSON)")
    ap.add_argument("--cache", default=None, help="passed to the example (brainx.io synapses)")
    ap.add_argument("--json", default=None, help="write every run's results here")
    ap.add_argument("--timeout", type=float, default=3 * 3600)
    a = ap.parse_args(argv)
    need = NEST_FULL_HPC_GIB if a.synapse_model.endswith("_hpc") else NEST_FULL_GIB
    if a.nest and a.scale >= 1 and available_gib() < need:
        sys.exit(f"NEST at full scale needs ~{need} GiB free; {available_gib():.1f} GiB "
                 "are available: run it later, or without --nest.")
    ref_path = a.reference or HERE / "data" / f"nest_microcircuit_{a.scale:g}_{a.background}.json"
    ref = json.load(open(ref_path)) if os.path.exists(ref_path) else None
    if ref and (ref["t_sim_ms"] != a.t_sim):
        print(f"note: the reference {ref_path} analysed {ref['t_sim_ms']:g} ms, this run "
              f"{a.t_sim:g} ms: ISI CVs grow with the window")
    bx, ne = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(a.rounds):
            seed = a.seed + k
            out = os.path.join(tmp, f"brainx{k}.json")
            bx.append(run_one(brainx_cmd(a, seed, out), out, a.timeout))
            print(f"round {k + 1}: brainx rtf {bx[-1]['rtf']:.2f}", end="", flush=True)
            if a.nest:
                out = os.path.join(tmp, f"nest{k}.json")
                ne.append(run_one(nest_cmd(a, seed, out), out, a.timeout))
                print(f", NEST rtf {ne[-1]['rtf']:.2f}", end="")
            print()
    print(f"microcircuit, scale {a.scale:g}, {a.background}, {a.t_presim:g} ms warm-up + "
          f"{a.t_sim:g} ms; reference: {ref_path if ref else 'none'}")
    print(report(bx, ne, ref))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"args": vars(a), "brainx": bx, "nest": ne}, fh, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
