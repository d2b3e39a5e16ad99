"""The COBA / CUBA E/I network of ``benchmarks/coba.py`` in Brian2: C++ standalone or cython.

The model is the one ``coba.py`` simulates (its constants are repeated here: this
script runs in an interpreter with Brian2, not brainx), written from its
equations: LIF neurons (tau 20 ms, threshold -50 mV, reset -60 mV, refractory
5 ms), 80 % excitatory and 20 % inhibitory; each presynaptic neuron projects to
``int(0.02 N)`` targets drawn with repeats allowed, from the same NumPy seeds as
``coba.py`` (the same synapses); exponential synapses (tau 5 ms excitatory, 10 ms
inhibitory). COBA: conductances in units of the leak, reversal potentials 0 and
-80 mV, jumps 0.6 and 6.7, rest -60 mV and a drive of 20 mV; CUBA: rest -49 mV, no
drive, current jumps of 1.62 and -9 mV; jumps divided by N / 4000. Initial
potentials Normal(-55, 2) mV (the same NumPy draw as ``coba.py``'s hand-written
version), dt 0.1 ms. The membrane is integrated by exponential Euler, the exact
step with the synaptic input held over the step, as ``coba.py``'s hand-written step.

Printed: the build time (for C++ standalone: code generation, then ``make``, g++
included), then for each round the run time of the simulation alone (standalone:
the main loop's time as the binary measures it, which excludes loading the arrays;
in parentheses the binary's whole run, as Brian2 times it from Python; cython: the
main loop of ``Network.run``; the build includes cython's compilation, which later
processes find in its cache) and the mean firing rate. The standalone binary is built
once and run once per round; the cython network is restored to its start and run
again.

Run with an interpreter that has Brian2: ``python benchmarks/brian2_coba.py
[--model coba|cuba] [--n 4000] [--duration 1000] [--target cpp_standalone|cython]
[--rounds 3]``. ``--wait``: read a line from stdin before each round (for
``coba.py --brian2``, which runs brainx between the rounds). Brian2 2.9.0 needs NumPy
below 2.4 (it wraps ``ndarray.ptp``, which 2.4 removed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

DT = 0.1                      # ms
V_TH, V_RESET = -50.0, -60.0  # mV
TAU, TAU_REF = 20.0, 5.0      # ms
TAU_E, TAU_I, E_E, E_I = 5.0, 10.0, 0.0, -80.0
P_CONN = 0.02
#: As coba.py's MODELS: rest and drive (mV), jumps at 4000 neurons.
MODELS = {"coba": dict(v_rest=-60.0, drive=20.0, w_e=0.6, w_i=6.7),
          "cuba": dict(v_rest=-49.0, drive=0.0, w_e=1.62, w_i=-9.0)}

#: The membrane: in COBA the conductances (units of the leak) pull towards their
#: reversal potentials, in CUBA the currents (in mV, R = 1) add to the rest potential.
EQUATIONS = {
    "coba": """
        dv/dt = (v_rest + drive - v + g_e * (rev_e - v) + g_i * (rev_i - v)) / tau_m : volt (unless refractory)
        dg_e/dt = -g_e / tau_e : 1
        dg_i/dt = -g_i / tau_i : 1
        n_spikes : integer
    """,
    "cuba": """
        dv/dt = (v_rest + drive - v + g_e + g_i) / tau_m : volt (unless refractory)
        dg_e/dt = -g_e / tau_e : volt
        dg_i/dt = -g_i / tau_i : volt
        n_spikes : integer
    """,
}


def connectivity(n: int, seed: int = 0):
    """``(n_exc, [(pre, post), (pre, post)])``: the E and I synapses, coba.py's draws."""
    n_exc = int(n * 0.8)
    conn_num = int(P_CONN * n)
    out = []
    for n_pre, s in ((n_exc, seed), (n - n_exc, seed + 1)):
        post = np.random.RandomState(s).randint(0, n, size=(n_pre, conn_num)).astype(np.int32)
        out.append((np.repeat(np.arange(n_pre, dtype=np.int32), conn_num), post.ravel()))
    return n_exc, out


def build(model: str, n: int, seed: int = 0):
    """The network: ``(Network, NeuronGroup)``."""
    import brian2 as b2
    from brian2 import ms, mV

    m = MODELS[model]
    scale = n / 4000
    unit = 1 if model == "coba" else mV
    namespace = dict(v_rest=m["v_rest"] * mV, drive=m["drive"] * mV, tau_m=TAU * ms,
                     tau_e=TAU_E * ms, tau_i=TAU_I * ms, rev_e=E_E * mV, rev_i=E_I * mV,
                     v_th=V_TH * mV, v_reset=V_RESET * mV,
                     w_e=m["w_e"] / scale * unit, w_i=m["w_i"] / scale * unit)
    neurons = b2.NeuronGroup(n, EQUATIONS[model], threshold="v >= v_th",
                             reset="v = v_reset; n_spikes += 1", refractory=TAU_REF * ms,
                             method="exponential_euler", namespace=namespace)
    neurons.v = np.random.RandomState(seed).normal(-55.0, 2.0, n).astype(np.float32) * mV
    n_exc, ((pre_e, post_e), (pre_i, post_i)) = connectivity(n, seed)
    exc = b2.Synapses(neurons[:n_exc], neurons, on_pre="g_e_post += w_e", namespace=namespace)
    exc.connect(i=pre_e, j=post_e)
    inh = b2.Synapses(neurons[n_exc:], neurons, on_pre="g_i_post += w_i", namespace=namespace)
    inh.connect(i=pre_i, j=post_i)
    return b2.Network(neurons, exc, inh), neurons


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), default="coba")
    p.add_argument("--n", type=int, default=4000)
    p.add_argument("--duration", type=float, default=1000.0, help="simulated ms")
    p.add_argument("--target", choices=("cpp_standalone", "cython"), default="cpp_standalone")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--directory", help="the standalone project (default: one per model and "
                   "size in the temporary directory; g++ rebuilds it in full each time)")
    p.add_argument("--wait", action="store_true", help="read a line from stdin before each round")
    args = p.parse_args(argv)

    import brian2 as b2
    from brian2 import ms

    b2.prefs.logging.console_log_level = "WARNING"
    standalone = args.target == "cpp_standalone"
    directory = args.directory or os.path.join(
        tempfile.gettempdir(), f"brian2_coba_{args.model}_{args.n}")
    if standalone:
        b2.set_device("cpp_standalone", directory=directory, build_on_run=False)
    else:
        b2.prefs.codegen.target = "cython"
    b2.defaultclock.dt = DT * ms
    print(f"{args.model.upper()}, Brian2 {b2.__version__} {args.target}, {args.n} neurons, "
          f"{args.duration:g} ms", flush=True)

    t0 = time.perf_counter()
    net, neurons = build(args.model, args.n)
    construct = time.perf_counter() - t0
    if standalone:
        net.run(args.duration * ms)
        t1 = time.perf_counter()
        b2.device.build(directory=directory, compile=True, run=False, clean=True)
        make = b2.device.timers["compile"]["make"]
        print(f"build s: {construct + time.perf_counter() - t1:.2f} (network {construct:.2f}, "
              f"code generation {time.perf_counter() - t1 - make:.2f}, make {make:.2f})",
              flush=True)
    else:
        net.store("start")
        t1 = time.perf_counter()
        net.run(0 * ms)                   # generates and compiles the rest of the code
        print(f"build s: {time.perf_counter() - t0:.2f} (network {construct:.2f}, the run's "
              f"code {time.perf_counter() - t1:.2f}; both with cython's compilation, which "
              "later processes find cached)", flush=True)

    runs = []
    for r in range(args.rounds):
        if args.wait:
            sys.stdin.readline()
        if standalone:
            b2.device.run(directory, with_output=False)
            run, whole = b2.device._last_run_time, b2.device.timers["run_binary"]
        else:
            net.restore("start")
            t0 = time.perf_counter()
            net.run(args.duration * ms)
            whole = time.perf_counter() - t0
            run = b2.device._last_run_time
        spikes = int(np.asarray(neurons.n_spikes[:]).sum())
        rate = spikes / args.n / (args.duration * 1e-3)
        runs.append(run)
        print(f"round {r + 1}: run s {run:.3f} ({whole:.3f}) rate Hz {rate:.2f}", flush=True)
    print(f"run s median {statistics.median(runs):.3f} min {min(runs):.3f}", flush=True)


if __name__ == "__main__":
    main()
