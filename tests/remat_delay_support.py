"""An E/I spiking network with an output delay, trained by BPTT: the test model of issue 44.

``EINet(delay)``: inputs and the recurrent spikes of ``delay`` ago (an
``output_delay`` of the LIF layer, a ring buffer of ``delay / dt + 1`` rows; 0 ms is a
one-row buffer, the network without delays) -> excitatory (positive) and
inhibitory recurrent weights -> exponential synapses whose drive depends on the membrane
potential (as a conductance's does) -> LIF neurons (surrogate spikes) -> readout.
"""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import nn

DT = 0.1 * u.ms


class EINet(nn.Module):
    def __init__(self, n_in=20, n_exc=64, n_inh=16, n_out=4, delay=1.5 * u.ms, seed=0):
        super().__init__()
        n = n_exc + n_inh
        self.n_exc = n_exc
        k = jax.random.split(jax.random.PRNGKey(seed), 4)
        self.w_in = brainx.ParamState(jax.random.normal(k[0], (n_in, n)) * 0.6, name="w_in")
        self.w_exc = brainx.ParamState(jnp.abs(jax.random.normal(k[1], (n_exc, n))) * 0.1,
                                       name="w_exc")
        self.w_inh = brainx.ParamState(jnp.abs(jax.random.normal(k[2], (n_inh, n))) * 0.3,
                                       name="w_inh")
        self.w_out = brainx.ParamState(jax.random.normal(k[3], (n, n_out)) * 0.3, name="w_out")
        self.lif = nn.LIF(n, tau=2.0 * u.ms, V_th=1.0 * u.mV, V_reset=0.0 * u.mV,
                          spk_fun=nn.surrogate.Arctan(alpha=2.0))
        self.delayed = self.lif.output_delay(delay)
        self.g_exc = nn.Expon(n, tau=5.0 * u.ms, g_initializer=0.0 * u.mA)
        self.g_inh = nn.Expon(n, tau=10.0 * u.ms, g_initializer=0.0 * u.mA)

    def update(self, x):
        d = self.delayed()                      # the spikes of `delay` ago
        g_e = self.g_exc(d[..., :self.n_exc] @ self.w_exc.value * u.mA)
        g_i = self.g_inh(d[..., self.n_exc:] @ self.w_inh.value * u.mA)
        v = self.lif.V.value / u.mV             # conductance-like: the drive depends on V
        spikes = self.lif(x @ self.w_in.value * u.mA + g_e * (2.0 - v) - g_i * (v + 1.0))
        return spikes @ self.w_out.value


def make_data(T=200, batch=8, n_in=20, seed=1):
    rng = np.random.RandomState(seed)
    xs = jnp.asarray((rng.rand(T, batch, n_in) < 0.2).astype(np.float32))
    target = jnp.asarray(rng.randn(batch, 4).astype(np.float32))
    return xs, target


def build(delay):
    with brainx.environ.context(dt=DT):
        net = EINet(delay=delay)
        nn.init_all_states(net, batch_size=8)
    return net


def loss_of(net, loop):
    """``loss(xs, target)``: a fresh trial, the loop ``loop(step, xs)``, a mean squared error."""
    def loss(xs, target):
        with brainx.environ.context(dt=DT):
            nn.reset_all_states(net, batch_size=xs.shape[1])
            out = loop(net.update, xs)
        return jnp.mean((out[xs.shape[0] // 2:].mean(axis=0) - target) ** 2)
    return loss
