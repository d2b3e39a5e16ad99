"""Regularisers and a module's sum of them, Param caching and Module.param_precompute, and the
more parameter transforms (ReluT, PowerT, MaskedT, SimplexT, ...), against their formulas."""

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
