"""One process of a 2-process x 4-device partitioned microcircuit (launched by tests/test_distributed.py).

Usage: python two_process_brain_scale.py PROCESS_ID PORT OUT.npz SCALE STEPS EVERY DELAY_MIN.
Each process has 4 fake CPU devices and joins the other with ``jax.distributed.initialize``
(CPU collectives over gloo): the mesh has 8 devices, each process draws the synapses of its
4 blocks only. Process 0 saves the spikes of the 8-device run and of a run on its own first
device (the same model on a one-device mesh), which must be equal.
"""

import os
import pathlib
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
pid, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
scale, steps, every, delay_min = float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), \
    float(sys.argv[7])
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                           process_id=pid, initialization_timeout=60)

import brainunit as u  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
import partitioned_microcircuit as pm  # noqa: E402

import brainx  # noqa: E402
from brainx import nn  # noqa: E402


def packed_run(net, n_steps):
    run = brainx.transform.jit(lambda ticks: brainx.transform.for_loop(
        lambda _: nn.pack_spikes(net.update()), ticks))
    return run(jnp.arange(n_steps))


brainx.environ.set(dt=0.1 * u.ms)
assert jax.device_count() == 8 and jax.local_device_count() == 4
drawn = []
real = nn.fixed_total_number_onto
nn.fixed_total_number_onto = lambda *a, **k: drawn.append(k["targets"]) or real(*a, **k)
net = pm.build(scale, 8, every=every, delay_min_ms=delay_min)
nn.fixed_total_number_onto = real
packed = multihost_utils.process_allgather(packed_run(net, steps), tiled=True)
eight = np.unpackbits(np.asarray(packed), axis=-1)[:, :net.n].astype(bool)
if pid == 0:
    mesh = brainx.distributed.make_mesh((1,), ("neurons",), devices=jax.local_devices()[:1])
    params = pm.exact_parameters(scale)
    part = brainx.distributed.NeuronPartition(
        mesh, "neurons", brainx.distributed.NeuronPartition.padded_size(net.n, 1))
    one_net = part.init_all_states(pm.PartitionedMicrocircuit(params, part, 55, every, delay_min))
    one = np.unpackbits(np.asarray(packed_run(one_net, steps)), axis=-1)[:, :net.n].astype(bool)
    np.savez(out, eight=eight, one=one, blocks=np.asarray(drawn))
else:
    np.savez(out + ".1.npz", blocks=np.asarray(drawn))
jax.distributed.shutdown()
