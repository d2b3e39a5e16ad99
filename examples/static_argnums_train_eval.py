"""One checkpointed step, two behaviours: a Python ``training`` flag as a static argument.
=======================================================================================

In training the step adds noise to the input current and drops out spikes; in
evaluation it does neither. The flag is a Python ``bool`` passed through
``static_argnums``, so ``if training:`` is plain Python: each value of the flag
gets its own trace (and, under ``jit``, its own compiled function), and the
other branch does not exist in it. The noise comes from a key held in a state,
(``brainx.random``), so the checkpointed step recomputes exactly the same
noise on the backward pass: its gradient equals the un-checkpointed one.

Run ``python examples/static_argnums_train_eval.py`` (about 15 s), ``--fast``
for a smoke run.
"""

# sphinx_gallery_thumbnail_path = "_static/gallery-thumbs/static_argnums_train_eval.svg"

from __future__ import annotations

import argparse
import functools

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import nn
from snn_bptt import make_batch


class NoisyNet(nn.Module):
    """Inputs -> LIF (input noise and spike dropout in training) -> linear readout."""

    def __init__(self, n_in: int, n_rec: int, n_out: int, rng, p_drop: float = 0.2,
                 noise: float = 1.0):
        super().__init__()
        self.inp = nn.Linear(n_in, n_rec, w_init=nn.init.Normal(scale=2.0, unit=u.mA))
        self.lif = nn.LIF(n_rec, tau=10.0 * u.ms, spk_fun=nn.surrogate.Arctan(2.0))
        self.out = nn.Linear(n_rec, n_out, w_init=nn.init.KaimingNormal(0.1), b_init=None)
        self.rng, self.p_drop, self.noise = rng, p_drop, noise
        self.traces = {True: 0, False: 0}

    def update(self, x, training: bool):
        self.traces[training] += 1                 # runs once per trace, not per call
        current = self.inp(x)
        if training:
            current = current + self.noise * self.rng.normal(size=current.shape) * u.mA
        spikes = self.lif(current)
        if training:
            keep = self.rng.bernoulli(1 - self.p_drop, size=spikes.shape)
            spikes = jnp.where(keep, spikes / (1 - self.p_drop), 0.0)
        return self.out(spikes)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fast", action="store_true")
    p.add_argument("--iters", type=int, default=150)
    args = p.parse_args(argv)
    T, batch, n_in, n_rec, n_classes = (20, 8, 40, 16, 4) if args.fast else (100, 64, 40, 64, 4)
    iters = 4 if args.fast else args.iters

    brainx.environ.set(dt=1.0 * u.ms)
    brainx.random.seed(1)              # weights and noise: brainx.random's key, a state
    rng = brainx.random
    data = np.random.RandomState(1)
    net = nn.init_all_states(NoisyNet(n_in, n_rec, n_classes, rng), batch_size=batch)
    params = net.states(brainx.ParamState)

    # The step: checkpointed, with `training` (argument 1) static.
    step = brainx.transform.checkpoint(net.update, static_argnums=1)

    def run(xs, training: bool):
        nn.reset_all_states(net, batch_size=xs.shape[1])
        return brainx.transform.for_loop(lambda x: step(x, training), xs)

    def loss_fn(xs, labels, training: bool):
        logits = run(xs, training)[T // 2:].mean(axis=0)
        logp = jax.nn.log_softmax(logits)
        ce = -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()
        return ce, (logits.argmax(axis=1) == labels).mean()

    # Create every state before the first compiled call: a state created later (outside any
    # transform) makes each jitted function look for its states again (one more trace).
    opt = brainx.optim.Adam(lr=1e-2)
    opt.register_trainable_weights(params)
    xs, labels = make_batch(data, batch, T, n_in, n_classes)

    # 1. Evaluation is deterministic, training is not.
    eval_loss = brainx.transform.jit(loss_fn, static_argnums=2)
    same_eval = bool(eval_loss(xs, labels, False)[0] == eval_loss(xs, labels, False)[0])
    same_train = bool(eval_loss(xs, labels, True)[0] == eval_loss(xs, labels, True)[0])
    print(f"loss of the same batch computed twice: identical in eval mode: {same_eval}, "
          f"in training mode (noise): {same_train}")

    # 2. The checkpointed step recomputes the same noise: its gradient equals the plain one.
    def grad_with(step_fn):
        def loss(xs, labels):
            nn.reset_all_states(net, batch_size=xs.shape[1])
            logits = brainx.transform.for_loop(lambda x: step_fn(x, True), xs)[T // 2:].mean(0)
            return -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1).mean()
        return brainx.transform.grad(loss, grad_states=params)

    start = rng.get_key()
    g_ckpt = grad_with(step)(xs, labels)
    rng.set_key(start)
    g_plain = grad_with(net.update)(xs, labels)
    diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(
        jax.tree.leaves(g_ckpt), jax.tree.leaves(g_plain)))
    print(f"gradient, checkpointed step vs plain step, same noise: max |difference| = {diff:.2e}")

    # 3. Train with training=True, evaluate with training=False: one compiled function each.

    @brainx.transform.jit(static_argnums=2)
    def update(xs, labels, training):
        # The flag is closed over, not passed through grad: grad's state discovery
        # would trace a Python bool argument (jax.grad would leave it concrete).
        grads, loss, acc = brainx.transform.grad(
            functools.partial(loss_fn, training=training), grad_states=params, has_aux=True,
            return_value=True)(xs, labels)
        opt.update(grads)
        return loss, acc

    traces_before = dict(net.traces)
    for it in range(iters):
        xs, labels = make_batch(data, batch, T, n_in, n_classes)
        loss, acc = update(xs, labels, True)
        if it == 0:
            traces_first = dict(net.traces)
        if it % max(1, iters // 5) == 0 or it == iters - 1:
            # same batch size as training: the states keep their shapes, nothing retraces
            test = make_batch(data, batch, T, n_in, n_classes)
            _, test_acc = eval_loss(*test, False)
            print(f"iter {it:4d}  train loss {float(loss):.3f} (noisy)  eval accuracy "
                  f"{float(test_acc):.2f}")
    first = {k: traces_first[k] - traces_before[k] for k in (True, False)}
    later = {k: net.traces[k] - traces_first[k] for k in (True, False)}
    print(f"step body traced during the first training call: {first[True]}x with "
          f"training=True, {first[False]}x with training=False; during the other {iters - 1} "
          f"calls: {later[True]}x and {later[False]}x (compiled once per flag value)")
    return dict(same_eval=same_eval, same_train=same_train, grad_diff=diff,
                first=first, later=later, eval_acc=float(test_acc))


if __name__ == "__main__":
    main()
