"""Weak and strong scaling of a data-parallel training step over 1/2/4/8 devices.

The step is a recurrent network's BPTT gradient and SGD update under one
``brainx.transform.jit``, the parameters replicated and the hidden state and batch
split over a ``"data"`` mesh axis of the first k devices (states placed with
``brainx.distributed.shard_states``).

* strong scaling: the same global batch on k devices; speed-up = t(1) / t(k);
* weak scaling: the same batch per device (global batch grows with k);
  efficiency = t(1) / t(k) (1.0: perfect).

On a CPU the script makes 8 fake devices, which share the machine's cores: the
figures then show what partitioning costs (and what a few cores give back), not
what 8 accelerators would. Run: ``python benchmarks/scaling.py [--steps 20]``.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import brainx  # noqa: E402
from brainx import nn  # noqa: E402


class RNN(nn.Module):
    def __init__(self, n_in, n_rec, n_out):
        super().__init__()
        self.rec = nn.Linear(n_in + n_rec, n_rec)
        self.out = nn.Linear(n_rec, n_out)
        self.n_rec = n_rec

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainx.HiddenState(jnp.zeros((batch_size, self.n_rec)))

    def update(self, x):
        self.h.value = jnp.tanh(self.rec(jnp.concatenate([x, self.h.value], axis=-1)))
        return self.out(self.h.value)


def step_time(k: int, batch: int, args) -> float:
    """Median seconds per training step with a global ``batch`` on ``k`` devices."""
    brainx.random.seed(0)
    net = nn.init_all_states(RNN(args.n_in, args.n_rec, 4), batch_size=batch)
    params = net.states(brainx.ParamState)
    opt = brainx.optim.SGD(lr=0.05)
    opt.register_trainable_weights(params)
    mesh = brainx.distributed.make_mesh((k,), ("data",), devices=jax.devices()[:k])
    brainx.distributed.shard_states(net, {brainx.HiddenState: P("data")}, mesh)
    brainx.distributed.shard_states(opt, {}, mesh)

    def loss(xs, labels):
        nn.reset_all_states(net, batch_size=xs.shape[1])
        logits = brainx.transform.for_loop(net.update, xs)[-1]
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1).mean()

    @brainx.transform.jit
    def train_step(xs, labels):
        grads, value = brainx.transform.grad(loss, grad_states=params,
                                             return_value=True)(xs, labels)
        opt.update(grads)
        return value

    rng = np.random.RandomState(0)
    xs = jax.device_put(rng.randn(args.T, batch, args.n_in).astype(np.float32),
                        NamedSharding(mesh, P(None, "data")))
    labels = jax.device_put(rng.randint(4, size=batch), NamedSharding(mesh, P("data")))
    jax.block_until_ready(train_step(xs, labels))           # compile
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        jax.block_until_ready(train_step(xs, labels))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--T", type=int, default=50)
    p.add_argument("--n-in", dest="n_in", type=int, default=32)
    p.add_argument("--n-rec", dest="n_rec", type=int, default=256)
    p.add_argument("--batch", type=int, default=256, help="global batch (strong scaling)")
    p.add_argument("--per-device", dest="per_device", type=int, default=32,
                   help="batch per device (weak scaling)")
    args = p.parse_args(argv)
    counts = [k for k in (1, 2, 4, 8) if k <= jax.device_count()]
    strong = {k: step_time(k, args.batch, args) for k in counts}
    weak = {k: step_time(k, args.per_device * k, args) for k in counts}
    print(f"{jax.device_count()} {jax.devices()[0].platform} devices; RNN {args.n_in}->"
          f"{args.n_rec}, T={args.T}; median of {args.steps} steps")
    print("| devices | strong: ms/step (batch %d) | speed-up | weak: ms/step (%d/device) | "
          "efficiency |" % (args.batch, args.per_device))
    print("|---|---|---|---|---|")
    for k in counts:
        print(f"| {k} | {strong[k] * 1e3:.1f} | {strong[1] / strong[k]:.2f} | "
              f"{weak[k] * 1e3:.1f} | {weak[1] / weak[k]:.2f} |")


if __name__ == "__main__":
    main()
