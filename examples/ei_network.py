"""An excitatory/inhibitory spiking network (CUBA, after Vogels & Abbott 2005), with units and noise.
==================================================================================================

``n_exc`` excitatory and ``n_inh`` inhibitory LIF neurons (membrane in mV,
refractory 5 ms) are randomly connected; each population's spikes drive an
exponential synapse per target (excitatory ``tau = 5 ms``, inhibitory
``tau = 10 ms``) whose current (mA through ``R = 1 ohm``) enters the
membrane, plus a Gaussian noise current drawn inside the compiled loop. The
network is simulated for a few thousand steps of 0.1 ms in one ``for_loop``
(with a progress bar); the example prints the population firing rates and
plots them, with a spike raster.

Run ``python examples/ei_network.py`` (a few seconds), ``--fast`` for a smoke run.
"""

from __future__ import annotations

import argparse
import time

import brainunit as u
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import nn


class EINet(nn.Module):
    """CUBA network: LIF neurons, E and I exponential synapses, random sparse connectivity."""

    def __init__(self, n_exc: int, n_inh: int, p_conn: float, rng, seed: int = 0,
                 noise=0.5 * u.mA):
        super().__init__()
        n = n_exc + n_inh
        self.n_exc, self.rng, self.noise = n_exc, rng, noise
        self.neurons = nn.LIF(n, R=1.0 * u.ohm, tau=20.0 * u.ms, tau_ref=5.0 * u.ms,
                              V_rest=-49.0 * u.mV, V_reset=-60.0 * u.mV, V_th=-50.0 * u.mV,
                              V_initializer=nn.init.Uniform(-60.0, -50.0, unit=u.mV),
                              spk_reset="hard")
        conn = np.random.RandomState(seed).rand(n, n) < p_conn     # fixed random synapses
        self.exc = nn.Linear(n_exc, n, w_init=nn.init.Constant(1.62 * u.mA), b_init=None,
                             w_mask=conn[:n_exc])
        self.inh = nn.Linear(n_inh, n, w_init=nn.init.Constant(-9.0 * u.mA), b_init=None,
                             w_mask=conn[n_exc:])
        self.g_exc = nn.Expon(n, tau=5.0 * u.ms, g_initializer=0.0 * u.mA)
        self.g_inh = nn.Expon(n, tau=10.0 * u.ms, g_initializer=0.0 * u.mA)

    def update(self):
        spikes = self.neurons.get_spike()            # spikes emitted on the previous step
        ge = self.g_exc(self.exc(spikes[..., :self.n_exc]))
        gi = self.g_inh(self.inh(spikes[..., self.n_exc:]))
        noise = self.noise * self.rng.normal(size=spikes.shape)
        return self.neurons(ge + gi + noise)


def simulate(args):
    brainx.environ.set(dt=0.1 * u.ms)
    brainx.random.seed(args.seed)
    net = nn.init_all_states(EINet(args.n_exc, args.n_inh, args.p, brainx.random,
                                   seed=args.seed))
    n_steps = int(round(args.duration / 0.1))

    bar = brainx.transform.ProgressBar(count=20) if not args.quiet else None
    t0 = time.perf_counter()
    spikes = brainx.transform.for_loop(lambda i: net.update(), jnp.arange(n_steps), pbar=bar)
    spikes = np.asarray(spikes)
    elapsed = time.perf_counter() - t0

    dt_s = 0.1e-3
    rate_e = spikes[:, :args.n_exc].mean() / dt_s
    rate_i = spikes[:, args.n_exc:].mean() / dt_s
    V = net.neurons.V.value
    print(f"{args.n_exc} E + {args.n_inh} I LIF neurons, p={args.p}, {n_steps} steps of "
          f"{brainx.environ.get_dt()} ({args.duration:g} ms) in {elapsed:.1f} s")
    print(f"mean firing rate: excitatory {rate_e:.1f} Hz, inhibitory {rate_i:.1f} Hz; "
          f"final V in [{float(V.min().to_decimal(u.mV)):.1f}, "
          f"{float(V.max().to_decimal(u.mV)):.1f}] mV")
    if args.plot:
        plot(spikes, args)
    return rate_e, rate_i


def plot(spikes, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t_ms = np.arange(spikes.shape[0]) * 0.1
    window = max(1, int(round(5.0 / 0.1)))                 # 5 ms box filter
    kernel = np.ones(window) / (window * 0.1e-3)

    def rate(pop):
        return np.convolve(pop.mean(axis=1), kernel, mode="same")

    fig, (ax_r, ax_s) = plt.subplots(2, 1, figsize=(9, 5), sharex=True,
                                     gridspec_kw=dict(height_ratios=[1, 1.4]))
    ax_r.plot(t_ms, rate(spikes[:, :args.n_exc]), label="excitatory", c="tab:blue")
    ax_r.plot(t_ms, rate(spikes[:, args.n_exc:]), label="inhibitory", c="tab:red")
    ax_r.set(ylabel="rate (Hz)", title="population firing rates (5 ms window)")
    ax_r.legend(fontsize=8)
    n_e, n_i = min(160, args.n_exc), min(40, args.n_inh)
    shown = np.concatenate([spikes[:, :n_e], spikes[:, args.n_exc:args.n_exc + n_i]], axis=1)
    t_idx, n_idx = np.nonzero(shown)
    colors = np.where(n_idx < n_e, "tab:blue", "tab:red")
    ax_s.scatter(t_ms[t_idx], n_idx, s=1, c=colors)
    ax_s.set(xlabel="time (ms)", ylabel="neuron",
             title=f"spikes of {n_e} excitatory and {n_i} inhibitory neurons")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=90)
    plt.close(fig)
    print(f"saved {args.plot}")


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fast", action="store_true", help="small network, short run (tests)")
    p.add_argument("--n-exc", dest="n_exc", type=int, default=1600)
    p.add_argument("--n-inh", dest="n_inh", type=int, default=400)
    p.add_argument("--p", type=float, default=0.04, help="connection probability")
    p.add_argument("--duration", type=float, default=300.0, help="ms (steps of 0.1 ms)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default="ei_network.png", help="PNG path ('' to skip)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if args.fast:
        args.n_exc, args.n_inh, args.p, args.duration = 320, 80, 0.2, 50.0
    return args


if __name__ == "__main__":
    simulate(parse())
