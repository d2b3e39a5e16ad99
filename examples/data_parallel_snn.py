"""Train the recurrent spiking network of ``snn_bptt.py`` data-parallel over every device.

The model, data and loss are ``snn_bptt.py``'s. Data parallelism here is the compiler's
kind: the parameters (and Adam's moments) are replicated on a one-axis mesh ``"data"``, the
network's hidden states (one row per trial) and each batch are split along it, and the one
``brainx.transform.jit`` step is compiled for that layout, so XLA runs each device on its
trials and all-reduces the gradients. The states keep their layout from call to call.

The same training run on one device gives the same loss curve (within float tolerance): the
script trains both and prints the largest difference.

Run ``python examples/data_parallel_snn.py`` (on a CPU it makes 8 fake devices), or with
``--fast`` for a few-second smoke run.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")  # CPU only

import brainunit as u  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import brainx  # noqa: E402
from brainx import nn  # noqa: E402
from snn_bptt import RecurrentSNN, make_batch, make_loss  # noqa: E402


def train(args, n_devices: int):
    """Losses of ``args.iters`` Adam steps, the model sharded over ``n_devices`` devices."""
    brainx.random.seed(args.seed)
    brainx.environ.set(dt=1.0 * u.ms)
    net = nn.init_all_states(RecurrentSNN(args.n_in, args.n_rec, args.n_classes),
                             batch_size=args.batch)
    params = net.states(brainx.ParamState)
    opt = brainx.optim.Adam(lr=args.lr)
    opt.register_trainable_weights(params)
    place = lambda x, spec: x                                  # noqa: E731  (one device)
    if n_devices > 1:
        mesh = brainx.distributed.make_mesh((n_devices,), ("data",),
                                            devices=jax.devices()[:n_devices])
        brainx.distributed.shard_states(net, {brainx.HiddenState: P("data")}, mesh)
        brainx.distributed.shard_states(opt, {}, mesh)        # replicated
        place = lambda x, spec: jax.device_put(x, NamedSharding(mesh, spec))  # noqa: E731
    loss_fn = make_loss(net, "loop", args.base)

    @brainx.transform.jit
    def train_step(xs, labels):
        grads, loss, acc = brainx.transform.grad(
            loss_fn, grad_states=params, has_aux=True, return_value=True)(xs, labels)
        opt.update(grads)
        return loss

    rng = np.random.RandomState(args.seed)
    losses = []
    for _ in range(args.iters):
        xs, labels = make_batch(rng, args.batch, args.T, args.n_in, args.n_classes)
        losses.append(float(train_step(place(xs, P(None, "data")), place(labels, P("data")))))
    return np.asarray(losses), train_step, (place(xs, P(None, "data")), place(labels, P("data")))


def main(args):
    n = args.devices or jax.device_count()
    if args.batch % n:
        raise SystemExit(f"--batch {args.batch} must be a multiple of the {n} devices")
    t0 = time.perf_counter()
    one, _, _ = train(args, 1)
    t1 = time.perf_counter()
    many, step, example = train(args, n)
    t2 = time.perf_counter()
    hlo = step.lower(*example).compile().as_text()
    diff = float(np.max(np.abs(one - many)))
    print(f"{args.iters} Adam steps, batch {args.batch}: 1 device {t1 - t0:.1f} s, "
          f"{n} devices {t2 - t1:.1f} s")
    print(f"loss {one[0]:.4f} -> {one[-1]:.4f} on 1 device, {many[0]:.4f} -> {many[-1]:.4f} on "
          f"{n}; largest difference along the curve {diff:.2e}")
    print(f"compiled step: {hlo.count('all-reduce(')} all-reduce, "
          f"{hlo.count('all-gather(')} all-gather")
    return one, many, hlo


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fast", action="store_true", help="tiny sizes, a few iterations (tests)")
    p.add_argument("--devices", type=int, default=0, help="devices to use (0: all)")
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--T", type=int, default=100, help="steps per trial (dt = 1 ms)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--n-in", dest="n_in", type=int, default=40)
    p.add_argument("--n-rec", dest="n_rec", type=int, default=64)
    p.add_argument("--n-classes", dest="n_classes", type=int, default=4)
    p.add_argument("--base", type=int, default=10, help="steps per checkpointed chunk")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.fast:
        args.iters, args.T, args.batch, args.n_rec = 4, 20, 16, 16
    return args


if __name__ == "__main__":
    main(parse())
