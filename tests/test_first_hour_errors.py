"""Errors a newcomer meets first point at the fix (issue 33): a Python branch on a traced value
inside jit/checkpoint, grad without anything to differentiate, a module as grad_states."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn, transform
from brainx.errors import ArgnumsError


# -- a Python `if` on a traced value ------------------------------------------------------------

def _relu(x, training):
    return jnp.maximum(x, 0.0) if training else x


def test_jit_branch_on_a_traced_argument_keeps_jax_type_and_names_static_argnums():
    with pytest.raises(jax.errors.TracerBoolConversionError) as info:
        transform.jit(_relu)(jnp.array([-1.0, 2.0]), True)
    message = str(info.value)
    assert message.startswith("Attempted boolean conversion of traced array")   # JAX's text first
    assert "brainx: jit(_relu) traces its arguments (x, training)" in message
    assert "static_argnums=(i,)" in message and "static_argnames=('name',)" in message
    assert message.count("brainx: ") == 1
    # the fix the message names works, and gives the eager result
    fixed = transform.jit(_relu, static_argnames="training")
    x = jnp.array([-1.0, 2.0])
    np.testing.assert_array_equal(fixed(x, True), _relu(x, True))
    np.testing.assert_array_equal(fixed(x, False), _relu(x, False))


def test_jit_hint_lists_only_the_traced_arguments():
    def f(x, n, scale):
        return x * scale if x.sum() > n else x

    with pytest.raises(jax.errors.ConcretizationTypeError,
                       match=r"jit\(f\) traces its arguments \(x, scale\) and the values"):
        transform.jit(f, static_argnums=1)(jnp.ones(2), 1, 2.0)


def test_jit_branch_on_a_state_value_names_data_branching():
    flag = brainx.State(jnp.array(1.0))

    @transform.jit
    def step(x):
        return x + 1 if flag.value > 0 else x

    with pytest.raises(jax.errors.TracerBoolConversionError,
                       match=r"jnp\.where, brainx\.transform\.cond or brainx\.transform\.ifelse"):
        step(jnp.ones(2))
    assert float(flag.value) == 1.0                      # the state is unchanged


def _scale(x, mode):
    return x * 2.0 if mode == "double" else x


@pytest.mark.parametrize("call, which, fix", [
    (lambda f: f(jnp.ones(2), "double"), "argument 'mode' (position 1) is a str",
     "brainx.transform.jit(_scale, static_argnums=(1,)) (or static_argnames=('mode',))"),
    (lambda f: f(jnp.ones(2), mode="double"), "argument 'mode' is a str",
     "brainx.transform.jit(_scale, static_argnames=('mode',))"),
])
def test_jit_a_string_argument_names_it_and_how_to_make_it_static(call, which, fix):
    counter = brainx.State(jnp.zeros(()))

    def f(x, mode):
        counter.value = counter.value + 1
        return _scale(x, mode)
    f.__name__ = "_scale"

    with pytest.raises(TypeError) as info:                  # JAX's own type, its text first
        call(transform.jit(f))
    message = str(info.value)
    assert message.startswith("Error interpreting argument to")
    assert f"brainx: jit(_scale): {which}, which JAX cannot trace" in message
    assert fix in message and message.count("brainx: ") == 1
    assert float(counter.value) == 0.0                      # no state written, no tracer left
    # the fix the message names works, and gives the eager result
    fixed = transform.jit(f, static_argnames="mode")
    np.testing.assert_array_equal(fixed(jnp.ones(2), "double"), _scale(jnp.ones(2), "double"))
    assert float(counter.value) == 1.0


def test_jit_a_string_after_a_static_argument_counts_positions_among_all_arguments():
    def f(x, n, label):
        return x * n

    with pytest.raises(TypeError, match=r"argument 'label' \(position 2\) is a str.*"
                                        r"static_argnums=\(2,\)"):
        transform.jit(f, static_argnums=1)(jnp.ones(2), 3, "x")


def test_jit_integer_conversion_of_a_traced_argument_gets_the_hint():
    def total(x, n):
        return sum(x[i] for i in range(n))

    with pytest.raises(jax.errors.TracerIntegerConversionError, match=r"static_argnums"):
        transform.jit(total)(jnp.arange(4.0), 3)
    assert float(transform.jit(total, static_argnums=1)(jnp.arange(4.0), 3)) == 3.0


def test_checkpoint_branch_on_a_traced_argument_names_checkpoint_static_argnums():
    w = brainx.ParamState(jnp.array([1.0, -2.0]))

    def layer(x, training):
        y = w.value * x
        return jnp.maximum(y, 0.0) if training else y

    def loss(ckpt):
        return transform.grad(lambda x: jnp.sum(ckpt(x, True)), grad_states=w)(jnp.ones(2))

    with pytest.raises(jax.errors.TracerBoolConversionError) as info:
        loss(transform.checkpoint(layer))
    message = str(info.value)
    assert "brainx: checkpoint(layer) traces its arguments (x, training)" in message
    assert "brainx.transform.checkpoint(layer, static_argnums=(i,))" in message
    # the fix: the gradient of the checkpointed layer equals plain JAX's
    got = loss(transform.checkpoint(layer, static_argnums=1))
    want = jax.grad(lambda v: jnp.sum(jnp.maximum(v * jnp.ones(2), 0.0)))(w.value)
    np.testing.assert_allclose(got, want)


def test_checkpoint_inside_jit_adds_the_hint_once():
    inner = transform.checkpoint(_relu)

    @transform.jit
    def outer(x):
        return inner(x, x.sum() > 0)

    with pytest.raises(jax.errors.TracerBoolConversionError) as info:
        outer(jnp.ones(2))
    message = str(info.value)
    assert message.count("brainx: ") == 1
    assert "checkpoint(_relu)" in message                # the innermost transform names itself


# -- grad without anything to differentiate -----------------------------------------------------

def test_grad_without_grad_states_called_without_arguments_says_pass_grad_states():
    w = brainx.ParamState(jnp.array([1.0, 2.0]))
    with pytest.raises(ArgnumsError, match=r"grad\(loss\): nothing to differentiate") as info:
        def loss():
            return jnp.sum(w.value ** 2)
        transform.grad(loss)()
    assert "Pass grad_states=" in str(info.value)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    # the fix: the gradient of sum(w^2) is 2w
    np.testing.assert_allclose(transform.grad(loss, grad_states=w)(), [2.0, 4.0])


def test_an_explicit_out_of_range_argnums_keeps_its_own_message():
    with pytest.raises(ArgnumsError, match=r"argnums 1 is out of range"):
        transform.grad(lambda x: jnp.sum(x), argnums=1)(jnp.ones(2))


def test_jacrev_and_vector_grad_say_the_same():
    w = brainx.ParamState(jnp.ones(2))
    for make in (transform.vector_grad, transform.jacrev):
        with pytest.raises(ArgnumsError, match=r"nothing to differentiate(.|\n)*grad_states"):
            make(lambda: w.value * 2)()


# -- a module as grad_states --------------------------------------------------------------------

class _MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 4)
        self.l2 = nn.Linear(4, 1)
        self.h = brainx.HiddenState(jnp.zeros(4))

    def __call__(self, x):
        self.h.value = jnp.tanh(self.l1(x))
        return self.l2(self.h.value)


def test_grad_states_module_means_its_param_states():
    net = _MLP()
    x = jnp.array([0.5, -1.0, 2.0])

    def loss(x):
        return jnp.sum(net(x) ** 2)

    by_module = transform.grad(loss, grad_states=net)(x)
    params = net.states(brainx.ParamState)
    assert set(by_module) == set(params)                 # the ParamStates only, keyed by path
    assert not any(isinstance(s, brainx.HiddenState) for s in params.values())

    # against plain JAX on the same parameters
    values = {k: s.value for k, s in params.items()}

    def pure(vals):
        p1, p2 = vals[("l1", "weight")], vals[("l2", "weight")]
        h = jnp.tanh(x @ p1["weight"] + p1["bias"])
        return jnp.sum((h @ p2["weight"] + p2["bias"]) ** 2)

    want = jax.grad(pure)(values)
    for k in want:
        for leaf in want[k]:
            np.testing.assert_allclose(by_module[k][leaf], want[k][leaf], rtol=1e-6)
    # the hidden state was written with the primal value, as a plain call writes it
    np.testing.assert_allclose(net.h.value, jnp.tanh(x @ values[("l1", "weight")]["weight"]
                                                     + values[("l1", "weight")]["bias"]))


def test_grad_states_module_feeds_an_optimiser():
    net = _MLP()
    opt = brainx.optim.SGD(lr=0.1)
    opt.register_trainable_weights(net.states(brainx.ParamState))
    x = jnp.ones(3)
    before = float(jnp.sum(net(x) ** 2))
    for _ in range(3):
        opt.update(transform.grad(lambda x: jnp.sum(net(x) ** 2), grad_states=net)(x))
    assert float(jnp.sum(net(x) ** 2)) < before


def test_a_module_without_params_and_a_module_in_a_list_say_what_to_pass():
    class Cell(nn.Module):
        def __init__(self):
            super().__init__()
            self.v = brainx.HiddenState(jnp.ones(2))

    cell = Cell()
    with pytest.raises(ValueError, match=r"grad_states=Cell \(a module\) means its ParamStates, "
                                         r"and it has none"):
        transform.grad(lambda: jnp.sum(cell.v.value), grad_states=cell)
    net = _MLP()
    with pytest.raises(TypeError, match=r"in a container: pass the module itself, or its "
                                        r"module\.states\(brainx\.ParamState\)"):
        transform.grad(lambda x: jnp.sum(net(x)), grad_states=[net])
