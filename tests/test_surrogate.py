"""Surrogate spike functions: Heaviside forward, the analytic surrogate derivative backward."""

import math

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import brainx
from brainx.nn import surrogate as sg


def _sig(z):
    return 1 / (1 + np.exp(-z))


# (function, class, params, the derivative written out independently, in numpy)
CASES = [
    (sg.sigmoid, sg.Sigmoid, dict(alpha=3.0), lambda x, alpha: alpha * _sig(alpha * x) * (1 - _sig(alpha * x))),
    (sg.arctan, sg.Arctan, dict(alpha=2.0), lambda x, alpha: alpha / (2 * (1 + (math.pi / 2 * alpha * x) ** 2))),
    (sg.piecewise_quadratic, sg.PiecewiseQuadratic, dict(alpha=1.5),
     lambda x, alpha: np.where(np.abs(x) > 1 / alpha, 0.0, alpha - alpha ** 2 * np.abs(x))),
    (sg.piecewise_exp, sg.PiecewiseExp, dict(alpha=2.0), lambda x, alpha: alpha / 2 * np.exp(-alpha * np.abs(x))),
    (sg.soft_sign, sg.SoftSign, dict(alpha=2.0), lambda x, alpha: alpha / (2 * (1 + np.abs(alpha * x)) ** 2)),
    (sg.erf, sg.ERF, dict(alpha=1.5), lambda x, alpha: alpha / math.sqrt(math.pi) * np.exp(-(alpha * x) ** 2)),
    (sg.relu_grad, sg.ReluGrad, dict(alpha=0.5, width=1.5), lambda x, alpha, width: np.maximum(alpha * (width - np.abs(x)), 0)),
    (sg.gaussian_grad, sg.GaussianGrad, dict(sigma=0.7, alpha=0.5),
     lambda x, sigma, alpha: alpha * np.exp(-x ** 2 / (2 * sigma ** 2)) / (math.sqrt(2 * math.pi) * sigma)),
    (sg.inv_square_grad, sg.InvSquareGrad, dict(alpha=10.0), lambda x, alpha: 1 / (alpha * np.abs(x) + 1) ** 2),
    (sg.slayer_grad, sg.SlayerGrad, dict(alpha=2.0), lambda x, alpha: np.exp(-alpha * np.abs(x))),
]
IDS = [c[0].__name__ for c in CASES]
XS = np.linspace(-2.5, 2.5, 41).astype(np.float32)


@pytest.mark.parametrize("fun,cls,params,deriv", CASES, ids=IDS)
def test_forward_is_heaviside(fun, cls, params, deriv):
    expected = (XS >= 0).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(fun(XS, **params)), expected)
    np.testing.assert_array_equal(np.asarray(cls(**params)(XS)), expected)
    assert fun(XS).dtype == jnp.float32


@pytest.mark.parametrize("fun,cls,params,deriv", CASES, ids=IDS)
def test_gradient_is_the_analytic_surrogate(fun, cls, params, deriv):
    expected = deriv(XS.astype(np.float64), **params)
    got_fun = jax.vmap(jax.grad(lambda x: fun(x, **params)))(XS)
    got_cls = jax.grad(lambda x: cls(**params)(x).sum())(XS)
    np.testing.assert_allclose(got_fun, expected, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(got_cls, expected, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(cls(**params).surrogate_grad(XS), expected, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("fun,cls,params,deriv", CASES, ids=IDS)
def test_surrogate_fun_is_the_antiderivative(fun, cls, params, deriv):
    obj = cls(**params)
    try:
        obj.surrogate_fun(XS)
    except NotImplementedError:
        pytest.skip(f"{cls.__name__} defines only a gradient")
    d = jax.vmap(jax.grad(obj.surrogate_fun))(XS)
    np.testing.assert_allclose(d, deriv(XS.astype(np.float64), **params), rtol=1e-4, atol=1e-5)


def test_steepness_changes_the_gradient_only():
    x = jnp.float32(0.3)
    g1 = jax.grad(lambda x: sg.sigmoid(x, alpha=1.0))(x)
    g8 = jax.grad(lambda x: sg.sigmoid(x, alpha=8.0))(x)
    assert g1 != g8 and sg.sigmoid(x, 1.0) == sg.sigmoid(x, 8.0) == 1.0


@settings(max_examples=30, deadline=None)
@given(st.floats(-3, 3, width=32), st.floats(0.25, 5.0, width=32))
def test_jvp_equals_vjp_and_jit(x, alpha):
    f = lambda x: sg.arctan(x, alpha)
    _, tangent = jax.jvp(f, (jnp.float32(x),), (jnp.float32(1.0),))
    g = jax.jit(jax.grad(f))(jnp.float32(x))
    np.testing.assert_allclose(tangent, g, rtol=1e-6)
    np.testing.assert_allclose(g, alpha / (2 * (1 + (math.pi / 2 * alpha * x) ** 2)), rtol=1e-4)


def test_traced_steepness_and_vmap_over_it():
    alphas = jnp.array([1.0, 2.0, 4.0])
    g = jax.vmap(jax.grad(sg.sigmoid), in_axes=(None, 0))(0.0, alphas)
    np.testing.assert_allclose(g, alphas / 4)
    assert jax.grad(lambda a: sg.sigmoid(0.2, a))(2.0) == 0.0   # no gradient to the parameter


def test_integer_and_dimensionless_quantity_inputs():
    assert sg.sigmoid(jnp.arange(-1, 2)).dtype == jnp.result_type(float)
    v = (jnp.array([1.0, 3.0]) * u.mV - 2.0 * u.mV) / (1.0 * u.mV)
    np.testing.assert_array_equal(sg.sigmoid(v), [0.0, 1.0])


def test_dimensional_input_is_refused_with_a_hint():
    with pytest.raises(TypeError, match=r"dimensionless.*mV"):
        sg.sigmoid(jnp.ones(2) * u.mV)


def test_instances_are_hashable_and_work_as_static_arguments():
    assert sg.Sigmoid(2.0) == sg.Sigmoid(2.0) and sg.Sigmoid(2.0) != sg.Sigmoid(3.0)
    assert sg.Sigmoid(1.0) != sg.Arctan(1.0)
    assert len({sg.Sigmoid(2.0), sg.Sigmoid(2.0), sg.ReluGrad()}) == 2
    assert repr(sg.ReluGrad()) == "ReluGrad(alpha=0.3, width=1.0)"
    traces = []

    def f(x, fn):
        traces.append(fn)
        return fn(x).sum()

    jf = jax.jit(jax.grad(f), static_argnums=1)
    x = jnp.array([0.1, -0.2])
    np.testing.assert_allclose(jf(x, sg.Sigmoid(4.0)), jax.grad(lambda x: sg.sigmoid(x, 4.0).sum())(x))
    jf(x, sg.Sigmoid(4.0))
    jf(x, sg.Sigmoid(2.0))
    assert len(traces) == 2


def test_surrogate_through_stateful_checkpoint_and_grad():
    w = brainx.ParamState(jnp.array([0.5, 1.5, -0.2]))
    v = brainx.HiddenState(jnp.zeros(3))

    @brainx.transform.checkpoint
    def step(x):
        v.value = 0.9 * v.value + w.value * x
        return sg.gaussian_grad(v.value - 0.5)

    def loss(xs):
        return sum(step(x).sum() for x in xs)

    xs = jnp.array([0.4, 0.3, 0.5])
    g = brainx.transform.grad(loss, grad_states=w)(xs)

    def ref(wv):
        vv, total = jnp.zeros(3), 0.0
        for x in xs:
            vv = 0.9 * vv + wv * x
            total = total + sg.gaussian_grad(vv - 0.5).sum()
        return total

    np.testing.assert_allclose(g, jax.grad(ref)(jnp.array([0.5, 1.5, -0.2])), rtol=1e-6)
    assert np.any(np.asarray(g) != 0)


def test_custom_surrogate_subclass():
    class Triangle(sg.Surrogate):
        _params = ("alpha",)

        def __init__(self, alpha=1.0):
            self.alpha = alpha

        @staticmethod
        def _grad(x, alpha):
            return jnp.maximum(alpha - alpha ** 2 * jnp.abs(x), 0.0)

    g = jax.vmap(jax.grad(Triangle(2.0)))(XS)
    np.testing.assert_allclose(g, np.maximum(2 - 4 * np.abs(XS), 0), atol=1e-6)
    with pytest.raises(NotImplementedError, match="only a gradient"):
        Triangle().surrogate_fun(XS)


def test_constructor_takes_params_by_position_or_name_with_defaults():
    assert sg.ReluGrad(0.5).width == 1.0 and sg.ReluGrad(width=2.0).alpha == 0.3
    assert sg.GaussianGrad(0.7, 0.4) == sg.GaussianGrad(alpha=0.4, sigma=0.7)
    with pytest.raises(TypeError, match=r"Sigmoid\(alpha=4\.0\)"):
        sg.Sigmoid(1.0, 2.0)
    with pytest.raises(TypeError, match="beta"):
        sg.Arctan(beta=1.0)

    class Bump(sg.Surrogate):
        _params = {"alpha": 2.0}

        @staticmethod
        def _grad(x, alpha):
            return alpha * jnp.exp(-x * x)

    assert repr(Bump()) == "Bump(alpha=2.0)"
    np.testing.assert_allclose(jax.grad(Bump(3.0))(0.5), 3.0 * np.exp(-0.25), rtol=1e-6)
