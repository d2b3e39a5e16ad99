"""What brainstate's client libraries (brainpy-state, braintrace) rely on, from brainstate's docs.

Each test states the documented behaviour and compares against the plain computation.
"""

from typing import TypeVar, Union, get_args

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.mixin import ParamDescriber

T = TypeVar("T")


def test_param_describer_of_a_type_variable_is_an_annotation():
    # brainpy-state annotates parameters as Union[ParamDescriber[T], T]
    annotation = Union[ParamDescriber[T], T]
    first, second = get_args(annotation)
    assert second is T and get_args(first) == (T,)
    # with a class it is still a describer, usable in isinstance (brainstate's meaning)
    described = brainx.nn.Linear.desc(out_size=4)
    assert isinstance(described, ParamDescriber[brainx.nn.Module])
    assert not isinstance(described, ParamDescriber[brainx.nn.LIF])


def test_right_shift_chains_module_calls():
    rnn, out = brainx.nn.Linear(3, 4), brainx.nn.Linear(4, 2)
    for x in (jnp.ones((2, 3)), np.ones((2, 3), np.float32)):   # JAX and NumPy inputs
        np.testing.assert_allclose(x >> rnn >> out, out(rnn(jnp.asarray(x))), rtol=1e-6)


def test_rnn_cell_is_a_bare_base_class_to_subclass():
    class Leaky(brainx.nn.RNNCell):                # braintrace's pattern: __init__(name=None)
        def __init__(self, n, name=None):
            super().__init__(name=name)
            self.n = n

        def init_state(self, batch_size=None, **kwargs):
            self.h = brainx.HiddenState(jnp.zeros(self.n))

        def update(self, x):
            self.h.value = 0.5 * self.h.value + x
            return self.h.value

    cell = brainx.nn.init_all_states(Leaky(3, name="leaky"))
    hs = [cell(jnp.ones(3)) for _ in range(3)]
    np.testing.assert_allclose(hs[-1], np.full(3, 1.75))
    assert isinstance(brainx.nn.GRUCell(2, 3), brainx.nn.RNNCell)


def test_linear_takes_a_callable_weight_mask():
    mask = lambda shape: 1.0 - jnp.eye(*shape)    # no self-connections
    layer = brainx.nn.Linear(3, 3, w_init=jnp.full((3, 3), 2.0), b_init=None, w_mask=mask)
    x = jnp.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(layer(x), x @ (jnp.full((3, 3), 2.0) * (1 - jnp.eye(3))))


def test_a_state_subclass_may_also_derive_from_a_class_with_a_value_slot():
    class Array:                                  # brainpy.math.Array's layout
        __slots__ = ("_value",)

    class Variable(brainx.State, Array):          # brainpy's `Variable(State, Array)`
        pass

    v = Variable(jnp.array([1.0, 2.0]), name="v")

    @brainx.transform.jit
    def step(x):
        v.value = v.value * 2.0 + x
        return v.value.sum()

    out = step(jnp.ones(2))
    np.testing.assert_allclose(v.value, [3.0, 5.0])
    np.testing.assert_allclose(out, 8.0)
    assert v.name == "v" and "_value" not in v.to_state_ref().get_metadata()


def test_a_subclass_keeping_its_value_in_a_slot_works_through_brainstate_s_protocol():
    from brainx.state import record_state_value_read, record_state_value_write

    class Array:
        __slots__ = ("_value",)

    class Variable(brainx.State, Array):          # brainpy's protocol, as its Variable does
        @property
        def value(self):
            record_state_value_read(self)
            return self._read_value()

        @value.setter
        def value(self, v):
            self._check_value_tree(v)
            record_state_value_write(self)
            self._write_value(v)

    v = Variable(jnp.array([1.0, 2.0]))
    w = brainx.ParamState(jnp.array([0.5, 0.5]))

    @brainx.transform.jit
    def step(x):
        v.value = v.value * w.value + x
        return v.value.sum()

    np.testing.assert_allclose(step(jnp.ones(2)), (np.array([1.0, 2.0]) * 0.5 + 1).sum())
    np.testing.assert_allclose(v.value, [1.5, 2.0])
    g = brainx.transform.grad(lambda: (v.value * w.value).sum(), grad_states=w)()
    np.testing.assert_allclose(g, v.value)        # the value read inside the trace is traced
    with pytest.raises(brainx.StateTypeError):
        with brainx.state.check_state_value_tree():
            v.value = jnp.ones(3)


def test_record_state_value_write_marks_a_state_written_without_changing_it():
    """braincell's DiffEqState reports a new derivative through record_state_value_write; its
    Runge-Kutta step asserts the state is listed as written by the StateTraceStack around."""
    from brainx.state import record_state_value_write

    class DiffEqState(brainx.HiddenState):
        derivative = None

        def set_derivative(self, d):
            record_state_value_write(self)
            self.derivative = d

    x = DiffEqState(jnp.array([1.0, 2.0]))
    tau = brainx.ParamState(jnp.array([2.0, 4.0]))

    def derivative_is_written():
        with brainx.StateTraceStack() as trace:
            x.set_derivative(-x.value / tau.value)
        return dict(zip(trace.states, trace.been_writen))

    written = derivative_is_written()
    assert written == {x: True, tau: False}
    np.testing.assert_allclose(x.derivative, [-0.5, -0.5])
    np.testing.assert_allclose(x.value, [1.0, 2.0])            # nothing was assigned

    @brainx.transform.jit
    def euler_step(dt):
        assert derivative_is_written()[x]
        x.value = x.value + dt * x.derivative
        return x.value

    np.testing.assert_allclose(euler_step(0.1), [0.95, 1.95])
    np.testing.assert_allclose(euler_step(0.1), [0.95 * 0.95, 1.95 - 0.1 * 1.95 / 4.0], rtol=1e-6)

    @brainx.transform.jit
    def only_marks():                                          # an output, unchanged
        record_state_value_write(x)
        return x.value.sum()

    before = np.asarray(x.value)
    np.testing.assert_allclose(only_marks(), before.sum(), rtol=1e-6)
    np.testing.assert_allclose(x.value, before)
    record_state_value_write(x)                                # no scope open: nothing to do
    np.testing.assert_allclose(x.value, before)


def test_transforms_given_brainstate_s_missing_return_a_decorator():
    from brainx.typing import Missing

    h = brainx.HiddenState(jnp.zeros(2))
    for transform in (brainx.transform.jit, brainx.transform.checkpoint):
        decorate = transform(Missing())                     # brainpy's cls_jit passes this on
        step = decorate(lambda x: h.value + x)
        np.testing.assert_allclose(step(jnp.ones(2)), np.ones(2))


def test_jaxpr_to_python_code_reads_like_the_jaxpr():
    import jax
    closed = jax.make_jaxpr(lambda x, y: jnp.exp(-x) * y)(1.0, 2.0)
    code = brainx.transform.jaxpr_to_python_code(closed, "decay")
    assert code.splitlines() == ["def decay(a, b):", "    c = -a", "    d = jax.lax.exp(c)",
                                 "    e = d * b", "    return e"]
    namespace = {"jax": jax}
    exec(code, namespace)
    assert float(namespace["decay"](0.5, 2.0)) == pytest.approx(float(jnp.exp(-0.5) * 2.0))


def test_signed_weight_linear_keeps_signs_and_its_gradient_is_jax_s():
    import jax
    w0 = jnp.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]])
    sign = jnp.array([[1.0, -1.0], [1.0, 1.0], [-1.0, -1.0]])
    layer = brainx.nn.SignedWLinear(3, 2, w_init=w0, w_sign=sign)
    x = jnp.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(layer(x), x @ (np.abs(w0) * sign), rtol=1e-6)
    loss = lambda: jnp.sum(layer(x) ** 2)
    g = brainx.transform.grad(loss, grad_states=layer.weight)()
    expected = jax.grad(lambda w: jnp.sum((x @ (jnp.abs(w) * sign)) ** 2))(w0)
    np.testing.assert_allclose(g, expected, rtol=1e-6)


def test_weight_standardization_and_the_scaled_ws_layer_against_numpy():
    w = np.random.RandomState(0).randn(4, 3).astype(np.float32)
    mean, var = w.mean(axis=0), w.var(axis=0)
    expected = (w - mean) / np.sqrt(np.maximum(var * 4, 1e-4))
    np.testing.assert_allclose(brainx.nn.weight_standardization(jnp.asarray(w)), expected,
                               rtol=1e-5, atol=1e-6)
    layer = brainx.nn.ScaledWSLinear(4, 3, w_init=jnp.asarray(w), b_init=jnp.full(3, 0.5))
    x = jnp.arange(4.0)
    np.testing.assert_allclose(layer(x), np.arange(4.0) @ expected + 0.5, rtol=1e-5)
    assert set(layer.weight.value) == {"weight", "bias", "gain"}


def test_lora_adds_a_low_rank_path_to_its_base_and_trains_only_it():
    import jax
    base = brainx.nn.Linear(3, 2, w_init=jnp.ones((3, 2)), b_init=None)
    adapter = brainx.nn.LoRA(3, 1, 2, base_module=base)
    a, b = adapter.weight.value["lora_a"], adapter.weight.value["lora_b"]
    x = jnp.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(adapter(x), x @ a @ b + x @ jnp.ones((3, 2)), rtol=1e-6)
    g = brainx.transform.grad(lambda: jnp.sum(adapter(x) ** 2), grad_states=adapter.weight)()
    ref = jax.grad(lambda p: jnp.sum((x @ p["lora_a"] @ p["lora_b"] + x @ jnp.ones((3, 2))) ** 2))(
        {"lora_a": a, "lora_b": b})
    for k in ("lora_a", "lora_b"):
        np.testing.assert_allclose(g[k], ref[k], rtol=1e-5)


def test_vmap_module_maps_the_module_over_lanes_with_batched_states():
    class Acc(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.h = brainx.HiddenState(jnp.zeros((4, 2)))     # a row per lane
            self.w = brainx.ParamState(jnp.array([1.0, -1.0]))   # shared

        def update(self, x):
            self.h.value = self.h.value + x * self.w.value
            return self.h.value.sum()

    acc = Acc()
    batched = brainx.nn.Vmap(acc, vmap_states=brainx.HiddenState)
    xs = jnp.arange(4.0)
    batched(xs)
    out = batched(xs)
    np.testing.assert_allclose(acc.h.value, 2 * xs[:, None] * np.array([1.0, -1.0]))
    np.testing.assert_allclose(out, np.zeros(4))
    assert isinstance(batched, brainx.nn.Module)


def test_environ_context_runs_the_layer_under_its_settings_and_restores_them():
    class Reads(brainx.nn.Module):
        def update(self, x):
            return x * brainx.environ.get_dt(), brainx.environ.get("fit")

    wrapped = brainx.nn.EnvironContext(Reads(), dt=0.5, fit=False)
    with brainx.environ.context(dt=0.1, fit=True):
        y, fit = wrapped(jnp.ones(2))
        np.testing.assert_allclose(y, [0.5, 0.5])
        assert fit is False
        y, fit = wrapped(jnp.ones(2), context={"dt": 2.0})       # added for this call
        np.testing.assert_allclose(y, [2.0, 2.0])
        wrapped.add_context(fit=True)
        assert wrapped(jnp.ones(2))[1] is True
        # under jit: the settings inside the wrapper are the ones the trace uses
        y, _ = brainx.transform.jit(wrapped)(jnp.ones(2))
        np.testing.assert_allclose(y, [0.5, 0.5])
        assert brainx.environ.get_dt() == 0.1 and brainx.environ.get("fit") is True
    with pytest.raises(TypeError, match="EnvironContext wraps a brainx.nn.Module"):
        brainx.nn.EnvironContext(lambda x: x)


def test_state_paths_are_brainstate_tuples_and_still_found_by_dotted_string():
    # braintrace compares key sets with brainstate's tuples: {('w',)}, {('layers', 0, 'weight')}
    net = brainx.nn.Sequential(brainx.nn.Linear(2, 3), brainx.nn.Linear(3, 1))
    params = net.states(brainx.ParamState)
    assert set(params.keys()) == {("layers", 0, "weight"), ("layers", 1, "weight")}
    assert ("layers", 1, "weight") in {k: 1 for k in params}          # a plain dict, by tuple
    assert params["layers.1.weight"] is params["layers", 1, "weight"] is net.layers[1].weight
    assert "layers.0.weight" in params and params.get("layers.9.weight") is None
    assert [str(k) for k in params] == ["layers.0.weight", "layers.1.weight"]

    class Cell(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = brainx.ParamState(jnp.ones(2))

    assert set(Cell().states().keys()) == {("w",)}


def test_grads_of_a_states_mapping_are_a_plain_dict_with_its_keys():
    # braintrace adds grads of `model.states(ParamState)` to a dict of zeros in a scan
    net = brainx.nn.Sequential(brainx.nn.Linear(2, 2), brainx.nn.Linear(2, 1))
    weights = net.states(brainx.ParamState)
    x = jnp.array([[0.5, -1.0]])

    def loss():
        return jnp.sum(net(x) ** 2)

    grads = brainx.transform.grad(loss, weights)()
    assert type(grads) is dict and set(grads) == set(weights.keys())
    zeros = {k: jax.tree.map(jnp.zeros_like, s.value) for k, s in weights.items()}
    total = jax.tree.map(lambda a, b: a + b, zeros, grads)       # the same tree
    plain = jax.grad(lambda vals: jnp.sum(
        ((x @ vals[0]["weight"] + vals[0]["bias"]) @ vals[1]["weight"] + vals[1]["bias"]) ** 2))(
        [net.layers[0].weight.value, net.layers[1].weight.value])
    for i in range(2):
        for name in ("weight", "bias"):
            np.testing.assert_allclose(total["layers", i, "weight"][name], plain[i][name],
                                       rtol=1e-6)


@pytest.mark.parametrize("op, truth", [
    ("add", lambda a, b: a + b), ("and", lambda a, b: a & b),
    ("iand", lambda a, b: (~a) & b), ("or", lambda a, b: a | b)])
def test_spike_bitwise_matches_the_boolean_operation_on_spikes(op, truth):
    a = np.array([0, 0, 1, 1], dtype=bool)
    b = np.array([0, 1, 0, 1], dtype=bool)
    got = brainx.nn.SpikeBitwise(op)(jnp.asarray(a, jnp.float32), jnp.asarray(b))
    np.testing.assert_array_equal(got, truth(a.astype(int), b.astype(int)) if op == "add"
                                  else truth(a, b).astype(np.float32))
    with pytest.raises(ValueError, match="op must be one of"):
        brainx.nn.SpikeBitwise("xor")
