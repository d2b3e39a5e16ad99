"""A conductance-based E/I network with 1.5 ms axonal delays (the COBA benchmark of Vogels & Abbott 2005).
=======================================================================================================

4000 LIF neurons (3200 excitatory, 800 inhibitory; membrane in mV, 5 ms
refractory) each send ``p * n`` random synapses (p = 2 %, 80) to the network. A
spike reaches its targets 1.5 ms after it is emitted: the projection reads
the population's spikes through ``neurons.output_delay(1.5 * u.ms)``, a ring
buffer of the last 16 steps of output kept in brainx states. The excitatory
and inhibitory synapses are exponential conductances (5 ms and 10 ms) whose
currents ``g (E - V)`` (``brainx.nn.COBA``, reversal 0 mV and -80 mV) are
registered as current inputs of the neurons, so the exponential-Euler step
of ``V`` treats them with their dependence on ``V``.

The projections are event-driven: ``brainx.nn.EventFixedProb`` draws, for
each presynaptic neuron, ``p * n`` random targets once, stores only those
synapses, and at every step adds up the weights of the rows whose neuron
spiked 1.5 ms earlier (the delayed spikes are its events; see
docs/event-driven.md). ``brainx.nn.EventFixedProbGroup`` runs the two
projections, which read the excitatory and the inhibitory part of one spike
vector, as one kernel call a step. One second of model time (10 000 steps of 0.1 ms)
runs in one ``brainx.transform.for_loop`` with a progress bar; the example
prints the mean firing rates and saves a raster plot and the population
rates.
Under the constant drive the network starts in a few synchronous volleys
and then settles, within about 150 ms, into asynchronous irregular firing
near 19 Hz: with a fixed number of targets per presynaptic neuron the
number of inputs per neuron varies (binomially), and that spread breaks the
synchrony.

Run ``python examples/ei_delay_network.py`` (under a minute on two cores),
``--duration 100`` for a shorter run, ``--plot-dir DIR`` to choose where the
PNGs go (default: next to this script), ``--backend jax_raw`` (or ``numba``)
to run the event product in brainevent's kernels instead of brainx's native one
(the default on CPU; brainevent is then needed: ``pip install
'brainx-jax[event]'``).
"""

from __future__ import annotations

import argparse
import pathlib
import time

import brainunit as u
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import nn

DT_MS = 0.1


class COBANet(nn.Module):
    """LIF neurons, delayed spikes, E and I exponential conductances with COBA outputs."""

    def __init__(self, n_exc=3200, n_inh=800, p=0.02, delay=1.5 * u.ms, seed=0, backend=None):
        super().__init__()
        n = n_exc + n_inh
        self.n_exc = n_exc
        self.neurons = nn.LIFRef(
            n, R=100.0 * u.Mohm, tau=20.0 * u.ms, tau_ref=5.0 * u.ms, V_rest=-60.0 * u.mV,
            V_th=-50.0 * u.mV, V_reset=-60.0 * u.mV, spk_reset="hard",
            V_initializer=nn.init.Normal(-55.0, 2.0, unit=u.mV))
        self.spikes_late = self.neurons.output_delay(delay)        # what the axons deliver now
        # each presynaptic neuron projects to int(p * n) random targets; the spikes are events
        self.exc = nn.EventFixedProb(n_exc, n, conn_num=p, conn_weight=6.0 * u.nS, seed=seed,
                                     backend=backend)
        self.inh = nn.EventFixedProb(n_inh, n, conn_num=p, conn_weight=67.0 * u.nS, seed=seed + 1,
                                     backend=backend)
        # both projections read one spike vector (E first, then I): one kernel call a step
        self.synapses = nn.EventFixedProbGroup(self.exc, self.inh)
        self.g_exc = nn.Expon(n, tau=5.0 * u.ms, g_initializer=0.0 * u.nS)
        self.g_inh = nn.Expon(n, tau=10.0 * u.ms, g_initializer=0.0 * u.nS)
        self.out_exc, self.out_inh = nn.COBA(E=0.0 * u.mV), nn.COBA(E=-80.0 * u.mV)
        self.neurons.add_current_input("exc", self.out_exc)
        self.neurons.add_current_input("inh", self.out_inh)

    def update(self, bias):
        spikes = self.spikes_late() > 0                              # the delayed events
        to_exc, to_inh = self.synapses(spikes)                       # E rows, then I rows
        self.out_exc.bind_cond(self.g_exc(to_exc))
        self.out_inh.bind_cond(self.g_inh(to_inh))
        return self.neurons(bias)


def simulate(args):
    brainx.environ.set(dt=DT_MS * u.ms)
    brainx.random.seed(args.seed)
    net = nn.init_all_states(COBANet(args.n_exc, args.n_inh, args.p, args.delay * u.ms,
                                     seed=args.seed, backend=args.backend))
    n_steps = int(round(args.duration / DT_MS))
    bias = args.bias * u.nA
    bar = None if args.quiet else brainx.transform.ProgressBar(count=20)

    t0 = time.perf_counter()
    spikes = brainx.transform.for_loop(lambda i: net.update(bias), jnp.arange(n_steps), pbar=bar)
    spikes = np.asarray(spikes)
    elapsed = time.perf_counter() - t0

    rate = spikes.mean() / (DT_MS * 1e-3)
    rate_e = spikes[:, :args.n_exc].mean() / (DT_MS * 1e-3)
    rate_i = spikes[:, args.n_exc:].mean() / (DT_MS * 1e-3)
    print(f"{args.n_exc} E + {args.n_inh} I COBA LIF neurons, p={args.p}, axonal delay "
          f"{args.delay:g} ms: {n_steps} steps of {DT_MS} ms ({args.duration:g} ms) in {elapsed:.1f} s")
    print(f"mean firing rate: {rate:.1f} Hz (excitatory {rate_e:.1f} Hz, inhibitory {rate_i:.1f} Hz)")
    if args.plot_dir:
        plot(spikes, args)
    return rate, rate_e, rate_i


def plot(spikes, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = pathlib.Path(args.plot_dir)
    out.mkdir(parents=True, exist_ok=True)
    t_ms = np.arange(spikes.shape[0]) * DT_MS

    fig, ax = plt.subplots(figsize=(9, 4))
    shown = spikes[:, :: max(1, spikes.shape[1] // 500)]            # every 8th neuron of 4000
    t_idx, n_idx = np.nonzero(shown)
    inh = n_idx * max(1, spikes.shape[1] // 500) >= args.n_exc
    ax.scatter(t_ms[t_idx], n_idx, s=0.5, c=np.where(inh, "tab:red", "tab:blue"))
    ax.set(xlabel="time (ms)", ylabel="neuron (every 8th)",
           title=f"spikes (blue: excitatory, red: inhibitory), {args.delay:g} ms axonal delay")
    fig.tight_layout()
    fig.savefig(out / "ei_delay_raster.png", dpi=90)
    plt.close(fig)

    window = max(1, int(round(5.0 / DT_MS)))                        # 5 ms box filter
    kernel = np.ones(window) / (window * DT_MS * 1e-3)
    fig, ax = plt.subplots(figsize=(9, 3))
    for part, label, color in ((slice(0, args.n_exc), "excitatory", "tab:blue"),
                               (slice(args.n_exc, None), "inhibitory", "tab:red")):
        ax.plot(t_ms, np.convolve(spikes[:, part].mean(axis=1), kernel, mode="same"),
                label=label, c=color, lw=0.8)
    ax.set(xlabel="time (ms)", ylabel="rate (Hz)", title="population rates (5 ms window)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "ei_delay_rate.png", dpi=90)
    plt.close(fig)
    print(f"saved {out / 'ei_delay_raster.png'} and {out / 'ei_delay_rate.png'}")


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=1000.0, help="model time in ms (dt 0.1 ms)")
    p.add_argument("--n-exc", dest="n_exc", type=int, default=3200)
    p.add_argument("--n-inh", dest="n_inh", type=int, default=800)
    p.add_argument("--p", type=float, default=0.02, help="connection probability")
    p.add_argument("--delay", type=float, default=1.5, help="axonal delay in ms")
    p.add_argument("--bias", type=float, default=0.2, help="constant input current in nA")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot-dir", dest="plot_dir", default=".",
                   help="where to write the PNGs (default: the working directory, as the other "
                        "examples; '' to skip)")
    p.add_argument("--backend", default=None, choices=("native", "numba", "jax_raw"),
                   help="kernel of the spike product (default: native on CPU, where it builds)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


if __name__ == "__main__":
    simulate(parse())
