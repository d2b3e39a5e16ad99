"""A large recurrent network of leaky integrate-and-fire neurons, sharded by neurons.
==================================================================================

Each device holds the membrane potentials of ``N / devices`` neurons and the columns of
the recurrent weight matrix that feed them (``W: P(None, "model")``, ``V: P("model")``),
so a network whose weights do not fit on one device runs over several. Each step every
device needs all of last step's spikes (one bit per neuron, the only communication), and
updates its own neurons. The specs are given when the states are created and take effect
when the network is placed on the mesh; ``brainx.transform.jit`` keeps every state on its
devices from step to step.

The script runs the same simulation on one device and on all of them and checks that the
spike counts agree. Run ``python examples/model_parallel_network.py`` (on a CPU it makes 8
fake devices), or with ``--fast``.
"""

# sphinx_gallery_thumbnail_path = "_static/gallery-thumbs/model_parallel_network.svg"

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")  # CPU only

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import brainx  # noqa: E402


class LIFNetwork(brainx.nn.Module):
    """``N`` LIF neurons, all-to-all random coupling, a constant drive."""

    def __init__(self, n: int, seed: int = 0, tau: float = 10.0, v_th: float = 1.0):
        super().__init__()
        rng = np.random.RandomState(seed)
        w = rng.randn(n, n).astype(np.float32) * (1.5 / np.sqrt(n))
        self.w = brainx.ParamState(jnp.asarray(w), sharding=P(None, "model"))
        self.drive = brainx.ParamState(jnp.asarray(rng.rand(n).astype(np.float32) * 0.15),
                                       sharding=P("model"))
        self.v = brainx.HiddenState(jnp.zeros(n), sharding=P("model"))
        self.spikes = brainx.HiddenState(jnp.zeros(n), sharding=P("model"))
        self.count = brainx.HiddenState(jnp.zeros(n), sharding=P("model"))
        self.decay, self.v_th = float(np.exp(-1.0 / tau)), v_th

    def update(self, _):
        v = self.v.value * self.decay + self.spikes.value @ self.w.value + self.drive.value
        spikes = (v >= self.v_th).astype(jnp.float32)
        self.v.value = jnp.where(spikes > 0, 0.0, v)
        self.spikes.value = spikes
        self.count.value = self.count.value + spikes


def simulate(n: int, steps: int, n_devices: int):
    """Spike counts per neuron after ``steps`` steps, the network sharded over ``n_devices``."""
    net = LIFNetwork(n)
    if n_devices > 1:
        mesh = brainx.distributed.make_mesh((n_devices,), ("model",),
                                            devices=jax.devices()[:n_devices])
        brainx.distributed.shard_states(net, mesh=mesh)       # each state by its own spec
    run = brainx.transform.jit(lambda: brainx.transform.for_loop(net.update, jnp.arange(steps)))
    run()
    return np.asarray(net.count.value), net


def main(args):
    n_dev = args.devices or jax.device_count()
    t0 = time.perf_counter()
    one, _ = simulate(args.n, args.steps, 1)
    t1 = time.perf_counter()
    many, net = simulate(args.n, args.steps, n_dev)
    t2 = time.perf_counter()
    per_device = net.w.value.addressable_shards[0].data.nbytes / 2 ** 20
    print(f"{args.n} neurons, {args.steps} steps: 1 device {t1 - t0:.1f} s, {n_dev} devices "
          f"{t2 - t1:.1f} s; W is {net.w.value.nbytes / 2 ** 20:.1f} MiB, "
          f"{per_device:.1f} MiB per device ({net.w.value.sharding.spec})")
    print(f"mean rate {one.mean() / args.steps:.3f} spikes/step; spike counts equal on 1 and "
          f"{n_dev} devices: {np.array_equal(one, many)} "
          f"(largest difference {np.abs(one - many).max():.0f})")
    return one, many, net


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fast", action="store_true", help="a small network (tests)")
    p.add_argument("--devices", type=int, default=0, help="devices to use (0: all)")
    p.add_argument("--n", type=int, default=4096, help="neurons (a multiple of the devices)")
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args(argv)
    if args.fast:
        args.n, args.steps = 256, 50
    return args


if __name__ == "__main__":
    main(parse())
