"""Policies inside checkpointed loops, and "save anything except these names".

Every gradient is compared with the un-checkpointed one (``for_loop``), and
memory with XLA's temp bytes of the compiled gradient. On CPU, XLA merges
recomputation away in straight-line code, so everything is measured in a loop.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import checkpoint_name

import brainx
from brainx import transform as bt
from brainx.transform import policies as P

N, T = 24, 40


class Cell:
    """States without names: a policy finds ``V`` by its path from the cell."""

    def __init__(self, key):
        self.W = brainx.ParamState(jax.random.normal(key, (N, N)) * 0.2)
        self.V = brainx.HiddenState(jnp.zeros(N))
        self.S = brainx.HiddenState(jnp.zeros(N))

    def step(self, x):
        pre = checkpoint_name(self.W.value @ x, "pre")
        # pre * tanh(V): the backward pass needs pre, so keeping it or not moves memory
        self.V.value = (0.9 * self.V.value * (1 - self.S.value) + pre * jnp.tanh(self.V.value)
                        + self.W.value @ self.S.value)
        self.S.value = jax.nn.sigmoid(5 * (self.V.value - 1))
        return jnp.mean((self.S.value - 0.1) ** 2)


@pytest.fixture(scope="module")
def cell():
    k1, k2 = jax.random.split(jax.random.PRNGKey(2))
    c = Cell(k1)
    xs = jax.random.normal(k2, (T, N)) * 0.5

    def measure(run):
        def loss(xs):
            c.V.value, c.S.value = jnp.zeros(N), jnp.zeros(N)
            return run(xs).mean()
        compiled = bt.jit(bt.grad(loss, grad_states=c.W)).lower(xs).compile()
        return compiled.memory_analysis().temp_size_in_bytes, np.asarray(compiled(xs))

    plain = measure(lambda xs: bt.for_loop(c.step, xs))
    return c, xs, measure, plain


def _loop(c, strategy, policy):
    return lambda xs: bt.checkpointed_for_loop(c.step, xs, checkpoint=strategy, policy=policy)


def test_save_anything_except_names_recomputes_them(cell):
    c, xs, measure, (plain_t, plain_g) = cell
    step_ck = lambda p: lambda xs: bt.for_loop(bt.checkpoint(c.step, prevent_cse=False,
                                                             policy=p), xs)
    everything = measure(step_ck(P.everything_saveable))
    ours = measure(step_ck(P.save_anything_except_these_names("pre")))
    for _, g in (everything, ours):
        np.testing.assert_allclose(g, plain_g, rtol=1e-5, atol=1e-7)
    assert everything[0] - ours[0] == T * N * 4     # pre (one f32[N] per step) is not kept
    # through a loop strategy's policy= as well, with the same memory as the checkpointed step
    loop = measure(_loop(c, "remat", P.save_anything_except_these_names("pre")))
    assert loop[0] == ours[0]
    np.testing.assert_allclose(loop[1], plain_g, rtol=1e-5, atol=1e-7)


def test_residual_report_names_what_is_kept(cell):
    c, xs, _, _ = cell
    ck = bt.checkpoint(c.step, policy=P.save_anything_except_these_names("pre"))
    report = bt.saved_residuals(ck, xs[0], grad_states=c.W)
    assert "'pre'" not in {r.origin for r in report}
    assert not report.of("name")          # the automatic names show as what made the value
    assert {r.origin for r in report.of("intermediate")} >= {"output of tanh"}


def test_state_policies_through_per_step_remat(cell):
    c, xs, measure, (plain_t, plain_g) = cell
    t = {}
    for name, policy in {"none": None, "save V": P.save_states("V")}.items():
        temp, g = measure(_loop(c, bt.PerStepRemat(), policy))
        np.testing.assert_allclose(g, plain_g, rtol=1e-5, atol=1e-7, err_msg=name)
        t[name] = temp
    assert t["none"] < t["save V"] < plain_t
    # the same memory as the checkpointed step with that policy in a plain for_loop
    step = bt.checkpoint(c.step, prevent_cse=False, policy=P.save_states("V"))
    assert t["save V"] == measure(lambda xs: bt.for_loop(step, xs))[0]


def test_state_policies_through_nested(cell):
    """``Nested``'s policy limits what the innermost segment keeps: less than keeping all."""
    c, xs, measure, (_, plain_g) = cell
    t = {}
    for name, policy in {"all": None, "save hidden": P.save_states(brainx.HiddenState)}.items():
        t[name], g = measure(_loop(c, bt.Nested(levels=2), policy))
        np.testing.assert_allclose(g, plain_g, rtol=1e-5, atol=1e-7, err_msg=name)
    assert t["save hidden"] < t["all"]
    _, g = measure(_loop(c, bt.NestedRemat(), P.save_states("V")))
    np.testing.assert_allclose(g, plain_g, rtol=1e-5, atol=1e-7)


def test_policy_needs_a_strategy_that_takes_one(cell):
    c, xs, _, _ = cell
    for strategy in ("binomial", bt.NoRemat()):
        with pytest.raises(ValueError, match="Use PerStepRemat, Nested or NestedRemat"):
            bt.checkpointed_for_loop(c.step, xs, checkpoint=strategy,
                                     policy=P.save_states("V"))
    with pytest.raises(ValueError, match="has a policy of its own"):
        bt.checkpointed_for_loop(c.step, xs, checkpoint=bt.Nested(policy=P.dots_saveable),
                                 policy=P.save_states("V"))
    with pytest.raises(TypeError, match="strings"):
        P.save_anything_except_these_names(c.V)
