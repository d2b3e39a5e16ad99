"""fwd_grad, GradientTransform(transform_params=, debug_nan=) against jax.grad and the estimator's definition."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import brainx
from brainx.transform import GradientTransform, fwd_grad, grad, jit, vector_grad


def loss(w, x):
    return jnp.sum(jnp.tanh(w * x) ** 2)


def test_fwd_grad_is_v_times_the_directional_derivative_with_the_documented_directions():
    x = jnp.array([0.3, -0.7, 1.1])
    g = fwd_grad(lambda x: loss(2.0, x), key=3)(x)
    v = jr.normal(jr.split(jr.PRNGKey(3), 1)[0], x.shape)
    exact = jax.grad(lambda x: loss(2.0, x))(x)
    np.testing.assert_allclose(g, v * jnp.dot(exact, v), rtol=1e-5)
    np.testing.assert_allclose(fwd_grad(lambda x: loss(2.0, x), key=3)(x), g)  # same key


def test_fwd_grad_averages_to_the_gradient_for_states_and_arguments():
    w = brainx.ParamState(jnp.array([0.5, -1.0]))
    calls = brainx.State(jnp.zeros(()))

    def f(x):
        calls.value = calls.value + 1
        return loss(w.value, x), x.sum()

    x = jnp.array([1.0, 2.0])
    (gw, gx), value, aux = fwd_grad(f, grad_states=w, argnums=0, has_aux=True,
                                    return_value=True, tangent_size=40000, key=0)(x)
    ref_w, ref_x = jax.grad(loss, argnums=(0, 1))(w.value, x)
    np.testing.assert_allclose(gw, ref_w, atol=0.05)
    np.testing.assert_allclose(gx, ref_x, atol=0.05)
    assert float(value) == pytest.approx(float(loss(w.value, x)))
    assert float(aux) == 3.0 and float(calls.value) == 1.0  # written once, primal value


def test_fwd_grad_key_none_draws_from_the_default_generator_and_clip():
    brainx.random.seed(1)
    f = fwd_grad(lambda x: jnp.sum(x ** 2))
    a, b = f(jnp.ones(3)), f(jnp.ones(3))
    assert not np.allclose(a, b)  # the generator advanced
    clipped = fwd_grad(lambda x: jnp.sum(100 * x), drct_der_clip=0.5, key=0)(jnp.ones(2))
    v = jr.normal(jr.split(jr.PRNGKey(0), 1)[0], (2,))
    np.testing.assert_allclose(clipped, v * jnp.clip(100 * v.sum(), -0.5, 0.5), rtol=1e-6)
    assert jit(fwd_grad(lambda x: jnp.sum(x ** 2), key=0))(jnp.ones(2)).shape == (2,)


def test_fwd_grad_refuses_non_scalar_outputs_and_integer_inputs():
    with pytest.raises(ValueError, match="must return a scalar"):
        fwd_grad(lambda x: x ** 2, key=0)(jnp.ones(2))
    n = brainx.State(jnp.arange(3))
    with pytest.raises(TypeError, match="float or complex"):
        fwd_grad(lambda: jnp.sum(n.value) * 1.0, grad_states=n, key=0)()
    with pytest.raises(ValueError, match="tangent_size"):
        fwd_grad(lambda x: x, tangent_size=0)(1.0)


def test_gradient_transform_takes_brainstate_arguments():
    w = brainx.ParamState(jnp.array([1.0 + 1.0j]))
    g = GradientTransform(lambda: jnp.sum(w.value ** 2).real, jax.grad, w, None, False, False,
                          {"holomorphic": False})
    np.testing.assert_allclose(g(), jax.grad(lambda z: jnp.sum(z ** 2).real)(w.value))
    assert g.target is not None and g.transform is jax.grad
    with pytest.raises(TypeError, match="bogus"):  # the params reach jax.grad
        GradientTransform(lambda x: x, jax.grad, transform_params={"bogus": 2})(1.0)
    with pytest.raises(TypeError, match="must be a dict"):
        GradientTransform(lambda x: x, jax.grad, transform_params=[1])


def test_debug_nan_in_gradients():
    x = jnp.array([0.0, 4.0])
    with pytest.raises(RuntimeError, match="the gradients of vector_grad") as info:
        vector_grad(jnp.sqrt, debug_nan=True)(x)
    assert "1 Inf" in str(info.value)
    np.testing.assert_allclose(vector_grad(jnp.sqrt, debug_nan=True)(jnp.array([1.0, 4.0])),
                               [0.5, 0.25])
    w = brainx.ParamState(jnp.array([0.0]))
    f = jit(grad(lambda: jnp.sum(jnp.sqrt(w.value)), grad_states=w, debug_nan=True))
    with pytest.raises(Exception, match="Inf"):
        f()
    assert w.value.tolist() == [0.0]


def test_fwd_grad_takes_a_one_element_seed_array_and_names_inexact_dtypes():
    w = brainx.ParamState(jnp.array([1.0, 2.0]))
    f = lambda: jnp.sum(w.value ** 2)  # noqa: E731
    np.testing.assert_allclose(fwd_grad(f, grad_states=w, key=np.array([42]))(),
                               fwd_grad(f, grad_states=w, key=42)())
    with pytest.raises(TypeError, match="inexact"):
        fwd_grad(lambda x: jnp.sum(x.astype(jnp.float32)), key=0)(jnp.array([2, 3]))
