"""Memory and time of a BPTT gradient through T steps, with and without checkpointing.

The workload of docs/loops.md and shared/anchors.md: 256 units,
``h <- 0.9 h (1 - s) + W x_t``, ``s = sigmoid(5 (h - 1))``, loss the mean of
``mean((s - 0.1)^2)`` over all steps, gradient with respect to the 256x256
weights ``W`` (a ``ParamState``; ``h`` and ``s`` are ``HiddenState`` s).

For each variant it prints XLA's temp bytes of the compiled gradient
(``memory_analysis().temp_size_in_bytes``), the seconds its first call takes
to trace, lower and compile (one measurement, on a loaded machine it moves
by 20%), the median time per gradient,
the median ratio of that time to the un-checkpointed raw ``lax.scan`` timed
in the same rounds (variants are timed in alternation, so machine load hits
all alike), and the largest difference of the gradient from that baseline.

The anchor is the nested scan written by hand: about sqrt(T) segments of
about sqrt(T) steps (the largest divisor of T not above sqrt(T)), with
``jax.checkpoint`` on the segment, the outer scan's body.

Run: ``python benchmarks/remat_memory.py [--T 1000 4000] [--rounds 9] [--only nested]``
(``--only`` keeps the variants whose name contains one of the words, and the baselines).
With several ``--T`` it ends with a table of time per step, to show that
every variant is linear in T.
"""

import argparse
import statistics
import math
import time
from functools import partial

import jax
import jax.numpy as jnp

import brainx
from brainx import transform as bt

N = 256


def _init():
    h = jnp.zeros(N)
    return h, jax.nn.sigmoid(5.0 * (h - 1.0))


def _raw_step(W, carry, x):
    h, s = carry
    h = 0.9 * h * (1.0 - s) + W @ x
    s = jax.nn.sigmoid(5.0 * (h - 1.0))
    return (h, s), jnp.mean((s - 0.1) ** 2)


def raw_loss(W, xs, remat=False, unroll=1):
    step = partial(_raw_step, W)
    if remat:
        step = jax.checkpoint(step, prevent_cse=False)
    return jax.lax.scan(step, _init(), xs, unroll=unroll)[1].mean()


def sqrt_split(T: int):
    """``(outer, inner)``: ``inner`` the largest divisor of ``T`` not above sqrt(T)."""
    inner = max(d for d in range(1, math.isqrt(T) + 1) if T % d == 0)
    return T // inner, inner


def raw_nested_loss(W, xs, outer, inner):
    """The anchor's nested scan: ``outer`` checkpointed segments of ``inner`` steps."""
    def segment(c, xseg):
        return jax.lax.scan(partial(_raw_step, W), c, xseg)
    seg = jax.checkpoint(segment, prevent_cse=False)
    return jax.lax.scan(seg, _init(), xs.reshape(outer, inner, N))[1].mean()


class Net:
    """The same network with states."""

    def __init__(self, W):
        self.W = brainx.ParamState(W)
        self.h = brainx.HiddenState(jnp.zeros(N))
        self.s = brainx.HiddenState(jnp.zeros(N))

    def reset(self):
        self.h.value, self.s.value = _init()

    def step(self, x):
        self.h.value = 0.9 * self.h.value * (1.0 - self.s.value) + self.W.value @ x
        self.s.value = jax.nn.sigmoid(5.0 * (self.h.value - 1.0))
        return jnp.mean((self.s.value - 0.1) ** 2)


def brainx_variants(net: Net):
    """name -> loss(xs) over the states of ``net``."""
    def lax_scan_loss(step):
        def loss(xs):
            net.reset()

            def body(carry, x):
                net.h.value, net.s.value = carry
                y = step(x)
                return (net.h.value, net.s.value), y

            carry, ys = jax.lax.scan(body, (net.h.value, net.s.value), xs)
            net.h.value, net.s.value = carry
            return ys.mean()
        return loss

    def loop_loss(loop, step, **kw):
        def loss(xs):
            net.reset()
            return loop(step, xs, **kw).mean()
        return loss

    ck_step = bt.checkpoint(net.step, prevent_cse=False)
    nothing_saveable = jax.checkpoint_policies.nothing_saveable
    cfl = bt.checkpointed_for_loop
    return {
        "brainx states in lax.scan": lax_scan_loss(net.step),
        "brainx states in lax.scan, checkpoint": lax_scan_loss(ck_step),
        "brainx for_loop": loop_loss(bt.for_loop, net.step),
        "brainx for_loop, checkpoint step": loop_loss(bt.for_loop, ck_step),
        "ckpt for_loop per_step_remat": loop_loss(cfl, net.step, checkpoint="per_step_remat"),
        "ckpt for_loop nested_remat": loop_loss(cfl, net.step, checkpoint="nested_remat"),
        "ckpt for_loop nested_remat, keep carries": loop_loss(
            cfl, net.step, checkpoint=bt.NestedRemat(policy=nothing_saveable)),
        "ckpt for_loop nested (default)": loop_loss(cfl, net.step),
        "ckpt for_loop nested, levels=2": loop_loss(
            cfl, net.step, checkpoint=bt.Nested(levels=2)),
        "ckpt for_loop nested, levels=3": loop_loss(
            cfl, net.step, checkpoint=bt.Nested(levels=3)),
        "ckpt for_loop nested, base=16": loop_loss(cfl, net.step, base=16),
        "ckpt for_loop nested, keep carries": loop_loss(
            cfl, net.step, checkpoint=bt.Nested(policy=nothing_saveable)),
        "ckpt for_loop nested, unroll=5": loop_loss(cfl, net.step, unroll=5),
        "ckpt for_loop nested, levels=2, unroll=5": loop_loss(
            cfl, net.step, checkpoint=bt.Nested(levels=2), unroll=5),
        "ckpt for_loop binomial(16)": loop_loss(cfl, net.step, checkpoint=bt.Binomial(16)),
        "ckpt for_loop binomial(32)": loop_loss(cfl, net.step, checkpoint=bt.Binomial(32)),
    }


def _compile(make):
    """``(compiled, seconds)``: the time of trace + lower + compile, what a first call adds."""
    start = time.perf_counter()
    compiled = make()
    return compiled, time.perf_counter() - start


BASELINES = ("raw lax.scan (baseline)", "raw nested scan")


def _wanted(name, only):
    return not only or name.startswith(BASELINES) or any(w in name for w in only)


def compile_all(T: int, seed: int = 0, only=()):
    """name -> (compiled gradient function of no arguments, temp bytes, compile seconds)."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    W = jax.random.normal(k1, (N, N)) * 0.05
    xs = (jax.random.uniform(k2, (T, N)) < 0.1).astype(jnp.float32)
    out = {}
    outer, inner = sqrt_split(T)
    raw = {"raw lax.scan (baseline)": raw_loss,
           "raw lax.scan, jax.checkpoint step": partial(raw_loss, remat=True),
           "raw lax.scan, unroll=5": partial(raw_loss, unroll=5),
           f"raw nested scan {outer} x {inner} (anchor)": partial(raw_nested_loss, outer=outer,
                                                                  inner=inner)}
    for name, loss in raw.items():
        if _wanted(name, only):
            c, secs = _compile(lambda: jax.jit(jax.grad(loss)).lower(W, xs).compile())
            out[name] = (partial(c, W, xs), c.memory_analysis().temp_size_in_bytes, secs)
    net = Net(W)
    for name, loss in brainx_variants(net).items():
        if _wanted(name, only):
            c, secs = _compile(lambda: bt.jit(bt.grad(loss, grad_states=net.W)).lower(xs).compile())
            out[name] = (partial(c, xs), c.memory_analysis().temp_size_in_bytes, secs)
    return out


def measure(Ts, rounds: int, only=()):
    """T -> rows; every variant of every T is timed in the same interleaved rounds."""
    fns = {(T, name): entry for T in Ts for name, entry in compile_all(T, only=only).items()}
    base = "raw lax.scan (baseline)"
    grads = {key: jax.block_until_ready(fn()) for key, (fn, _, _) in fns.items()}  # warm-up
    times = {key: [] for key in fns}
    for _ in range(rounds):
        for key, (fn, _, _) in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(fn())
            times[key].append(time.perf_counter() - start)
    results = {T: [] for T in Ts}
    for (T, name), (_, temp, secs) in fns.items():
        ratio = statistics.median(t / b for t, b in zip(times[T, name], times[T, base]))
        err = float(jnp.max(jnp.abs(grads[T, name] - grads[T, base])))
        results[T].append((name, temp / 1024, statistics.median(times[T, name]) * 1e3, ratio,
                           err, secs))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--T", type=int, nargs="+", default=[1000])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--only", nargs="*", default=[],
                        help="keep variants whose name contains one of these words")
    args = parser.parse_args()
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {N} units, "
          f"median of {args.rounds} interleaved rounds")
    results = measure(args.T, args.rounds, tuple(args.only))
    for T in args.T:
        rows = results[T]
        print(f"\nT = {T}")
        print(f"| {'variant':<40} | {'temp KiB':>9} | {'ms / grad':>9} | {'x baseline':>10} "
              f"| {'compile s':>9} | {'max grad err':>12} |")
        print(f"|{'-' * 42}|{'-' * 11}|{'-' * 11}|{'-' * 12}|{'-' * 11}|{'-' * 14}|")
        for name, kib, ms, ratio, err, secs in rows:
            print(f"| {name:<40} | {kib:>9.1f} | {ms:>9.2f} | {ratio:>9.2f}x | {secs:>9.2f} "
                  f"| {err:>12.1e} |")
    if len(args.T) > 1:
        t0, t1 = args.T[0], args.T[-1]
        print(f"\nTime per step (us), T = {t0} and T = {t1} (same rounds): equal when linear in T")
        print(f"| {'variant':<40} | {'T=' + str(t0):>8} | {'T=' + str(t1):>8} | {'ratio':>6} |")
        print(f"|{'-' * 42}|{'-' * 10}|{'-' * 10}|{'-' * 8}|")
        first = {r[0]: r[2] for r in results[t0]}
        for name, _, ms, _, _, _ in results[t1]:
            if name in first:
                a, b = first[name] / t0 * 1e3, ms / t1 * 1e3
                print(f"| {name:<40} | {a:>8.2f} | {b:>8.2f} | {b / a:>5.2f}x |")


if __name__ == "__main__":
    main()
