"""saved_residuals against residuals counted by hand, and state policies against XLA's memory.

Each small function's residuals are worked out on paper from the derivative
rules (d(w x)/dw needs x, d sin needs cos, ...); loops stack them per step.
Policies are compared in a loop (on CPU XLA merges recomputation away in
straight-line code), by XLA temp bytes, and their gradients against the
un-checkpointed gradient.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform as bt
from brainx.transform import policies as P

F32 = 4


def _kinds(report):
    return sorted((r.kind, r.origin, r.type_str) for r in report)


def test_straight_line_function_hand_counted():
    w = brainx.ParamState(jnp.ones(3), name="w")

    def f(x):
        return jnp.sum(jnp.sin(w.value * x))

    report = bt.saved_residuals(f, jnp.ones(3), grad_states=w)
    # d/dw needs x, d/dx needs w, both need cos(w x): three f32[3]
    assert _kinds(report) == [("argument", "x", "f32[3]"), ("intermediate", "output of cos",
                                                           "f32[3]"),
                              ("state", "w (ParamState)", "f32[3]")]
    assert report.total_bytes == 3 * 3 * F32
    cos = report.of("intermediate")[0]
    assert cos.source.startswith("test_residual_report.py:")


def test_checkpoint_keeps_only_inputs():
    w = brainx.ParamState(jnp.ones(3), name="w")
    f = bt.checkpoint(lambda x: jnp.sum(jnp.sin(jnp.sin(w.value * x))))
    report = bt.saved_residuals(f, jnp.ones(3), grad_states=w)
    assert {r.kind for r in report} == {"argument", "state"}
    assert report.total_bytes == 2 * 3 * F32


def test_checkpoint_name_is_reported():
    from jax.ad_checkpoint import checkpoint_name
    w = brainx.ParamState(jnp.ones((4, 4)), name="w")
    f = bt.checkpoint(lambda x: jnp.sum(jnp.tanh(checkpoint_name(w.value @ x, "pre"))),
                      policy=jax.checkpoint_policies.save_only_these_names("pre"))
    report = bt.saved_residuals(f, jnp.ones(4), grad_states=w)
    assert ("name", "'pre'", "f32[4]") in _kinds(report)


class Cell:
    def __init__(self, n):
        self.V = brainx.HiddenState(jnp.zeros(n))
        self.W = brainx.ParamState(jnp.eye(n) * 0.5)

    def step(self, x):
        self.V.value = jnp.tanh(self.V.value @ self.W.value + x)
        return self.V.value.sum()


def test_for_loop_stacks_state_per_step_with_paths():
    T, n = 12, 5
    net = {"lif": Cell(n)}
    cell = net["lif"]

    def loss(xs):
        cell.V.value = jnp.zeros(n)
        return bt.for_loop(cell.step, xs).sum()

    report = bt.saved_residuals(loss, jnp.ones((T, n)), grad_states=cell.W, paths=net)
    states = {r.origin: r for r in report.of("state")}
    # V_t @ W: dW needs every V_t -> T x f32[n]; tanh' needs tanh(.) -> T x f32[n] (an intermediate)
    v = states["lif.V (HiddenState)"]
    assert v.loops == (T,) and v.shape == (T, n) and v.nbytes == T * n * F32
    assert v.type_str == f"{T} x f32[{n}]"
    assert states["lif.W (ParamState)"].shape == (n, n)
    stacked = [r for r in report if r.loops == (T,)]
    assert sum(r.nbytes for r in stacked) == len(stacked) * T * n * F32
    assert report.total_bytes == sum(r.nbytes for r in report)

    # with a checkpointed step, only the carry V is kept per step, plus the inputs
    ck = bt.checkpoint(cell.step, prevent_cse=False)

    def loss_ck(xs):
        cell.V.value = jnp.zeros(n)
        return bt.for_loop(ck, xs).sum()

    ck_report = bt.saved_residuals(loss_ck, jnp.ones((T, n)), grad_states=cell.W, paths=net)
    assert not ck_report.of("intermediate")
    assert sorted(r.origin for r in ck_report) == ["lif.V (HiddenState)", "lif.W (ParamState)",
                                                     "xs"]
    # (JAX 0.12's scan saves tanh's output once, as the carry V, so there the plain step keeps
    # no intermediate either; up to 0.10 it keeps it twice)
    assert ck_report.total_bytes <= report.total_bytes


def test_print_has_table_and_temp_bytes(capsys):
    w = brainx.ParamState(jnp.ones(3), name="w")
    report = bt.print_saved_residuals(lambda x: jnp.sum(jnp.sin(w.value * x)), jnp.ones(3),
                                      grad_states=w)
    text = capsys.readouterr().out
    assert "w (ParamState)" in text and "total 36 bytes in 3 residuals" in text
    assert report.temp_bytes is not None and "XLA temp memory" in text


def test_grad_state_not_read_is_named_in_error():
    w = brainx.ParamState(jnp.ones(3), name="w")
    other = brainx.ParamState(jnp.ones(3), name="other")
    with pytest.raises(ValueError, match="never reads"):
        bt.saved_residuals(lambda x: jnp.sum(w.value * x), jnp.ones(3), grad_states=other)


# -- state policies, in a loop ----------------------------------------------------------------
N, T = 32, 40


@pytest.fixture(scope="module")
def loop_net():
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    W = brainx.ParamState(jax.random.normal(k1, (N, N)) * 0.1, name="W")
    V = brainx.HiddenState(jnp.zeros(N), name="V", tag="membrane")
    S = brainx.HiddenState(jnp.zeros(N), name="S")
    xs = jax.random.normal(k2, (T, N))

    def step(x):
        V.value = 0.9 * V.value * (1 - S.value) + W.value @ x + W.value @ S.value
        S.value = jax.nn.sigmoid(5 * (V.value - 1))
        return jnp.mean((S.value - 0.1) ** 2)

    def measure(policy):
        st = step if policy == "plain" else bt.checkpoint(step, prevent_cse=False,
                                                          policy=policy)

        def loss(xs):
            V.value, S.value = jnp.zeros(N), jnp.zeros(N)
            return bt.for_loop(st, xs).mean()

        g = bt.jit(bt.grad(loss, grad_states=W))
        compiled = g.lower(xs).compile()     # called as compiled: no second compile
        temp = compiled.memory_analysis().temp_size_in_bytes
        return temp, np.asarray(compiled(xs)), bt.saved_residuals(loss, xs, grad_states=W)

    return measure, (W, V, S)


def test_state_policies_move_memory_and_keep_gradients(loop_net):
    measure, (W, V, S) = loop_net
    plain_t, plain_g, _ = measure("plain")
    none_t, none_g, none_r = measure(None)
    results = {name: measure(p) for name, p in {
        "save V": P.save_states("V"), "save V by tag": P.save_states("membrane"),
        "save V by state": P.save_states(V), "save hidden": P.save_states(brainx.HiddenState),
        "recompute V": P.recompute_states(V),
        "dots+S": P.save_from_both_policies(P.dots_saveable, P.save_states(S)),
    }.items()}
    for name, (_, g, _) in results.items():
        np.testing.assert_allclose(g, plain_g, rtol=1e-5, atol=1e-7, err_msg=name)
    t = {name: r[0] for name, r in results.items()}
    # keeping V's new value costs one more f32[N] per step than keeping nothing
    per_step = T * N * 4
    assert results["save V"][2].total_bytes == none_r.total_bytes + per_step
    assert t["save V"] > none_t and t["save V"] == t["save V by tag"] == t["save V by state"]
    assert t["save hidden"] > t["save V"]
    assert results["save hidden"][2].total_bytes == none_r.total_bytes + 2 * per_step
    assert t["dots+S"] > t["save V"]           # two dots and S per step
    assert none_t < plain_t
    by = results["recompute V"][2].by_origin()
    assert by["V (HiddenState)"] == per_step and by["S (HiddenState)"] == 2 * per_step


def test_jax_save_from_both_policies_combines_state_policy(loop_net):
    measure, (W, V, S) = loop_net
    ours = measure(P.save_from_both_policies(P.dots_saveable, P.save_states(S)))
    theirs = measure(jax.checkpoint_policies.save_from_both_policies(P.dots_saveable,
                                                                     P.save_states(S)))
    assert ours[0] == theirs[0] and ours[2].total_bytes == theirs[2].total_bytes


def test_offload_policy_decisions():
    from jax.ad_checkpoint import Offloadable, checkpoint_name
    v = brainx.HiddenState(jnp.zeros(2), name="v")
    policy = P.offload_states(brainx.HiddenState)
    from brainx.transform.remat.state_names import NAME_PRIMITIVE, state_tag
    decision = policy(NAME_PRIMITIVE, name=state_tag(v))
    assert isinstance(decision, Offloadable) and decision.dst == "pinned_host"
    assert policy(NAME_PRIMITIVE, name="other") is not decision
    with pytest.raises(TypeError, match="selector"):
        P.save_states(3)


# -- memory budget ----------------------------------------------------------------------------
def test_memory_budget_fits_compiled_temp_bytes_and_keeps_gradient():
    from brainx.transform.remat.memory_budget import Budgeted
    T, n = 200, 16
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    W = brainx.ParamState(jax.random.normal(k1, (n, n)) * 0.3)
    h = brainx.HiddenState(jnp.zeros(n))
    xs = jax.random.normal(k2, (T, n))

    def step(x):
        h.value = jnp.tanh(h.value @ W.value + x)
        return jnp.sum(h.value ** 2)

    def grad_of(**kw):
        def loss(xs):
            h.value = jnp.zeros(n)
            return bt.checkpointed_for_loop(step, xs, **kw).sum()
        return bt.jit(bt.grad(loss, grad_states=W))

    reference = grad_of(checkpoint="per_step_remat")(xs)
    chosen = []
    few = (bt.Nested(levels=2), bt.Binomial(16), bt.Binomial(4))  # fewer candidates to compile
    for budget in (40_000, 6_000, 3_000):
        b = Budgeted(budget) if budget > 10_000 else Budgeted(budget, candidates=few)
        g = grad_of(memory_budget=b)
        compiled = g.lower(xs).compile()
        temp = compiled.memory_analysis().temp_size_in_bytes
        assert temp <= budget, (budget, temp, str(b.choice))
        np.testing.assert_allclose(compiled(xs), reference, rtol=1e-4, atol=1e-5)
        assert b.choice.estimate <= budget and repr(b.choice.strategy) in str(b.choice)
        chosen.append(type(b.choice.strategy).__name__)
    assert chosen[0] == "Nested" and chosen[-1] == "Binomial"   # less memory, slower strategies
    with pytest.raises(ValueError, match="not both"):
        bt.checkpointed_for_loop(step, xs, memory_budget=1000, checkpoint="nested")
