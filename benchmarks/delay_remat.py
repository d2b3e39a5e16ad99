"""A checkpointed step with a delay buffer: memory and time of its gradient (issue 44).

The minimal case: ``for_loop`` over T = 200 steps of a step that reads a
``(max_delay, 512)`` ring buffer ``max_delay - 1`` steps back, computes
``v <- tanh(delayed @ W + x + 0.5 v)`` with a 512x512 weight ``W``, writes ``v``
into one slot of the buffer and advances the write index; the loss is the sum
of ``sum(v ** 2)`` over all steps, its gradient taken with respect to ``W``
and compiled under ``brainx.transform.jit``. For ``max_delay`` 8, 32 and 128 it
prints, per variant, XLA's temporary memory of the compiled gradient
(``memory_analysis().temp_size_in_bytes``), the median time of a gradient
(variants timed in alternation, so that machine load hits all alike), and the
largest difference of the gradient from brainx's no-remat ``for_loop``
(relative to the gradient's largest entry).

The raw JAX rows are the same step over explicit arrays: ``lax.scan`` of the
plain step, and of ``jax.checkpoint(step)``, which keeps every step's input,
the buffer included. The line after each table compares brainx's
checkpointed step with raw JAX's: memory ratio and time ratio.

Run: ``python benchmarks/delay_remat.py [--delays 8 32 128] [--T 200] [--rounds 7]``
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import transform as bt

N = 512


def brainx_variants(D: int, T: int):
    """The brainx losses ``loss(xs)`` and their grad states, by name."""
    W = brainx.ParamState(jax.random.normal(jax.random.PRNGKey(0), (N, N)) * 0.05, name="W")
    buf = brainx.DelayState(jnp.zeros((D, N)), name="buf")
    ptr = brainx.ShortTermState(jnp.zeros((), jnp.int32), name="ptr")
    v = brainx.HiddenState(jnp.zeros(N), name="v")

    def step(x):
        delayed = buf.value[(ptr.value - (D - 1)) % D]
        v.value = jnp.tanh(delayed @ W.value + x + 0.5 * v.value)
        buf.value = buf.value.at[ptr.value].set(v.value)
        ptr.value = (ptr.value + 1) % D
        return jnp.sum(v.value ** 2)

    def reset():
        buf.value = jnp.zeros((D, N))
        ptr.value = jnp.zeros((), jnp.int32)
        v.value = jnp.zeros(N)

    def looped(loop):
        def loss(xs):
            reset()
            return loop(xs).sum()
        return loss

    ck = bt.checkpoint(step)
    return W, {
        "brainx for_loop, no remat": looped(lambda xs: bt.for_loop(step, xs)),
        "brainx for_loop(checkpoint(step))": looped(lambda xs: bt.for_loop(ck, xs)),
        "brainx checkpointed_for_loop (Nested)": looped(
            lambda xs: bt.checkpointed_for_loop(step, xs, checkpoint="nested")),
        "brainx checkpointed_for_loop(checkpoint(step))": looped(
            lambda xs: bt.checkpointed_for_loop(ck, xs, checkpoint="nested")),
        "brainx Binomial(8)": looped(
            lambda xs: bt.checkpointed_for_loop(step, xs, checkpoint=bt.Binomial(8))),
    }


def raw_step(D: int):
    def step(carry, x, W):
        buf, ptr, v = carry
        delayed = buf[(ptr - (D - 1)) % D]
        v = jnp.tanh(delayed @ W + x + 0.5 * v)
        return (buf.at[ptr].set(v), (ptr + 1) % D, v), jnp.sum(v ** 2)
    return step


def raw_variants(D: int):
    step = raw_step(D)

    def make(f):
        def loss(W, xs):
            init = (jnp.zeros((D, N)), jnp.zeros((), jnp.int32), jnp.zeros(N))
            return jax.lax.scan(lambda c, x: f(c, x, W), init, xs)[1].sum()
        return jax.jit(jax.grad(loss))

    return {"raw JAX lax.scan, no remat": make(step),
            "raw JAX lax.scan(jax.checkpoint(step))": make(jax.checkpoint(step))}


def measure(D: int, T: int, rounds: int):
    xs = jax.random.normal(jax.random.PRNGKey(1), (T, N))
    W, losses = brainx_variants(D, T)
    calls, temps = {}, {}
    for name, loss in losses.items():
        g = bt.jit(bt.grad(loss, grad_states=W))
        temps[name] = g.lower(xs).compile().memory_analysis().temp_size_in_bytes
        calls[name] = (lambda g: lambda: g(xs))(g)
    w0 = W.value
    for name, g in raw_variants(D).items():
        temps[name] = g.lower(w0, xs).compile().memory_analysis().temp_size_in_bytes
        calls[name] = (lambda g: lambda: g(w0, xs))(g)
    grads = {name: np.asarray(jax.block_until_ready(call())) for name, call in calls.items()}
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            jax.block_until_ready(call())
            times[name].append(time.perf_counter() - start)
    ref = grads["brainx for_loop, no remat"]
    scale = float(np.max(np.abs(ref)))
    rows = [(name, temps[name] / 1024, statistics.median(times[name]) * 1e3,
             float(np.max(np.abs(grads[name] - ref))) / scale) for name in calls]
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delays", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--T", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}; T={args.T}, N={N}, "
          f"rounds={args.rounds}")
    for D in args.delays:
        rows = measure(D, args.T, args.rounds)
        width = max(len(r[0]) for r in rows)
        print(f"\nmax_delay={D} (buffer {D}x{N}, read {D - 1} steps back)")
        print(f"{'variant'.ljust(width)}  {'temp KiB':>9}  {'ms / grad':>9}  {'rel. grad err':>13}")
        for name, kib, ms, err in rows:
            print(f"{name.ljust(width)}  {kib:9,.0f}  {ms:9.2f}  {err:13.1e}")
        by = {r[0]: r for r in rows}
        ours, raw = by["brainx for_loop(checkpoint(step))"], by["raw JAX lax.scan(jax.checkpoint(step))"]
        plain = by["brainx for_loop, no remat"]
        print(f"checkpointed step, brainx / raw JAX: memory {ours[1] / raw[1]:.3f}x "
              f"(1/{raw[1] / ours[1]:.1f}), time {ours[2] / raw[2]:.2f}x; "
              f"brainx checkpointed / brainx no remat: memory {ours[1] / plain[1]:.2f}x")


if __name__ == "__main__":
    main()
