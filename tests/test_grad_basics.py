"""`transform.grad` basics against jax.grad of the explicit-state function."""

import jax
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import transform


def test_grad_states_and_argnums_layout():
    w = brainx.ParamState(jnp.array([1.0, 2.0]))
    b = brainx.ParamState(jnp.array(0.5))
    h = brainx.HiddenState(jnp.zeros(2))

    def loss(x, y):
        h.value = jnp.tanh(w.value * x + b.value)
        return jnp.sum(h.value * y), h.value

    def pure(w, b, x, y):
        h = jnp.tanh(w * x + b)
        return jnp.sum(h * y), h

    x, y = jnp.array([0.3, -0.2]), jnp.array([1.0, 3.0])
    (gs, (gx, gy)), value, aux = transform.grad(
        loss, grad_states={"w": w, "b": b}, argnums=(0, 1), has_aux=True, return_value=True)(x, y)
    pg = jax.grad(pure, argnums=(0, 1, 2, 3), has_aux=True)(w.value, b.value, x, y)[0]
    for got, want in zip((gs["w"], gs["b"], gx, gy), pg):
        assert np.allclose(got, want, atol=1e-6)
    assert np.allclose(value, pure(w.value, b.value, x, y)[0])
    assert np.allclose(aux, h.value) and np.allclose(h.value, jnp.tanh(w.value * x + b.value))


def test_default_is_argnum_zero_and_python_objects_ride_along():
    w = brainx.ParamState(jnp.array([1.0, 2.0]))

    def loss(x, mode):
        scale = 2.0 if mode == "double" else 1.0
        return scale * jnp.sum(w.value * x ** 2)

    g = transform.grad(loss)(jnp.array([1.0, 1.0]), "double")
    assert np.allclose(g, 4 * w.value)
    gw = transform.grad(loss, grad_states=w)(jnp.array([1.0, 1.0]), "single")
    assert np.allclose(gw, jnp.ones(2))


def test_python_control_flow_on_non_differentiated_arguments():
    """As under jax.grad, arguments that are not differentiated stay concrete."""
    w = brainx.ParamState(jnp.array([1.0, 2.0]))
    h = brainx.HiddenState(jnp.zeros(2))

    def loss(x, n_steps, double):
        for _ in range(n_steps):          # a Python int
            h.value = h.value + w.value * x
        total = jnp.sum(h.value ** 2)
        return 2 * total if double else total   # a Python bool

    def pure(w, x, n_steps, double):
        h = jnp.zeros(2)
        for _ in range(n_steps):
            h = h + w * x
        total = jnp.sum(h ** 2)
        return 2 * total if double else total

    for n_steps, double in [(3, True), (2, False)]:
        h.value = jnp.zeros(2)
        g = transform.grad(loss, grad_states=w)(0.5, n_steps, double)
        assert np.allclose(g, jax.grad(pure)(w.value, 0.5, n_steps, double))
        h.value = jnp.zeros(2)
        gx = transform.grad(loss, argnums=0)(jnp.float32(0.5), n_steps, double)
        assert np.allclose(gx, jax.grad(pure, argnums=1)(w.value, 0.5, n_steps, double))
