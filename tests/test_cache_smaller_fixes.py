"""Five small fixes, each checked against plain JAX, brainunit or an eager run.

1. ``brainx.io`` loads a weakly typed value back weakly typed (old files as before);
2. ``memory_budget=`` that no strategy meets raises, naming the smallest budget that fits;
3. a jitted write keeps a state's sharding (the 8-device test is
   tests/multidevice/test_sharding_kept.py, run by test_distributed.py in its own process);
4. ``examples/data_parallel_snn.py`` checks what is true: equal first-step gradients, equal
   losses until a spike flips;
5. a write that drops or changes a Quantity's unit is refused, naming the state.
"""

import os
import pathlib
import re
import subprocess
import sys

import brainunit as u
import jax
import jax.numpy as jnp
import msgpack
import numpy as np
import pytest

import brainx
from brainx import transform as bt
from brainx.transform.remat.memory_budget import Budgeted, MemoryBudgetError

ROOT = pathlib.Path(__file__).parent.parent


def weak(x) -> bool:
    return bool(jax.typeof(x).weak_type)


# -- 1. brainx.io keeps weak types -------------------------------------------------------------
def test_io_loads_a_weakly_typed_value_weakly_typed(tmp_path):
    path = tmp_path / "w.msgpack"
    s = brainx.State(0.5, name="s")                  # a Python scalar: weakly typed in JAX

    @bt.jit
    def double():
        s.value = s.value * 2
    double()
    assert weak(s.value)                             # as JAX makes it: 0.5 * 2 stays weak
    strong = brainx.State(jnp.ones(2), name="strong")
    q = brainx.State(jnp.asarray(3.0) * u.mV, name="q")
    assert weak(q.value.mantissa)
    saved = {"s": s, "strong": strong, "q": q}
    before = {k: v.value for k, v in saved.items()}
    brainx.io.save(path, saved)

    fresh = {"s": brainx.State(jnp.zeros(())), "strong": brainx.State(jnp.zeros(2)),
             "q": brainx.State(jnp.zeros(()) * u.mV)}
    assert not weak(fresh["s"].value)
    brainx.io.load(path, fresh)
    assert weak(fresh["s"].value) and not weak(fresh["strong"].value)
    assert weak(fresh["q"].value.mantissa) and fresh["q"].value.unit == u.mV
    for k in saved:
        np.testing.assert_array_equal(u.get_mantissa(fresh[k].value), u.get_mantissa(before[k]))
    # promotes as the saved value does in plain JAX: weak float32 + bfloat16 -> bfloat16
    half = jnp.ones((), jnp.bfloat16)
    assert (fresh["s"].value + half).dtype == (before["s"] + half).dtype == jnp.bfloat16
    assert (fresh["strong"].value + half).dtype == (before["strong"] + half).dtype


@pytest.mark.counts_traces
def test_io_weak_value_does_not_retrace_after_load_and_old_files_load_strong(tmp_path):
    path = tmp_path / "w.msgpack"
    s = brainx.State(jnp.asarray(1.5), name="s")
    traces = []

    @bt.jit
    def step():
        traces.append(1)
        s.value = s.value + 1
    step()
    step()
    assert len(traces) == 1 and weak(s.value)
    brainx.io.save(path, {"s": s})
    s.value = jnp.asarray(0.0)
    brainx.io.load(path, {"s": s})
    step()
    assert len(traces) == 1 and float(s.value) == 4.5   # the same type: the same trace

    # a file written before the weak mark (the record without "weak") loads as before: strong
    with open(path, "rb") as f:
        header = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)
    leaf = header["states"][0]["leaves"][0][1]
    assert leaf.pop("weak") is True
    old = tmp_path / "old.msgpack"
    with open(old, "wb") as f:
        f.write(msgpack.packb(header, use_bin_type=True))
    brainx.io.load(old, {"s": s})
    assert not weak(s.value) and float(s.value) == 3.5


# -- 2. a memory budget no strategy meets -------------------------------------------------------
def test_memory_budget_below_every_strategy_names_the_smallest_that_fits():
    T, n = 200, 16
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    w0 = jax.random.normal(k1, (n, n)) * 0.3
    xs = jax.random.normal(k2, (T, n))
    W = brainx.ParamState(w0)
    h = brainx.HiddenState(jnp.zeros(n))

    def step(x):
        h.value = jnp.tanh(h.value @ W.value + x)
        return jnp.sum(h.value ** 2)

    def grad_of(budget):
        def loss(xs):
            h.value = jnp.zeros(n)
            return bt.checkpointed_for_loop(step, xs, memory_budget=budget).sum()
        return bt.jit(bt.grad(loss, grad_states=W))

    with pytest.raises(ValueError, match="no checkpointing strategy fits it") as info:
        grad_of(1024)(xs)
    assert isinstance(info.value, MemoryBudgetError)
    message = str(info.value)
    found = re.search(r"smallest budget that fits this loop is ([\d,]+) bytes, with (\w+)\(",
                      message)
    assert found, message
    smallest, strategy = int(found.group(1).replace(",", "")), found.group(2)
    assert smallest > 1024 and info.value.choice.estimate == smallest
    assert type(info.value.choice.strategy).__name__ == strategy
    np.testing.assert_array_equal(h.value, jnp.zeros(n))   # nothing written

    # that budget fits (the same gradient as plain JAX), one byte less does not
    def raw_loss(w, xs):
        def body(c, x):
            c = jnp.tanh(c @ w + x)
            return c, jnp.sum(c ** 2)
        return jax.lax.scan(body, jnp.zeros(n), xs)[1].sum()
    budget = Budgeted(smallest)
    np.testing.assert_allclose(grad_of(budget)(xs), jax.grad(raw_loss)(w0, xs),
                               rtol=1e-4, atol=1e-5)
    assert budget.choice.estimate <= smallest
    with pytest.raises(MemoryBudgetError, match=f"is {smallest:,} bytes"):
        grad_of(smallest - 1)(xs)


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
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "data_parallel_snn.py"), "--fast", "--iters",
         "3", "--T", "6", "--base", "3", "--n-in", "8"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "step 1 gradients: largest difference" in run.stdout
    assert "the same spikes" in run.stdout and "largest difference along" not in run.stdout


# -- 5. a write that drops a unit names the state ----------------------------------------------
def _mv_state():
    return brainx.State(jnp.arange(3.0) * u.mV, name="membrane")


def _assert_kept(s):
    assert s.value.unit == u.mV
    np.testing.assert_array_equal(s.value.mantissa, np.arange(3.0))


DROPPED = r"State\(.*name='membrane'.*drops its unit: from mV to dimensionless"


def test_eager_write_dropping_a_unit_names_the_state():
    s = _mv_state()
    with pytest.raises(brainx.StateTypeError, match=DROPPED):
        s.value = jnp.ones(3)
    _assert_kept(s)
    with pytest.raises(brainx.StateTypeError, match=r"changes its unit: from mV to mA"):
        s.value = jnp.ones(3) * u.mA
    _assert_kept(s)
    # a unit of the same dimension is a write as brainunit computes it
    s.value = s.value + 1 * u.volt
    assert u.math.allclose(s.value, jnp.arange(3.0) * u.mV + 1 * u.volt)


def test_jit_write_dropping_a_unit_names_the_state_and_changes_nothing():
    s = _mv_state()

    @bt.jit
    def reset():
        s.value = jnp.zeros(3)                       # never read: the old value is not traced
    with pytest.raises(brainx.StateTypeError, match=DROPPED):
        reset()
    _assert_kept(s)

    @bt.jit
    def strip():
        s.value = s.value.mantissa * 2
    with pytest.raises(brainx.StateTypeError, match=DROPPED):
        strip()
    _assert_kept(s)

    @bt.jit
    def good():
        s.value = s.value * 2                        # keeps mV: as eager brainunit
    good()
    assert u.math.allclose(s.value, jnp.arange(3.0) * 2 * u.mV)


def test_loop_write_dropping_a_unit_names_the_state():
    s = _mv_state()

    def step(x):
        s.value = s.value.mantissa + x
        return x
    with pytest.raises(brainx.StateTypeError, match=DROPPED):
        bt.for_loop(step, jnp.ones((4, 3)))
    _assert_kept(s)

    def good(x):
        s.value = s.value + x * u.mV
        return s.value.mantissa.sum()
    out = bt.for_loop(good, jnp.ones((4, 3)))        # eager: the value after step k is v0 + k
    np.testing.assert_allclose(out, [np.sum(np.arange(3.0) + k) for k in range(1, 5)])
    assert s.value.unit == u.mV
    np.testing.assert_allclose(s.value.mantissa, np.arange(3.0) + 4)


def test_a_unit_dropped_in_a_tree_names_the_leaf_and_plain_states_take_units():
    net = brainx.nn.Linear(3, 2, w_init=jnp.ones((3, 2)) * u.mA)
    old = net.weight.value
    with pytest.raises(brainx.StateTypeError, match=r"drops its unit at leaf \['weight'\]"):
        net.weight.value = {"weight": jnp.ones((3, 2)), "bias": old["bias"]}
    assert net.weight.value is old
    plain = brainx.State(jnp.zeros(3))
    plain.value = jnp.ones(3) * u.mV                 # no unit to keep: may be given one
    assert plain.value.unit == u.mV
    dimensionless = brainx.State(u.Quantity(jnp.zeros(3)))
    dimensionless.value = jnp.ones(3)                # no unit to drop
