"""checkpointed_for_loop(memory_budget=...) against hand-picked strategies on the BPTT workload.

For each budget: the strategy chosen, XLA's compiled temp bytes (must fit the
budget) and the median time per gradient next to the fastest hand-picked
strategy that fits. Run: ``python benchmarks/remat_budget.py 1000`` (or 16000).
"""
import time, jax, jax.numpy as jnp, brainx
from brainx import transform as bt
from brainx.transform.remat.memory_budget import Budgeted
import sys, os; sys.path.insert(0, os.path.dirname(__file__))
from remat_memory import Net, N
T=int(sys.argv[1])
k1,k2=jax.random.split(jax.random.PRNGKey(0))
W=jax.random.normal(k1,(N,N))*0.05; xs=(jax.random.uniform(k2,(T,N))<0.1).astype(jnp.float32)
net=Net(W)
def mk(**kw):
    def loss(xs):
        net.reset(); return bt.checkpointed_for_loop(net.step, xs, **kw).mean()
    return bt.jit(bt.grad(loss, grad_states=net.W))
def timeit(g):
    c = g.lower(xs).compile(); g(xs).block_until_ready()
    ts=[]
    for _ in range(5):
        t=time.perf_counter(); g(xs).block_until_ready(); ts.append(time.perf_counter()-t)
    return c.memory_analysis().temp_size_in_bytes, sorted(ts)[2]
hand = {n: timeit(mk(checkpoint=s)) for n, s in [("per_step", bt.PerStepRemat()), ("nested2", bt.Nested(levels=2)), ("nested3", bt.Nested(levels=3)), ("binomial32", bt.Binomial(32)),("binomial8", bt.Binomial(8))]}
for n,(tb,t) in hand.items(): print(f"hand {n:12s} temp {tb/1024:9.1f} KiB  {t*1e3:8.2f} ms")
for budget in [int(x*1024) for x in (1200, 600, 300, 150)]:
    b = Budgeted(budget); tb, t = timeit(mk(memory_budget=b))
    fits = [v for v in hand.values() if v[0] <= budget]
    best = min(v[1] for v in fits) if fits else float('nan')
    print(b.choice); print(f"budget {budget/1024:7.0f} KiB -> {b.choice.strategy!r:40s} temp {tb/1024:8.1f} KiB fits={tb<=budget} time {t*1e3:.2f} ms vs best fitting hand {best*1e3:.2f} ms")
