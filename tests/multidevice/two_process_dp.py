"""One process of a 2-process data-parallel run (launched by tests/test_distributed.py).

Usage: python two_process_dp.py PROCESS_ID PORT OUT.npz. Each process owns one
CPU device and feeds its half of every batch with
``jax.make_array_from_process_local_data``; process 0 saves the losses and
parameters, which must equal a one-process run.
"""

import sys

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
pid, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                           process_id=pid, initialization_timeout=60)

import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import brainx  # noqa: E402
from dp_model import build, data, jit_step  # noqa: E402

mesh = brainx.distributed.make_mesh((2,), ("data",))
net, params, opt = build(16)
brainx.distributed.shard_states(net, {brainx.HiddenState: P("data")}, mesh)
brainx.distributed.shard_states(opt, {}, mesh)
step = jit_step(net, params, opt)
losses = []
for i in range(3):
    xs, labels = data(16, seed=i)
    half = slice(8 * pid, 8 * pid + 8)                 # this process's half of the batch
    xs = jax.make_array_from_process_local_data(NamedSharding(mesh, P(None, "data")),
                                                np.asarray(xs)[:, half])
    labels = jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")),
                                                    np.asarray(labels)[half])
    losses.append(float(step(xs, labels)))
if pid == 0:  # the parameters are replicated: this process's copy is the whole value
    leaves = jax.tree_util.tree_flatten_with_path({str(p): s.value for p, s in params.items()})[0]
    np.savez(out, losses=np.asarray(losses), **{
        jax.tree_util.keystr(path): np.asarray(leaf.addressable_shards[0].data)
        for path, leaf in leaves})
jax.distributed.shutdown()
