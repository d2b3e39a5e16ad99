"""Train a recurrent spiking network by backpropagation through time (BPTT).
=========================================================================

The task: each trial is ``T`` ms of Poisson spike trains on ``n_in`` input
channels, all firing at 10 Hz except a bump of channels at up to 30 Hz whose
position is the class (one of four). Noisy, so it takes a few hundred steps. A recurrent
layer of LIF neurons (membrane potentials in mV, currents in mA) feeds a leaky
readout (an exponential synapse per class); the class with the largest mean
readout over the second half of the trial wins.

What the example shows:

* a model written with ``brainx.nn`` (``Linear``, ``LIF``, ``Expon``) whose
  parameters are found with ``net.states(brainx.ParamState)``;
* the step under ``@brainx.transform.checkpoint`` and the time loop under
  ``brainx.transform.checkpointed_for_loop``, differentiated with
  ``brainx.transform.grad`` and compiled, with the Adam update, by one
  ``brainx.transform.jit``;
* ``brainx.transform.memory_report``: the gradient's XLA temporary memory,
  time and error with no remat, with a checkpointed step, with a checkpointed
  loop and with binomial checkpointing;
* the trained model and its optimiser saved with ``brainx.io.save``, loaded
  into a freshly built model and optimiser with ``brainx.io.load``, and the
  reloaded model evaluated: its test accuracy equals the trained model's;
* a loss curve, and the spike raster and readout of a correctly classified
  test trial of the reloaded model, saved with matplotlib.

Run ``python examples/snn_bptt.py`` (about 20 s on 2 CPU cores), or with
``--fast`` for a few-second smoke run.
"""

from __future__ import annotations

import argparse
import os
import time

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import nn


# -- data ------------------------------------------------------------------------------------
def make_batch(rng: np.random.RandomState, batch: int, T: int, n_in: int, n_classes: int,
               dt_ms: float = 1.0):
    """Poisson spikes ``(T, batch, n_in)`` and labels ``(batch,)``: class c drives a bump of channels."""
    channels = np.arange(n_in)
    centers = (np.arange(n_classes) + 0.5) * n_in / n_classes
    width = n_in / n_classes / 2
    rates_hz = 10.0 + 20.0 * np.exp(-0.5 * ((channels[None] - centers[:, None]) / width) ** 2)
    labels = rng.randint(n_classes, size=batch)
    p = rates_hz[labels] * dt_ms * 1e-3                       # spike probability per step
    spikes = (rng.rand(T, batch, n_in) < p[None]).astype(np.float32)
    return jnp.asarray(spikes), jnp.asarray(labels)


def class_name(c: int, n_in: int, n_classes: int) -> str:
    """What class ``c`` looks like: the input channels of its bump of higher rates."""
    width = n_in / n_classes
    return f"bump on inputs {round(c * width)}-{round((c + 1) * width) - 1}"


# -- model -------------------------------------------------------------------------------------
class RecurrentSNN(nn.Module):
    """Inputs and last step's spikes -> LIF layer -> linear readout -> exponential synapses."""

    def __init__(self, n_in: int, n_rec: int, n_out: int):
        super().__init__()
        self.rec = nn.Linear(n_in + n_rec, n_rec,
                             w_init=nn.init.Normal(scale=2.0, unit=u.mA),
                             b_init=nn.init.ZeroInit(unit=u.mA))
        self.lif = nn.LIF(n_rec, tau=10.0 * u.ms, V_th=1.0 * u.mV, V_reset=0.0 * u.mV,
                          spk_fun=nn.surrogate.Arctan(alpha=2.0))
        self.readout = nn.Linear(n_rec, n_out, w_init=nn.init.KaimingNormal(0.1, unit=u.mA),
                                 b_init=None)
        self.out = nn.Expon(n_out, tau=10.0 * u.ms, g_initializer=0.0 * u.mA)

    def update(self, x):
        last_spikes = self.lif.get_spike()                 # spikes of the previous step
        current = self.rec(jnp.concatenate([x, last_spikes], axis=-1))
        spikes = self.lif(current)
        return self.out(self.readout(spikes)), spikes


# -- the loss, with three ways to keep (or not) the residuals of T steps -------------------------
def make_loss(net: RecurrentSNN, variant: str, base: int, spike_counts: bool = False):
    """``loss(xs, labels) -> (loss, accuracy)`` with the time loop of ``variant``.

    With ``spike_counts``, ``(loss, (accuracy, counts))``: ``counts[b, i]`` is how many
    times neuron ``i`` fired in trial ``b`` (``data_parallel_snn.py`` compares them).
    """
    plain_step = net.update
    ckpt_step = brainx.transform.checkpoint(net.update)

    def run(xs):
        if variant == "none":
            return brainx.transform.for_loop(plain_step, xs)
        if variant == "step":
            return brainx.transform.for_loop(ckpt_step, xs)
        if variant == "default":  # the strategy set in brainx.environ (memory_report sets it)
            return brainx.transform.checkpointed_for_loop(plain_step, xs)
        # nested loops: the outer one checkpoints chunks of `base` steps
        return brainx.transform.checkpointed_for_loop(ckpt_step, xs, base=base)

    def loss(xs, labels):
        nn.reset_all_states(net, batch_size=xs.shape[1])   # a fresh trial, same states
        out, spikes = run(xs)                               # (T, batch, n_out) in mA
        logits = out[xs.shape[0] // 2:].mean(axis=0).to_decimal(u.mA)
        logp = jax.nn.log_softmax(logits)
        ce = -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()
        acc = (logits.argmax(axis=1) == labels).mean()
        if spike_counts:
            return ce, (acc, jnp.round(spikes.sum(axis=0)).astype(jnp.int32))
        return ce, acc

    return loss


def grad_memory_kib(net, xs, labels, base: int, repeats: int = 3) -> dict:
    """XLA's temporary memory for the loss gradient, per loop variant, from a memory report.

    ``brainx.transform.memory_report`` compiles the gradient of the loss whose
    loop names no strategy (variant ``"default"``) under each strategy and
    prints XLA's temp memory, the time per gradient and the gradient's
    largest difference from no remat.
    """
    strategies = {"no remat": brainx.transform.NoRemat(),
                  "checkpointed step": brainx.transform.PerStepRemat(),
                  f"checkpointed loop (base={base})": brainx.transform.Nested(base=base),
                  "Binomial(4)": brainx.transform.Binomial(4)}
    report = brainx.transform.memory_report(
        make_loss(net, "default", base), xs, labels, grad_states=net.states(brainx.ParamState),
        has_aux=True, strategies=strategies, repeats=repeats)
    kib = [row.temp_bytes / 1024 for row in report]
    return {"none": kib[0], "step": kib[1], "loop": kib[2], "report": report}


# -- training ------------------------------------------------------------------------------------
def train(args):
    rng = np.random.RandomState(args.seed)
    brainx.random.seed(args.seed)
    brainx.environ.set(dt=1.0 * u.ms)
    net = nn.init_all_states(RecurrentSNN(args.n_in, args.n_rec, args.n_classes),
                             batch_size=args.batch)
    params = net.states(brainx.ParamState)
    dt_ms = brainx.environ.get_dt().to_decimal(u.ms)
    print(f"RecurrentSNN: {args.n_in} inputs -> {args.n_rec} LIF -> {args.n_classes} readouts, "
          f"T={args.T} steps of {dt_ms:g} ms, batch={args.batch}")
    print("parameters (net.states(ParamState)):", "; ".join(
        f"{path} = " + ", ".join(f"{k} {v.shape} {v.unit}" for k, v in s.value.items())
        for path, s in params.items()))

    opt = brainx.optim.Adam(lr=args.lr)
    opt.register_trainable_weights(params)
    loss_fn = make_loss(net, "loop", args.base)

    @brainx.transform.jit
    def train_step(xs, labels):
        grads, loss, acc = brainx.transform.grad(
            loss_fn, grad_states=params, has_aux=True, return_value=True)(xs, labels)
        opt.update(grads)
        return loss, acc

    xs, labels = make_batch(rng, args.batch, args.T, args.n_in, args.n_classes)
    mem = grad_memory_kib(net, xs, labels, args.base, repeats=1 if args.fast else 3)
    print("gradient memory (XLA temp): " + ", ".join(
        f"{name} {mem[key]:.0f} KiB" for name, key in
        (("no remat", "none"), ("checkpointed step", "step"), ("checkpointed loop", "loop"))))

    from tqdm import tqdm
    losses, accs = [], []
    t0 = time.perf_counter()
    bar = tqdm(range(args.iters), desc="training", ncols=80, disable=args.quiet)
    for it in bar:
        xs, labels = make_batch(rng, args.batch, args.T, args.n_in, args.n_classes)
        loss, acc = train_step(xs, labels)
        losses.append(float(loss))
        accs.append(float(acc))
        bar.set_postfix(loss=f"{losses[-1]:.3f}", acc=f"{accs[-1]:.2f}")
        if (it + 1) % args.print_every == 0 or it == 0:
            window = slice(max(0, it + 1 - args.print_every), it + 1)
            bar.write(f"iter {it + 1:4d}  loss {np.mean(losses[window]):.4f}  "
                      f"train acc {np.mean(accs[window]):.2f}  (mean since last line)")
    elapsed = time.perf_counter() - t0

    # save the trained model and optimiser; load them into a freshly built model and optimiser
    brainx.io.save(args.checkpoint, {"net": net, "opt": opt})
    fresh = nn.init_all_states(RecurrentSNN(args.n_in, args.n_rec, args.n_classes),
                               batch_size=args.batch)         # new random weights
    fresh_opt = brainx.optim.Adam(lr=args.lr)
    fresh_opt.register_trainable_weights(fresh.states(brainx.ParamState))
    brainx.io.load(args.checkpoint, {"net": fresh, "opt": fresh_opt})

    xs, labels = make_batch(rng, 256, args.T, args.n_in, args.n_classes)
    test_acc, reloaded_acc = (float(brainx.transform.jit(make_loss(model, "none", args.base))(
        xs, labels)[1]) for model in (net, fresh))
    print(f"trained {args.iters} iterations in {elapsed:.1f} s; loss {losses[0]:.3f} -> "
          f"{np.mean(losses[-args.print_every:]):.3f}; test accuracy {test_acc:.1%} on 256 new trials "
          f"(chance {1 / args.n_classes:.0%})")
    print(f"brainx.io.save wrote the model and Adam's state to {args.checkpoint} "
          f"({os.path.getsize(args.checkpoint) / 1024:.0f} KiB); brainx.io.load read them into a "
          f"new RecurrentSNN and Adam (at step {int(fresh_opt.step_count.value)})")
    print(f"reloaded model: test accuracy {reloaded_acc:.1%} on the same trials, "
          f"{'equal to' if reloaded_acc == test_acc else 'DIFFERENT FROM'} the trained model's")
    if args.plot:
        plot(fresh, losses, xs, labels, args)
    return losses, test_acc, reloaded_acc


def plot(net, losses, xs, labels, args):
    """Loss curve; raster and readout of the first test trial that ``net`` classifies correctly."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nn.reset_all_states(net, batch_size=xs.shape[1])
    out, spikes = brainx.transform.for_loop(net.update, xs)      # every test trial at once
    readouts = np.asarray(out.to_decimal(u.mA))                  # (T, trials, n_classes)
    predicted = readouts[args.T // 2:].mean(axis=0).argmax(axis=1)
    correct = np.flatnonzero(predicted == np.asarray(labels))
    i = int(correct[0]) if correct.size else 0                   # none correct: a --fast model
    label, guess = int(labels[i]), int(predicted[i])
    name = class_name(label, args.n_in, args.n_classes)
    verdict = "classified correctly" if guess == label else f"misclassified as class {guess}"
    readout = readouts[:, i]

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    axes[0].plot(losses)
    axes[0].set(xlabel="iteration", ylabel="cross-entropy", title="training loss")
    ins = np.asarray(xs[:, i])
    width = args.n_in / args.n_classes
    axes[1].axhspan(label * width - 0.5, (label + 1) * width - 0.5, color="tab:blue", alpha=0.1)
    t_in, n_in = np.nonzero(ins)
    axes[1].scatter(t_in, n_in, s=2, c="tab:gray", label="input")
    t_rec, n_rec = np.nonzero(np.asarray(spikes[:, i]))
    axes[1].scatter(t_rec, n_rec + ins.shape[1], s=2, c="tab:red", label="LIF")
    axes[1].set(xlabel="time (ms)", ylabel="neuron",
                title=f"test trial {i}: class {label}, {name}"
                      f"\n({verdict}; shaded: the bump's inputs)")
    axes[1].legend(loc="upper right", markerscale=4, fontsize=8)
    for c in range(readout.shape[1]):
        axes[2].plot(readout[:, c], lw=2.5 if c == label else 1.2,
                     label=f"class {c}: {class_name(c, args.n_in, args.n_classes)}")
    axes[2].axvspan(args.T // 2, args.T, color="0.9")
    axes[2].set(xlabel="time (ms)", ylabel="readout (mA)",
                title=f"reloaded model's readout: class {guess} wins\n(mean over the shaded half)")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=90)
    plt.close(fig)
    print(f"saved {args.plot}: test trial {i}, class {label} ({name}), {verdict}")


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fast", action="store_true", help="tiny sizes, a few iterations (tests)")
    p.add_argument("--iters", type=int, default=400)
    p.add_argument("--T", type=int, default=100, help="steps per trial (dt = 1 ms)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--n-in", dest="n_in", type=int, default=40)
    p.add_argument("--n-rec", dest="n_rec", type=int, default=64)
    p.add_argument("--n-classes", dest="n_classes", type=int, default=4)
    p.add_argument("--base", type=int, default=10, help="steps per checkpointed chunk")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--print-every", dest="print_every", type=int, default=50)
    p.add_argument("--plot", default="snn_bptt.png", help="PNG path ('' to skip)")
    p.add_argument("--checkpoint", default="snn_bptt.msgpack",
                   help="where brainx.io.save writes the trained model and optimiser")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if args.fast:
        args.iters, args.T, args.batch, args.n_rec, args.print_every = 6, 20, 8, 16, 2
    return args


if __name__ == "__main__":
    train(parse())
