"""Eager ``transform.grad`` / ``vmap`` / ``checkpoint``: time per call, recompilations, memory.

A transform called outside ``jit`` runs again on every call. If each call
traces, lowers or compiles anew, or keeps something alive, an eager training
loop or a notebook slows down and its memory grows. This benchmark calls each
brainx transform 300 times on a function that reads a state and calls
``jnp.clip`` (a jnp function that is itself jitted), against the same JAX
transform of the explicit-state version (the state's value an argument),
and prints per transform:

- the first call's time, and the median time per call after it;
- the XLA compilations (JAX's ``/jax/core/compile/backend_compile_duration``
  event), jaxpr traces (``/jax/core/compile/jaxpr_trace_duration``) and MLIR
  lowerings (``/jax/core/compile/jaxpr_to_mlir_module_duration``) counted by a
  ``jax.monitoring`` listener during the calls after the first (JAX's eager
  op-by-op dispatch compiles each primitive once, so raw JAX shows 0 after the
  first call);
- the growth of resident memory (RSS, ``/proc/self/statm``, read after a
  ``gc.collect()``) over those calls.

Before the table, every case is called once on both sides (untimed), so the
first call of a fresh transform finds JAX's per-primitive and jnp's caches
equally warm on both sides: it measures the transform's own first-call cost.

Two ways of calling: ``reused`` builds the transform once and calls it
(``g = transform.grad(f, ...)``, then ``g(x)`` 300 times); ``inline`` builds
it in every call (``transform.grad(f, ...)(x)``), as eager code often does
(``--inline``; off by default to keep the run short while a transform
compiles on every call).

The sides are timed in alternating chunks (the order flips every chunk), so
machine load hits both alike; the results of the two sides are checked equal
on the first and the last call. Times are the process's CPU time (all its
threads) by default, ``--clock wall`` for wall-clock time.

Run: ``python benchmarks/eager_transform_memory.py [--calls 300] [--rounds 15]
[--inline] [--clock cpu|wall]``
(from a checkout that is not the installed one: ``PYTHONPATH=. python ...``).
"""

import argparse
import collections
import gc
import os
import statistics
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import transform as bt

try:  # the event names, where this JAX defines them
    from jax._src.dispatch import (BACKEND_COMPILE_EVENT, JAXPR_TO_MLIR_MODULE_EVENT,
                                   JAXPR_TRACE_EVENT)
except ImportError:  # pragma: no cover - depends on the JAX version
    BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
    JAXPR_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
    JAXPR_TO_MLIR_MODULE_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"

EVENTS = {BACKEND_COMPILE_EVENT: "compiles", JAXPR_TRACE_EVENT: "traces",
          JAXPR_TO_MLIR_MODULE_EVENT: "lowerings"}
COUNTS = collections.Counter()
CLOCK = time.process_time
PAGE = os.sysconf("SC_PAGE_SIZE")
N, LANES = 16, 8


def _listener(event, duration, **kwargs):
    name = EVENTS.get(event)
    if name is not None:
        COUNTS[name] += 1


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


# -- the function: reads a state, calls jnp.clip -------------------------------------------------

def f_raw(w, x):
    return jnp.sum(jnp.clip(w * x, -0.5, 0.5) ** 2)


def make_grad(mode):
    w0, x = jnp.linspace(-1.0, 1.0, N), jnp.linspace(0.5, 1.5, N)
    s = brainx.ParamState(w0)

    def f(x):
        return f_raw(s.value, x)

    if mode == "reused":
        g, gr = bt.grad(f, grad_states=s), jax.grad(f_raw)
        return (lambda: gr(w0, x)), (lambda: g(x))
    return (lambda: jax.grad(f_raw)(w0, x)), (lambda: bt.grad(f, grad_states=s)(x))


def make_vmap(mode):
    w0, xs = jnp.linspace(-1.0, 1.0, N), jnp.linspace(0.5, 1.5, LANES * N).reshape(LANES, N)
    s = brainx.ParamState(w0)

    def f(x):
        return f_raw(s.value, x)

    if mode == "reused":
        v, vr = bt.vmap(f), jax.vmap(f_raw, in_axes=(None, 0))
        return (lambda: vr(w0, xs)), (lambda: v(xs))
    return ((lambda: jax.vmap(f_raw, in_axes=(None, 0))(w0, xs)), (lambda: bt.vmap(f)(xs)))


def make_checkpoint(mode):
    w0, x = jnp.linspace(-1.0, 1.0, N), jnp.linspace(0.5, 1.5, N)
    s = brainx.ParamState(w0)

    def f(x):
        return f_raw(s.value, x)

    if mode == "reused":
        c, cr = bt.checkpoint(f), jax.checkpoint(f_raw)
        return (lambda: cr(w0, x)), (lambda: c(x))
    return (lambda: jax.checkpoint(f_raw)(w0, x)), (lambda: bt.checkpoint(f)(x))


CASES = {"grad": make_grad, "vmap": make_vmap, "checkpoint": make_checkpoint}


# -- measuring -----------------------------------------------------------------------------------

def _check(raw, ours, what):
    for a, b in zip(jax.tree.leaves(raw), jax.tree.leaves(ours), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-6, atol=1e-7,
                                   err_msg=f"brainx differs from raw ({what})")


def run_case(make, mode, calls, rounds):
    sides = dict(zip(("raw", "brainx"), make(mode)))
    first, outs = {}, {}
    for name, fn in sides.items():
        start = CLOCK()
        outs[name] = jax.block_until_ready(fn())
        first[name] = CLOCK() - start
    _check(outs["raw"], outs["brainx"], "first call")

    rest = max(calls - 1, rounds)                 # the calls after the first, in chunks
    sizes = [rest // rounds + (i < rest % rounds) for i in range(rounds)]
    chunk_us = {name: [] for name in sides}
    counts = {name: collections.Counter() for name in sides}
    grown = dict.fromkeys(sides, 0)
    order = list(sides)
    for r, per_chunk in enumerate(sizes):
        for name in (order if r % 2 == 0 else order[::-1]):
            fn = sides[name]
            gc.collect()
            before_rss, before = rss_bytes(), COUNTS.copy()
            start = CLOCK()
            for _ in range(per_chunk):
                out = fn()
            jax.block_until_ready(out)
            chunk_us[name].append((CLOCK() - start) / per_chunk * 1e6)
            counts[name] += COUNTS - before
            gc.collect()
            grown[name] += rss_bytes() - before_rss
            outs[name] = out
    _check(outs["raw"], outs["brainx"], "last call")
    per_call = {k: statistics.median(v) for k, v in chunk_us.items()}
    return first, per_call, counts, grown, 1 + sum(sizes)


def _commit(path):
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per side and case")
    parser.add_argument("--rounds", type=int, default=15,
                        help="alternating chunks the calls after the first are split into")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--inline", action="store_true",
                        help="also the rows that build the transform in every call")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    jax.monitoring.register_event_duration_secs_listener(_listener)
    where = os.path.dirname(brainx.__file__)
    print(f"brainx {where} (commit {_commit(where)}), jax {jax.__version__}, backend "
          f"{jax.default_backend()}, {args.clock} time; per call: median over {args.rounds} "
          f"chunks; counts and RSS growth over the calls after the first")
    for make in CASES.values():  # warm JAX's per-primitive and jnp's caches for both sides
        for fn in make("reused"):
            jax.block_until_ready(fn())
    head = ["transform", "made", "calls", "first call raw (ms)", "first call brainx (ms)",
            "per call raw (us)", "per call brainx (us)", "brainx / raw",
            "compiles raw", "compiles brainx", "traces raw", "traces brainx",
            "lowerings raw", "lowerings brainx", "RSS growth raw (KiB)", "RSS growth brainx (KiB)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, make in CASES.items():
        for mode in ("reused", "inline") if args.inline else ("reused",):
            first, per_call, counts, grown, n = run_case(make, mode, args.calls, args.rounds)
            row = [f"{name}", mode, str(n), f"{first['raw'] * 1e3:.1f}",
                   f"{first['brainx'] * 1e3:.1f}", f"{per_call['raw']:.0f}",
                   f"{per_call['brainx']:.0f}", f"{per_call['brainx'] / per_call['raw']:.2f}x"]
            for event in ("compiles", "traces", "lowerings"):
                row += [str(counts["raw"][event]), str(counts["brainx"][event])]
            row += [f"{grown['raw'] / 1024:.0f}", f"{grown['brainx'] / 1024:.0f}"]
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
