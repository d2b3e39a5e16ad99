"""Checkpointed loops against plain JAX with explicit state passing, for every strategy."""

import gc
import io
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import brainx
from brainx.transform import (
    Binomial, Nested, NestedRemat, PerStepRemat, ProgressBar, checkpointed_for_loop,
    checkpointed_scan, checkpointed_while_loop, grad, jit,
)
from brainx.transform.remat.checkpoint_strategies import SegmentPlan, segment_sizes
from brainx.transform.remat.treeverse import binomial_split, treeverse

N = 3
STRATEGIES = [PerStepRemat(), NestedRemat(), NestedRemat(levels=3), Nested(), Nested(levels=3),
              Nested(base=2),
              Nested(segments=(5, 2), policy=jax.checkpoint_policies.nothing_saveable),
              Binomial(1), Binomial(3)]
IDS = ["per_step", "nested_remat", "nested_remat3", "nested", "nested3", "nested_base2",
       "nested_5_2_carries", "binomial1", "binomial3"]


class Net:
    """v and count are written every step; w and b are only read."""

    def __init__(self):
        params = 0.6 * jax.random.normal(jax.random.PRNGKey(0), (N + 1, N))
        self.w, self.b = brainx.ParamState(params[:N], name="w"), brainx.ParamState(
            params[N] / 6, name="b")
        self.v, self.count = (brainx.HiddenState(jnp.zeros(N), name="v"),
                              brainx.ShortTermState(jnp.zeros((), jnp.int32), name="count"))

    def scan_step(self, acc, x):
        self.v.value = jnp.tanh(self.v.value @ self.w.value + x + self.b.value)
        self.count.value = self.count.value + 1
        return acc + self.v.value.sum() ** 2, (self.v.value, self.count.value)


def ref_loss(params, v0, acc0, xs, reverse):
    """The same loop in plain JAX: (loss, (final v, final count, final acc, ys))."""
    w, b = params

    def step(carry, x):
        v, count, acc = carry
        v = jnp.tanh(v @ w + x + b)
        return (v, count + 1, acc + v.sum() ** 2), (v, count + 1)

    (v, count, acc), (vs, counts) = jax.lax.scan(step, (v0, jnp.int32(0), acc0), xs,
                                                 reverse=reverse)
    weights = jnp.arange(1.0, xs.shape[0] + 1.0)
    loss = acc + (vs.sum(axis=1) * weights).sum() + (v ** 2).sum()
    return loss, (v, count, acc, vs, counts)


def brainx_loss(net, strategy, reverse):
    def loss(acc0, xs):
        acc, (vs, counts) = checkpointed_scan(net.scan_step, acc0, xs, checkpoint=strategy,
                                              reverse=reverse)
        weights = jnp.arange(1.0, xs.shape[0] + 1.0)
        return acc + (vs.sum(axis=1) * weights).sum() + (net.v.value ** 2).sum(), (acc, vs,
                                                                                      counts)
    return loss


def _data(length, seed=1):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return jax.random.normal(k1, (length, N)), jax.random.normal(k2, (N,)) * 0.5


CASES = ([pytest.param(s, 7, False, id=f"{i}-7") for s, i in zip(STRATEGIES, IDS)]
         + [pytest.param(s, 13, True, id=f"{i}-13-reverse") for s, i in zip(STRATEGIES, IDS)]
         + [pytest.param(s, n, False, id=f"{i}-{n}") for s, i in zip(STRATEGIES, IDS)
            if i in ("nested_remat", "nested", "binomial1") for n in (0, 1, 16)])
_ref = jax.jit(jax.value_and_grad(ref_loss, argnums=(0, 2, 3), has_aux=True), static_argnums=4)


@pytest.mark.parametrize("strategy, length, reverse", CASES)
def test_strategy_matches_plain_scan(strategy, length, reverse):
    xs, v0 = _data(length)
    net = Net()
    net.v.value = v0
    params = (net.w.value, net.b.value)
    (ref_val, (v, count, acc, vs, counts)), ref_grads = _ref(params, v0, 1.0, xs, reverse)
    g = jit(grad(brainx_loss(net, strategy, reverse), grad_states=(net.w, net.b),
                 argnums=(0, 1), has_aux=True, return_value=True))
    (state_grads, (g_acc, g_xs)), value, (acc_b, vs_b, counts_b) = g(1.0, xs)
    np.testing.assert_allclose(value, ref_val, rtol=1e-5)
    np.testing.assert_allclose(vs_b, vs, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(counts_b, counts)
    np.testing.assert_allclose(acc_b, acc, rtol=1e-5)
    np.testing.assert_allclose(net.v.value, v, rtol=1e-5, atol=1e-6)   # final states
    assert int(net.count.value) == int(count) == length
    for got, want in zip(state_grads, ref_grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g_acc, ref_grads[1], rtol=1e-5)
    np.testing.assert_allclose(g_xs, ref_grads[2], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("strategy", [Nested(), Binomial(2), NestedRemat()],
                         ids=["nested", "binomial", "nested_remat"])
def test_for_loop_several_xs_and_grad_of_the_initial_state(strategy):
    xs, v0 = _data(11)
    ts = jnp.arange(11.0)
    w = brainx.ParamState(jnp.eye(N) * 0.5)
    v = brainx.HiddenState(jnp.zeros(N))

    def step(t, x):
        v.value = jnp.sin(v.value @ w.value + x * t * 0.1)
        return v.value.sum()

    def loss(v0):
        v.value = v0
        return (checkpointed_for_loop(step, ts, xs, checkpoint=strategy) ** 2).sum()

    def ref(v0, w):
        def body(v, tx):
            v = jnp.sin(v @ w + tx[1] * tx[0] * 0.1)
            return v, v.sum()
        return (jax.lax.scan(body, v0, (ts, xs))[1] ** 2).sum()

    g_w, g_v0 = grad(loss, grad_states=w, argnums=0)(v0)
    r_v0, r_w = jax.grad(ref, argnums=(0, 1))(v0, w.value)
    np.testing.assert_allclose(g_w, r_w, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(g_v0, r_v0, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("strategy", ["nested", "binomial"])
def test_raw_jax_grad_through_closed_over_values(strategy):
    """A step closing over a differentiated array (no state) still gets its gradient."""
    xs, _ = _data(9)

    def loss(a, checkpoint):
        step = lambda c, x: (jnp.tanh(a * c + x), (c * a).sum())
        c, ys = checkpointed_scan(step, jnp.ones(N), xs, checkpoint=checkpoint)
        return ys.sum() + c.sum()

    want = jax.grad(loss)(0.7, "per_step_remat")
    np.testing.assert_allclose(jax.grad(loss)(0.7, strategy), want, rtol=1e-5)
    np.testing.assert_allclose(jax.jit(jax.grad(loss), static_argnums=1)(0.7, strategy), want,
                               rtol=1e-5)


def test_forward_mode_through_nested_remat():
    xs, _ = _data(10)
    step = lambda c, x: (jnp.sin(c) + x, c.sum())
    f = lambda c0, k: checkpointed_scan(step, c0, xs, checkpoint=k)[1].sum()
    c0, dc = jnp.ones(N), jnp.arange(1.0, N + 1.0)
    _, want = jax.jvp(lambda c: f(c, "per_step_remat"), (c0,), (dc,))
    _, got = jax.jvp(lambda c: f(c, NestedRemat(levels=3)), (c0,), (dc,))
    np.testing.assert_allclose(got, want, rtol=1e-5)


def _temp_bytes(loss, *args):
    return jax.jit(jax.grad(loss)).lower(*args).compile().memory_analysis().temp_size_in_bytes


def test_checkpointed_strategies_use_less_temp_memory_than_the_plain_loop():
    n, T = 32, 256
    w0 = jax.random.normal(jax.random.PRNGKey(0), (n, n)) * 0.1
    xs = jax.random.normal(jax.random.PRNGKey(1), (T, n))

    def make(checkpoint):
        w, h = brainx.ParamState(w0), brainx.HiddenState(jnp.zeros(n))

        def step(x):
            h.value = jnp.tanh(h.value @ w.value + x)
            return (h.value ** 2).mean()

        def loss(xs):
            h.value = jnp.zeros(n)
            if checkpoint is None:
                return brainx.transform.for_loop(step, xs).mean()
            return checkpointed_for_loop(step, xs, checkpoint=checkpoint).mean()

        c = jit(grad(loss, grad_states=w)).lower(xs).compile()
        return c.memory_analysis().temp_size_in_bytes

    plain = make(None)
    nested, binomial = make("nested"), make(Binomial(8))
    assert nested < plain / 4, (nested, plain)
    assert binomial < plain / 8, (binomial, plain)


def test_loop_invariant_residuals_are_not_stored_per_step():
    """A value computed from loop constants only (w * mask) is kept once, not once per step."""
    n, T = 64, 64
    w = jax.random.normal(jax.random.PRNGKey(0), (n, n)) * 0.1
    mask = (jax.random.uniform(jax.random.PRNGKey(1), (n, n)) < 0.5).astype(jnp.float32)
    xs = jax.random.normal(jax.random.PRNGKey(2), (T, n))

    def loss(w, checkpoint):
        step = lambda h, x: (jnp.tanh(h @ (w * mask) + x), h.sum())
        return checkpointed_scan(step, jnp.zeros(n), xs, checkpoint=checkpoint)[1].sum()

    matrix = n * n * 4
    plan = Nested(segments=16)
    assert _temp_bytes(lambda w: loss(w, plan), w) < 6 * matrix
    np.testing.assert_allclose(jax.grad(loss)(w, plan), jax.grad(loss)(w, "per_step_remat"),
                               rtol=1e-4, atol=1e-6)


def _while_ref(w, x0, n):
    x = x0
    for _ in range(n):
        x = jnp.tanh(x @ w) + 0.3
    return x


@pytest.mark.parametrize("snapshots", [1, 2, 32])
def test_while_loop_values_states_and_grads(snapshots):
    w = brainx.ParamState(jnp.eye(N) * 0.8 + 0.05, name="w")
    x = brainx.HiddenState(jnp.full(N, 0.1), name="x")
    steps = brainx.ShortTermState(jnp.zeros((), jnp.int32), name="steps")

    def body(total):
        x.value = jnp.tanh(x.value @ w.value) + 0.3
        steps.value = steps.value + 1
        return total + x.value.sum()

    def loss(x0):
        x.value = x0
        steps.value = jnp.zeros((), jnp.int32)
        total = checkpointed_while_loop(lambda t: t < 9.0, body, 0.0,
                                        checkpoint=Binomial(snapshots))
        return total + (x.value ** 2).sum()

    x0 = jnp.array([0.1, 0.2, 0.3])
    g_w, g_x0 = grad(loss, grad_states=w, argnums=0)(x0)
    n = int(steps.value)
    assert n > 3

    def ref(w, x0):
        xi, total = x0, 0.0
        for _ in range(n):
            xi = jnp.tanh(xi @ w) + 0.3
            total = total + xi.sum()
        return total + (xi ** 2).sum()

    np.testing.assert_allclose(x.value, _while_ref(w.value, x0, n), rtol=1e-5)
    r_w, r_x0 = jax.grad(ref, argnums=(0, 1))(w.value, x0)
    np.testing.assert_allclose(g_w, r_w, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(g_x0, r_x0, rtol=1e-4, atol=1e-6)


def test_while_loop_max_steps_jit_and_vmap():
    w = jnp.eye(N) * 0.9

    def run(x0, max_steps):
        return checkpointed_while_loop(lambda c: c[1] < 100, lambda c: (jnp.tanh(c[0] @ w) + 0.3,
                                                                          c[1] + 1),
                                       (x0, 0), max_steps=max_steps)

    x0 = jnp.ones(N) * 0.2
    xf, n = jax.jit(run, static_argnums=1)(x0, 5)
    assert int(n) == 5
    np.testing.assert_allclose(xf, _while_ref(w, x0, 5), rtol=1e-5)
    g = jax.grad(lambda x0: run(x0, 5)[0].sum())(x0)
    np.testing.assert_allclose(g, jax.grad(lambda x0: _while_ref(w, x0, 5).sum())(x0), rtol=1e-5)
    batch = jnp.stack([x0, 2 * x0])
    gv = jax.vmap(jax.grad(lambda x0: run(x0, 4)[0].sum()))(batch)
    for i in range(2):
        np.testing.assert_allclose(
            gv[i], jax.grad(lambda x0: _while_ref(w, x0, 4).sum())(batch[i]), rtol=1e-5)


def test_while_loop_refuses_strategies_that_need_a_length_and_writes_in_cond():
    s = brainx.State(jnp.zeros(()), name="flag")
    with pytest.raises(ValueError, match="needs the number of steps"):
        checkpointed_while_loop(lambda c: c < 3, lambda c: c + 1, 0, checkpoint="nested")

    def cond(c):
        s.value = s.value + 1
        return c < 3

    with pytest.raises(ValueError, match="cond_fun writes State\\(.*name='flag'"):
        checkpointed_while_loop(cond, lambda c: c + 1, 0)
    assert float(s.value) == 0.0


def test_type_change_is_an_error_naming_the_state_and_no_state_changes():
    v = brainx.HiddenState(jnp.zeros(3), name="v")
    keep = brainx.HiddenState(jnp.ones(2), name="keep")

    def step(x):
        keep.value = keep.value + 1
        v.value = jnp.zeros(4) + x
        return x

    with pytest.raises(brainx.StateTypeError, match="State\\(.*name='v'"):
        checkpointed_for_loop(step, jnp.ones(5))
    np.testing.assert_array_equal(v.value, jnp.zeros(3))
    np.testing.assert_array_equal(keep.value, jnp.ones(2))


def test_bad_arguments_are_clear_errors():
    xs = jnp.ones(4)
    with pytest.raises(ValueError, match="Unknown checkpoint strategy 'fast'"):
        checkpointed_for_loop(lambda x: x, xs, checkpoint="fast")
    with pytest.raises(ValueError, match="either base= or a checkpoint strategy"):
        checkpointed_for_loop(lambda x: x, xs, base=4, checkpoint=Nested())
    with pytest.raises(ValueError, match="length=3 disagrees"):
        checkpointed_for_loop(lambda x: x, xs, length=3)
    with pytest.raises(ValueError, match="levels must be an int >= 1"):
        Nested(levels=0)
    with pytest.raises(ValueError, match="snapshots must be an int >= 1"):
        Binomial(0)
    with pytest.raises(TypeError, match="must return a pair"):
        checkpointed_scan(lambda c, x: c, 0.0, xs)
    # A carry that changes type is named as in scan (also for zero steps).
    for n in (0, 3):
        with pytest.raises(TypeError, match=r"the step of checkpointed_scan \(.*<lambda>\) returns "
                                            r"a carry of type float32\[2\]"):
            checkpointed_scan(lambda c, x: (c + x, c), 0.0, jnp.zeros((n, 2)))


def test_zero_length_checkpointed_scan_returns_init_like_lax_scan():
    # brainstate raises ValueError for zero steps; brainx runs them, as jax.lax.scan does.
    s = brainx.State(jnp.ones(()))

    def step(c, x):
        s.value = s.value * 2
        return c * x, c

    want = jax.lax.scan(lambda c, x: (c * x, c), 2.0, jnp.zeros((0,)))
    for kw in ({}, {"length": 0}):
        got = checkpointed_scan(step, 2.0, jnp.zeros((0,)), **kw)
        jax.tree.map(np.testing.assert_array_equal, got, want)
    assert float(s.value) == 1.0
    grad = jax.grad(lambda a: checkpointed_scan(lambda c, x: (c * x, c), a, jnp.zeros((0,)))[0])
    assert float(grad(2.0)) == 1.0


def test_compiled_once_outside_jit_and_same_under_disable_jit():
    traces = []
    v = brainx.HiddenState(jnp.zeros(()))

    def step(x):
        traces.append(1)
        v.value = 0.5 * v.value + x
        return v.value

    xs = jnp.arange(6.0)
    first = checkpointed_for_loop(step, xs)
    n = len(traces)
    second = checkpointed_for_loop(step, xs)
    assert len(traces) == n  # no retrace on the second call
    assert float(v.value) == pytest.approx(float(second[-1]))
    v.value = jnp.zeros(())
    with jax.disable_jit():
        eager = checkpointed_for_loop(step, xs)
    np.testing.assert_allclose(eager, first, rtol=1e-6)


def test_progress_bar_moves_on_the_forward_pass_only():
    out = io.StringIO()
    w = brainx.ParamState(jnp.ones(()))
    v = brainx.HiddenState(jnp.zeros(()))

    def step(x):
        v.value = 0.5 * v.value + w.value * x
        return v.value

    bar = ProgressBar(freq=5, file=out)
    loss = lambda xs: checkpointed_for_loop(step, xs, pbar=bar).sum()
    g = grad(loss, grad_states=w)(jnp.ones(20))
    text = out.getvalue()
    assert text.count("20/20") == 1 and text.count("| 0/20") == 1, text  # one bar, one pass
    assert float(g) == pytest.approx(float(grad(
        lambda xs: brainx.transform.for_loop(step, xs).sum(), grad_states=w)(jnp.ones(20))))


@settings(max_examples=30, deadline=None)
@given(length=st.integers(1, 3000), levels=st.integers(1, 4))
def test_property_segment_plans_cover_the_loop_exactly(length, levels):
    def steps(p: SegmentPlan) -> int:
        if p.is_leaf:
            return p.length
        assert p.stride * p.count + (p.tail.length if p.tail else 0) == p.length
        assert steps(p.child) == p.stride
        return p.count * p.stride + (steps(p.tail) if p.tail else 0)

    assert steps(SegmentPlan.balanced(length, levels)) == length
    sizes = segment_sizes(length, levels)
    assert steps(SegmentPlan.build(length, sizes)) == length
    assert SegmentPlan.balanced(length, 2).peak_carries() <= 3 * int(np.sqrt(length)) + 4


@pytest.mark.parametrize("snapshots", [1, 2, 5])
def test_treeverse_reverses_every_step_once_in_reverse_order(snapshots):
    @jax.jit
    def order(n):
        def reverse_at(state, c, t):
            out, k = state
            return out.at[k].set(t * 1000 + c), k + 1   # c: the carry before step t is t
        out, _ = treeverse(lambda c, t: c + 1, reverse_at, jnp.int32(0), n, snapshots,
                           (jnp.full(40, -1), jnp.int32(0)))
        return out

    for n in [0, 1, 2, 7, 23, 40]:
        want = [t * 1001 for t in range(n - 1, -1, -1)] + [-1] * (40 - n)
        assert order(n).tolist() == want


_split = jax.jit(binomial_split)


@settings(max_examples=60, deadline=None)
@given(length=st.integers(2, 10 ** 6), free=st.integers(1, 64))
def test_property_binomial_split_is_inside_the_interval(length, free):
    left = int(_split(length, free))
    assert 1 <= left <= length - 1


@pytest.mark.parametrize("strategy", ["nested", "binomial"])
def test_a_deleted_model_is_not_kept_alive(strategy):
    xs, _ = _data(5)
    net = Net()
    alive = weakref.ref(net)
    loss = lambda xs: checkpointed_scan(net.scan_step, 0.0, xs, checkpoint=strategy)[0]
    grad(loss, grad_states=net.w)(xs)
    jit(grad(loss, grad_states=net.w))(xs)
    del net, loss
    gc.collect()
    assert alive() is None


def test_grad_of_grad_through_nested():
    xs = jnp.linspace(0.0, 1.0, 9)

    def f(a, checkpoint):
        step = lambda c, x: (jnp.sin(a * c) + x, c)
        return checkpointed_scan(step, 0.5, xs, checkpoint=checkpoint)[1].sum()

    want = jax.grad(jax.grad(f))(0.7, "per_step_remat")
    np.testing.assert_allclose(jax.grad(jax.grad(f))(0.7, "nested"), want, rtol=1e-5)


@pytest.mark.parametrize("strategy", ["nested", Binomial(2)], ids=["nested", "binomial"])
def test_random_key_state_and_no_xs(strategy):
    """The key is a written state: recomputation on the reverse pass draws the same noise."""
    key = brainx.State(jax.random.key(0), name="key")
    w = brainx.ParamState(jnp.ones(N))
    v = brainx.HiddenState(jnp.zeros(N))

    def step(total, _):
        key.value, sub = jax.random.split(key.value)
        v.value = 0.9 * v.value + w.value * jax.random.normal(sub, (N,))
        return total + (v.value ** 2).sum(), None

    def loss(loop, **kw):
        key.value, v.value = jax.random.key(0), jnp.zeros(N)
        return loop(step, 0.0, None, length=12, **kw)[0]

    want = grad(loss, grad_states=w)(brainx.transform.scan)
    got = grad(loss, grad_states=w)(checkpointed_scan, checkpoint=strategy)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("strategy", ["nested", "binomial", "nested_remat"])
def test_an_exception_in_the_step_leaves_every_state_unchanged(strategy):
    v = brainx.HiddenState(jnp.ones(N), name="v")
    w = brainx.ParamState(jnp.ones(N), name="w")

    def step(x):
        v.value = v.value * w.value
        if x.shape != (N,):
            raise RuntimeError("bad input")
        v.value = v.value + x
        return v.value.sum()

    loss = lambda xs: checkpointed_for_loop(step, xs, checkpoint=strategy).sum()
    with pytest.raises(RuntimeError, match="bad input"):
        grad(loss, grad_states=w)(jnp.ones((4, N + 1)))
    np.testing.assert_array_equal(v.value, jnp.ones(N))
    np.testing.assert_array_equal(w.value, jnp.ones(N))
