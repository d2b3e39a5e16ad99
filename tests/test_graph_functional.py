"""The functional pattern: split a model, rebuild it inside a raw JAX transform, split it again.

States that ``treefy_merge`` creates inside ``jax.jit`` / ``jax.grad`` hold that trace's
tracers and belong to it: they may be read and written there (brainstate and flax.nnx allow
the same). A state that existed before the raw transform is still refused a tracer.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import graph


class Count(brainx.State):
    pass


class Model(brainx.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = brainx.ParamState(jnp.array([1.0, -0.5]))
        self.calls = Count(jnp.array(0))

    def __call__(self, x):
        self.calls.value = self.calls.value + 1
        return jnp.tanh(self.w.value * x).sum()


def test_merge_inside_jit_and_grad_trains_like_plain_jax():
    model = Model()
    gdef, params, counts = graph.treefy_split(model, brainx.ParamState, Count)

    @jax.jit
    def step(params, counts, x):
        def loss(p):
            m = graph.treefy_merge(gdef, p, counts)
            return m(x) ** 2, graph.treefy_states(m, Count)

        (value, counts), grads = jax.value_and_grad(loss, has_aux=True)(params)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), counts, value

    def plain_loss(w, x):
        return jnp.tanh(w * x).sum() ** 2

    w, x = jnp.array([1.0, -0.5]), jnp.array([0.3, 2.0])
    for _ in range(3):
        params, counts, value = step(params, counts, x)
        expected = plain_loss(w, x)
        w = w - 0.1 * jax.grad(plain_loss)(w, x)
        np.testing.assert_allclose(value, expected, rtol=1e-6)
    np.testing.assert_allclose(jax.tree.leaves(params)[0], w, rtol=1e-6)
    assert int(jax.tree.leaves(counts)[0]) == 3
    np.testing.assert_array_equal(model.w.value, jnp.array([1.0, -0.5]))   # untouched
    assert int(model.calls.value) == 0


def test_a_state_from_outside_or_another_trace_is_still_refused():
    # a raw jit may lend itself the state while it runs (see test_lent_states.py); the
    # state still holds jit's tracer when it ends: the next read refuses it and puts 0 back
    model = Model()
    jax.jit(lambda x: model(x))(jnp.ones(2))
    with pytest.raises(brainx.TracerLeakError, match="has ended"):
        model.calls.value
    assert int(model.calls.value) == 0

    def outer(x):
        s = brainx.State(x)                 # born in jit's trace

        def inner(y):
            s.value = y                     # a grad tracer would escape jax.grad
            return y.sum()

        g = jax.grad(inner)(x)
        return g + s.value                  # read after jax.grad ended

    with pytest.raises(brainx.TracerLeakError):
        jax.jit(outer)(jnp.ones(2))


def test_brainx_transforms_write_a_state_born_in_the_enclosing_raw_trace():
    def h(x):
        s = brainx.State(x)
        brainx.transform.jit(lambda: setattr(s, "value", s.value * 3.0))()
        brainx.transform.for_loop(lambda i: setattr(s, "value", s.value + i), jnp.arange(3.0))
        return s.value

    np.testing.assert_allclose(jax.jit(h)(jnp.ones(2)), 3.0 * jnp.ones(2) + 3.0)


def test_a_generator_seeded_inside_raw_jit_draws_there_like_one_given_the_key():
    from brainx.random import RandomState
    drawn = jax.jit(lambda x: RandomState(5).normal(size=3) + x)(0.0)
    np.testing.assert_array_equal(drawn, RandomState(5).normal(size=3))
