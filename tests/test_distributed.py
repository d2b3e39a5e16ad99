"""The multi-device tests, each in its own processes (the device count is fixed at JAX start).

* tests/multidevice/ runs as a separate pytest on 8 fake CPU devices;
* a data-parallel training step runs in 2 processes joined by
  ``jax.distributed.initialize`` (CPU collectives over gloo), each feeding its
  half of the batch; losses and parameters must equal a one-process run;
* under --long, the partitioned microcircuit in 2 processes of 4 fake devices each
  (tests/multidevice/two_process_brain_scale.py) must give one device's spikes.
"""

import os
import pathlib
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).parent.parent
MULTI = ROOT / "tests" / "multidevice"


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(MULTI)]), **extra)
    # this run's XLA optimization level (tests/conftest.py: FAST_XLA_FLAGS) and nothing else
    level = [f for f in os.environ.get("XLA_FLAGS", "").split() if "optimization_level" in f]
    env.pop("XLA_FLAGS", None)
    env.update(extra)
    if level:
        env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""), *level]).strip()
    return env


def test_multidevice_suite_on_eight_fake_devices(request):
    # The two examples (data- and model-parallel, one device against eight) run in the long run;
    # the default run checks the same equalities on the smaller models of the other files.
    # test_brain_scale.py's 1000-step microcircuit checks run with --long, passed on
    long = request.config.getoption("--long")
    options = ["--long"] if long else ["--ignore", str(MULTI / "test_distributed_examples.py")]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, str(MULTI)],
        cwd=ROOT, env=_env(XLA_FLAGS="--xla_force_host_platform_device_count=8"),
        capture_output=True, text=True, timeout=900 if long else 360)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_data_parallel_step_equals_one_process(tmp_path):
    out = tmp_path / "dp.npz"
    port = _free_port()
    script = str(MULTI / "two_process_dp.py")
    env = _env(XLA_FLAGS="--xla_force_host_platform_device_count=1")
    procs = [subprocess.Popen([sys.executable, script, str(i), str(port), str(out)], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for i in range(2)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=180)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), "\n----\n".join(x[-3000:] for x in logs)

    sys.path.insert(0, str(MULTI))
    try:
        from dp_model import build, data, jit_step
    finally:
        sys.path.remove(str(MULTI))
    net, params, opt = build(16)
    step = jit_step(net, params, opt)
    ref = [float(step(*data(16, seed=i))) for i in range(3)]
    got = np.load(out)
    np.testing.assert_allclose(got["losses"], ref, rtol=1e-5, atol=1e-6)
    leaves = jax.tree_util.tree_flatten_with_path({str(p): s.value for p, s in params.items()})[0]
    assert len(leaves) == len(got.files) - 1
    for path, leaf in leaves:
        np.testing.assert_allclose(got[jax.tree_util.keystr(path)], np.asarray(leaf),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("every,delay_min", [(1, 0.05), (5, 0.45)])
def test_two_processes_of_four_devices_give_one_devices_microcircuit_spikes(request, tmp_path,
                                                                           every, delay_min):
    """The partitioned microcircuit (scale 0.1, 1000 steps) on 2 jax.distributed processes x 4
    fake devices equals one device; each process draws only its 4 blocks' synapses. Under
    --long (two processes start and compile: about 10 CPU s each case)."""
    if not request.config.getoption("--long"):
        pytest.skip("make test-long (--long)")
    out = tmp_path / "spikes.npz"
    port = _free_port()
    script = str(MULTI / "two_process_brain_scale.py")
    args = [str(out), "0.1", "1000", str(every), str(delay_min)]
    procs = [subprocess.Popen([sys.executable, script, str(i), str(port), *args], cwd=ROOT,
                              env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for i in range(2)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=400)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), "\n----\n".join(x[-3000:] for x in logs)
    got = np.load(out)
    assert got["one"].sum() > 1000
    np.testing.assert_array_equal(got["eight"], got["one"])
    first, second = got["blocks"].tolist(), np.load(str(out) + ".1.npz")["blocks"].tolist()
    assert len(first) == len(second) == 4 and not set(map(tuple, first)) & set(map(tuple, second))
