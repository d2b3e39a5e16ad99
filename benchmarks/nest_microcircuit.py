"""The Potjans & Diesmann (2014) microcircuit in NEST, built from our own tables (issue 43).

A reference runner for brainx's microcircuit: it builds the network that
``../shared/microcircuit.md`` (and ``docs/microcircuit.md``) describes, in NEST, runs a warm-up
and a measured window, and writes the per-population rates and ISI CVs, the build time, the
real-time factor and the peak memory as JSON. It needs NEST (``pip install nest-simulator``, in
a venv of its own) and NumPy only; it does not import brainx, so it runs in NEST's environment::

    /tmp/nest-venv/bin/python benchmarks/nest_microcircuit.py --scale 0.1 --seed 1 \\
        --t-presim 500 --t-sim 2000 --threads 2 --json out.json

``--summarize`` gathers such runs (``benchmarks/data/nest_runs/*.json`` of one scale and
background) into ``benchmarks/data/nest_microcircuit_<scale>_<background>.json``: per seed, the
mean and the seed-to-seed SD, and the tolerance a brainx run is held to (see ``summarize``).

The statistics: a population's rate is its spike count in the window over (neurons x window);
its ISI CV is the mean, over the neurons with at least 3 spikes in the window, of each
neuron's ISI standard deviation over its ISI mean.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np

POPS = ["L23E", "L23I", "L4E", "L4I", "L5E", "L5I", "L6E", "L6I"]
N_FULL = np.array([20683, 5834, 21915, 5479, 4850, 1065, 14395, 2948])
# connection probabilities [target, source]
C = np.array([
    [0.1009, 0.1689, 0.0437, 0.0818, 0.0323, 0.0, 0.0076, 0.0],
    [0.1346, 0.1371, 0.0316, 0.0515, 0.0755, 0.0, 0.0042, 0.0],
    [0.0077, 0.0059, 0.0497, 0.1350, 0.0067, 0.0003, 0.0453, 0.0],
    [0.0691, 0.0029, 0.0794, 0.1597, 0.0033, 0.0, 0.1057, 0.0],
    [0.1004, 0.0622, 0.0505, 0.0057, 0.0831, 0.3726, 0.0204, 0.0],
    [0.0548, 0.0269, 0.0257, 0.0022, 0.0600, 0.3158, 0.0086, 0.0],
    [0.0156, 0.0066, 0.0211, 0.0166, 0.0572, 0.0197, 0.0396, 0.2252],
    [0.0364, 0.0010, 0.0034, 0.0005, 0.0277, 0.0080, 0.0658, 0.1443]])
K_EXT = np.array([1600, 1500, 2100, 1900, 2000, 1900, 2900, 2100])
FULL_RATES = np.array([0.903, 2.965, 4.414, 5.876, 7.569, 8.633, 1.105, 7.829])   # Hz
V0_MEAN = np.array([-68.28, -63.16, -63.33, -63.45, -63.11, -61.66, -66.72, -61.43])
V0_SD = np.array([5.36, 4.57, 4.74, 4.94, 4.94, 4.55, 5.46, 4.48])
NEURON = dict(C_m=250.0, tau_m=10.0, tau_syn=0.5, E_L=-65.0, V_th=-50.0, V_reset=-65.0,
              t_ref=2.0)
BG_RATE = 8.0            # Hz per external source
PSP_E, G = 0.15, -4.0    # mV; inhibitory PSP = G * PSP_E
W_REL_SD, D_REL_SD = 0.1, 0.5
DELAY_E, DELAY_I, DELAY_BG = 1.5, 0.75, 1.5   # ms
DT = 0.1


def psc_per_psp(C_m, tau_m, tau_s):
    """pA of a current jump whose membrane deflection peaks at 1 mV."""
    t_max = tau_s * tau_m / (tau_m - tau_s) * np.log(tau_m / tau_s)
    peak = tau_s * tau_m / (C_m * (tau_m - tau_s)) * (np.exp(-t_max / tau_m) - np.exp(-t_max / tau_s))
    return 1.0 / peak


def model(scale: float, background: str) -> dict:
    """Sizes, synapse counts, weights, delays and DC of the microcircuit at ``scale`` (N and K)."""
    f = float(scale)
    Q_full = np.log(1 - C) / np.log(1 - 1 / np.outer(N_FULL, N_FULL).astype(np.float64))
    K_full = Q_full / N_FULL[:, None]
    per_mv = psc_per_psp(NEURON["C_m"], NEURON["tau_m"], NEURON["tau_syn"])
    psp = np.tile(np.where(np.arange(8) % 2 == 0, PSP_E, G * PSP_E), (8, 1))
    psp[0, 2] = 2 * PSP_E                                        # L4E -> L23E
    w = psp * per_mv
    w_ext = PSP_E * per_mv
    tau_s = NEURON["tau_syn"] * 1e-3                             # s, rates in Hz
    dc = BG_RATE * K_EXT * w_ext * tau_s if background == "dc" else np.zeros(8)
    if f != 1:
        dc = dc + tau_s * (1 - np.sqrt(f)) * (w * K_full) @ FULL_RATES
        if background == "poisson":
            dc = dc + tau_s * (1 - np.sqrt(f)) * w_ext * K_EXT * BG_RATE
    return dict(
        n=np.round(N_FULL * f).astype(int),
        synapses=np.round(Q_full * f * f).astype(np.int64),
        weight=w / np.sqrt(f), weight_ext=w_ext / np.sqrt(f),
        k_ext=np.round(K_EXT * f).astype(int),
        delay=np.tile(np.where(np.arange(8) % 2 == 0, DELAY_E, DELAY_I), (8, 1)),
        I_e=dc)


def population_stats(senders, times, first_id, n, t0, t1):
    """Rate (Hz) and mean ISI CV (neurons with >= 3 spikes) of one population in [t0, t1)."""
    keep = (times >= t0) & (times < t1)
    s, t = (senders[keep] - first_id).astype(np.int64), times[keep]   # empty: float in NEST
    rate = len(t) / (n * (t1 - t0) * 1e-3)
    order = np.lexsort((t, s))
    s, t = s[order], t[order]
    counts = np.bincount(s, minlength=n)
    cvs = []
    starts = np.concatenate([[0], np.cumsum(counts)])
    for i in np.flatnonzero(counts >= 3):
        isi = np.diff(t[starts[i]:starts[i + 1]])
        cvs.append(isi.std() / isi.mean())
    return rate, (float(np.mean(cvs)) if cvs else float("nan")), len(cvs)


def run(scale, background, seed, threads, t_presim, t_sim, synapse_model="static_synapse"):
    import nest

    nest.set_verbosity("M_ERROR")
    nest.ResetKernel()
    nest.SetKernelStatus({"resolution": DT, "local_num_threads": threads, "rng_seed": seed,
                          "print_time": False})
    m = model(scale, background)
    t_start = time.perf_counter()
    pops = []
    for i in range(8):
        p = nest.Create("iaf_psc_exp", int(m["n"][i]))
        p.set(tau_syn_ex=NEURON["tau_syn"], tau_syn_in=NEURON["tau_syn"], E_L=NEURON["E_L"],
              V_th=NEURON["V_th"], V_reset=NEURON["V_reset"], t_ref=NEURON["t_ref"],
              C_m=NEURON["C_m"], tau_m=NEURON["tau_m"], I_e=float(m["I_e"][i]))
        p.set(V_m=nest.random.normal(float(V0_MEAN[i]), float(V0_SD[i])))
        pops.append(p)
    recorders = nest.Create("spike_recorder", 8)
    if background == "poisson":
        gens = nest.Create("poisson_generator", 8)
        for i in range(8):
            gens[i].rate = float(BG_RATE * m["k_ext"][i])
    # one copy of the synapse model per source sign: NEST holds at most 134 M synapses per
    # thread and model, and the full model's 299 M (240 M excitatory) need two on two threads
    models = {True: synapse_model + "_from_E", False: synapse_model + "_from_I"}
    for name in models.values():
        nest.CopyModel(synapse_model, name)
    for y in range(8):
        for x in range(8):
            n_syn = int(m["synapses"][y, x])
            if n_syn == 0:
                continue
            w, d = float(m["weight"][y, x]), float(m["delay"][y, x])
            weight = nest.math.redraw(nest.random.normal(mean=w, std=abs(w) * W_REL_SD),
                                      min=0.0 if w > 0 else -np.inf,
                                      max=np.inf if w > 0 else 0.0)
            delay = nest.math.redraw(nest.random.normal(mean=d, std=d * D_REL_SD),
                                     min=DT - 0.5 * DT, max=np.inf)
            nest.Connect(pops[x], pops[y], {"rule": "fixed_total_number", "N": n_syn},
                         {"synapse_model": models[x % 2 == 0], "weight": weight, "delay": delay})
    for i in range(8):
        if background == "poisson":
            nest.Connect(gens[i], pops[i], "all_to_all",
                         {"weight": float(m["weight_ext"]), "delay": DELAY_BG})
        nest.Connect(pops[i], recorders[i])
    nest.Prepare()                  # the connection tables are finished here, inside the build
    build_s = time.perf_counter() - t_start
    t0 = time.perf_counter()
    nest.Run(t_presim)
    presim_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    nest.Run(t_sim)
    sim_s = time.perf_counter() - t0
    nest.Cleanup()
    rates, cvs, n_cv = {}, {}, {}
    for i, name in enumerate(POPS):
        ev = recorders[i].get("events")
        first = int(pops[i][0].global_id)
        r, cv, k = population_stats(np.asarray(ev["senders"]), np.asarray(ev["times"]), first,
                                    int(m["n"][i]), t_presim, t_presim + t_sim)
        rates[name], cvs[name], n_cv[name] = r, cv, k
    return {
        "simulator": f"NEST {nest.__version__}", "scale": scale, "background": background,
        "seed": seed, "threads": threads, "synapse_model": synapse_model,
        "t_presim_ms": t_presim, "t_sim_ms": t_sim, "rates_hz": rates, "cv_isi": cvs, "neurons_in_cv": n_cv,
        "build_s": build_s, "presim_s": presim_s, "sim_s": sim_s, "rtf": sim_s / (t_sim * 1e-3),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "neurons": int(m["n"].sum()), "synapses": int(nest.num_connections) - (
            int(m["n"].sum()) if background == "poisson" else 0) - int(m["n"].sum()),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def summarize(paths, out_path):
    """One reference file from several seeds' runs: values per seed, mean, SD and tolerance.

    A run of another simulator is another realization of the random network, so one run is
    held to NEST's run-to-run spread: a population's rate passes within ``3 * max(SD, SE)`` of
    the NEST seeds' mean, where SD is the SD over the seeds (``ddof=1``) and SE =
    ``sqrt(rate / (N T))`` the standard error that spike-count noise alone gives a population
    rate over N neurons and a window T (a floor: a few seeds can agree by chance); an ISI CV
    within ``max(0.05, 3 SD)`` of the mean (0.05 is issue 43's bound).
    """
    runs = [json.load(open(p)) for p in paths]
    first = runs[0]
    for r in runs:
        for key in ("scale", "background", "t_presim_ms", "t_sim_ms", "threads"):
            if r[key] != first[key]:
                raise ValueError(f"{key} differs between the runs: {r[key]} and {first[key]}")
    summary = {"what": "NEST reference statistics of the PD14 microcircuit, from "
               "benchmarks/nest_microcircuit.py (our own tables; see its docstring)",
               "simulator": first["simulator"], "scale": first["scale"],
               "background": first["background"], "threads": first["threads"],
               "t_presim_ms": first["t_presim_ms"], "t_sim_ms": first["t_sim_ms"],
               "seeds": [r["seed"] for r in runs], "dates": [r["date"] for r in runs],
               "tolerance_rule": summarize.__doc__.split("\n\n")[1].strip().replace("\n    ", " "),
               "per_seed": {k: [r[k] for r in runs] for k in (
                   "rates_hz", "cv_isi", "build_s", "sim_s", "rtf", "peak_rss_mib")}}
    sizes = model(first["scale"], first["background"])["n"]
    T = first["t_sim_ms"] * 1e-3
    for key in ("rates_hz", "cv_isi"):
        table = {}
        for i, pop in enumerate(POPS):
            v = np.array([np.nan if r[key][pop] is None else r[key][pop] for r in runs], float)
            mean = float(np.nanmean(v)) if np.any(~np.isnan(v)) else float("nan")
            sd = float(np.nanstd(v, ddof=1)) if np.sum(~np.isnan(v)) > 1 else 0.0
            if key == "rates_hz":
                tol = 3 * max(sd, np.sqrt(mean / (sizes[i] * T)))
            else:
                tol = max(0.05, 3 * sd)
            table[pop] = {k: (None if np.isnan(x) else x)           # strict JSON: no NaN
                          for k, x in (("mean", mean), ("sd", sd), ("tolerance", tol))}
        summary[key] = table
    summary["neurons"], summary["synapses"] = first["neurons"], first["synapses"]
    with open(out_path, "w") as fh:
        json.dump(summary, fh, indent=1)
        fh.write("\n")
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--background", choices=["poisson", "dc"], default="poisson")
    ap.add_argument("--seed", type=int, default=55)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--t-presim", type=float, default=500.0)
    ap.add_argument("--t-sim", type=float, default=1000.0)
    ap.add_argument("--synapse-model", default="static_synapse",
                    help="static_synapse (default) or NEST's compact static_synapse_hpc "
                         "(about 2/3 of the memory, but at most 134 M synapses per thread: "
                         "full scale needs 3 threads)")
    ap.add_argument("--json", default=None, help="write the result here (else stdout)")
    ap.add_argument("--summarize", nargs="+", metavar="RUN.json", default=None,
                    help="gather these runs into the reference file named by --json")
    a = ap.parse_args(argv)
    if a.summarize:
        out = summarize(a.summarize, a.json or "summary.json")
        print(json.dumps({k: out[k] for k in ("seeds", "rates_hz", "cv_isi")}, indent=1))
        return 0
    out = run(a.scale, a.background, a.seed, a.threads, a.t_presim, a.t_sim, a.synapse_model)
    text = json.dumps(out, indent=1)
    if a.json:
        with open(a.json, "w") as fh:
            fh.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
