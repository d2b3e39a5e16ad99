"""transform.grad inside a brainx trace runs the function once, under the JAX transform.

Inside ``transform.jit`` (or a loop's trace) the gradient's function is traced
either way, so it is not discovered first and replayed: JAX traces it
directly, the grad states reading as its primals. Each case is checked
against ``jax.grad`` of the same computation written with explicit state, and
the user's Python is counted.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform as bt


def test_grad_in_jit_runs_the_function_once_and_matches_jax_grad():
    w = brainx.ParamState(jnp.array([1.0, -2.0, 0.5]))
    h = brainx.HiddenState(jnp.zeros(3))
    calls, seen = [], []

    def loss(x):
        calls.append(1)
        seen.append(type(w.value).__name__)      # what the function computes with
        h.value = jnp.tanh(w.value * x + h.value)
        return jnp.sum(h.value ** 2)

    step = bt.jit(lambda x: bt.grad(loss, grad_states=w, return_value=True)(x))
    x = jnp.array([0.3, 0.2, -1.0])
    grads, value = step(x)
    assert len(calls) == 1                                    # one trace, no replay of it

    def pure(w, h, x):
        h = jnp.tanh(w * x + h)
        return jnp.sum(h ** 2), h

    (want_value, want_h), want_g = jax.value_and_grad(pure, has_aux=True)(
        jnp.array([1.0, -2.0, 0.5]), jnp.zeros(3), x)
    raw_seen = []

    def raw_loss(w, h, x):
        raw_seen.append(type(w).__name__)
        return pure(w, h, x)

    jax.jit(jax.grad(raw_loss, has_aux=True))(jnp.ones(3), jnp.zeros(3), x)
    assert seen == raw_seen          # traced by the differentiation itself, as under jax.grad
    np.testing.assert_allclose(grads, want_g, rtol=1e-6)
    np.testing.assert_allclose(value, want_value, rtol=1e-6)
    np.testing.assert_allclose(h.value, want_h, rtol=1e-6)   # the write inside grad landed

    step(x)                                                   # cached: no trace at all
    assert len(calls) == 1


def test_grad_of_arguments_and_states_with_aux_in_a_loop():
    w = brainx.ParamState(jnp.array(2.0))
    count = brainx.ShortTermState(jnp.array(0))

    def loss(a, b):
        count.value = count.value + 1
        return w.value * a * b, {"ab": a * b}

    def body(carry, x):
        (gw, ga), aux = bt.grad(loss, grad_states=w, argnums=0, has_aux=True)(x, 3.0)
        return carry + gw + ga, aux["ab"]

    total, ab = bt.scan(body, jnp.array(0.0), jnp.arange(4.0))
    xs = np.arange(4.0)
    np.testing.assert_allclose(total, np.sum(xs * 3.0 + 2.0 * 3.0), rtol=1e-6)
    np.testing.assert_allclose(ab, xs * 3.0, rtol=1e-6)
    assert int(count.value) == 4


def test_hessian_and_jacfwd_in_jit_match_jax():
    w = brainx.ParamState(jnp.array([0.5, -1.0]))

    def f(x):
        return jnp.sum(jnp.sin(w.value * x) * x)

    x = jnp.array([0.7, 1.3])
    hess = bt.jit(lambda x: bt.hessian(f, argnums=0)(x))(x)
    jac = bt.jit(lambda x: bt.jacfwd(lambda x: jnp.sin(w.value * x), argnums=0)(x))(x)
    pure = lambda x: jnp.sum(jnp.sin(jnp.array([0.5, -1.0]) * x) * x)
    np.testing.assert_allclose(hess, jax.hessian(pure)(x), rtol=1e-5)
    np.testing.assert_allclose(jac, jax.jacfwd(lambda x: jnp.sin(jnp.array([0.5, -1.0]) * x))(x),
                               rtol=1e-6)


def test_second_order_grad_nested_in_jit():
    w = brainx.ParamState(jnp.array(1.5))

    def f(x):
        return w.value * x ** 3

    inner = bt.grad(f, argnums=0)
    outer = bt.jit(lambda x: bt.grad(lambda x: inner(x), argnums=0)(x))
    np.testing.assert_allclose(outer(2.0), 6 * 1.5 * 2.0, rtol=1e-6)


def test_a_container_changed_in_place_inside_grad_in_jit_is_written_back_whole():
    w = brainx.ParamState(jnp.array(1.0))
    memo = brainx.ShortTermState({"last": jnp.zeros(()), "n": jnp.zeros((), jnp.int32)})

    def loss(x):
        y = w.value * x
        memo.value["last"] = y                              # changed in place, not assigned
        return y ** 2

    g = bt.jit(lambda x: bt.grad(loss, grad_states=w)(x))(3.0)
    np.testing.assert_allclose(g, 2 * 3.0 * 3.0, rtol=1e-6)
    np.testing.assert_allclose(memo.value["last"], 3.0)
    assert isinstance(memo.value["last"], jax.Array)        # no tracer was left in the dict
    assert int(memo.value["n"]) == 0


def test_a_grad_state_the_function_never_reads_is_refused_inside_jit_with_states_unchanged():
    w = brainx.ParamState(jnp.array(1.0))
    unused = brainx.ParamState(jnp.array(5.0))
    h = brainx.HiddenState(jnp.array(0.0))

    def loss(x):
        h.value = w.value * x
        return h.value

    with pytest.raises(ValueError, match="never reads"):
        bt.jit(lambda x: bt.grad(loss, grad_states=[w, unused])(x))(2.0)
    assert float(h.value) == 0.0 and float(w.value) == 1.0
    g = bt.jit(lambda x: bt.grad(loss, grad_states=[w, unused], check_states=False)(x))(2.0)
    np.testing.assert_allclose(g[0], 2.0)
    np.testing.assert_allclose(g[1], 0.0)


def test_an_error_inside_grad_in_jit_leaves_every_state_as_it_was():
    w = brainx.ParamState(jnp.array(1.0))
    h = brainx.HiddenState(jnp.array(0.0))

    def loss(x):
        h.value = w.value * x
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        bt.jit(lambda x: bt.grad(loss, grad_states=w)(x))(2.0)
    assert isinstance(h.value, jax.Array) and float(h.value) == 0.0


def test_a_state_argument_is_refused_inside_jit():
    w = brainx.ParamState(jnp.array(1.0))
    with pytest.raises(brainx.errors.StateTypeError, match="cannot be an instance of State"):
        bt.jit(lambda: bt.grad(lambda s: s.value ** 2, argnums=0)(w))()


def test_a_state_holding_a_string_differentiates_inside_jit():
    w = brainx.ParamState({"w": jnp.array(2.0), "kind": "weight"})

    def loss(x):
        return w.value["w"] * x

    kinds = []

    def step(x):
        g = bt.grad(loss, grad_states=w)(x)
        kinds.append(g["kind"])                   # the string rides along in the gradient
        return g["w"]

    np.testing.assert_allclose(bt.jit(step)(4.0), 4.0)
    assert kinds == ["weight"] and w.value["kind"] == "weight"


def test_a_custom_vjp_forward_rule_that_writes_falls_back_to_discovery():
    # JAX runs a custom_vjp forward rule at the level around the differentiation; its write is
    # lent (brainx.state.lending), which only the discovery trace sees in order
    h = brainx.HiddenState(jnp.zeros(2))
    calls = []

    @jax.custom_vjp
    def cell(x):
        return jnp.tanh(x + h.value)

    def cell_fwd(x):
        y = jnp.tanh(x + h.value)
        h.value = y
        return y, y

    cell.defvjp(cell_fwd, lambda y, g: (g * (1 - y ** 2),))

    def loss(x):
        calls.append(1)
        return cell(x).sum()

    g = bt.jit(lambda x: bt.grad(loss)(x))(jnp.array([0.5, -0.5]))
    np.testing.assert_allclose(g, 1 - np.tanh([0.5, -0.5]) ** 2, rtol=1e-6)
    np.testing.assert_array_equal(h.value, np.zeros(2))
    assert len(calls) == 2                        # the direct run, then the discovery way


def test_a_custom_vjp_forward_rule_that_reads_a_state_gives_the_right_gradient():
    # the forward rule runs at the level around the differentiation (and JAX may cache its
    # trace): such a read sends the call the discovery way, where the state is an input
    w = brainx.ParamState(jnp.array([2.0, -1.0]))

    @jax.custom_vjp
    def scaled(x):
        return w.value * x

    def scaled_fwd(x):
        return w.value * x, w.value

    scaled.defvjp(scaled_fwd, lambda wv, g: (g * wv,))
    step = bt.jit(lambda x: bt.grad(lambda x: jnp.sum(scaled(x) ** 2))(x))
    x = jnp.array([0.5, 3.0])
    want = jax.grad(lambda x: jnp.sum((jnp.array([2.0, -1.0]) * x) ** 2))(x)
    np.testing.assert_allclose(step(x), want, rtol=1e-6)
    w.value = jnp.array([1.0, 1.0])
    step2 = bt.jit(lambda x: bt.grad(lambda x: jnp.sum(scaled(x) ** 2))(x))
    np.testing.assert_allclose(step2(x), 2 * x, rtol=1e-6)          # the new value, not a stale one


def test_random_draws_inside_grad_in_jit_advance_the_key_once_and_match_the_pure_gradient():
    brainx.random.seed(3)
    w = brainx.ParamState(jnp.array([1.0, 2.0, 3.0]))

    def loss(x):
        noise = brainx.random.normal(size=(3,))
        return jnp.sum((w.value * x + noise) ** 2)

    key_before = brainx.random.get_key()
    g = bt.jit(lambda x: bt.grad(loss, grad_states=w)(x))(jnp.ones(3))
    key_after = brainx.random.get_key()
    assert not np.array_equal(jax.random.key_data(key_before), jax.random.key_data(key_after))

    brainx.random.set_key(key_before)                      # the same draw, eagerly
    noise = brainx.random.normal(size=(3,))
    np.testing.assert_array_equal(jax.random.key_data(brainx.random.get_key()),
                                  jax.random.key_data(key_after))
    want = jax.grad(lambda w: jnp.sum((w * jnp.ones(3) + noise) ** 2))(jnp.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(g, want, rtol=1e-6)
