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

Run: ``python benchmarks/compile_time.py [--rounds 7]`` (from a checkout that
is not the installed one, put it first: ``PYTHONPATH=. python ...``; the
header prints which brainx was imported).
"""

import argparse
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

try:  # optional third column; never a dependency of brainx
    import brainstate as _bs
except ImportError:  # pragma: no cover - depends on the environment
    _bs = None

UNITS, T, OUTER, INNER = 256, 1000, 40, 25


class Counter:
    """How many times a step function ran."""

    def __init__(self):
        self.n = 0


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
    start = time.perf_counter()
    out = jax.block_until_ready(thunk())
    return time.perf_counter() - start, out, counter.n


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


def _commit(path):
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7,
                        help="timed first calls per side and case (x3 for quick cases)")
    args = parser.parse_args()
    where = os.path.dirname(brainx.__file__)
    print(f"brainx {where} (commit {_commit(where)}), jax {jax.__version__}, "
          f"backend {jax.default_backend()}; medians; "
          f"brainstate {'present' if _bs is not None else 'not installed'}")
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
        times, n = measure(sides, args.rounds)
        t = {k: statistics.median(v) for k, v in times.items()}
        row = [name, f"{t['raw'] * 1e3:.0f}"]
        for k in ["brainx"] + other:
            paired = statistics.median(a / b for a, b in zip(times[k], times["raw"]))
            row += [f"{t[k] * 1e3:.0f}", f"{t[k] / t['raw']:.2f}x", f"{paired:.2f}x"]
        row += [str(len(times["raw"]))] + [n[k] for k in ["raw", "brainx"] + other]
        print("| " + " | ".join(row) + " |", flush=True)

if __name__ == "__main__":
    main()
