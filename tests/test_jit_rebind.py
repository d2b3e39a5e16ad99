"""A jitted step keeps its compiled function when a model's states are made anew.

brainstate programs reset a model with ``init_all_states`` before each step,
and a model's ``init_state`` makes new ``HiddenState`` objects: the step then
touches other states than the ones it was compiled for. The states are
inputs of the compiled function, not part of it, so when the new trace is
the old one (an equal jaxpr over states in the same roles) ``jit`` runs the
same compiled function on the new states instead of compiling again
(``JitEntry.revalidate``). Each case here checks the result against the same
step compiled afresh on every call, and counts the compiled functions.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn
from brainx import transform


class Leaky(nn.Module):
    def __init__(self, n=4, shape=None):
        super().__init__()
        self.w = brainx.ParamState(jnp.linspace(-1.0, 1.0, n * n).reshape(n, n))
        self.n = n
        self.shape = shape
        self.decay = 0.9

    def init_state(self, batch_size=None, **kwargs):
        self.v = brainx.HiddenState(jnp.zeros(self.shape or (self.n,)))

    def update(self, x):
        self.v.value = self.v.value * self.decay + jnp.tanh(x @ self.w.value)
        return self.v.value.sum()


def _train(make_step, net, calls, x):
    """``calls`` steps, the model's states made anew before each; the losses and states."""
    losses, hidden = [], []
    step = make_step(net)
    for _ in range(calls):
        nn.init_all_states(net)
        hidden.append(net.v)
        losses.append(float(step(x)))
    return losses, hidden, step


def _grad_step(net, **jit_kwargs):
    params = net.states(brainx.ParamState)

    def loss(x):
        total = 0.0
        for _ in range(3):
            total = total + net(x)
        return total

    def step(x):
        grads, value = transform.grad(loss, params, return_value=True)(x)
        for k, s in params.items():
            s.value = s.value - 0.01 * grads[k]
        return value

    return transform.jit(step, **jit_kwargs)


def _compiled(step):
    """The jax.jit functions of a jitted step's entries, and how many programs each holds."""
    return [(e.jitted, e.jitted._cache_size()) for e in step._entries.values()]


def _stepped_once(net):
    """``(step, x, its jax.jit function)`` after one call of a new grad step on ``net``."""
    x = jnp.ones(4)
    step = _grad_step(net)
    nn.init_all_states(net)
    step(x)
    return step, x, _compiled(step)[0][0]


def _fresh_each_call(net, calls, x):
    """The reference: a new ``transform.jit`` for every call (nothing is reused)."""
    losses = []
    for _ in range(calls):
        nn.init_all_states(net)
        losses.append(float(_grad_step(net)(x)))
    return losses


def test_new_states_run_the_same_compiled_step():
    x = jnp.linspace(0.0, 1.0, 4)
    net = Leaky()
    losses, hidden, step = _train(_grad_step, net, 5, x)
    [(jitted, programs)] = _compiled(step)
    assert programs == 1
    assert len({id(s) for s in hidden}) == 5
    # the last step wrote the last model's state, and each earlier one its own, once
    expected = _fresh_each_call(Leaky(), 5, x)
    np.testing.assert_allclose(losses, expected, rtol=1e-6)
    v = np.zeros(4)
    w = np.asarray(Leaky().w.value)
    for _ in range(3):
        v = v * 0.9 + np.tanh(np.asarray(x) @ w)
    np.testing.assert_allclose(np.asarray(hidden[0].value), v, rtol=1e-5)
    for s in hidden:  # every model ran 3 steps from zero (weights differ between calls)
        assert np.all(np.asarray(s.value) != 0.0)


def test_the_rebound_step_writes_the_new_states_only():
    x = jnp.ones(4)
    net = Leaky()
    step = _grad_step(net)
    nn.init_all_states(net)
    step(x)
    old = net.v
    before = np.asarray(old.value)
    nn.init_all_states(net)
    step(x)
    np.testing.assert_array_equal(np.asarray(old.value), before)  # the old state is left alone
    assert net.v is not old and np.all(np.asarray(net.v.value) != 0.0)
    assert [p for _, p in _compiled(step)] == [1]


def test_new_states_of_another_shape_compile_again():
    net = Leaky()
    step, x, first = _stepped_once(net)
    net.shape = (2, 4)  # a batch: the trace's types differ
    nn.init_all_states(net)
    out = step(x)
    assert _compiled(step)[0][0] is not first
    assert net.v.value.shape == (2, 4) and out.shape == ()


def test_states_that_swap_roles_run_by_position():
    a = brainx.State(jnp.ones(3))
    b = brainx.State(jnp.zeros(3))
    a_first = [True]

    def step(x):
        first, second = (a, b) if a_first[0] else (b, a)
        first.value = first.value + x
        return second.value.sum()

    f = transform.jit(step)
    f(jnp.ones(3))
    compiled = _compiled(f)[0][0]
    a_first[0] = False
    brainx.state.structure_changed()
    out = f(jnp.ones(3))  # the same jaxpr, b now in a's place: the same compiled function
    assert _compiled(f)[0][0] is compiled
    np.testing.assert_array_equal(np.asarray(b.value), np.ones(3))
    np.testing.assert_array_equal(np.asarray(a.value), 2 * np.ones(3))
    assert float(out) == 6.0


def test_another_computation_on_new_states_compiles_again():
    net = Leaky()
    step, x, first = _stepped_once(net)
    net.w.value = net.w.value[:, ::-1]  # the same types: the trace is equal
    nn.init_all_states(net)
    step(x)
    assert _compiled(step)[0][0] is first
    net.decay = 0.5  # a constant of the trace: another jaxpr
    nn.init_all_states(net)
    twin = Leaky()
    twin.decay, twin.w.value = 0.5, net.w.value
    nn.init_all_states(twin)
    out = step(x)
    assert _compiled(step)[0][0] is not first
    np.testing.assert_allclose(float(out), float(_grad_step(twin)(x)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(net.v.value), np.asarray(twin.v.value), rtol=1e-6)


def test_donated_states_are_not_rebound():
    x = jnp.ones(4)
    net = Leaky()
    step = _grad_step(net, donate_states=True)
    jitted, losses = [], []
    for _ in range(3):
        nn.init_all_states(net)
        losses.append(float(step(x)))
        jitted.append(next(iter(step._entries.values())).jitted)
    np.testing.assert_allclose(losses, _fresh_each_call(Leaky(), 3, x), rtol=1e-6)
    assert len({id(j) for j in jitted}) == 3  # donation is decided per state: compiled anew


def test_states_with_a_sharding_are_not_rebound():
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    made = []

    class Placed(Leaky):
        def init_state(self, batch_size=None, **kwargs):
            self.v = brainx.HiddenState(jnp.zeros(self.n), sharding=sharding)
            made.append(self.v)

    net = Placed()
    step, x, first = _stepped_once(net)
    nn.init_all_states(net)
    step(x)
    assert _compiled(step)[0][0] is not first
    assert len(made) == 2 and np.all(np.asarray(made[1].value) != 0.0)


@pytest.mark.counts_traces
@pytest.mark.parametrize("calls", [2, 4])
def test_rebinding_keeps_the_fast_path(calls):
    x = jnp.ones(4)
    net = Leaky()
    step = _grad_step(net)
    for _ in range(calls):
        nn.init_all_states(net)
        step(x)
    entry = next(iter(step._entries.values()))
    assert entry.fast is not None and step._dispatch is entry.fast
    v = net.v
    before = np.asarray(v.value)
    step(x)  # the fast path, on the current states
    assert np.all(np.asarray(v.value) != before)
