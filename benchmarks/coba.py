"""COBA E/I network (Vogels & Abbott 2005): brainx against hand-written JAX, same model, same run.

80 % excitatory and 20 % inhibitory LIF neurons (tau 20 ms, rest and reset
-60 mV, threshold -50 mV, refractory 5 ms, a constant drive of 20 mV),
connected at random with probability 0.02 (each presynaptic neuron projects to
``0.02 * N`` targets, repeats allowed), exponential conductances (excitatory
tau 5 ms, reversal 0 mV, weight 0.6; inhibitory tau 10 ms, reversal -80 mV,
weight 6.7; conductances in units of the leak, weights divided by N / 4000 so
the mean input does not grow with N), dt 0.1 ms: one second is 10 000 steps.
``--model cuba``: the current-based variant (rest -49 mV, no drive, exponential
currents of 1.62 mV and -9 mV, the same connectivity).

* **brainx**: ``nn.LIFRef``, two ``nn.EventFixedProb`` projections, two
  ``nn.Expon`` and two ``nn.COBA`` outputs registered as the neurons' current
  inputs; ``brainx.transform.for_loop`` under ``brainx.transform.jit``.
* **brainx, one call** (``brainx1``): the same network with its two projections in
  one ``nn.EventFixedProbGroup``, one brainevent call a step instead of two.
* **hand-written JAX** (``hand``): the same step on explicit arrays under
  ``lax.scan`` and ``jax.jit``: the membrane's exact step
  ``V_inf + (V - V_inf) exp(-dt g / tau)`` written out, the same synapses (both
  draw them from the same NumPy seeds), the same initial potentials, and the same
  kernel as brainx's layers (brainx's native one on CPU, called directly): what
  brainx adds to the step is the difference.
* **hand-written JAX + brainevent** (``hand-be``): the same, with brainevent's
  ``FixedNumPerPre`` kernels (numba on CPU): the floor before the native kernel.

Printed per size: build time (the network's construction: connectivity drawn,
states initialised) in a fresh process, and of it the connectivity, and again
in the same process; compile time (trace + lower + XLA, after a small network
of each kind was compiled once); run time (median of interleaved rounds), the StableHLO op count before XLA, the instruction count
of one step after it (XLA's loop body with its fusions), XLA's temporary
memory, and the firing rates of both over all their runs (they must agree
within 2 %; the network is chaotic, so single spikes differ after a while).
Run times: median and minimum over the rounds, the minimum being what a run
takes when nothing else runs on the machine.

Run: ``python benchmarks/coba.py [--quick] [--model coba|cuba] [--sizes 4000 16000 64000]
[--rounds 3]``. ``--profile`` adds a per-step profile at each size (the step without
synapses, each projection alone, with and without spikes: the fixed cost of a call).
``--brian2 PYTHON`` (an interpreter with Brian2) adds, after each size, the same network in
Brian2 (``brian2_coba.py``: C++ standalone, and cython unless ``--no-cython``), its rounds
interleaved with runs of brainx's two versions, and the ratios brainx / Brian2.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import nn
from brainx.nn.connectivity.native.product import sparse_product
from brainx.nn.connectivity.native.rows import SynapseRows

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from snn_bptt import hlo_counts, interleaved, stablehlo_ops, temp_mib  # noqa: E402

DT = 0.1                      # ms
V_TH, V_RESET = -50.0, -60.0
TAU, TAU_REF = 20.0, 5.0
TAU_E, TAU_I, E_E, E_I = 5.0, 10.0, 0.0, -80.0
P_CONN = 0.02
#: The two models: rest potential and drive (mV), weights (conductances in units of the
#: leak for COBA, currents in mV for CUBA) at 4000 neurons.
MODELS = {"coba": dict(v_rest=-60.0, drive=20.0, w_e=0.6, w_i=6.7),
          "cuba": dict(v_rest=-49.0, drive=0.0, w_e=1.62, w_i=-9.0)}
MODEL = "coba"                # main() sets it from --model


def params() -> dict:
    return MODELS[MODEL]


def sizes(n: int):
    """``(n_exc, n_inh, conn_num, w_e, w_i)`` of the network of ``n`` neurons."""
    n_exc = int(n * 0.8)
    scale = n / 4000
    return n_exc, n - n_exc, int(P_CONN * n), params()["w_e"] / scale, params()["w_i"] / scale


# -- brainx ---------------------------------------------------------------------------------------
class EINet(nn.Module):
    """The COBA network written with brainx.nn."""

    def __init__(self, n: int, seed: int = 0, grouped: bool = False):
        super().__init__()
        n_exc, n_inh, conn_num, w_e, w_i = sizes(n)
        self.n_exc = n_exc
        self.drive = params()["drive"]
        self.neurons = nn.LIFRef(
            n, R=1.0, tau=TAU * u.ms, tau_ref=TAU_REF * u.ms, V_rest=params()["v_rest"] * u.mV,
            V_th=V_TH * u.mV, V_reset=V_RESET * u.mV, spk_reset="hard",
            V_initializer=nn.init.Normal(-55.0, 2.0, unit=u.mV))
        self.exc = nn.EventFixedProb(n_exc, n, conn_num=conn_num, conn_weight=w_e, seed=seed)
        self.inh = nn.EventFixedProb(n_inh, n, conn_num=conn_num, conn_weight=w_i, seed=seed + 1)
        self.g_exc = nn.Expon(n, tau=TAU_E * u.ms)
        self.g_inh = nn.Expon(n, tau=TAU_I * u.ms)
        if MODEL == "coba":
            self.out_exc, self.out_inh = nn.COBA(E=E_E * u.mV), nn.COBA(E=E_I * u.mV)
        else:             # the currents are in mV (R = 1)
            self.out_exc, self.out_inh = nn.CUBA(u.mV), nn.CUBA(u.mV)
        self.neurons.add_current_input("exc", self.out_exc)
        self.neurons.add_current_input("inh", self.out_inh)
        self.both = nn.EventFixedProbGroup(self.exc, self.inh) if grouped else None

    def update(self):
        spikes = self.neurons.get_spike()            # the previous step's spikes
        if self.both is None:
            g_exc, g_inh = self.exc(spikes[:self.n_exc]), self.inh(spikes[self.n_exc:])
        else:
            g_exc, g_inh = self.both(spikes)         # one brainevent call for both
        self.out_exc.bind_cond(self.g_exc(g_exc))
        self.out_inh.bind_cond(self.g_inh(g_inh))
        return self.neurons(self.drive * u.mV)


def build_brainx(n: int, seed: int = 0, grouped: bool = False):
    brainx.random.seed(seed)
    return nn.init_all_states(EINet(n, seed, grouped))


def brainx_run(net: EINet, n_steps: int):
    """The jitted simulation: spikes per step, shape ``(n_steps,)``."""
    def step(i):
        return net.update().sum()
    return brainx.transform.jit(lambda: brainx.transform.for_loop(step, jnp.arange(n_steps)))


# -- hand-written JAX -------------------------------------------------------------------------------
def build_hand(n: int, seed: int = 0, kernel: str = "native"):
    """Connectivity (the same NumPy draws as EventFixedProb's) and the initial state.

    ``kernel``: ``"native"`` (brainx's C++ kernel, called directly) or ``"brainevent"``.
    """
    n_exc, n_inh, conn_num, w_e, w_i = sizes(n)
    idx_e = np.random.RandomState(seed).randint(0, n, size=(n_exc, conn_num)).astype(np.int32)
    idx_i = np.random.RandomState(seed + 1).randint(0, n, size=(n_inh, conn_num)).astype(np.int32)
    if kernel == "native":
        rows_e, rows_i = SynapseRows.fixed(jnp.asarray(idx_e), n), SynapseRows.fixed(jnp.asarray(idx_i), n)
        w_e, w_i = jnp.float32(w_e), jnp.float32(w_i)
        conn_e = lambda spiked: sparse_product(spiked, w_e, rows_e, event=True)   # noqa: E731
        conn_i = lambda spiked: sparse_product(spiked, w_i, rows_i, event=True)   # noqa: E731
    else:
        import brainevent
        mat_e = brainevent.FixedNumPerPre(jnp.asarray(w_e), jnp.asarray(idx_e), shape=(n_exc, n))
        mat_i = brainevent.FixedNumPerPre(jnp.asarray(w_i), jnp.asarray(idx_i), shape=(n_inh, n))
        conn_e = lambda spiked: brainevent.BinaryArray(spiked) @ mat_e            # noqa: E731
        conn_i = lambda spiked: brainevent.BinaryArray(spiked) @ mat_i            # noqa: E731
    V = jnp.asarray(np.random.RandomState(seed).normal(-55.0, 2.0, n).astype(np.float32))
    zeros = jnp.zeros(n, jnp.float32)
    return dict(n_exc=n_exc, conn_e=conn_e, conn_i=conn_i, idx_e=idx_e), (V, zeros, zeros, zeros)


def hand_run(model: dict, n_steps: int):
    """``jax.jit(state -> (state, spikes per step))``."""
    n_exc, conn_e, conn_i = model["n_exc"], model["conn_e"], model["conn_i"]
    decay_e, decay_i = np.float32(np.exp(-DT / TAU_E)), np.float32(np.exp(-DT / TAU_I))
    v_rest, drive = params()["v_rest"], params()["drive"]

    def step(state, _):
        V, t_ref, ge, gi = state
        spiked = V >= V_TH
        ge = ge * decay_e + conn_e(spiked[:n_exc])
        gi = gi * decay_i + conn_i(spiked[n_exc:])
        V = jnp.where(spiked, V_RESET, V)
        if MODEL == "coba":
            g = 1.0 + ge + gi                                   # total conductance / leak
            V_inf = (v_rest + drive + gi * E_I) / g             # (ge * E_E is 0)
            V = V_inf + (V - V_inf) * jnp.exp(-DT / TAU * g)
        else:
            V_inf = v_rest + drive + ge + gi                    # currents in mV (R = 1)
            V = V_inf + (V - V_inf) * np.float32(np.exp(-DT / TAU))
        t_ref = jnp.where(spiked, TAU_REF, t_ref)
        V = jnp.where(t_ref > DT / 2, V_RESET, V)
        t_ref = jnp.maximum(t_ref - DT, 0.0)
        spikes = (V >= V_TH).astype(jnp.float32)           # the model's output, as LIF's
        return (V, t_ref, ge, gi), spikes.sum()

    return jax.jit(lambda state: jax.lax.scan(step, state, None, length=n_steps))


# -- measuring ------------------------------------------------------------------------------------
HANDS = {"hand": "native", "hand-be": "brainevent"}


def build_seconds(which: str, n: int, seed: int = 0) -> tuple:
    """``(seconds to build the network, of which the connectivity)``, in this process."""
    t0 = time.perf_counter()
    if which == "brainx":
        brainx.random.seed(seed)
        net = EINet(n, seed)                                 # the projections draw their synapses
        t1 = time.perf_counter()
        jax.block_until_ready(nn.init_all_states(net).neurons.V.value)
    else:
        model, state = build_hand(n, seed, HANDS[which])
        t1 = time.perf_counter()
        jax.block_until_ready(state)
    return time.perf_counter() - t0, t1 - t0


def cold_build_seconds(which: str, n: int) -> tuple:
    """:func:`build_seconds` in a fresh Python process (after the imports): what a script pays,
    XLA's start and the first compilations included."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--build-only", which,
                          str(n), "--model", MODEL], capture_output=True, text=True, check=True)
    return tuple(float(v) for v in out.stdout.split()[-2:])


def has_brainevent() -> bool:
    try:
        import brainevent  # noqa: F401
        return nn.event_backend.has_numba()
    except ImportError:
        return False


def warm_up(hands):
    """Build, compile and run a small network of each kind once: the first trace, compilation
    and kernel call of a process pay one-time costs that are not the model's."""
    net = build_brainx(400)
    jax.block_until_ready(brainx_run(net, 10)())
    for name in hands:
        model, state = build_hand(400, 0, HANDS[name])
        jax.block_until_ready(hand_run(model, 10)(state))


def measure(n: int, n_steps: int, rounds: int, hands, seed: int = 0) -> dict:
    """Build, compile, run every version; the figures of one size."""
    out = {}
    for which in ("brainx", *hands):
        out[f"build {which}"], out[f"conn {which}"] = cold_build_seconds(which, n)
    net, net1 = build_brainx(n, seed), build_brainx(n, seed, grouped=True)
    out["rebuild brainx"] = build_seconds("brainx", n, seed + 1)[0]  # a second network, warm
    compiled, start = {}, {}
    for name, model_b in (("brainx", net), ("brainx1", net1)):
        t0 = time.perf_counter()
        lowered = brainx_run(model_b, n_steps).lower()
        compiled[name] = (lowered, lowered.compile())
        out[f"compile {name}"] = time.perf_counter() - t0
    for name in hands:
        model, state = build_hand(n, seed, HANDS[name])
        out[f"rebuild {name}"] = build_seconds(name, n, seed + 1)[0]
        start[name] = (net.neurons.V.value.to_decimal(u.mV),) + state[1:]   # the same start
        t0 = time.perf_counter()
        lowered = hand_run(model, n_steps).lower(start[name])
        compiled[name] = (lowered, lowered.compile())
        out[f"compile {name}"] = time.perf_counter() - t0
    for name, (lowered, exe) in compiled.items():
        counts = hlo_counts(exe)
        out[f"ops {name}"] = stablehlo_ops(lowered)
        out[f"step {name}"] = counts["loops"][0] if counts["loops"] else counts["total"]
        out[f"temp {name}"] = temp_mib(exe)

    # the rates over every run (the first from the same start): the network is chaotic, so
    # the versions drift apart spike by spike and only their statistics can agree
    counts = {name: [] for name in compiled}
    runs = {}
    for name, (_, exe) in compiled.items():
        if name in hands:
            holder = {"state": start[name]}

            def run(exe=exe, holder=holder, name=name):
                holder["state"], spikes = exe(holder["state"])
                counts[name].append(jax.block_until_ready(spikes))
        else:
            def run(exe=exe, name=name):
                counts[name].append(jax.block_until_ready(exe()))
        runs[name] = run
        run()
    times = interleaved(runs, rounds)
    out["runs"] = runs
    for name in compiled:
        out[f"run {name}"], out[f"min {name}"] = times[name]
        spikes = sum(float(np.asarray(c).sum()) for c in counts[name])
        out[f"rate {name}"] = spikes / n / (len(counts[name]) * n_steps * DT * 1e-3)
        model_seconds = n_steps * DT * 1e-3
        synaptic_events = out[f"rate {name}"] * n * model_seconds * sizes(n)[2]
        out[f"events/s {name}"] = synaptic_events / out[f"run {name}"]
    return out


def brian2(python: str, n: int, duration: float, rounds: int, targets, runs: dict) -> tuple:
    """Brian2's figures (``brian2_coba.py`` in ``python``), each round interleaved with a run of
    each of ``runs``: ``{name: (median, min, rate or None)}`` and the build lines."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "brian2_coba.py")
    procs, builds = {}, {}
    for target in targets:                      # one build at a time
        procs[target] = subprocess.Popen(
            [python, script, "--model", MODEL, "--n", str(n), "--duration", str(duration),
             "--target", target, "--rounds", str(rounds), "--wait"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for line in procs[target].stdout:
            if line.startswith("build s:"):
                builds[target] = line.split(":", 1)[1].strip()
                break
        else:
            raise RuntimeError(f"brian2_coba.py ({target}) failed")
    times = {name: [] for name in (*targets, *runs)}
    rates = {}
    for _ in range(rounds):
        for target, proc in procs.items():
            proc.stdin.write("\n")
            proc.stdin.flush()
            words = proc.stdout.readline().split()   # round i: run s T (whole) rate Hz R
            times[target].append(float(words[4]))
            rates[target] = float(words[-1])
        for name, run in runs.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    for proc in procs.values():
        proc.communicate()
    return {name: (statistics.median(ts), min(ts), rates.get(name))
            for name, ts in times.items()}, builds


def profile(n: int, n_steps: int, rounds: int, seed: int = 0) -> dict:
    """Microseconds per step of the parts of a step, each in a loop of its own.

    The loop alone; the neurons without synapses; the E projection's kernel call with no
    spike and at the network's rate (about 20 Hz: the difference is the work per spike;
    the silent call less the loop alone is the fixed cost of a call), for the native kernel
    and brainevent's (numba); and the E projection through ``brainx.nn.EventFixedProb``
    (the native kernel; the difference to the direct call is brainx's).
    """
    _, state = build_hand(n, seed)
    n_exc, _, conn_num, w_e, _ = sizes(n)
    rng = np.random.RandomState(seed)
    rate = 20.0 * DT * 1e-3
    spikes = jnp.asarray(rng.rand(n_steps, n) < rate)
    silent = jnp.zeros_like(spikes)

    def scan(step, xs):
        return jax.jit(lambda s: jax.lax.scan(step, s, xs)[0])

    def loop_only(c, spk):
        return c + spk[0], None

    def neurons_only(carry, spk):
        V, t_ref = carry
        spiked = V >= V_TH
        V = jnp.where(spiked, V_RESET, V)
        g = 1.0 + spk * 0.1
        V_inf = (params()["v_rest"] + params()["drive"]) / g
        V = V_inf + (V - V_inf) * jnp.exp(-DT / TAU * g)
        t_ref = jnp.where(spiked, TAU_REF, t_ref)
        return (jnp.where(t_ref > DT / 2, V_RESET, V), jnp.maximum(t_ref - DT, 0.0)), None

    def proj(conn):
        def step(g, spk):
            return g + conn(spk[:n_exc]), None
        return step

    kernels = {"native": build_hand(n, seed, "native")[0]["conn_e"]}
    if has_brainevent():
        kernels["brainevent numba"] = build_hand(n, seed, "brainevent")[0]["conn_e"]
    brainx.random.seed(seed)
    layer = nn.EventFixedProb(n_exc, n, conn_num=conn_num, conn_weight=w_e, seed=seed)

    def brainx_proj(layer):
        g = brainx.ShortTermState(jnp.zeros(n))

        def step(spk):
            g.value = g.value + layer(spk[:n_exc])

        @brainx.transform.jit
        def run():
            brainx.transform.for_loop(step, spikes)
            return g.value
        return lambda _: run()

    zero = jnp.zeros(n)
    fns = {"loop alone": (scan(loop_only, spikes), zero),
           "neurons, no synapses": (scan(neurons_only, spikes), (state[0], state[1]))}
    for name, conn in kernels.items():
        fns[f"E projection, no spike, {name}"] = (scan(proj(conn), silent), zero)
        fns[f"E projection, {name}"] = (scan(proj(conn), spikes), zero)
    fns["E projection, brainx EventFixedProb (native)"] = (brainx_proj(layer), zero)
    for f, arg in fns.values():
        jax.block_until_ready(f(arg))
    times = interleaved({k: (lambda f=f, a=a: jax.block_until_ready(f(a)))
                         for k, (f, a) in fns.items()}, rounds)
    out = {k: t[0] / n_steps * 1e6 for k, t in times.items()}
    for name in kernels:
        out[f"fixed cost of a call, {name}"] = (out[f"E projection, no spike, {name}"]
                                                - out["loop alone"])
    out["spikes per step (E, I)"] = (float(spikes[:, :n_exc].sum()) / n_steps,
                                     float(spikes[:, n_exc:].sum()) / n_steps)
    return out


def main(argv=None):
    global MODEL
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="4000 neurons, 100 ms, 2 rounds")
    p.add_argument("--model", choices=sorted(MODELS), default="coba")
    p.add_argument("--sizes", type=int, nargs="+", default=[4000, 16000, 64000])
    p.add_argument("--duration", type=float, default=1000.0, help="simulated ms")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile", action="store_true", help="add a per-step profile")
    p.add_argument("--no-brainevent", dest="brainevent", action="store_false",
                   help="leave out the hand-written version on brainevent's kernels")
    p.add_argument("--brian2", metavar="PYTHON",
                   help="an interpreter with Brian2: add Brian2's C++ standalone and cython")
    p.add_argument("--no-cython", dest="cython", action="store_false",
                   help="with --brian2: C++ standalone only")
    p.add_argument("--build-only", dest="build_only", nargs=2, metavar=("WHICH", "N"),
                   help=argparse.SUPPRESS)          # used by cold_build_seconds
    args = p.parse_args(argv)
    MODEL = args.model
    brainx.environ.set(dt=DT * u.ms)
    if args.build_only:
        print(*build_seconds(args.build_only[0], int(args.build_only[1])))
        return
    if args.quick:
        args.sizes, args.duration, args.rounds = [4000], 100.0, 2
    n_steps = int(round(args.duration / DT))
    hands = ["hand"] + (["hand-be"] if args.brainevent and has_brainevent() else [])
    print(f"{MODEL.upper()} (Vogels & Abbott 2005), {n_steps} steps of {DT} ms; jax "
          f"{jax.__version__}, {jax.devices()[0].device_kind}, event backend "
          f"{nn.get_event_backend()}")
    header = ("neurons", "build s (fresh process)", "of which connectivity", "build s (again)",
              "compile s", "run s median (min)", "us/step", "synaptic events/s", "ops pre-XLA",
              "instr/step", "temp MiB", "rate Hz")
    print(" | ".join(header))
    warm_up(hands)
    for n in args.sizes:
        r = measure(n, n_steps, args.rounds, hands)
        runs = r.pop("runs")
        r["build brainx1"], r["conn brainx1"], r["rebuild brainx1"] = (
            r["build brainx"], r["conn brainx"], r["rebuild brainx"])   # the same network
        names = ("brainx", "brainx1", *hands)
        for name in names:
            print(f"{n} {name:7s} | {r['build ' + name]:.3f} | {r['conn ' + name]:.3f} | "
                  f"{r['rebuild ' + name]:.3f} | "
                  f"{r['compile ' + name]:.2f} | "
                  f"{r['run ' + name]:.3f} ({r['min ' + name]:.3f}) | "
                  f"{r['run ' + name] / n_steps * 1e6:.1f} | {r['events/s ' + name]:.3g} | "
                  f"{r['ops ' + name]} | {r['step ' + name]} | "
                  f"{r['temp ' + name]:.2f} | {r['rate ' + name]:.2f}")
        for name in ("brainx", "brainx1"):
            for hand in hands:
                print(f"{n} {name} / {hand}: run {r['run ' + name] / r['run ' + hand]:.3f}x "
                      f"(min {r['min ' + name] / r['min ' + hand]:.3f}x), instructions per step "
                      f"{r['step ' + name] / r['step ' + hand]:.3f}x, rates differ by "
                      f"{abs(r['rate ' + name] / r['rate ' + hand] - 1):.1%}")
        if args.brian2:
            targets = ["cpp_standalone"] + (["cython"] if args.cython else [])
            b2, builds = brian2(args.brian2, n, args.duration, args.rounds, targets,
                                {name: runs[name] for name in ("brainx", "brainx1")})
            for target in targets:
                print(f"{n} Brian2 {target} | build s {builds[target]} | run s "
                      f"{b2[target][0]:.3f} ({b2[target][1]:.3f}) | rate {b2[target][2]:.2f} Hz")
            for name in ("brainx", "brainx1"):
                for target in targets:
                    print(f"{n} {name} / Brian2 {target}: run {b2[name][0] / b2[target][0]:.3f}x "
                          f"(min {b2[name][1] / b2[target][1]:.3f}x; brainx interleaved "
                          f"{b2[name][0]:.3f} ({b2[name][1]:.3f}) s)")
        if args.profile:
            for part, value in profile(n, min(n_steps, 2000), max(args.rounds, 5)).items():
                shown = (f"{value[0]:.1f}, {value[1]:.1f}" if isinstance(value, tuple)
                         else f"{value:.1f} us/step")
                print(f"{n} profile: {part}: {shown}")


if __name__ == "__main__":
    main()
