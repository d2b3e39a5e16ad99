"""Event-driven against dense: the synaptic input step of a 4000-neuron E/I network.

3200 excitatory and 800 inhibitory presynaptic neurons, connection probability
0.02 (each presynaptic neuron projects to 80 of the 4000 postsynaptic ones),
one weight per synapse (``ParamState``s). One step computes the input current
``I = E(spikes_E) + I(spikes_I)``:

* event: two ``brainx.nn.EventFixedProb`` layers, bool spikes, per backend
  (``native``: brainx's C++ kernel over the spiking rows, an XLA custom call;
  ``numba``: brainevent's loops over the spiking rows, called back through Python;
  ``jax_raw``: gather + segment_sum over every stored synapse);
* dense: two ``brainx.nn.Linear`` layers (no bias) holding the same synapses
  as dense ``(pre, 4000)`` matrices, the spikes as 0/1 floats;
* brainstate's ``EventFixedProb`` (shared weights, its own synapses), timed in
  the same rounds, as the last column ("time (dense / it)"), only if
  ``import brainstate`` works; otherwise the column says n/a.

Each step is compiled with ``brainx.transform.jit``. Time: the median over
interleaved rounds (every variant and rate in each round, so machine load
hits all alike) of the time per step, each measurement a block of steps;
the ratio is dense time / event time in the same round (median). Memory:
the compiled step's ``memory_analysis()`` argument + temp bytes, and the
bytes of the stored connectivity (weights + indices; dense: the matrices).
Every event result is checked against the dense one before timing.

Run: ``python benchmarks/event_conn.py [--rounds 15] [--reps 50] [--rates 1 2 5 10]``
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import nn

N_E, N_I, N_POST, PROB = 3200, 800, 4000, 0.02
BRAINSTATE = "brainstate EventFixedProb"


def dense_matrix(layer) -> np.ndarray:
    """The ``(pre, post)`` matrix of an ``EventFixedProb`` layer (repeated pairs add)."""
    idx = np.asarray(layer.indices)
    D = np.zeros((layer.in_size[-1], layer.out_size[-1]), np.float32)
    rows = np.broadcast_to(np.arange(idx.shape[0])[:, None], idx.shape)
    np.add.at(D, (rows.ravel(), idx.ravel()), np.asarray(layer.weight.value).ravel())
    return D


def build(backend: str):
    """The event E and I layers for ``backend`` (the same synapses for every backend)."""
    brainx.random.seed(0)
    e = nn.EventFixedProb(N_E, N_POST, PROB, nn.init.Normal(0.6, 0.1), seed=1, backend=backend)
    i = nn.EventFixedProb(N_I, N_POST, PROB, nn.init.Normal(-6.7, 0.5), seed=2, backend=backend)
    return e, i


def variants():
    """name -> (compiled step of the spike vector, memory bytes, connectivity bytes)."""
    out = {}
    layers = {}
    for backend in ("native", "numba", "jax_raw"):
        if backend == "native" and not nn.event_backend.has_native():
            continue
        if backend == "numba" and not nn.event_backend.has_numba():
            continue
        e, i = layers[backend] = build(backend)

        def step(s, e=e, i=i):
            return e(s[:N_E]) + i(s[N_E:])
        conn = sum(x.nbytes for layer in (e, i) for x in (layer.weight.value, layer.indices))
        out[f"event ({backend})"] = (step, conn)
    e, i = next(iter(layers.values()))
    dense_e = nn.Linear(N_E, N_POST, w_init=dense_matrix(e), b_init=None)
    dense_i = nn.Linear(N_I, N_POST, w_init=dense_matrix(i), b_init=None)

    def dense_step(s):
        x = s.astype(jnp.float32)
        return dense_e(x[:N_E]) + dense_i(x[N_E:])
    out["dense (nn.Linear)"] = (dense_step, dense_e.weight.value["weight"].nbytes
                                + dense_i.weight.value["weight"].nbytes)
    compiled = {}
    probe = jnp.zeros(N_E + N_I, bool)
    for name, (fn, conn) in out.items():
        jitted = brainx.transform.jit(fn)
        mem = jitted.lower(probe).compile().memory_analysis()
        compiled[name] = (jitted, mem.argument_size_in_bytes + mem.temp_size_in_bytes, conn)
    return compiled


def brainstate_step():
    """brainstate's ``EventFixedProb`` for the same step (other synapses, same sizes), jitted
    with brainstate's jit; ``None`` when ``import brainstate`` fails."""
    try:
        import brainstate
    except ImportError:
        return None
    e = brainstate.nn.EventFixedProb(N_E, N_POST, PROB, 0.6, seed=1)
    i = brainstate.nn.EventFixedProb(N_I, N_POST, PROB, -6.7, seed=2)
    return brainstate.transform.jit(lambda s: e(s[:N_E]) + i(s[N_E:]))


def spikes_at(rate: float, seed: int):
    return jnp.asarray(np.random.RandomState(seed).rand(N_E + N_I) < rate)


def measure(rates, rounds: int, reps: int):
    fns = variants()
    inputs = {r: spikes_at(r / 100, seed=int(r * 10)) for r in rates}
    ref = "dense (nn.Linear)"
    for r, s in inputs.items():       # warm up, and check every variant against dense
        want = np.asarray(fns[ref][0](s))
        for name, (fn, _, _) in fns.items():
            got = np.asarray(jax.block_until_ready(fn(s)))
            err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
            assert err < 1e-4, f"{name} at {r}% differs from dense by {err:.2e}"
    timed = {name: fn for name, (fn, _, _) in fns.items()}
    bs = brainstate_step()
    if bs is not None:
        timed[BRAINSTATE] = bs
        for s in inputs.values():
            jax.block_until_ready(bs(s))
    times = {(r, name): [] for r in rates for name in timed}
    for _ in range(rounds):
        for r in rates:
            for name, fn in timed.items():
                s = inputs[r]
                t0 = time.perf_counter()
                for _ in range(reps):
                    y = fn(s)
                jax.block_until_ready(y)
                times[(r, name)].append((time.perf_counter() - t0) / reps)
    rows = []
    for r in rates:
        if bs is None:
            bs_col = "n/a"
        else:
            t = times[(r, BRAINSTATE)]
            bs_col = (f"{statistics.median(t) * 1e6:,.0f} us "
                      f"({statistics.median(d / e for d, e in zip(times[(r, ref)], t)):.1f}x)")
        for name, (_, mem, conn) in fns.items():
            t = times[(r, name)]
            ratio = statistics.median(d / e for d, e in zip(times[(r, ref)], t))
            rows.append((r, name, statistics.median(t) * 1e6, ratio, mem, fns[ref][1] / mem,
                         conn, fns[ref][2] / conn, bs_col))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--rates", type=float, nargs="+", default=[1, 2, 5, 10])
    args = parser.parse_args()
    rows = measure(args.rates, args.rounds, args.reps)
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, {N_E}+{N_I} -> {N_POST}, "
          f"p = {PROB}; median of {args.rounds} interleaved rounds of {args.reps} steps")
    print("| rate | variant | time / step (us) | dense / this (time) | compiled args+temp (MB) "
          "| dense / this (memory) | connectivity (MB) | brainstate EventFixedProb |")
    print("|---:|---|---:|---:|---:|---:|---:|---|")
    for r, name, us, ratio, mem, mem_ratio, conn, conn_ratio, bs_col in rows:
        print(f"| {r:g} % | {name} | {us:,.0f} | {ratio:.1f}x | {mem / 2**20:.1f} | "
              f"{mem_ratio:.1f}x | {conn / 2**20:.1f} | {bs_col} |")


if __name__ == "__main__":
    main()
