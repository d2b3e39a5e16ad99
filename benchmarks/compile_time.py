"""First-call cost (trace + lower + compile + first run) of brainx transforms against raw JAX.

A first call is what a user waits for before a jitted step, a simulation loop
or a gradient runs at all. Each round builds everything anew (a fresh step
function, fresh states, a fresh transform object), clears JAX's caches
(``jax.clear_caches()``) and brainx's loop cache, then times one call up to
``jax.block_until_ready``. The sides of a case are timed in alternation,
round after round (the order flips every round), so machine load hits all of
them alike. The table shows median times, the ratio of the medians
(brainx / raw) and, as ``paired``, the median of the per-round ratios (each
pair timed back to back, so it is the steadier of the two on a busy machine).

It also counts how many times the user's Python step function runs during
that first call (a Python counter in the step): JAX traces a step once; a
stateful transform that traces more often pays for it on every first call.

Cases (the LIF-like step: 256 units, ``h <- 0.9 h (1 - s) + W x_t``,
``s = sigmoid(5 (h - 1))``, ``W`` a 256x256 ``ParamState``):

- ``jit, N states``: a ``transform.jit`` step reading and writing N states of
  shape (4,), against ``jax.jit`` of the same step with the states passed in
  and out explicitly.
- ``for_loop eager`` / ``for_loop in jit``: a 1000-step ``transform.for_loop``
  called outside every transform (brainx compiles the loop itself), and inside
  ``transform.jit``, against ``jax.jit`` of ``jax.lax.scan``.
- ``jit(grad(checkpointed_for_loop))``: T=1000 with the default strategy
  (``Nested``: 40 segments of 25 steps, hand-written reverse pass), against
  ``jax.jit(jax.grad(...))`` of a scan over ``jax.checkpoint``-ed segments of
  an inner scan (same 40 x 25 cut).

A brainstate column appears only when ``brainstate`` is importable.

A second table splits the first call into its phases, brainx against raw JAX:
trace + lower (``brainx.transform.jit(f).lower(*args)`` / ``jax.jit(f).lower(*args)``),
XLA compile (``lowered.compile()``) and, on a second fresh build, the whole
first call (run included). Each round builds everything anew (model, states,
step, transform object) and clears brainx's loop cache, but, unless
``--clear-caches``, not JAX's caches: jnp's jitted functions (``jnp.clip``,
``jnp.where``, ``jnp.linalg.norm``, ...) keep their process-global caches, and
an untimed warm-up round of every side first leaves them equally warm for
both (the first table, which clears them, measures a first call in a cold
process). Sides alternate, the order flipping every round. The warm-up's
results are checked equal between brainx and raw (outputs and new state
values; for the SNN the loss, the accuracy and the updated weights). The step
calls column counts the traces of the user's step in the lower and in the
first call: a 0 would mean a cache served a trace (a fresh function did not
miss), so the times of that row would not measure a trace. Cases:

- ``jit, 1000 states of (4,)``: the first table's step, split.
- ``model step``: a ``brainx.nn.Module`` of 10 layers, each of 50 neuron
  groups with a ``ParamState`` (plastic weight) and a ``HiddenState``: 1000
  states, all read and written, with ``jnp.clip`` / ``jnp.where`` per group and
  ``jnp.linalg.norm`` per layer; raw: the same step on explicit dicts of
  values in and out, under ``jax.jit``.
- ``SNN BPTT train step``: 100 Poisson inputs -> 256 recurrent LIF (arctan
  surrogate) -> 10 leaky readouts (``Expon``), T=200, batch 64, cross-entropy,
  one Adam step: ``brainx.nn`` (plain numbers, no units), ``transform.for_loop``,
  ``transform.grad``, ``brainx.optim.Adam`` under ``transform.jit``, against
  ``lax.scan``, ``jax.value_and_grad``, ``optax.adam`` under ``jax.jit``.

The two models' builders live in ``compile_models.py``.

Before each timed phase the garbage of earlier rounds is collected (``gc.collect()``,
untimed), so that one side does not pay for freeing what another built; the
collector stays on while timing, as in a user's process.

Times are the process's CPU time (all threads, XLA's included; ``--clock
wall`` for wall-clock time), as on a shared machine other processes' load
stretches wall-clock times at random.

Run: ``python benchmarks/compile_time.py [--rounds 7] [--phase-rounds 3]
[--tables all|first-call|phases] [--cases TEXT] [--clear-caches] [--clock cpu|wall]`` (from a
checkout that is not the installed one, put it first: ``PYTHONPATH=. python
...``; the header prints which brainx was imported). About 3 minutes on 2
cores with the defaults.
"""

import argparse
import gc
import os
import statistics
import subprocess
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import transform as bt

from compile_models import (GROUPS, GSIZE, LAYERS, SNN_BATCH, SNN_IN, SNN_OUT, SNN_REC, SNN_T,
                            Built, Counter, allclose, brainx_model_step, brainx_snn_step,
                            check_model, check_snn, raw_model_step, raw_snn_step, snn_data)

try:  # optional third column; never a dependency of brainx
    import brainstate as _bs
except ImportError:  # pragma: no cover - depends on the environment
    _bs = None

UNITS, T, OUTER, INNER = 256, 1000, 40, 25

# The process's CPU time (all its threads, XLA's compiler threads included) by default: on a
# shared machine, other processes' load stretches wall-clock times at random, CPU time counts
# only this process's work. ``--clock wall`` for wall-clock time.
CLOCK = time.process_time


# -- the LIF-like step, pure ---------------------------------------------------------------

def _lif(W, h, s, x):
    h = 0.9 * h * (1.0 - s) + W @ x
    return h, jax.nn.sigmoid(5.0 * (h - 1.0))


def _h0():
    return jnp.zeros(UNITS)


def _s0():
    return jax.nn.sigmoid(5.0 * (_h0() - 1.0))


# -- builders: each returns (thunk doing the first call, counter) --------------------------

def raw_jit_states(n, x):
    c = Counter()

    def step(values, x):
        c.n += 1
        return [v * 0.9 + x for v in values], x.sum()

    values = [jnp.zeros(4) for _ in range(n)]
    f = jax.jit(step)
    return (lambda: f(values, x)[0]), c


def stateful_jit_states(lib, n, x):
    c = Counter()
    states = [lib.HiddenState(jnp.zeros(4)) for _ in range(n)]

    def step(x):
        c.n += 1
        for s in states:
            s.value = s.value * 0.9 + x
        return x.sum()

    f = lib.transform.jit(step)

    def call():
        f(x)
        return [s.value for s in states]
    return call, c


def raw_scan(xs, W):
    c = Counter()

    def body(carry, x):
        c.n += 1
        h, s = _lif(W, *carry, x)
        return (h, s), s

    # the carry in and out explicitly, as brainx passes and writes back the states
    f = jax.jit(lambda W, carry, xs: jax.lax.scan(body, carry, xs))
    carry = (_h0(), _s0())
    return (lambda: f(W, carry, xs)[1]), c


def _stateful_net(lib, W):
    c = Counter()
    w = lib.ParamState(W)
    h, s = lib.HiddenState(_h0()), lib.HiddenState(_s0())

    def step(x):
        c.n += 1
        h.value, s.value = _lif(w.value, h.value, s.value, x)
        return s.value
    return step, w, c


def stateful_for_loop_eager(lib, xs, W):
    step, _, c = _stateful_net(lib, W)
    return (lambda: lib.transform.for_loop(step, xs)), c


def stateful_for_loop_in_jit(lib, xs, W):
    step, _, c = _stateful_net(lib, W)
    f = lib.transform.jit(lambda xs: lib.transform.for_loop(step, xs))
    return (lambda: f(xs)), c


def raw_nested_grad(xs, W):
    c = Counter()

    def body(W, carry, x):
        c.n += 1
        h, s = _lif(W, *carry, x)
        return (h, s), s

    def loss(W, carry, xs):
        seg = jax.checkpoint(lambda carry, xseg: jax.lax.scan(partial(body, W), carry, xseg),
                             prevent_cse=False)
        carry, ys = jax.lax.scan(seg, carry, xs.reshape(OUTER, INNER, UNITS))
        return jnp.mean((ys - 0.1) ** 2), carry

    # the final carry out too, as brainx writes back the states
    f = jax.jit(jax.grad(loss, has_aux=True))
    carry = (_h0(), _s0())
    return (lambda: f(W, carry, xs)[0]), c


def stateful_checkpointed_grad(lib, xs, W):
    step, w, c = _stateful_net(lib, W)

    def loss(xs):
        return jnp.mean((lib.transform.checkpointed_for_loop(step, xs) - 0.1) ** 2)

    f = lib.transform.jit(lib.transform.grad(loss, grad_states=w))
    return (lambda: f(xs)), c


# -- timing -------------------------------------------------------------------------------

def _first_call(build):
    """Seconds of one first call of a freshly built function, its result and step count."""
    jax.clear_caches()
    bt.clear_loop_cache()
    clear_bs = getattr(getattr(_bs, "transform", None), "clear_loop_cache", None)
    if clear_bs is not None:  # pragma: no cover - brainstate is optional
        clear_bs()
    thunk, counter = build()
    gc.collect()  # the last round's garbage is not this side's cost
    start = CLOCK()
    out = jax.block_until_ready(thunk())
    return CLOCK() - start, out, counter.n


def measure(sides, rounds):
    """First-call seconds of each side, timed in alternation, and its step counts.

    Returns ``{side: [seconds per round]}`` and ``{side: "counts seen"}``.
    Round 0 is a warm-up (one-time costs of JAX's and brainx's Python code
    paths), not timed; a case whose warm-up took under 0.5 s on every side
    gets three times ``rounds``, since short times are the noisiest.
    """
    times = {name: [] for name in sides}
    calls = {name: set() for name in sides}
    outs, warm = {}, {}
    order = list(sides)
    r, total = 0, rounds
    while r <= total:
        for name in (order if r % 2 == 0 else order[::-1]):
            t, out, n = _first_call(sides[name])
            if r:
                times[name].append(t)
            else:
                outs[name], warm[name] = out, t
            calls[name].add(n)
        if r == 0 and max(warm.values()) < 0.5:
            total = 3 * rounds
        r += 1
    ref = jax.tree.leaves(outs["raw"])
    for name, out in outs.items():  # every side computes the same thing
        for a, b in zip(ref, jax.tree.leaves(out), strict=True):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=2e-4, atol=1e-6,
                                       err_msg=f"{name} differs from raw")
    return times, {k: "/".join(map(str, sorted(v))) for k, v in calls.items()}


def cases(x, xs, W):
    libs = {"brainx": brainx} | ({"brainstate": _bs} if _bs is not None else {})
    for n in (10, 100, 1000):
        yield f"jit, {n} states of (4,)", {"raw": partial(raw_jit_states, n, x)} | {
            k: partial(stateful_jit_states, lib, n, x) for k, lib in libs.items()}
    yield f"for_loop eager, T={T}", {"raw": partial(raw_scan, xs, W)} | {
        k: partial(stateful_for_loop_eager, lib, xs, W) for k, lib in libs.items()}
    yield f"for_loop in jit, T={T}", {"raw": partial(raw_scan, xs, W)} | {
        k: partial(stateful_for_loop_in_jit, lib, xs, W) for k, lib in libs.items()}
    yield f"jit(grad(checkpointed_for_loop)), T={T}", {"raw": partial(raw_nested_grad, xs, W)} | {
        k: partial(stateful_checkpointed_grad, lib, xs, W) for k, lib in libs.items()}


# == phases of the first call: trace + lower, XLA compile, whole first call ===================
#
# Each builder makes everything anew and returns a ``Built`` (``compile_models.py``, with the
# builders of the realistic models: A. a 10-layer model of 1000 small states, B. an SNN
# training step by BPTT); C. is here.

# -- C. (split) the jitted step writing N states of (4,), as in the first table -----------------

def raw_states_built(n, x):
    c = Counter()

    def step(values, x):
        c.n += 1
        return [v * 0.9 + x for v in values], x.sum()

    values = [jnp.zeros(4) for _ in range(n)]
    f = jax.jit(step)
    return Built(f, (values, x), lambda: f(values, x), c)


def brainx_states_built(n, x):
    c = Counter()
    states = [brainx.HiddenState(jnp.zeros(4)) for _ in range(n)]

    def step(x):
        c.n += 1
        for s in states:
            s.value = s.value * 0.9 + x
        return x.sum()

    f = bt.jit(step)

    def call():
        out = f(x)
        return [s.value for s in states], out
    return Built(f, (x,), call, c)


# -- timing of the phases ---------------------------------------------------------------------

PHASES = ("lower", "compile", "first call")


def _fresh(build, clear):
    if clear:
        jax.clear_caches()
    bt.clear_loop_cache()
    return build()


def _phases(build, clear):
    """Seconds of lower, compile and first call (the last of a second fresh build), its result."""
    built = _fresh(build, clear)
    gc.collect()  # the last round's garbage is not this side's cost
    t0 = CLOCK()
    lowered = built.jitted.lower(*built.args)
    t1 = CLOCK()
    lowered.compile()
    t2 = CLOCK()
    lower_calls = built.counter.n
    del built, lowered
    built = _fresh(build, clear)
    gc.collect()
    t3 = CLOCK()
    out = jax.block_until_ready(built.call())
    t4 = CLOCK()
    return (t1 - t0, t2 - t1, t4 - t3), out, f"{lower_calls}/{built.counter.n}"


def measure_phases(sides, rounds, clear, check):
    """Per side, ``{phase: [seconds per round]}``, timed in alternation; and the step calls seen.

    Round 0 is an untimed warm-up of every side (one-time costs of JAX's, jnp's and brainx's
    Python code paths and caches), after which the results of the sides are compared by ``check``.
    """
    times = {name: {p: [] for p in PHASES} for name in sides}
    calls = {name: set() for name in sides}
    outs = {}
    order = list(sides)
    for r in range(rounds + 1):
        for name in (order if r % 2 == 0 else order[::-1]):
            secs, out, n = _phases(sides[name], clear)
            calls[name].add(n)
            if r == 0:
                outs[name] = out
                continue
            for p, t in zip(PHASES, secs):
                times[name][p].append(t)
        if r == 0:
            for name in order[1:]:
                check(outs[order[0]], outs[name], name)
    return times, {k: ",".join(sorted(v)) for k, v in calls.items()}


def check_states(raw, ours, name):
    allclose(raw, ours, name)


def phase_cases(x, xs, labels):
    yield ("jit, 1000 states of (4,)", check_states,
           {"raw": partial(raw_states_built, 1000, x),
            "brainx": partial(brainx_states_built, 1000, x)})
    yield (f"model step: {LAYERS} layers x {GROUPS * 2} states", check_model,
           {"raw": partial(raw_model_step, jnp.linspace(-1.0, 1.0, GSIZE)),
            "brainx": partial(brainx_model_step, jnp.linspace(-1.0, 1.0, GSIZE))})
    yield (f"SNN BPTT train step: {SNN_IN}->{SNN_REC} LIF->{SNN_OUT}, T={SNN_T}, "
           f"batch {SNN_BATCH}, Adam", check_snn,
           {"raw": partial(raw_snn_step, xs, labels),
            "brainx": partial(brainx_snn_step, xs, labels)})


def print_phases(rounds, clear, only=""):
    caches = ("jax.clear_caches() before each build" if clear
              else "jnp's caches warm, as after a warm-up")
    print(f"\nphases of the first call ({caches}; medians; brainx / raw: the ratio of the "
          "medians and, in brackets, the median of the per-round ratios)")
    head = ["case"] + [f"{p} {k}" for p in PHASES
                       for k in ("raw (ms)", "brainx (ms)", "brainx / raw")]
    head += ["rounds", "step calls raw (lower/call)", "step calls brainx (lower/call)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    xs, labels = snn_data()
    for name, check, sides in phase_cases(jnp.ones(4), xs, labels):
        if only not in name:
            continue
        times, n = measure_phases(sides, rounds, clear, check)
        row = [name]
        for p in PHASES:
            raw, ours = times["raw"][p], times["brainx"][p]
            paired = statistics.median(a / b for a, b in zip(ours, raw))
            mr, mo = statistics.median(raw), statistics.median(ours)
            row += [f"{mr * 1e3:.0f}", f"{mo * 1e3:.0f}", f"{mo / mr:.2f}x ({paired:.2f}x)"]
        row += [str(rounds), n["raw"], n["brainx"]]
        print("| " + " | ".join(row) + " |", flush=True)


def _commit(path):
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7,
                        help="timed first calls per side and case of the first table "
                             "(x3 for quick cases)")
    parser.add_argument("--phase-rounds", type=int, default=3,
                        help="timed rounds per side and case of the phases table")
    parser.add_argument("--tables", choices=("all", "first-call", "phases"), default="all")
    parser.add_argument("--clear-caches", action="store_true",
                        help="phases table: jax.clear_caches() before each build (cold jnp caches)")
    parser.add_argument("--cases", default="",
                        help="phases table: only the cases whose name holds this text")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="cpu: the process's CPU time (default); wall: wall-clock time")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    where = os.path.dirname(brainx.__file__)
    print(f"brainx {where} (commit {_commit(where)}), jax {jax.__version__}, "
          f"backend {jax.default_backend()}, {args.clock} time; medians; "
          f"brainstate {'present' if _bs is not None else 'not installed'}")
    if args.tables in ("all", "first-call"):
        print_first_calls(args.rounds)
    if args.tables in ("all", "phases"):
        print_phases(args.phase_rounds, args.clear_caches, args.cases)


def print_first_calls(rounds):
    key = jax.random.PRNGKey(0)
    x = jnp.ones(4)
    xs = jax.random.normal(key, (T, UNITS)) * 0.5
    W = jax.random.normal(jax.random.fold_in(key, 1), (UNITS, UNITS)) / UNITS ** 0.5
    other = ["brainstate"] if _bs is not None else []
    head = ["case", "raw JAX (ms)"]
    for k in ["brainx"] + other:
        head += [f"{k} (ms)", f"{k} / raw", "paired"]
    head += ["rounds"] + [f"step calls {k}" for k in ["raw", "brainx"] + other]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, sides in cases(x, xs, W):
        times, n = measure(sides, rounds)
        t = {k: statistics.median(v) for k, v in times.items()}
        row = [name, f"{t['raw'] * 1e3:.0f}"]
        for k in ["brainx"] + other:
            paired = statistics.median(a / b for a, b in zip(times[k], times["raw"]))
            row += [f"{t[k] * 1e3:.0f}", f"{t[k] / t['raw']:.2f}x", f"{paired:.2f}x"]
        row += [str(len(times["raw"]))] + [n[k] for k in ["raw", "brainx"] + other]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
