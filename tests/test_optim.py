"""brainx.optim: SGD and Adam against hand-written updates; units; errors change nothing."""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import ParamState
from brainx.optim import SGD, Adam, OptimState


def _grads(seed, shapes):
    rs = np.random.RandomState(seed)
    return {k: jnp.asarray(rs.randn(*s).astype(np.float32)) for k, s in shapes.items()}


def test_adam_matches_the_formula_over_several_steps():
    shapes = {"a": (3,), "b": (2, 2)}
    params = {k: ParamState(jnp.ones(s)) for k, s in shapes.items()}
    opt = Adam(lr=0.05, beta1=0.8, beta2=0.9, eps=1e-6, weight_decay=0.01)
    opt.register_trainable_weights(params)
    ref = {k: np.ones(s) for k, s in shapes.items()}
    m = {k: np.zeros(s) for k, s in shapes.items()}
    v = {k: np.zeros(s) for k, s in shapes.items()}
    for t in range(1, 6):
        g = _grads(t, shapes)
        opt.update(g)
        for k in shapes:
            gk = np.asarray(g[k], np.float64) + 0.01 * ref[k]
            m[k] = 0.8 * m[k] + 0.2 * gk
            v[k] = 0.9 * v[k] + 0.1 * gk ** 2
            ref[k] = ref[k] - 0.05 * (m[k] / (1 - 0.8 ** t)) / (np.sqrt(v[k] / (1 - 0.9 ** t)) + 1e-6)
    for k in shapes:
        np.testing.assert_allclose(params[k].value, ref[k], rtol=1e-5, atol=1e-6)
    assert int(opt.step_count.value) == 5


def test_sgd_with_momentum_and_a_schedule():
    w = ParamState(jnp.array([1.0, -2.0]))
    opt = SGD(lr=lambda step: 0.1 / (1 + step), momentum=0.5)
    opt.register_trainable_weights({"w": w})
    ref, vel = np.array([1.0, -2.0]), np.zeros(2)
    for t in range(4):
        g = np.array([0.5, 1.0]) * (t + 1)
        opt.update({"w": jnp.asarray(g, jnp.float32)})
        vel = 0.5 * vel + g
        ref = ref - 0.1 / (1 + t) * vel
    np.testing.assert_allclose(w.value, ref, rtol=1e-6)


def test_units_are_kept_and_update_compiles_with_the_gradient():
    layer = brainx.nn.Linear(3, 2, w_init=jnp.ones((3, 2)) * u.mA)
    params = layer.states(ParamState)
    opt = Adam(lr=0.1)
    opt.register_trainable_weights(params)

    def loss(x):
        return (layer(x).to_decimal(u.mA) ** 2).mean()

    @brainx.transform.jit
    def train(x):
        grads, value = brainx.transform.grad(loss, grad_states=params, return_value=True)(x)
        opt.update(grads)
        return value

    x = jnp.ones((4, 3))
    first = float(train(x))
    for _ in range(20):
        last = float(train(x))
    assert last < first
    W = layer.weight.value["weight"]
    assert W.unit == u.mA and layer.weight.value["bias"].unit == u.mA
    assert int(opt.step_count.value) == 21
    assert all(isinstance(s, OptimState) for s in opt.states().values())
    assert "slots.weight.m" in opt.states() and "weight" not in opt.states()


def test_bad_gradients_are_refused_and_change_nothing():
    w = ParamState(jnp.ones(3), name="w")
    b = ParamState({"x": jnp.zeros(2)}, name="b")
    opt = Adam(lr=0.1)
    opt.register_trainable_weights({"w": w, "b": b})
    before = [np.asarray(w.value), np.asarray(b.value["x"]), int(opt.step_count.value)]
    slots_before = jax.tree.map(np.asarray, [s.value for s in opt.states().values()])

    with pytest.raises(KeyError, match="unregistered weights \\['c'\\]"):
        opt.update({"w": jnp.ones(3), "c": jnp.ones(1)})
    with pytest.raises(ValueError, match=r"'b' does not match.*name='b'"):
        opt.update({"w": jnp.ones(3), "b": {"x": jnp.ones(5)}})   # w would be valid
    with pytest.raises(TypeError, match="dict of gradients"):
        opt.update([jnp.ones(3)])
    assert np.array_equal(w.value, before[0]) and np.array_equal(b.value["x"], before[1])
    assert int(opt.step_count.value) == before[2]
    after = jax.tree.map(np.asarray, [s.value for s in opt.states().values()])
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(after),
                                                    jax.tree.leaves(slots_before)))


def test_register_errors():
    opt = Adam()
    with pytest.raises(TypeError, match="'w' is .*not a State"):
        opt.register_trainable_weights({"w": jnp.ones(2)})
    w1, w2 = ParamState(jnp.ones(2)), ParamState(jnp.ones(2))
    opt.register_trainable_weights({"w": w1})
    opt.register_trainable_weights({"w": w1})     # the same state again: fine
    with pytest.raises(ValueError, match="already registered"):
        opt.register_trainable_weights({"w": w2})
    opt.register_trainable_weights([w2])           # a sequence: keys are positions
    assert list(opt.param_states) == ["w", "0"]
