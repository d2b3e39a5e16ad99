"""Train the recurrent spiking network of ``snn_bptt.py`` data-parallel over every device.
=======================================================================================

The model, data and loss are ``snn_bptt.py``'s. Data parallelism here is the compiler's
kind: the parameters (and Adam's moments) are replicated on a one-axis mesh ``"data"``, the
network's hidden states (one row per trial) and each batch are split along it, and the one
``brainx.transform.jit`` step is compiled for that layout, so XLA runs each device on its
trials and all-reduces the gradients. The states keep their layout from call to call.

The script trains the same run on one device too and checks what is the same. Not the whole
loss curve: several devices sum the gradient's terms in another order, so the parameters differ
from the first update by float rounding (about 1e-7), and a spike is all or nothing: once a
membrane potential within rounding of the threshold crosses it on one side only, one neuron
fires in one run and not in the other, and from then on the two runs train on different
spikes (with the defaults on CPU, spike counts first differ at step 82; the loss curves,
equal to about 1e-7 until then, end about 0.1 apart, both trained). What holds, and is checked
(the script exits with an error otherwise):

* the gradients of the first step agree to 1e-6 (relative to the largest entry);
* over every step before the first one whose spike counts (per trial and neuron) differ, the
  two loss curves agree to 1e-5 (relative).

Run ``python examples/data_parallel_snn.py`` (on a CPU it makes 8 fake devices), or with
``--fast`` for a few-second smoke run.
"""

# sphinx_gallery_thumbnail_path = "_static/gallery-thumbs/data_parallel_snn.svg"

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


#: what "the same" means: first-step gradients (relative to the largest entry) and the losses
#: of the steps before the first flipped spike (relative)
GRAD_TOL, LOSS_TOL = 1e-6, 1e-5


def train(args, n_devices: int):
    """``args.iters`` Adam steps, the model sharded over ``n_devices`` devices.

    Returns the losses, the spike counts of every step (``(iters, batch, n_rec)``), the
    first step's gradients (arrays), the step and an example batch (for its HLO).
    """
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
    loss_fn = make_loss(net, "loop", args.base, spike_counts=True)

    @brainx.transform.jit
    def train_step(xs, labels):
        grads, loss, (acc, counts) = brainx.transform.grad(
            loss_fn, grad_states=params, has_aux=True, return_value=True)(xs, labels)
        opt.update(grads)
        return loss, counts, grads

    rng = np.random.RandomState(args.seed)
    losses, counts, first_grads = [], [], None
    for _ in range(args.iters):
        xs, labels = make_batch(rng, args.batch, args.T, args.n_in, args.n_classes)
        loss, count, grads = train_step(place(xs, P(None, "data")), place(labels, P("data")))
        losses.append(float(loss))
        counts.append(np.asarray(count))
        if first_grads is None:
            first_grads = [np.asarray(g) for g in jax.tree.leaves(grads)]
    return (np.asarray(losses), np.stack(counts), first_grads, train_step,
            (place(xs, P(None, "data")), place(labels, P("data"))))


def compare(one, many) -> dict:
    """What agrees between the runs ``one`` and ``many`` (each ``train``'s first three results)."""
    (l1, c1, g1), (ln, cn, gn) = one, many
    scale = max(float(np.max(np.abs(g))) for g in g1)
    grad_diff = max(float(np.max(np.abs(a - b))) for a, b in zip(g1, gn)) / scale
    flipped = [i for i in range(len(l1)) if not np.array_equal(c1[i], cn[i])]
    first = flipped[0] if flipped else len(l1)     # steps [0, first) fired the same spikes
    rel = np.abs(l1 - ln) / np.abs(l1)
    return {"grad_diff": grad_diff, "first_flip": first,
            "same_spikes_diff": float(rel[:first].max()) if first else 0.0,
            "largest_diff": float(np.abs(l1 - ln).max()),
            "spikes_differ": int(np.sum(c1[first] != cn[first])) if flipped else 0}


def main(args):
    n = args.devices or jax.device_count()
    if args.batch % n:
        raise SystemExit(f"--batch {args.batch} must be a multiple of the {n} devices")
    t0 = time.perf_counter()
    *one, _, _ = train(args, 1)
    t1 = time.perf_counter()
    *many, step, example = train(args, n)
    t2 = time.perf_counter()
    hlo = step.lower(*example).compile().as_text()
    c = compare(one, many)
    print(f"{args.iters} Adam steps, batch {args.batch}: 1 device {t1 - t0:.1f} s, "
          f"{n} devices {t2 - t1:.1f} s")
    print(f"loss {one[0][0]:.4f} -> {one[0][-1]:.4f} on 1 device, {many[0][0]:.4f} -> "
          f"{many[0][-1]:.4f} on {n}")
    print(f"step 1 gradients: largest difference {c['grad_diff']:.1e} of the largest entry "
          f"(tolerance {GRAD_TOL:g})")
    if c["first_flip"] < args.iters:
        print(f"the same spikes for {c['first_flip']} steps, and over them the same losses "
              f"(largest relative difference {c['same_spikes_diff']:.1e}, tolerance "
              f"{LOSS_TOL:g}); at step {c['first_flip'] + 1}, {c['spikes_differ']} spike "
              f"count(s) differ (a potential within float rounding of the threshold), and "
              f"the curves part: largest difference after {c['largest_diff']:.2e}")
    else:
        print(f"the same spikes at all {args.iters} steps, and the same losses (largest "
              f"relative difference {c['same_spikes_diff']:.1e}, tolerance {LOSS_TOL:g})")
    print(f"compiled step: {hlo.count('all-reduce(')} all-reduce, "
          f"{hlo.count('all-gather(')} all-gather")
    if c["grad_diff"] > GRAD_TOL or c["same_spikes_diff"] > LOSS_TOL:
        raise SystemExit(f"1 and {n} devices disagree beyond float rounding: {c}")
    return one[0], many[0], hlo, c


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
