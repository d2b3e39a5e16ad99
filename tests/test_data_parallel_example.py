"""A jitted write keeps a state's sharding (the 8-device test is
tests/multidevice/test_sharding_kept.py, run by test_distributed.py in its own process), and
``examples/data_parallel_snn.py`` checks what is true: equal first-step gradients, equal
losses until a spike flips."""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform as bt

ROOT = pathlib.Path(__file__).parent.parent


# -- 3. a jitted write keeps the sharding -------------------------------------------------------
def test_a_reset_inside_jit_on_one_device_is_plain_jax():
    h = brainx.HiddenState(jnp.arange(4.0))

    @bt.jit
    def reset():
        h.value = jnp.zeros_like(h.value)
    reset()
    expected = jax.jit(jnp.zeros_like)(jnp.arange(4.0))
    np.testing.assert_array_equal(h.value, expected)
    assert h.value.sharding == expected.sharding


# -- 4. the data-parallel example says what is true ---------------------------------------------
def _example():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import data_parallel_snn
    finally:
        sys.path.remove(str(ROOT / "examples"))
    return data_parallel_snn


def test_data_parallel_comparison_stops_at_the_first_flipped_spike():
    ex = _example()
    rng = np.random.RandomState(0)
    losses = 1.0 + rng.rand(10).astype(np.float32)
    counts = rng.randint(0, 5, size=(10, 4, 3))
    grads = [rng.randn(3, 3).astype(np.float32), rng.randn(3).astype(np.float32)]
    other_losses = losses * (1 + 1e-7)
    other_losses[6:] += 0.1                          # the curves part after step 6 ...
    other_counts = counts.copy()
    other_counts[6, 1, 2] += 1                       # ... where one spike flipped
    other_grads = [g + 1e-8 for g in grads]
    c = ex.compare((losses, counts, grads), (other_losses, other_counts, other_grads))
    assert c["first_flip"] == 6 and c["spikes_differ"] == 1
    assert c["same_spikes_diff"] == pytest.approx(
        float(np.max(np.abs(losses[:6] - other_losses[:6]) / losses[:6])))
    assert c["same_spikes_diff"] <= ex.LOSS_TOL and c["grad_diff"] <= ex.GRAD_TOL
    assert c["largest_diff"] == pytest.approx(float(np.max(np.abs(losses - other_losses))))
    same = ex.compare((losses, counts, grads), (losses, counts, grads))
    assert same["first_flip"] == 10 and same["same_spikes_diff"] == 0 == same["grad_diff"]


def test_data_parallel_example_runs_and_checks_on_eight_devices():
    # eight devices, and this run's XLA optimization level (tests/conftest.py: FAST_XLA_FLAGS)
    level = [f for f in os.environ.get("XLA_FLAGS", "").split() if "optimization_level" in f]
    env = dict(os.environ, XLA_FLAGS=" ".join(["--xla_force_host_platform_device_count=8", *level]))
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "data_parallel_snn.py"), "--fast", "--iters",
         "3", "--T", "6", "--base", "3", "--n-in", "8"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "step 1 gradients: largest difference" in run.stdout
    assert "the same spikes" in run.stdout and "largest difference along" not in run.stdout
