"""The brainx.nn gaps that brainstate's tutorials hit (tests/compat/run_tutorials.py), checked
against plain NumPy references of brainstate's documented behaviour."""

import brainunit as u
import jax.numpy as jnp
import numpy as np
import pytest

from brainx import environ, nn

DT = 0.1  # ms


@pytest.fixture(autouse=True)
def dt_context():
    with environ.context(dt=DT * u.ms):
        yield


# -- Delay: brainstate's older arguments delay_method / interp_method ------------------------
def _ramp(delay, n):
    """Write 0, 1, ..., n-1 (one per step) and leave t at the last step's time."""
    for i in range(n):
        delay.update(jnp.array([float(i)]))
    return environ.context(t=(n - 1) * DT * u.ms)


@pytest.mark.parametrize("method", ["rotation", "concat", None])
def test_delay_method_kinds_all_read_the_same_ring_buffer(method):
    if method == "concat":   # deprecated, as in brainstate 0.6: one ring buffer for all
        with pytest.warns(DeprecationWarning, match="deprecated"):
            delay = nn.Delay(jnp.zeros(1), time=0.5 * u.ms, delay_method=method)
    else:
        delay = nn.Delay(jnp.zeros(1), time=0.5 * u.ms, delay_method=method)
    delay.register_entry("three", 0.3 * u.ms)
    nn.init_all_states(delay)
    got = []
    for i in range(9):
        delay.update(jnp.array([float(i)]))
        got.append(float(delay.at("three")[0]))
    # three steps back, zeros before anything was written
    np.testing.assert_array_equal(got, [0, 0, 0, 0, 1, 2, 3, 4, 5])
    assert delay.delay_method == "rotation"


def test_delay_method_unknown_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="'rotation' or 'concat'"):
        nn.Delay(jnp.zeros(1), time=1.0 * u.ms, delay_method="shift")


def test_interp_method_round_reads_the_nearest_step_in_retrieve_at_time():
    delay = nn.init_all_states(nn.Delay(jnp.zeros(1), time=5.0 * u.ms, interp_method="round"))
    with _ramp(delay, 100):
        now = 99 * DT * u.ms
        for back, expected in ((2.5, 99 - 25), (2.54, 99 - 25), (2.56, 99 - 26), (0.04, 99)):
            got = delay.retrieve_at_time(now - back * u.ms)
            assert float(got[0]) == pytest.approx(expected), back


def test_interp_method_linear_interp_is_the_default_and_interpolates():
    for kw in ({}, {"interp_method": "linear_interp"}):
        delay = nn.init_all_states(nn.Delay(jnp.zeros(1), time=5.0 * u.ms, **kw))
        with _ramp(delay, 100):
            got = delay.retrieve_at_time(99 * DT * u.ms - 2.54 * u.ms)
        assert float(got[0]) == pytest.approx(99 - 25.4, abs=1e-3)   # a ramp: linear is exact


def test_interp_method_does_not_change_registered_entries_which_round_up():
    """As in brainstate, a registered fractional delay reads ceil(t / dt) steps back."""
    for method in ("round", "linear_interp"):
        delay = nn.Delay(jnp.zeros(1), time=1.0 * u.ms, interp_method=method)
        delay.register_entry("frac", 0.24 * u.ms)                  # 2.4 steps -> 3
        nn.init_all_states(delay)
        with _ramp(delay, 10):
            assert float(delay.at("frac")[0]) == 9 - 3


def test_interpolation_wins_over_interp_method():
    delay = nn.init_all_states(nn.Delay(jnp.zeros(1), time=5.0 * u.ms, interpolation="linear",
                                        interp_method="round"))
    with _ramp(delay, 100):
        got = delay.retrieve_at_time(99 * DT * u.ms - 2.54 * u.ms)
    assert float(got[0]) == pytest.approx(99 - 25.4, abs=1e-3)


def test_interp_method_unknown_names_the_choices():
    with pytest.raises(ValueError, match=r"interp_method='spline' is not a known .*'cubic'"):
        nn.Delay(jnp.zeros(1), time=1.0 * u.ms, interp_method="spline")
    assert nn.Delay(jnp.zeros(1), time=1.0 * u.ms, interp_method="cubic").interp_method == "cubic"


def test_registered_entries_map_names_to_whole_steps_and_indices():
    delay = nn.Delay(jnp.zeros(3), time=1.0 * u.ms)
    delay.register_entry("now", 0.0 * u.ms)
    delay.register_entry("frac", 0.25 * u.ms)
    idx = jnp.arange(3)
    delay.register_entry("each", jnp.array([0.1, 0.2, 0.3]) * u.ms, idx)
    entries = delay._registered_entries
    assert list(entries) == ["now", "frac", "each"]
    assert entries["now"] == (0,) and entries["frac"] == (3,)
    np.testing.assert_array_equal(entries["each"][0], [1, 2, 3])
    assert entries["each"][1] is idx


def test_state_with_delay_takes_delay_method():
    class Leaky(nn.Dynamics):
        def init_state(self, batch_size=None):
            from brainx import HiddenState
            self.V = HiddenState(jnp.zeros(self.varshape))

        def update(self, x):
            self.V.value = self.V.value * 0.5 + x
            return self.V.value

    cell = nn.init_all_states(Leaky(2))
    tracked = nn.StateWithDelay(target=cell, item="V", delay_method="rotation")
    tracked.register_entry("two", 0.2 * u.ms)
    nn.init_all_states(tracked)
    V = np.zeros(2)
    history = []
    for i in range(6):
        x = np.array([1.0, 2.0]) * i
        cell.update(jnp.asarray(x))
        tracked.update()
        V = V * 0.5 + x
        history.append(V.copy())
    np.testing.assert_allclose(tracked.at("two"), history[-3], rtol=1e-6)


# -- regularisers, and a module's sum of them ---------------------------------------------------
def test_regularisers_match_their_formulas():
    x = np.array([3.0, -4.0, 0.5], np.float32)
    assert float(nn.L1Reg(0.1).loss(jnp.asarray(x))) == pytest.approx(0.1 * np.abs(x).sum())
    assert float(nn.L2Reg(0.1).loss(jnp.asarray(x))) == pytest.approx(0.1 * (x ** 2).sum())
    assert float(nn.L2Reg(-1.0).loss(jnp.asarray(x))) == 0.0             # relu of the weight
    enet = nn.ElasticNetReg(l1_weight=0.2, l2_weight=0.3, alpha=0.25)
    assert float(enet.loss(jnp.asarray(x))) == pytest.approx(
        0.25 * 0.2 * np.abs(x).sum() + 0.75 * 0.3 * (x ** 2).sum(), rel=1e-6)
    gauss = nn.GaussianReg(mean=1.0, std=0.5, weight=0.1)
    prec = 1.0 / 0.25
    assert float(gauss.loss(jnp.asarray(x))) == pytest.approx(
        0.1 * (prec * ((x - 1.0) ** 2).sum() - np.log(prec)), rel=1e-5)
    assert (nn.L1Reg().reset_value(), nn.L2Reg().reset_value(), gauss.reset_value()) == (0.0, 0.0, 1.0)


def test_regulariser_priors_have_the_documented_spread():
    import brainx
    brainx.random.seed(0)
    draws = np.asarray(nn.L2Reg(4.0).sample_init((20000,)))               # N(0, 1 / 4)
    assert abs(draws.mean()) < 0.02 and draws.std() == pytest.approx(0.5, rel=0.03)
    lap = np.asarray(nn.L1Reg(2.0).sample_init(20000))                    # Laplace(0, 1 / 2)
    assert np.mean(np.abs(lap)) == pytest.approx(0.5, rel=0.05)
    g = np.asarray(nn.GaussianReg(mean=3.0, std=2.0).sample_init((20000,)))
    assert g.mean() == pytest.approx(3.0, abs=0.05) and g.std() == pytest.approx(2.0, rel=0.03)


def test_param_reg_loss_sums_over_the_module_tree_and_trains():
    import brainx

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Param(jnp.array([3.0, -4.0]), reg=nn.L2Reg(0.1))
            self.inner = nn.Module()
            self.inner.v = nn.Param(jnp.array([1.0, -2.0, 2.0]), reg=nn.L1Reg(0.5))
            self.c = nn.Const(jnp.array([100.0]))
            self.free = nn.Param(jnp.array([7.0]))                          # no regulariser

    net = Net()
    names = [name for name, _ in net.named_param_modules()]
    assert names == ["w", "inner.v", "c", "free"]
    assert [type(p).__name__ for p in net.param_modules(allowed_hierarchy=(1, 1))] == \
        ["Param", "Const", "Param"]                                        # not inner.v (depth 2)
    assert float(net.reg_loss()) == pytest.approx(0.1 * 25 + 0.5 * 5)
    assert nn.Module().reg_loss() == 0.0

    g_w, g_v = brainx.transform.grad(net.reg_loss, grad_states=[net.w.val, net.inner.v.val])()
    np.testing.assert_allclose(g_w, 0.2 * np.array([3.0, -4.0]), rtol=1e-6)
    np.testing.assert_allclose(g_v, 0.5 * np.sign([1.0, -2.0, 2.0]), rtol=1e-6)


def test_reset_to_prior_uses_the_regulariser_mode():
    p = nn.Param(jnp.array([2.0, 3.0]), t=nn.SoftplusT(0.0), reg=nn.GaussianReg(mean=1.5, std=1.0))
    p.reset_to_prior()
    np.testing.assert_allclose(p.value(), [1.5, 1.5], rtol=1e-5)


# -- Param caching and Module.param_precompute ---------------------------------------------
def test_param_cache_hits_until_the_value_is_written():
    p = nn.Param(jnp.array([1.0, 2.0]), t=nn.SoftplusT(0.0))
    assert p.cache_stats == {"valid": False, "has_cached_value": False}
    first = p.cache()
    assert p.value() is first and p.cache_stats["valid"]
    p.val.value = p.val.value + 1.0                                     # an optimiser step
    assert not p.cache_stats["valid"]
    np.testing.assert_allclose(p.value(), np.log1p(np.exp(np.asarray(p.val.value))), rtol=1e-6)
    p.set_value(jnp.array([4.0, 5.0]))
    assert p.cache_stats == {"valid": False, "has_cached_value": False}
    np.testing.assert_allclose(p.value(), [4.0, 5.0], rtol=1e-5)


def test_param_precompute_traces_each_forward_once_and_keeps_values_and_gradients():
    import brainx

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.g = nn.Param(jnp.array([0.5, 1.5]), t=nn.SoftplusT(0.0))

        def update(self, x):
            return x * self.g.value()

    model = Model()
    params = model.states(brainx.ParamState)

    def run(precompute):
        def f():
            x = jnp.ones(2)
            if precompute:
                with model.param_precompute():
                    for _ in range(5):
                        x = model(x)
            else:
                for _ in range(5):
                    x = model(x)
            return jnp.sum(x)
        return f

    count = lambda f: str(brainx.transform.make_jaxpr(f)()[0]).count("name=softplus")
    assert count(run(False)) == 5 and count(run(True)) == 1
    np.testing.assert_allclose(run(True)(), run(False)(), rtol=1e-6)
    g_pre = brainx.transform.grad(run(True), grad_states=params)()
    g_ref = brainx.transform.grad(run(False), grad_states=params)()
    np.testing.assert_allclose(g_pre["g", "val"], g_ref["g", "val"], rtol=1e-5)
    assert model.g.cache_stats["has_cached_value"] is False               # cleared on exit
    with pytest.raises(RuntimeError):
        with model.param_precompute():
            assert model.g.cache_stats["valid"]
            raise RuntimeError("mid-simulation")
    assert model.g.cache_stats["has_cached_value"] is False


# -- more parameter transforms ---------------------------------------------------------------
@pytest.mark.parametrize("t, y", [
    (nn.ScaledSigmoidT(0.0, 2.0, beta=3.0), [0.1, 1.0, 1.9]),
    (nn.PowerT(0.5), [0.5, 2.0, 8.0]),
    (nn.PowerT(0.0), [0.5, 2.0, 8.0]),
    (nn.OrderedT(), [-1.0, 0.5, 2.0]),
    (nn.SimplexT(), [0.2, 0.3, 0.5]),
    (nn.UnitVectorT(), [0.6, 0.8]),
    (nn.ReluT(1.0), [1.5, 3.0]),
    (nn.MaskedT(jnp.array([1.0, 0.0, 1.0]), nn.SoftplusT(0.0)), [0.5, -2.0, 8.0]),
])
def test_more_transforms_round_trip(t, y):
    np.testing.assert_allclose(t.forward(t.inverse(jnp.array(y))), y, rtol=1e-4, atol=1e-5)


def test_more_transforms_forward_formulas_and_ranges():
    x = np.array([-3.0, -0.2, 0.0, 0.7, 4.0], np.float32)
    sig = lambda v: 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(nn.ScaledSigmoidT(-1.0, 3.0, beta=2.0).forward(jnp.asarray(x)),
                               -1.0 + 4.0 * sig(2.0 * x), rtol=1e-5)
    np.testing.assert_allclose(nn.ReluT(0.5).forward(jnp.asarray(x)), np.maximum(x, 0) + 0.5)
    pos = np.abs(x) + 0.1
    np.testing.assert_allclose(nn.PowerT(2.0).forward(jnp.asarray(pos)), (pos ** 2 - 1) / 2, rtol=1e-5)
    np.testing.assert_allclose(nn.PowerT(0.0).forward(jnp.asarray(pos)), np.log(pos), rtol=1e-5)
    o = np.asarray(nn.OrderedT().forward(jnp.asarray(x)))
    assert np.all(np.diff(o) > 0) and o[0] == x[0]
    np.testing.assert_allclose(np.diff(o), np.log1p(np.exp(x[1:])), rtol=1e-5)
    batch = np.random.RandomState(0).randn(6, 4).astype(np.float32)
    s = np.asarray(nn.SimplexT().forward(jnp.asarray(batch)))            # 4 reals -> 5 probabilities
    assert s.shape == (6, 5) and np.all(s >= 0)
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-6)
    # stick-breaking by hand for the first row
    z, left, ref = sig(batch[0]), 1.0, []
    for zk in z:
        ref.append(zk * left)
        left *= 1 - zk
    np.testing.assert_allclose(s[0], ref + [left], rtol=1e-5)
    v = np.asarray(nn.UnitVectorT().forward(jnp.asarray(batch)))
    np.testing.assert_allclose(np.linalg.norm(v, axis=-1), 1.0, rtol=1e-5)
    m = nn.MaskedT(jnp.array([True, False, True, False, True]), nn.SoftplusT(0.0))
    np.testing.assert_allclose(m.forward(jnp.asarray(x)),
                               np.where([1, 0, 1, 0, 1], np.log1p(np.exp(x)), x), rtol=1e-5)


def test_masked_transform_keeps_gradients_finite_where_the_inner_map_is_undefined():
    import jax
    m = nn.MaskedT(jnp.array([True, False]), nn.PowerT(0.0))               # log on entry 0 only
    g = jax.grad(lambda x: jnp.sum(m.forward(x)))(jnp.array([2.0, -5.0]))
    np.testing.assert_allclose(g, [0.5, 1.0])


def test_simplex_param_trains_fewer_numbers_and_stays_on_the_simplex():
    import brainx
    probs = nn.Param(jnp.array([0.2, 0.3, 0.5]), t=nn.SimplexT())
    assert probs.val.value.shape == (2,)
    import jax
    target = jnp.array([0.7, 0.2, 0.1])
    g = brainx.transform.grad(lambda: jnp.sum((probs.value() - target) ** 2), grad_states=probs.val)()
    pure = jax.grad(lambda x: jnp.sum((nn.SimplexT().forward(x) - target) ** 2))
    np.testing.assert_allclose(g, pure(probs.val.value), rtol=1e-5)
    step = jax.jit(lambda x: x - 2.0 * pure(x))
    x = probs.val.value
    for _ in range(200):
        x = step(x)
    probs.val.value = x
    np.testing.assert_allclose(probs.value(), target, atol=1e-3)
    assert float(jnp.sum(probs.value())) == pytest.approx(1.0, abs=1e-6)


def test_transform_errors_name_the_problem():
    with pytest.raises(ValueError, match="lower must be below upper"):
        nn.ScaledSigmoidT(1.0, 0.0)
    with pytest.raises(ValueError, match="beta must be positive"):
        nn.ScaledSigmoidT(0.0, 1.0, beta=0.0)
    with pytest.raises(TypeError, match="MaskedT: transform must be"):
        nn.MaskedT(jnp.array([True]), lambda x: x)
    with pytest.raises(ValueError, match="alpha"):
        nn.ElasticNetReg(alpha=1.5)


# -- clip_grad_norm and the running metrics ----------------------------------------------------
def test_clip_grad_norm_scales_to_the_global_norm():
    rng = np.random.RandomState(0)
    grads = {"a": rng.randn(3, 2).astype(np.float32), "b": [rng.randn(4).astype(np.float32)]}
    flat = np.concatenate([grads["a"].ravel(), grads["b"][0]])
    for order, ref in ((2.0, np.linalg.norm(flat)), ("inf", np.abs(flat).max()),
                       (1, np.abs(flat).sum())):
        clipped, norm = nn.clip_grad_norm(grads, max_norm=0.5, norm_type=order, return_norm=True)
        assert float(norm) == pytest.approx(ref, rel=1e-5)
        np.testing.assert_allclose(clipped["a"], grads["a"] * 0.5 / (ref + 1e-6), rtol=1e-5)
    kept = nn.clip_grad_norm(grads, max_norm=1e3)                          # below the bound
    np.testing.assert_allclose(kept["b"][0], grads["b"][0], rtol=1e-6)
    assert nn.clip_grad_norm({}, 1.0) == {}


def test_metrics_accumulate_inside_jit_and_reset():
    import brainx
    rng = np.random.RandomState(1)
    metrics = nn.MultiMetric(loss=nn.AverageMetric("loss"), accuracy=nn.AccuracyMetric())

    @brainx.transform.jit
    def eval_step(logits, labels, loss):
        metrics.update(loss=loss, logits=logits, labels=labels)

    batches = [(rng.randn(8, 5).astype(np.float32), rng.randint(0, 5, 8), rng.rand(8).astype(np.float32))
               for _ in range(3)]
    for logits, labels, loss in batches:
        eval_step(jnp.asarray(logits), jnp.asarray(labels), jnp.asarray(loss))
    out = metrics.compute()
    all_logits = np.concatenate([b[0] for b in batches])
    all_labels = np.concatenate([b[1] for b in batches])
    assert float(out["accuracy"]) == pytest.approx(np.mean(all_logits.argmax(-1) == all_labels))
    assert float(out["loss"]) == pytest.approx(np.concatenate([b[2] for b in batches]).mean(), rel=1e-5)
    metrics.reset()
    eval_step(jnp.asarray(batches[0][0]), jnp.asarray(batches[0][1]), jnp.asarray(batches[0][2]))
    assert float(metrics.compute()["loss"]) == pytest.approx(batches[0][2].mean(), rel=1e-5)


def test_metric_errors_say_what_is_wrong():
    with pytest.raises(TypeError, match="'loss'"):
        nn.AverageMetric("loss").update(values=1.0)
    with pytest.raises(ValueError, match="one more axis"):
        nn.AccuracyMetric().update(logits=jnp.zeros(3), labels=jnp.zeros(3, jnp.int32))
    with pytest.raises(ValueError, match="integer class indices"):
        nn.AccuracyMetric().update(logits=jnp.zeros((3, 2)), labels=jnp.zeros(3))
    with pytest.raises(ValueError, match="taken by a method"):
        nn.MultiMetric(update=nn.AverageMetric())
