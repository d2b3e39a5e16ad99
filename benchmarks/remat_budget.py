"""``checkpointed_for_loop(memory_budget=...)`` against every strategy picked by hand.

The BPTT workload of ``remat_memory.py`` (256 units, T steps). First every
strategy the chooser considers is compiled by hand and its XLA temp bytes
(``memory_analysis()``) measured; the budgets are then placed just above each
of these (x1.05), so each budget has a known best answer: the fastest
hand-picked strategy that fits. For each budget it prints the strategy
chosen, its temp bytes (must fit), its time per gradient and the best
fitting hand-picked strategy's, timed in the same interleaved rounds (the
fastest of the rounds: on a machine shared with other jobs the minimum moves
least), and their ratio (the chooser should be within 10 %).

Run: ``python benchmarks/remat_budget.py 1000`` (or ``16000``; ``--rounds 7``).
"""

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp

from brainx import transform as bt
from brainx.transform.remat.memory_budget import Budgeted, candidates

sys.path.insert(0, os.path.dirname(__file__))
from remat_memory import N, Net  # noqa: E402


def _short(s):
    return repr(s).replace(", segments=None, base=None, policy=None", "").replace(
        "(policy=None, prevent_cse=False)", "()")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("T", type=int)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    T = args.T
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    W = jax.random.normal(k1, (N, N)) * 0.05
    xs = (jax.random.uniform(k2, (T, N)) < 0.1).astype(jnp.float32)
    net = Net(W)

    def compile_grad(**kw):
        def loss(xs):
            net.reset()
            return bt.checkpointed_for_loop(net.step, xs, **kw).mean()
        c = bt.jit(bt.grad(loss, grad_states=net.W)).lower(xs).compile()
        return c, c.memory_analysis().temp_size_in_bytes

    fns, temps = {}, {}
    for s in candidates():
        fns[_short(s)], temps[_short(s)] = compile_grad(checkpoint=s)
    budgets = sorted({int(t * 1.05) for t in temps.values()}, reverse=True)
    chosen = {}
    for b in budgets:
        strategy = Budgeted(b)
        fns[f"budget {b}"], temps[f"budget {b}"] = compile_grad(memory_budget=strategy)
        chosen[b] = strategy.choice
    for c in fns.values():  # warm-up
        jax.block_until_ready(c(xs))
    times = {k: [] for k in fns}
    for _ in range(args.rounds):
        for k, c in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(c(xs))
            times[k].append(time.perf_counter() - start)
    ms = {k: min(v) * 1e3 for k, v in times.items()}

    print(f"jax {jax.__version__}, {jax.default_backend()}, {N} units, T = {T}, fastest of "
          f"{args.rounds} interleaved rounds")
    print("\nhand-picked strategies:")
    print(f"| {'strategy':<28} | {'temp KiB':>9} | {'ms / grad':>9} |")
    print(f"|{'-' * 30}|{'-' * 11}|{'-' * 11}|")
    for s in candidates():
        k = _short(s)
        print(f"| {k:<28} | {temps[k] / 1024:>9.1f} | {ms[k]:>9.1f} |")
    print("\nbudgets (each 1.05 x a hand-picked strategy's temp bytes):")
    print(f"| {'budget KiB':>10} | {'chosen':<28} | {'temp KiB':>9} | {'fits':>4} | "
          f"{'ms / grad':>9} | {'best fitting by hand':<28} | {'ms':>7} | {'ratio':>5} |")
    print(f"|{'-' * 12}|{'-' * 30}|{'-' * 11}|{'-' * 6}|{'-' * 11}|{'-' * 30}|{'-' * 9}|"
          f"{'-' * 7}|")
    same = 0
    for b in budgets:
        k = f"budget {b}"
        fitting = [h for h in map(_short, candidates()) if temps[h] <= b]
        best = min(fitting, key=lambda h: ms[h]) if fitting else None
        best_ms = ms[best] if best else float("nan")
        pick = _short(chosen[b].strategy)
        same += pick == best
        print(f"| {b / 1024:>10.1f} | {pick:<28} | {temps[k] / 1024:>9.1f} "
              f"| {'yes' if temps[k] <= b else 'NO':>4} | {ms[k]:>9.1f} | "
              f"{(best or '-') if pick != best else 'same':<28} | "
              f"{best_ms:>7.1f} | {ms[k] / best_ms:>5.2f} |")
    print(f"\n{same} of {len(budgets)} budgets chose the best fitting strategy.")


if __name__ == "__main__":
    main()
