"""The Potjans & Diesmann (2014) cortical microcircuit: 77 169 neurons, 299 M synapses, per-synapse delays.
===========================================================================================================

The model of ``examples/microcircuit_model.py`` (eight populations of NEST's
``iaf_psc_exp``, fixed-total-number connectivity with per-synapse weights and
delays, Poisson or DC background, down-scaled with NEST's compensation), built
and run the way NEST's reference implementation runs it: a warm-up of
``--t-presim`` ms left out of the statistics, then ``--t-sim`` ms analysed.

The recurrent synapses are one :class:`brainx.nn.DelayedEventConn`: every
synapse has its own delay, and spikes are delivered NEST's way, into a
postsynaptic ring buffer, by the native kernel (no Python on the step). The
network is stepped in jitted ``for_loop`` chunks of 1000 steps (0.1 s) that
return the spikes packed as bits (:func:`brainx.nn.pack_spikes`), not a dense
raster.

Run ``python examples/microcircuit.py --scale 0.1`` (seconds to build, about a
minute to run on two cores), ``--scale 1`` for the full model (about 4 GiB),
``--background dc`` for NEST's benchmark setting (at scales below ~0.4 only L6I
fires: the DC is sub-threshold elsewhere), ``--json PATH`` for the numbers,
``--plot PATH`` for the raster and rate figure, ``--cache DIR`` to save the
drawn synapses with ``brainx.io`` and load them in the next run of the same
scale and seed.

It prints the build time, the real-time factor (wall time of the ``--t-sim``
part / model time), the peak memory, and each population's rate and ISI CV.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import sys
import time

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

# the model module beside this file (sphinx-gallery runs the example in its folder, without __file__)
_HERE = pathlib.Path(globals().get("__file__", "microcircuit.py")).resolve().parent
sys.path.insert(0, str(_HERE))
import microcircuit_model as model  # noqa: E402

import brainx  # noqa: E402
from brainx import nn  # noqa: E402

CHUNK = 1000          # steps per compiled call


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def simulate(net: model.Microcircuit, steps: int) -> np.ndarray:
    """``steps`` steps in jitted chunks; the spikes packed as bits, ``(steps, ceil(n / 8))``."""
    @brainx.transform.jit
    def chunk(ticks):
        return brainx.transform.for_loop(lambda _: nn.pack_spikes(net.update()), ticks)

    out = []
    for start in range(0, steps, CHUNK):
        out.append(np.asarray(chunk(jnp.arange(min(CHUNK, steps - start)))))
    return np.concatenate(out) if out else np.zeros((0, -(-net.n // 8)), np.uint8)


def populations(sizes) -> dict:
    edges = np.concatenate([[0], np.cumsum(sizes)])
    return {name: (int(edges[i]), int(edges[i + 1])) for i, name in enumerate(model.POPULATIONS)}


def plot(raster: nn.SpikeRaster, pops: dict, rates: dict, path: str) -> None:
    import matplotlib                       # optional dependency
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 5), gridspec_kw={"width_ratios": [3, 1]})
    shown = raster.window(raster.t0, raster.t0 + min(200.0, raster.duration_ms))
    nn.spike_stats.raster_plot(shown, pops, ax=ax, max_neurons=200, markersize=1.5)
    ax.set_title("spikes, 200 neurons per population")
    names = list(rates)
    bx.barh(range(len(names)), [rates[k] for k in names], color=[f"C{i}" for i in range(8)])
    bx.set_yticks(range(len(names)), names)
    bx.invert_yaxis()
    bx.set_xlabel("rate (Hz)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=0.1, help="N and K scaling (default 0.1)")
    ap.add_argument("--background", choices=("poisson", "dc"), default="poisson")
    ap.add_argument("--t-presim", type=float, default=500.0, help="warm-up, ms (default 500)")
    ap.add_argument("--t-sim", type=float, default=1000.0, help="analysed, ms (default 1000)")
    ap.add_argument("--seed", type=int, default=55)
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--plot", default=None, help="raster and rate figure (default: "
                                                  "microcircuit.png in the working folder; 'none': "
                                                  "no plot)")
    ap.add_argument("--cache", default=None, help="folder for the drawn synapses (brainx.io)")
    args = ap.parse_args(argv)

    brainx.environ.set(dt=model.DT_MS * u.ms)
    params = model.network_parameters(args.scale, args.background)
    if args.background == "dc":
        for name, i_e in zip(model.POPULATIONS, params["I_e"]):
            if i_e <= 375.0:       # rheobase (V_th - E_L) / R_m
                print(f"note: population {name} is sub-threshold with downscaled DC input "
                      f"({i_e:.1f} pA < 375 pA) and may not fire")
    path = None
    if args.cache:
        os.makedirs(args.cache, exist_ok=True)
        path = os.path.join(args.cache, f"microcircuit_scale{args.scale:g}_seed{args.seed}.msgpack")
    t0 = time.perf_counter()
    conn, loaded = model.cached_build(params, args.seed, path)
    synapses = conn.nnz
    net = model.Microcircuit(params, conn, seed=args.seed)
    del conn
    nn.init_all_states(net)
    jax.block_until_ready(net.recurrent.weight.value)
    build_s = time.perf_counter() - t0
    print(f"microcircuit at scale {args.scale:g}, {args.background} background: {net.n} neurons, "
          f"{synapses:,} synapses (max delay {net.recurrent.slots - 1} steps); "
          f"{'loaded' if loaded else 'built'} in {build_s:.1f} s, peak RSS {peak_rss_mib():.0f} MiB")

    steps_pre = int(round(args.t_presim / model.DT_MS))
    steps_sim = int(round(args.t_sim / model.DT_MS))
    t1 = time.perf_counter()
    simulate(net, min(CHUNK, steps_pre) if steps_pre else 0)        # includes the compilation
    compile_and_first_s = time.perf_counter() - t1
    if steps_pre > CHUNK:
        simulate(net, steps_pre - CHUNK)
    presim_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    packed = simulate(net, steps_sim)
    sim_s = time.perf_counter() - t2
    rtf = sim_s / (args.t_sim * 1e-3)
    raster = nn.SpikeRaster(packed, net.n, dt=model.DT_MS, t0=args.t_presim)
    pops = populations(params["sizes"])
    rates = nn.spike_stats.firing_rates(raster, pops)
    cvs = nn.spike_stats.isi_cv(raster, pops)
    print(f"warm-up {args.t_presim:g} ms in {presim_s:.1f} s (first chunk, with compilation, "
          f"{compile_and_first_s:.1f} s); {args.t_sim:g} ms in {sim_s:.2f} s: real-time factor "
          f"{rtf:.2f}, {sim_s / max(steps_sim, 1) * 1e6:.0f} us/step")
    print(f"peak RSS {peak_rss_mib():.0f} MiB")
    print("population   rate (Hz)   ISI CV")
    for name in model.POPULATIONS:
        print(f"{name:10s} {rates[name]:10.3f} {cvs[name]:8.3f}")
    result = {"scale": args.scale, "background": args.background, "seed": args.seed,
              "t_presim_ms": args.t_presim, "t_sim_ms": args.t_sim,
              "rates_hz": rates, "cv_isi": cvs, "build_s": build_s, "loaded": loaded,
              "presim_s": presim_s, "sim_s": sim_s, "rtf": rtf,
              "us_per_step": sim_s / max(steps_sim, 1) * 1e6, "peak_rss_mib": peak_rss_mib(),
              "neurons": int(net.n), "synapses": int(synapses),
              "spikes": int(raster.counts().sum())}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=float)
    plot_path = args.plot or "microcircuit.png"
    if plot_path != "none" and steps_sim:
        try:
            plot(raster, pops, rates, plot_path)
            print(f"saved {plot_path}")
        except ImportError:
            print("matplotlib is not installed: no plot")
    return result


if __name__ == "__main__":
    main()
