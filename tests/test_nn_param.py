"""Param / Const and the parameter transforms, against the formulas in plain JAX."""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn

X = jnp.linspace(-4.0, 4.0, 9)

# (transform, its forward written out in plain JAX)
CASES = [
    (nn.IdentityT(), lambda x: x),
    (nn.SoftplusT(0.5), lambda x: 0.5 + jnp.log1p(jnp.exp(x))),
    (nn.NegSoftplusT(1.0), lambda x: 1.0 - jnp.log1p(jnp.exp(-x))),
    (nn.ExpT(-1.0), lambda x: -1.0 + jnp.exp(x)),
    (nn.LogT(0.0), jnp.exp),
    (nn.SigmoidT(-2.0, 3.0), lambda x: -2.0 + 5.0 / (1.0 + jnp.exp(-x))),
    (nn.TanhT(0.0, 2.0), lambda x: jnp.tanh(x) + 1.0),
    (nn.SoftsignT(-1.0, 1.0), lambda x: x / (1.0 + jnp.abs(x))),
    (nn.AffineT(-3.0, 2.0), lambda x: -3.0 * x + 2.0),
    (nn.ChainT(nn.SoftplusT(0.0), nn.AffineT(2.0, 1.0)),
     lambda x: 2.0 * jnp.log1p(jnp.exp(x)) + 1.0),
    (nn.PositiveT(), jnp.exp),
    (nn.NegativeT(), lambda x: -jnp.exp(x)),
]
IDS = [type(t).__name__ for t, _ in CASES]


@pytest.mark.parametrize("t,ref", CASES, ids=IDS)
def test_forward_inverse_and_jacobian_match_the_formula(t, ref):
    y = t.forward(X)
    np.testing.assert_allclose(y, ref(X), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t.inverse(y), X, rtol=1e-4, atol=1e-4)
    dref = jax.vmap(jax.grad(ref))(X)
    np.testing.assert_allclose(t.log_abs_det_jacobian(X, y), jnp.sum(jnp.log(jnp.abs(dref))),
                               rtol=1e-4, atol=1e-4)
    # the gradient of a loss through the transform is the chain rule of the formula
    loss = lambda f: lambda x: jnp.sum(jnp.sin(f(x)))  # noqa: E731
    np.testing.assert_allclose(jax.grad(loss(t.forward))(X), jax.grad(loss(ref))(X),
                               rtol=1e-5, atol=1e-6)


def test_bounded_transforms_stay_in_range_for_extreme_inputs():
    x = jnp.array([-1e4, -50.0, 0.0, 50.0, 1e4])
    assert jnp.all(nn.SoftplusT(1.0).forward(x) >= 1.0)
    y = nn.SigmoidT(0.0, 1.0).forward(x)
    assert jnp.all((y >= 0.0) & (y <= 1.0))
    assert jnp.all(jnp.isfinite(nn.ExpT(0.0).forward(x)))          # exponent clipped at 20
    # softplus inverse is exact far from the bound, where log(exp(z) - 1) would overflow
    np.testing.assert_allclose(nn.SoftplusT(0.0).inverse(jnp.array([100.0])), [100.0], rtol=1e-6)


def test_clip_transform_clips_and_has_no_gradient_outside():
    t = nn.ClipT(0.0, 1.0)
    np.testing.assert_allclose(t.forward(jnp.array([-1.0, 0.3, 2.0])), [0.0, 0.3, 1.0])
    g = jax.grad(lambda x: jnp.sum(t.forward(x) * jnp.array([1.0, 2.0, 3.0])))(
        jnp.array([-1.0, 0.3, 2.0]))
    np.testing.assert_allclose(g, [0.0, 2.0, 0.0])


def test_transforms_with_units():
    t = nn.SigmoidT(-80.0 * u.mV, -40.0 * u.mV)
    y = t.forward(jnp.array([0.0, 2.0]))
    assert y.unit == u.mV
    np.testing.assert_allclose(y.to_decimal(u.mV),
                               -80.0 + 40.0 * jax.nn.sigmoid(jnp.array([0.0, 2.0])), rtol=1e-6)
    np.testing.assert_allclose(t.inverse(-50.0 * u.mV), np.log(30.0 / 10.0), rtol=1e-5)
    sp = nn.SoftplusT(2.0 * u.ms)
    np.testing.assert_allclose(sp.inverse(sp.forward(jnp.array(0.7))), 0.7, rtol=1e-5)
    with pytest.raises(ValueError, match="lower must be below upper"):
        nn.SigmoidT(1.0, 0.0)
    with pytest.raises(ValueError, match="non-zero"):
        nn.AffineT(0.0, 1.0)


def test_param_trains_the_unconstrained_value_and_the_gradient_is_the_chain_rule():
    target = jnp.array([0.6, 3.0, 7.5])

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rate = nn.Param(jnp.array([1.0, 1.0, 1.0]), t=nn.SoftplusT(0.0))
            self.gain = nn.Const(2.0)

    model = Model()
    assert list(model.states(brainx.ParamState)) == ["rate.val"]
    x0 = model.rate.val.value
    np.testing.assert_allclose(jax.nn.softplus(x0), 1.0, rtol=1e-6)   # stored = inverse(value)

    def loss():
        return jnp.sum((model.gain.value() * model.rate.value() - target) ** 2)

    g = brainx.transform.grad(loss, grad_states=model.rate.val)()
    g_ref = jax.grad(lambda x: jnp.sum((2.0 * jax.nn.softplus(x) - target) ** 2))(x0)
    np.testing.assert_allclose(g, g_ref, rtol=1e-6)

    @brainx.transform.jit
    def step():
        grads = brainx.transform.grad(loss, grad_states=model.rate.val)()
        model.rate.val.value = model.rate.val.value - 0.2 * grads

    for _ in range(300):
        step()
    np.testing.assert_allclose(model.rate.value(), target / 2.0, rtol=1e-3)


def test_sigmoid_param_never_leaves_its_bounds_under_large_steps():
    p = nn.Param(0.5, t=nn.SigmoidT(0.0, 1.0))
    for _ in range(20):
        g = brainx.transform.grad(lambda: -p.value(), grad_states=p.val)()
        p.val.value = p.val.value - 50.0 * g                    # push it up, hard
    assert 0.9 < float(p.value()) <= 1.0


def test_param_with_units_set_value_clip_and_vmap():
    tau = nn.Param(jnp.array([5.0, 20.0]) * u.ms, t=nn.SoftplusT(1.0 * u.ms))
    np.testing.assert_allclose(tau.value().to_decimal(u.ms), [5.0, 20.0], rtol=1e-5)
    tau.set_value(jnp.array([2.0, 40.0]) * u.ms)
    np.testing.assert_allclose(tau.value().to_decimal(u.ms), [2.0, 40.0], rtol=1e-5)
    tau.clip(max_val=30.0 * u.ms)
    np.testing.assert_allclose(tau.value().to_decimal(u.ms), [2.0, 30.0], rtol=1e-5)
    decay = brainx.transform.vmap(lambda dt: u.math.exp(-dt / tau.value()))(
        jnp.array([1.0, 2.0]) * u.ms)
    np.testing.assert_allclose(decay, np.exp(-np.array([[1.0], [2.0]]) / np.array([2.0, 30.0])),
                               rtol=1e-5)


def test_param_reg_loss_precompute_and_const():
    class L2:
        def loss(self, v):
            return 0.5 * jnp.sum(v ** 2)

        def reset_value(self):
            return jnp.array([0.25, 0.25])

    p = nn.Param(jnp.array([1.0, 2.0]), t=nn.ExpT(0.0), reg=L2(), precompute=lambda v: v * 10)
    np.testing.assert_allclose(p.value(), [10.0, 20.0], rtol=1e-5)
    np.testing.assert_allclose(p.reg_loss(), 0.5 * (100.0 + 400.0), rtol=1e-5)
    g = brainx.transform.grad(p.reg_loss, grad_states=p.val)()
    x = jnp.log(jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(g, jax.grad(lambda x: 0.5 * jnp.sum((10 * jnp.exp(x)) ** 2))(x),
                               rtol=1e-5)
    p.reset_to_prior()
    np.testing.assert_allclose(p.value(), [2.5, 2.5], rtol=1e-5)
    c = nn.Const(jnp.array([3.0]), reg=L2())
    assert c.reg_loss() == 0.0 and list(c.states()) == []
    c.set_value(jnp.array([4.0]))
    np.testing.assert_allclose(c.value(), [4.0])


def test_param_init_and_errors():
    assert nn.Param.init(None) is None
    with pytest.raises(ValueError, match="allow_none"):
        nn.Param.init(None, allow_none=False)
    p = nn.Param(jnp.ones(3))
    assert nn.Param.init(p, sizes=3) is p
    c = nn.Param.init(nn.init.Constant(2.0), sizes=(2, 3))
    assert isinstance(c, nn.Const) and c.value().shape == (2, 3)
    with pytest.raises(ValueError, match="broadcast"):
        nn.Param.init(jnp.ones(4), sizes=3)
    with pytest.raises(TypeError, match="Transform"):
        nn.Param(1.0, t=jnp.exp)
    with pytest.raises(ValueError, match="outside the range"):
        nn.Param(-1.0, t=nn.SoftplusT(0.0))
    with pytest.raises(ValueError, match="never trained"):
        nn.Const(1.0, fit=True)
