"""Per-call dispatch time of a jitted step that reads and writes N small states.

Compares ``brainx.transform.jit`` with raw ``jax.jit`` given the same states
explicitly in and out, measured in the same run, and prints the ratios.

Times are the process's CPU time per call (``time.process_time``, all its
threads, XLA's included), not wall-clock time: on a shared machine another
process's load stretches wall-clock chunks at random, while CPU time counts
only the work of this one. ``--clock wall`` measures wall-clock time.

Run: ``python benchmarks/dispatch.py [--calls 10000] [--clock wall]``.
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

import brainx
from brainx import transform


CLOCK = time.process_time


def _chunk_us(fn, calls: int) -> float:
    start = CLOCK()
    for _ in range(calls):
        out = fn()
    jax.block_until_ready(out)
    return (CLOCK() - start) / calls * 1e6


def interleaved_us(raw_fn, our_fn, calls: int, repeats: int = 15):
    """Median per-call times of both, measured in alternating chunks.

    Alternating keeps both sides under the same machine load (the machines
    are shared), and the median ignores chunks hit by a burst of other work.
    """
    for fn in (raw_fn, our_fn):
        for _ in range(100):
            fn()
        jax.block_until_ready(fn())
    raw, ours = [], []
    for _ in range(repeats):
        raw.append(_chunk_us(raw_fn, calls))
        ours.append(_chunk_us(our_fn, calls))
    return statistics.median(raw), statistics.median(ours)


def bench(n: int, calls: int):
    calls = max(calls // max(n // 10, 1), 20)  # about the same time per chunk
    x = jnp.ones(4)

    # raw JAX: states passed explicitly in and out
    @jax.jit
    def raw_step(values, x):
        return [v * 0.9 + x for v in values], x.sum()

    raw_values = [jnp.zeros(4) for _ in range(n)]

    def raw_call():
        nonlocal raw_values
        raw_values, out = raw_step(raw_values, x)
        return out

    states = [brainx.HiddenState(jnp.zeros(4)) for _ in range(n)]

    @transform.jit
    def step(x):
        for s in states:
            s.value = s.value * 0.9 + x
        return x.sum()

    def brainx_call():
        return step(x)

    raw, ours = interleaved_us(raw_call, brainx_call, calls)
    for s, v in zip(states, raw_values):  # same computation, same results
        assert jnp.allclose(s.value, v)
    return raw, ours


def bench_grad(n: int, calls: int):
    """A jitted SGD step: the gradient of a loss over n parameter states, applied to them."""
    x = jnp.ones((8, 4))

    def loss_of(ws, x):
        h = x
        for w in ws:
            h = jnp.tanh(h @ w)
        return (h ** 2).mean()

    @jax.jit
    def raw_step(ws, x):
        loss, grads = jax.value_and_grad(loss_of)(ws, x)
        return [w - 0.1 * g for w, g in zip(ws, grads)], loss

    raw_ws = [jnp.eye(4) * 0.5 for _ in range(n)]

    def raw_call():
        nonlocal raw_ws
        raw_ws, loss = raw_step(raw_ws, x)
        return loss

    params = [brainx.ParamState(jnp.eye(4) * 0.5) for _ in range(n)]

    @transform.jit
    def step(x):
        grads, loss = transform.grad(lambda x: loss_of([p.value for p in params], x),
                                     grad_states=params, return_value=True)(x)
        for p, g in zip(params, grads):
            p.value = p.value - 0.1 * g
        return loss

    raw, ours = interleaved_us(raw_call, lambda: step(x), calls)
    for p, w in zip(params, raw_ws):
        assert jnp.allclose(p.value, w, atol=1e-6)
    return raw, ours


def bench_vmap(n: int, calls: int):
    """A jitted step vmapped over a batch of 16 lanes of n hidden states."""
    x = jnp.ones((16, 4))

    @jax.jit
    def raw_step(hs, x):
        def one(hs, x):
            new = [h * 0.9 + x for h in hs]
            return new, sum(h.sum() for h in new)
        return jax.vmap(one)(hs, x)

    raw_hs = [jnp.zeros((16, 4)) for _ in range(n)]

    def raw_call():
        nonlocal raw_hs
        raw_hs, out = raw_step(raw_hs, x)
        return out

    hidden = [brainx.HiddenState(jnp.zeros((16, 4))) for _ in range(n)]

    @transform.jit
    def step(x):
        def one(x):
            for h in hidden:
                h.value = h.value * 0.9 + x
            return sum(h.value.sum() for h in hidden)
        return transform.vmap(one, in_states=hidden)(x)

    raw, ours = interleaved_us(raw_call, lambda: step(x), calls)
    for h, v in zip(hidden, raw_hs):
        assert jnp.allclose(h.value, v)
    return raw, ours


def bench_random(n: int, calls: int):
    """A jitted draw from n generators (typed keys): each call splits every key once."""
    shape = (4,)

    @jax.jit
    def raw_step(keys):
        draws, new_keys = [], []
        for k in keys:
            k, sub = jax.random.split(k)
            draws.append(jax.random.normal(sub, shape))
            new_keys.append(k)
        return new_keys, sum(d.sum() for d in draws)

    raw_keys = [jax.random.key(i) for i in range(n)]

    def raw_call():
        nonlocal raw_keys
        raw_keys, out = raw_step(raw_keys)
        return out

    rngs = [brainx.random.RandomState(jax.random.key(i)) for i in range(n)]

    @transform.jit
    def step():
        return sum(r.normal(size=shape).sum() for r in rngs)

    raw, ours = interleaved_us(raw_call, step, calls)
    for r, k in zip(rngs, raw_keys):  # same keys, so the same numbers were drawn
        assert (jax.random.key_data(r.value) == jax.random.key_data(k)).all()
    return raw, ours


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {args.calls} calls per "
          f"measurement, {args.clock} time")
    print(f"{'N states':>8} | {'raw jax.jit (us)':>16} | {'brainx jit (us)':>15} | {'ratio':>5}")
    print("-" * 56)
    for n in (0, 1, 10, 100, 1000):
        raw, ours = bench(n, args.calls)
        print(f"{n:>8} | {raw:>16.1f} | {ours:>15.1f} | {ours / raw:>4.2f}x")
    for title, fn in (("jitted grad step (SGD on N ParamStates)", bench_grad),
                      ("jitted vmap step (16 lanes of N HiddenStates)", bench_vmap),
                      ("jitted random draw (N RandomStates, typed keys)", bench_random)):
        print(f"\n{title}")
        print(f"{'N states':>8} | {'raw jax (us)':>16} | {'brainx (us)':>15} | {'ratio':>5}")
        print("-" * 56)
        for n in (1, 10):
            raw, ours = fn(n, args.calls)
            print(f"{n:>8} | {raw:>16.1f} | {ours:>15.1f} | {ours / raw:>4.2f}x")


if __name__ == "__main__":
    main()
