"""`transform.grad` basics against jax.grad of the explicit-state function."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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


def test_jacobians_of_a_tree_output_keep_the_output_structure():
    """jacrev/jacfwd/hessian of a tuple or dict output: output-major, as jax.jacrev returns it,
    with states and arguments arranged at each output leaf."""
    w = brainx.ParamState(jnp.array([1.0, 2.0]))
    h = brainx.HiddenState(jnp.zeros(2))

    def f(x, y):
        h.value = w.value * x
        return {"a": h.value * y[0], "b": (jnp.sum(w.value ** 2 * x) * y[1],)}

    def pure(w, x, y):
        return {"a": w * x * y[0], "b": (jnp.sum(w ** 2 * x) * y[1],)}

    x, y = jnp.array([3.0, 4.0]), jnp.array([0.5, -2.0])
    for ours, theirs in [(transform.jacrev, jax.jacrev), (transform.jacfwd, jax.jacfwd)]:
        want = theirs(pure, argnums=(0, 1, 2))(w.value, x, y)
        got = ours(f, grad_states={"w": w}, argnums=(0, 1))(x, y)
        assert jax.tree.structure(got) == jax.tree.structure(
            {"a": ({"w": 0}, (0, 0)), "b": (({"w": 0}, (0, 0)),)})
        for leaf in ("a", "b"):
            g = got[leaf] if leaf == "a" else got[leaf][0]
            r = want[leaf] if leaf == "a" else want[leaf][0]
            np.testing.assert_allclose(g[0]["w"], r[0], rtol=1e-6)
            np.testing.assert_allclose(g[1][0], r[1], rtol=1e-6)
            np.testing.assert_allclose(g[1][1], r[2], rtol=1e-6)
        # arguments only: exactly jax's layout
        got = ours(f, argnums=1)(x, y)
        want1 = theirs(pure, argnums=2)(w.value, x, y)
        assert jax.tree.structure(got) == jax.tree.structure(want1)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), got, want1)
        np.testing.assert_allclose(h.value, w.value * x)  # the written state holds its new value

    def g2(x):
        return jnp.sum(w.value * x ** 3), jnp.sum(w.value ** 2 * x)

    H = transform.hessian(g2, grad_states=w, argnums=0)(x)
    Href = jax.hessian(lambda w, x: (jnp.sum(w * x ** 3), jnp.sum(w ** 2 * x)),
                       argnums=(0, 1))(w.value, x)
    assert jax.tree.structure(H) == jax.tree.structure(Href)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), H, Href)


def test_bad_or_repeated_argnums_raise_before_any_state_changes():
    from brainx.errors import ArgnumsError

    w = brainx.ParamState(jnp.array([1.0, 2.0]))
    calls = brainx.State(jnp.zeros(()))

    def f(x, y):
        calls.value = calls.value + 1
        return jnp.sum(w.value * x * 10 + y ** 2)

    x, y = jnp.ones(2), jnp.ones(2)
    for bad in (0.5, True, "0", [0, 1.0]):
        with pytest.raises(ArgnumsError, match="argnums must be an int"):
            transform.grad(f, argnums=bad)
    for api in (transform.grad, transform.vector_grad, transform.jacrev, transform.jacfwd,
                transform.hessian):
        with pytest.raises(ValueError, match="names an argument twice"):
            api(f, argnums=(1, 1))
        with pytest.raises(ValueError, match="names the same argument twice"):
            api(f, grad_states=w, argnums=(0, -2))(x, y)  # -2 is 0 for two arguments
        with pytest.raises(TypeError, match="out of range"):  # also a TypeError, as in jax
            api(f, argnums=2)(x, y)
    with pytest.raises(ValueError, match="twice"):
        transform.vjp(f, x, y, argnums=(1, -1))
    assert float(calls.value) == 0.0 and not isinstance(calls.value, jax.core.Tracer)
    # negative argnums count from the end, as in jax.grad
    np.testing.assert_allclose(transform.grad(f, argnums=-2)(x, y),
                               jax.grad(lambda x, y: jnp.sum(w.value * x * 10 + y ** 2))(x, y))
    gw, gy = transform.grad(f, grad_states=w, argnums=-1)(x, y)
    np.testing.assert_allclose(gw, 10 * x)
    np.testing.assert_allclose(gy, 2 * y)


def test_gradient_transform_repr_names_its_configuration():
    w = brainx.ParamState(jnp.ones(2), name="w")

    def loss():
        return jnp.sum(w.value ** 2)

    text = repr(transform.GradientTransform(loss, jax.grad, grad_states={"p": w},
                                            return_value=True))
    assert text.startswith("GradientTransform(grad(loss)")
    assert "grad_states={'p': 'w'}" in text and "return_value=True" in text


def test_clear_errors_for_a_state_argument_and_a_missing_aux_leave_states_alone():
    w = brainx.ParamState(jnp.array([1.0, 2.0]), name="w")
    h = brainx.HiddenState(jnp.zeros(2))

    def loss(x):
        h.value = w.value * x
        return jnp.sum(h.value)

    with pytest.raises(TypeError, match=r"cannot be an instance of State .*name='w'.*give it in grad_states"):
        transform.grad(lambda s: jnp.sum(s.value))(w)
    with pytest.raises(TypeError, match=r"must return a pair \(value, aux\); it returned float32\[\]"):
        transform.grad(loss, grad_states=w, has_aux=True)(1.0)
    assert h.value.tolist() == [0.0, 0.0] and w.value.tolist() == [1.0, 2.0]
