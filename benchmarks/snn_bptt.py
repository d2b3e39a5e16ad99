"""SNN training by BPTT: brainx against a hand-written JAX version of the same model, same run.

The model (as in the spiking-network surveys): 100 Poisson input channels ->
256 recurrent LIF neurons (soft reset, threshold 1, tau 10 ms, dt 1 ms, the
ReLU-shaped surrogate of width 1) -> 10 leaky readouts (tau 10 ms); T = 200
steps, batch 64, the loss the cross-entropy of the readouts' time average,
one Adam step (lr 1e-3) per training step. The inputs of each step feed the
LIF layer together with the previous step's spikes through one linear layer.

* **brainx**: ``nn.Linear`` + ``nn.LIF`` + ``nn.Linear`` + ``nn.Expon`` in a
  ``nn.Module``; ``brainx.transform.for_loop`` over the steps (with
  ``brainx.transform.checkpoint`` on the step for "remat"),
  ``brainx.transform.grad`` and ``brainx.optim.Adam``, all under one
  ``brainx.transform.jit``.
* **plain JAX**: the same arithmetic on explicit arrays: ``lax.scan`` (with
  ``jax.checkpoint`` on the step for "remat"), ``jax.grad``, ``optax.adam``,
  one ``jax.jit``. Its spike is the one a JAX user writes: ``jax.custom_jvp``
  of ``v >= 1`` with the surrogate in the rule. The LIF is written as brainx's
  is (the spikes of the previous step recomputed from ``V``, which is the
  state); ``plain JAX, spikes carried`` keeps the spikes in the carry instead
  (a different program, one residual fewer: see docs/performance.md).

Both start from the same weights and see the same batches; the loss after each
training step must agree (the check prints the largest difference). Printed
per variant: seconds per training step (median and minimum over interleaved
rounds, each a block of steps), compile time (trace + lower + XLA), XLA temporary memory
(``compiled.memory_analysis().temp_size_in_bytes``), the StableHLO op count
before XLA and the instruction count of XLA's loop bodies after it (the
forward and the backward scan), and the ratio to plain JAX.

Run: ``python benchmarks/snn_bptt.py [--quick] [--rounds 5] [--steps 5]``.

The module also holds the HLO counting that ``benchmarks/coba.py`` uses.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

# -- counting the compiled program ------------------------------------------------------------------
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*->.*\{\s*$")
_CALLEES = re.compile(r"\b(?:calls|to_apply|body|condition|branch_computations)=\{?([%\w.\-, ]+)\}?")
_BODY = re.compile(r"\bbody=%?([\w.\-]+)")


def _computations(hlo_text: str):
    """``({name: [instruction lines]}, entry name)`` of an optimised HLO module's text."""
    comps, current, entry = {}, None, None
    for line in hlo_text.splitlines():
        s = line.strip()
        if current is None:
            m = _COMPUTATION.match(s)
            if m and not s.startswith("HloModule"):
                current = m.group(2)
                comps[current] = []
                entry = current if m.group(1) else entry
        elif s == "}":
            current = None
        elif " = " in s:
            comps[current].append(s)
    return comps, entry


def _count(comps, name, seen) -> int:
    """Instructions of computation ``name`` and of every computation it calls (fusions...)."""
    if name in seen or name not in comps:
        return 0
    seen.add(name)
    callees = [c.strip().lstrip("%") for line in comps[name] for m in _CALLEES.finditer(line)
               for c in m.group(1).split(",") if c.strip()]
    return len(comps[name]) + sum(_count(comps, c, seen) for c in callees)


def hlo_counts(compiled) -> dict:
    """Instruction counts of a compiled program (``jax.stages.Compiled`` or its ``as_text()``).

    ``total``: every instruction of the module; ``loops``: for each ``while``
    body (outermost first), its instructions with those of the computations it
    calls (its fusions): the work of one step; ``largest_fusion``: the
    instructions of the largest fused computation; ``split``: how many fused loops
    XLA runs on several threads (``outer_dimension_partitions``).
    """
    text = compiled if isinstance(compiled, str) else compiled.as_text()
    comps, entry = _computations(text)
    bodies = []
    for name in comps:
        for line in comps[name]:
            bodies += [b for b in _BODY.findall(line) if b not in bodies]
    fused = [len(v) for n, v in comps.items() if "fused" in n or "fusion" in n]
    return dict(total=sum(len(v) for v in comps.values()),
                loops=[_count(comps, b, set()) for b in bodies],
                largest_fusion=max(fused, default=0),
                split=text.count("outer_dimension_partitions"))


def stablehlo_ops(lowered) -> int:
    """Operations in a lowered program's StableHLO (before XLA): one per ``%x = op`` line."""
    text = lowered if isinstance(lowered, str) else lowered.as_text()
    return sum(1 for line in text.splitlines()
               if re.search(r"=\s*\"?(stablehlo|chlo|func|mhlo)\.|\bcall @", line))


def temp_mib(compiled) -> float:
    """XLA's temporary memory of a compiled program, MiB."""
    return compiled.memory_analysis().temp_size_in_bytes / 2 ** 20


def interleaved(fns: dict, rounds: int) -> dict:
    """``{name: (median, min) seconds}``: each round calls every function once, in turn.

    On a shared machine the median says what a run takes, the minimum what it takes
    when nothing else runs; the ratios of both are printed.
    """
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(ts), min(ts)) for name, ts in times.items()}


# -- the model --------------------------------------------------------------------------------------
N_IN, N_REC, N_OUT, T, BATCH = 100, 256, 10, 200, 64
TAU, TAU_OUT, DT, LR = 10.0, 10.0, 1.0, 1e-3          # ms, ms, ms
ALPHA, WIDTH = 0.3, 1.0                                 # the surrogate: max(ALPHA (WIDTH - |x|), 0)


def initial_weights(seed: int = 0) -> dict:
    rng = np.random.RandomState(seed)
    # strong enough that the LIF layer fires at about 20 Hz from the start
    return {"W": (rng.randn(N_IN + N_REC, N_REC) * 15.0 / np.sqrt(N_IN + N_REC)).astype(np.float32),
            "b": np.full(N_REC, 0.5, np.float32),
            "W_out": (rng.randn(N_REC, N_OUT) / np.sqrt(N_REC)).astype(np.float32)}


def batches(n: int, seed: int = 1):
    """``n`` batches of Poisson inputs ``(T, BATCH, N_IN)`` (0/1 floats) and labels ``(BATCH,)``.

    Class ``c`` raises the rate of a tenth of the channels from 10 Hz to 50 Hz.
    """
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        labels = rng.randint(N_OUT, size=BATCH)
        rates = np.full((BATCH, N_IN), 10.0)
        for i, c in enumerate(labels):
            rates[i, c * N_IN // N_OUT:(c + 1) * N_IN // N_OUT] = 50.0
        spikes = rng.rand(T, BATCH, N_IN) < rates[None] * DT * 1e-3
        out.append((jnp.asarray(spikes.astype(np.float32)), jnp.asarray(labels)))
    return out


def cross_entropy(logits, labels):
    logp = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()


# -- brainx -------------------------------------------------------------------------------------------
def brainx_train_step(weights: dict, remat: bool):
    """The brainx model and its jitted training step ``(xs, labels) -> loss``."""
    import brainunit as u
    import brainx
    from brainx import nn

    class SNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.rec = nn.Linear(N_IN + N_REC, N_REC, w_init=weights["W"] * u.mA,
                                 b_init=weights["b"] * u.mA)
            self.lif = nn.LIF(N_REC, R=1.0 * u.ohm, tau=TAU * u.ms, V_th=1.0 * u.mV,
                              V_reset=0.0 * u.mV, V_rest=0.0 * u.mV,
                              spk_fun=nn.surrogate.ReluGrad(ALPHA, WIDTH))
            self.readout = nn.Linear(N_REC, N_OUT, w_init=weights["W_out"] * u.mA, b_init=None)
            self.out = nn.Expon(N_OUT, tau=TAU_OUT * u.ms, g_initializer=0.0 * u.mA)

        def update(self, x):
            last = self.lif.get_spike()                       # the previous step's spikes
            spikes = self.lif(self.rec(jnp.concatenate([x, last], axis=-1)))
            return self.out(self.readout(spikes))

    brainx.environ.set(dt=DT * u.ms)
    net = nn.init_all_states(SNN(), batch_size=BATCH)
    params = net.states(brainx.ParamState)
    opt = brainx.optim.Adam(lr=LR)
    opt.register_trainable_weights(params)
    step = brainx.transform.checkpoint(net.update) if remat else net.update

    def loss(xs, labels):
        nn.reset_all_states(net, batch_size=BATCH)
        out = brainx.transform.for_loop(step, xs)            # (T, BATCH, N_OUT) mA
        return cross_entropy(out.mean(axis=0).to_decimal(u.mA), labels)

    @brainx.transform.jit
    def train_step(xs, labels):
        grads, value = brainx.transform.grad(loss, grad_states=params, return_value=True)(
            xs, labels)
        opt.update(grads)
        return value

    return train_step


# -- plain JAX ----------------------------------------------------------------------------------------
@jax.custom_jvp
def spike(x):
    """Heaviside of ``x`` with the ReLU-shaped surrogate gradient."""
    return (x >= 0).astype(x.dtype)


@spike.defjvp
def _spike_jvp(primals, tangents):
    (x,), (tx,) = primals, tangents
    return spike(x), jnp.maximum(ALPHA * (WIDTH - jnp.abs(x)), 0.0) * tx


def jax_loss(params, xs, labels, remat: bool, carry_spikes: bool = False):
    decay, decay_out = np.float32(np.exp(-DT / TAU)), np.float32(np.exp(-DT / TAU_OUT))

    def step(carry, x):
        V, last, out = carry
        if not carry_spikes:
            last = spike(V - 1.0)                             # spikes of the previous step
        I = jnp.concatenate([x, last], axis=-1) @ params["W"] + params["b"]
        V = V - last                                          # soft reset: V_th - V_reset = 1
        V = I + (V - I) * decay                               # exact: V_inf = R I, R = 1
        s = spike(V - 1.0)
        out = out * decay_out + s @ params["W_out"]
        return (V, s, out), out

    body = jax.checkpoint(step) if remat else step
    zeros = jnp.zeros((BATCH, N_REC))
    _, outs = jax.lax.scan(body, (zeros, zeros, jnp.zeros((BATCH, N_OUT))), xs)
    return cross_entropy(outs.mean(axis=0), labels)


def jax_train_step(weights: dict, remat: bool, carry_spikes: bool = False):
    """``(state, xs, labels) -> (state, loss)`` jitted; ``state`` the initial one."""
    import optax
    params = {k: jnp.asarray(v) for k, v in weights.items()}
    opt = optax.adam(LR)

    @jax.jit
    def train_step(state, xs, labels):
        params, opt_state = state
        value, grads = jax.value_and_grad(jax_loss)(params, xs, labels, remat, carry_spikes)
        updates, opt_state = opt.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), value

    return train_step, (params, opt.init(params))


# -- measuring ------------------------------------------------------------------------------------------
def _warm_up():
    """Compile something small with JAX and with brainx first: the first compile of a process
    pays for loading XLA, the first brainx transform for its imports."""
    import brainx
    jax.jit(jax.grad(lambda x: jax.lax.scan(lambda c, y: (c * y, c), x, jnp.ones(3))[0]))(1.0)
    state = brainx.ShortTermState(jnp.ones(2))

    @brainx.transform.jit
    def f(x):
        state.value = state.value * x
        return state.value.sum()
    f(2.0)


def measure(rounds: int, steps: int, check_steps: int) -> dict:
    _warm_up()
    weights = initial_weights()
    data = batches(max(steps, check_steps))
    xs, labels = data[0]
    rows = {}
    runners = {}
    for remat in (False, True):
        tag = "remat" if remat else "no remat"
        t0 = time.perf_counter()
        fb = brainx_train_step(weights, remat)
        lowered = fb.lower(xs, labels)
        cb = lowered.compile()
        rows[f"brainx, {tag}"] = dict(compile=time.perf_counter() - t0, ops=stablehlo_ops(lowered),
                                      loops=hlo_counts(cb)["loops"], temp=temp_mib(cb), run=cb)
        variants = [(f"plain JAX, {tag}", False)]
        if not remat:
            variants.append(("plain JAX, spikes carried", True))
        for name, carry in variants:
            t0 = time.perf_counter()
            fj, state = jax_train_step(weights, remat, carry)
            lowered = fj.lower(state, xs, labels)
            cj = lowered.compile()
            rows[name] = dict(compile=time.perf_counter() - t0, ops=stablehlo_ops(lowered),
                              loops=hlo_counts(cj)["loops"], temp=temp_mib(cj), run=cj,
                              state=state)
    # the same losses, step by step, from the same weights on the same batches
    for name, row in rows.items():
        losses = []
        for xs, labels in data[:check_steps]:
            if "state" in row:
                row["state"], value = row["run"](row["state"], xs, labels)
            else:
                value = row["run"](xs, labels)
            losses.append(float(value))
        row["losses"] = np.array(losses)
    for name, row in rows.items():
        def block(row=row):
            for xs, labels in data[:steps]:
                if "state" in row:
                    row["state"], value = row["run"](row["state"], xs, labels)
                else:
                    value = row["run"](xs, labels)
            jax.block_until_ready(value)
        runners[name] = block
    for block in runners.values():
        block()                                                        # warm
    times = interleaved(runners, rounds)
    for name, row in rows.items():
        row["step s"], row["min s"] = (t / steps for t in times[name])
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2 rounds of 2 steps")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--steps", type=int, default=2, help="training steps per timed block")
    p.add_argument("--check-steps", dest="check_steps", type=int, default=5)
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.steps, args.check_steps = 2, 2, 3
    print(f"SNN BPTT: {N_IN} Poisson inputs -> {N_REC} LIF -> {N_OUT} leaky readouts, T={T}, "
          f"batch {BATCH}, Adam; jax {jax.__version__}, {jax.devices()[0].device_kind}")
    rows = measure(args.rounds, args.steps, args.check_steps)
    print("variant | s/step median (min) | vs plain JAX median (min) | compile s | temp MiB | "
          "vs plain JAX | ops pre-XLA | instr/step fwd, bwd")
    for name, row in rows.items():
        ref = rows["plain JAX, remat" if "remat" in name and "no remat" not in name
                   else "plain JAX, no remat"]
        print(f"{name} | {row['step s']:.4f} ({row['min s']:.4f}) | "
              f"{row['step s'] / ref['step s']:.3f} ({row['min s'] / ref['min s']:.3f}) | "
              f"{row['compile']:.2f} | {row['temp']:.1f} | {row['temp'] / ref['temp']:.3f} | "
              f"{row['ops']} | {', '.join(map(str, row['loops']))}")
    base = rows["plain JAX, no remat"]["losses"]
    for name, row in rows.items():
        print(f"{name}: losses {np.round(row['losses'], 4).tolist()}, largest difference from "
              f"plain JAX {np.abs(row['losses'] - base).max():.2e}")


if __name__ == "__main__":
    main()
