"""memory_report against the same gradients compiled by hand, and against plain JAX.

A recurrent network over T steps; its loss calls ``checkpointed_for_loop``
without naming a strategy, so each row of the report runs its own. Each
row's temp bytes must be XLA's ``memory_analysis()`` of the gradient compiled
with that strategy named explicitly, and every gradient must match
``jax.grad`` of the same network written as a ``lax.scan``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform as bt
from brainx.transform.remat.default_strategy import default_strategy_reads
from brainx.transform.remat.memory_budget import Budgeted

N, T = 16, 60


def _raw_loss(W, xs):
    def step(carry, x):
        v, s = carry
        v = 0.9 * v * (1 - s) + W @ x + W @ s
        s = jax.nn.sigmoid(5 * (v - 1))
        return (v, s), jnp.mean((s - 0.1) ** 2)
    return jax.lax.scan(step, (jnp.zeros(N), jnp.zeros(N)), xs)[1].mean()


@pytest.fixture(scope="module")
def net():
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    W = brainx.ParamState(jax.random.normal(k1, (N, N)) * 0.2, name="W")
    V = brainx.HiddenState(jnp.zeros(N), name="V")
    S = brainx.HiddenState(jnp.zeros(N), name="S")
    xs = jax.random.normal(k2, (T, N))

    def step(x):
        V.value = 0.9 * V.value * (1 - S.value) + W.value @ x + W.value @ S.value
        S.value = jax.nn.sigmoid(5 * (V.value - 1))
        return jnp.mean((S.value - 0.1) ** 2)

    def make_loss(**loop_kw):
        def loss(xs):
            V.value, S.value = jnp.zeros(N), jnp.zeros(N)
            return bt.checkpointed_for_loop(step, xs, **loop_kw).mean()
        return loss

    return W, V, xs, make_loss


def test_rows_are_the_compiled_gradients_and_match_jax(net, capsys):
    W, V, xs, make_loss = net
    V.value = jnp.full(N, 3.0)          # the report puts every state back as it found it
    strategies = {"none": bt.NoRemat(), "per step": "remat", "binomial 2": bt.Binomial(2)}
    report = bt.memory_report(make_loss(), xs, grad_states=W, strategies=strategies,
                              memory_budget=20_000, repeats=1)
    table = capsys.readouterr().out
    np.testing.assert_array_equal(V.value, jnp.full(N, 3.0))
    assert [r.name for r in report] == ["none", "per step", "binomial 2", "budget 20 KiB"]
    assert "budget 20 KiB -> " in table and "max rel. grad error" in table

    reference = np.asarray(jax.jit(jax.grad(_raw_loss))(W.value, xs))
    for row in report[:3]:
        compiled = bt.jit(bt.grad(make_loss(checkpoint=row.strategy), grad_states=W)) \
            .lower(xs).compile()
        assert row.temp_bytes == compiled.memory_analysis().temp_size_in_bytes, row.name
        np.testing.assert_allclose(compiled(xs), reference, rtol=1e-5, atol=1e-7)
        assert row.max_error < 1e-6 and row.seconds > 0
    t = [r.temp_bytes for r in report]
    assert t[0] > t[1] > t[2]            # no remat > per-step checkpoint > Binomial(2)
    # the budgeted row fits its budget, and says which strategy it ran
    assert t[3] <= 20_000 and isinstance(report[3].chosen, bt.CheckpointStrategy)
    assert report["per step"] is report[1] and report[3].max_error < 1e-6
    with pytest.raises(KeyError, match="No row named"):
        report["missing"]


def test_loop_naming_its_strategy_is_refused(net):
    W, _, xs, make_loss = net
    with pytest.raises(ValueError, match="no checkpointed loop that takes its strategy"):
        bt.memory_report(make_loss(checkpoint="nested"), xs[:20], grad_states=W, repeats=1,
                         verbose=False)


def test_environ_setting_is_read_only_by_loops_that_name_no_strategy(net):
    W, _, xs, make_loss = net
    lower = lambda loss: bt.jit(bt.grad(loss, grad_states=W)).lower(xs[:10])
    before = default_strategy_reads()
    with brainx.environ.context(checkpoint_strategy=Budgeted(4_000)):
        lower(make_loss(checkpoint="binomial"))
        lower(make_loss(base=4))
        assert default_strategy_reads() == before     # the strategy is named: not read
        lower(make_loss())
        assert default_strategy_reads() == before + 1


def test_no_remat_row_of_a_checkpointed_step_and_the_warning_names_the_buffer(capsys):
    """The "no remat" row of a loss whose step is already checkpointed is the plain step's
    no-remat program; a strategy needing more memory than it gets a warning line naming the
    state its reverse pass keeps (a delay buffer kept at each segment start)."""
    W = brainx.ParamState(jnp.eye(8) * 0.5, name="W")
    buf = brainx.DelayState(jnp.zeros((32, 8)), name="buf")
    ptr = brainx.ShortTermState(jnp.int32(0), name="ptr")
    xs = jax.random.normal(jax.random.PRNGKey(2), (40, 8))

    def step(x):
        out = jnp.tanh(buf.value[(ptr.value - 31) % 32] @ W.value + x)
        buf.value = buf.value.at[ptr.value].set(out)
        ptr.value = (ptr.value + 1) % 32
        return jnp.sum(out ** 2)

    def loss_of(f):
        def loss(xs):
            buf.value, ptr.value = jnp.zeros((32, 8)), jnp.int32(0)
            return bt.checkpointed_for_loop(f, xs).sum()
        return loss

    strategies = {"no remat": bt.NoRemat(), "nested": bt.Nested(segments=4)}
    report = bt.memory_report(loss_of(bt.checkpoint(step)), xs, grad_states=W,
                              strategies=strategies, repeats=1)
    out = capsys.readouterr().out
    with brainx.environ.context(checkpoint_strategy=bt.NoRemat()):
        plain = bt.jit(bt.grad(loss_of(step), grad_states=W)).lower(xs).compile()
    assert report["no remat"].temp_bytes == plain.memory_analysis().temp_size_in_bytes
    nested = report["nested"]
    assert nested.temp_bytes > report["no remat"].temp_bytes   # 10 buffers of 1 KiB kept
    assert nested.kept_states[0][0] == "buf (DelayState)"
    assert "warning: nested needs" in out and "buf (DelayState)" in out
    assert "max rel. grad error" in out and report["no remat"].kept_states == ()
