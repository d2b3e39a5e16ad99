"""COBA E/I network (Vogels & Abbott 2005) in brainstate + brainpy.state: the brainstate column.

The network of ``coba.py`` (same parameters, sizes, dt, initial potentials and
connectivity), written the way a brainstate user writes it: ``brainpy.state.LIFRef``
neurons, two ``brainpy.state.AlignPostProj`` projections, each an
``brainstate.nn.EventFixedProb`` (brainevent's ``FixedPostNumConn``, numba on CPU)
into a ``brainpy.state.Expon`` synapse with a ``COBA`` (or ``CUBA``) output merged
into the neurons; the simulation is ``brainstate.transform.for_loop`` under
``brainstate.transform.jit``, the model time ``t`` set with
``brainstate.environ.context`` at each step (``LIFRef``'s refractory period reads it).

It runs in an environment with brainstate and brainpy (``brainpy.state``) and does not
import brainx. Model parameters (``coba.py``'s): 80 % excitatory, 20 % inhibitory
LIF neurons, tau 20 ms, threshold -50 mV, reset -60 mV (a hard reset), refractory
5 ms; COBA: rest -60 mV, drive 20 mV, exponential conductances in units of the
leak (E: tau 5 ms, reversal 0 mV, weight 0.6; I: tau 10 ms, reversal -80 mV, weight
6.7); CUBA: rest -49 mV, no drive, exponential currents of 1.62 mV and -9 mV;
weights divided by N / 4000; each presynaptic neuron projects to ``int(0.02 N)``
targets drawn with ``np.random.RandomState(seed).randint`` (the E projection seed 0,
the I projection seed 1, as coba.py's); initial potentials Normal(-55, 2) mV; dt
0.1 ms.

One difference in the neuron that is brainpy.state's: ``LIFRef`` holds a neuron at
its reset while ``t - t_last_spike < tau_ref``, with ``t = i * dt`` in float32, so a
neuron is held 49 or 50 steps after a spike (coba.py's: 50); the firing rates agree with
coba.py's all the same (COBA: 19.8, 5.2, 1.8 Hz at 4000, 16 000, 64 000 neurons).

The CPU kernel: brainevent's default is numba (``pip install numba``; without it the
numba backend fails to build the kernel and nothing runs unless
``brainevent.config.set_backend('cpu', 'jax_raw')``). brainevent 0.3.0 calls each numba
kernel through a Python ctypes callback (the XLA FFI handler wraps the buffers as NumPy
arrays, then calls the jitted kernel): about 65 us a call on a 2-core machine even with
no spike, two calls a step.

Printed per size: build time (construction, connectivity drawn, states initialised)
in a fresh process and again in this one; compile time (trace + lower + XLA, after a
small network was compiled and run once); run time, median and minimum over the
rounds (the compiled program's call from Python, block_until_ready; each round
continues the previous one, time included); us per step; the mean firing rate over
all runs.

Run: ``python benchmarks/coba_brainstate.py [--model coba|cuba] [--sizes 4000 16000]
[--duration 1000] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import brainpy
import brainstate
import braintools
import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

DT = 0.1                      # ms
V_TH, V_RESET = -50.0, -60.0
TAU, TAU_REF = 20.0, 5.0
TAU_E, TAU_I, E_E, E_I = 5.0, 10.0, 0.0, -80.0
P_CONN = 0.02
MODELS = {"coba": {"v_rest": -60.0, "drive": 20.0, "w_e": 0.6, "w_i": 6.7},
          "cuba": {"v_rest": -49.0, "drive": 0.0, "w_e": 1.62, "w_i": -9.0}}
MODEL = "coba"                # main() sets it from --model


def params() -> dict:
    return MODELS[MODEL]


def sizes(n: int):
    """``(n_exc, n_inh, conn_num, w_e, w_i)`` of the network of ``n`` neurons."""
    n_exc = int(n * 0.8)
    scale = n / 4000
    return n_exc, n - n_exc, int(P_CONN * n), params()["w_e"] / scale, params()["w_i"] / scale


class EINet(brainstate.nn.Module):
    """The network, with brainpy.state's neuron, synapse and output models."""

    def __init__(self, n: int, seed: int = 0):
        super().__init__()
        n_exc, n_inh, conn_num, w_e, w_i = sizes(n)
        self.n_exc = n_exc
        self.drive = params()["drive"] * u.mV
        self.pop = brainpy.state.LIFRef(
            n, R=1.0, tau=TAU * u.ms, tau_ref=TAU_REF * u.ms, V_rest=params()["v_rest"] * u.mV,
            V_th=V_TH * u.mV, V_reset=V_RESET * u.mV, spk_reset="hard",
            V_initializer=braintools.init.Normal(-55.0 * u.mV, 2.0 * u.mV))
        if MODEL == "coba":       # conductances in units of the leak: g (E - V) is in mV
            out_e = brainpy.state.COBA.desc(E=E_E * u.mV)
            out_i = brainpy.state.COBA.desc(E=E_I * u.mV)
        else:                     # currents in mV (R = 1)
            out_e = out_i = brainpy.state.CUBA.desc(scale=u.mV)
        zero = braintools.init.Constant(0.0)
        self.exc = brainpy.state.AlignPostProj(
            comm=brainstate.nn.EventFixedProb(n_exc, n, conn_num=conn_num, conn_weight=w_e, seed=seed),
            syn=brainpy.state.Expon.desc(n, tau=TAU_E * u.ms, g_initializer=zero),
            out=out_e, post=self.pop)
        self.inh = brainpy.state.AlignPostProj(
            comm=brainstate.nn.EventFixedProb(n_inh, n, conn_num=conn_num, conn_weight=w_i,
                                              seed=seed + 1),
            syn=brainpy.state.Expon.desc(n, tau=TAU_I * u.ms, g_initializer=zero),
            out=out_i, post=self.pop)

    def update(self, i):
        with brainstate.environ.context(i=i, t=i * brainstate.environ.get_dt()):
            spikes = self.pop.get_spike() != 0.0          # the previous step's spikes
            self.exc(spikes[:self.n_exc])
            self.inh(spikes[self.n_exc:])
            return self.pop(self.drive)


def build(n: int, seed: int = 0) -> EINet:
    brainstate.random.seed(seed)
    net = EINet(n, seed)
    brainstate.nn.init_all_states(net)
    return net


def simulation(net: EINet, n_steps: int):
    """``run(i0)``: ``n_steps`` steps from step ``i0``; spikes per step, shape ``(n_steps,)``."""
    def step(i):
        return net.update(i).sum()

    @brainstate.transform.jit
    def run(i0):
        return brainstate.transform.for_loop(step, i0 + jnp.arange(n_steps))
    return run


def compiled_call(run, *args):
    """Lower and compile ``run`` (a ``brainstate.transform.jit`` function) for ``args``; a call
    of the compiled program that reads the states and writes them back, as ``run`` does."""
    exe = run.lower(*args).compile()
    trace = run.stateful_fun.get_state_trace(*args, compile_if_miss=True)

    def call(*args):
        read = trace.get_read_state_values(True)
        writes, outs = exe(trace.get_state_values(), *args)
        trace.assign_state_vals_v2(read, writes)
        return outs
    return call


def build_seconds(n: int, seed: int = 0) -> float:
    t0 = time.perf_counter()
    net = build(n, seed)
    jax.block_until_ready(net.pop.V.value)
    return time.perf_counter() - t0


def cold_build_seconds(n: int) -> float:
    """:func:`build_seconds` in a fresh Python process (after the imports)."""
    out = subprocess.run([sys.executable, __file__, "--build-only", str(n), "--model", MODEL],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def measure(n: int, n_steps: int, rounds: int, seed: int = 0) -> dict:
    out = {"build cold": cold_build_seconds(n), "build": build_seconds(n, seed + 1)}
    net = build(n, seed)
    t0 = time.perf_counter()
    call = compiled_call(simulation(net, n_steps), jnp.int32(0))
    out["compile"] = time.perf_counter() - t0
    counts, times = [], []
    for k in range(rounds + 1):              # the first run is not timed
        i0 = jnp.int32(k * n_steps)
        t0 = time.perf_counter()
        counts.append(jax.block_until_ready(call(i0)))
        if k:
            times.append(time.perf_counter() - t0)
    out["run"], out["min"] = statistics.median(times), min(times)
    spikes = sum(float(np.asarray(c).sum()) for c in counts)
    out["rate"] = spikes / n / (len(counts) * n_steps * DT * 1e-3)
    return out


def main(argv=None):
    global MODEL
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), default="coba")
    p.add_argument("--sizes", type=int, nargs="+", default=[4000, 16000, 64000])
    p.add_argument("--duration", type=float, default=1000.0, help="simulated ms")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--build-only", dest="build_only", type=int, metavar="N",
                   help=argparse.SUPPRESS)          # used by cold_build_seconds
    args = p.parse_args(argv)
    MODEL = args.model
    brainstate.environ.set(dt=DT * u.ms)
    if args.build_only:
        print(build_seconds(args.build_only))
        return
    n_steps = round(args.duration / DT)
    try:
        import brainevent
        import numba
        kernel = f"brainevent {brainevent.__version__}, numba {numba.__version__}"
    except ImportError as err:
        kernel = f"({err})"
    print(f"{MODEL.upper()} (Vogels & Abbott 2005), brainstate {brainstate.__version__}, brainpy "
          f"{brainpy.__version__}, {kernel}; jax {jax.__version__}, "
          f"{jax.devices()[0].device_kind}; {n_steps} steps of {DT} ms")
    print("neurons | build s (fresh process) | build s (again) | compile s | run s median (min) "
          "| us/step | rate Hz")
    warm = build(400)                        # the first trace, compilation and call of a process
    jax.block_until_ready(simulation(warm, 10)(jnp.int32(0)))
    for n in args.sizes:
        r = measure(n, n_steps, args.rounds)
        print(f"{n} | {r['build cold']:.3f} | {r['build']:.3f} | {r['compile']:.2f} | "
              f"{r['run']:.3f} ({r['min']:.3f}) | {r['run'] / n_steps * 1e6:.1f} | "
              f"{r['rate']:.2f}", flush=True)


if __name__ == "__main__":
    main()
