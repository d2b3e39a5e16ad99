"""named_call / named_scope, StateFinder, eval_shape(return_state_shapes=), jit(name=), ProgressBar options."""

import io

import jax
import jax.numpy as jnp
import pytest

import brainx
from brainx.transform import (
    ProgressBar, StateFinder, eval_shape, for_loop, jit, named_call, named_scope,
)


def _stacks(jaxpr):
    return {str(e.source_info.name_stack) for e in jaxpr.eqns}


def test_named_call_and_named_scope_label_operations_and_keep_states():
    h = brainx.State(jnp.zeros(()))

    @named_call
    def bump(x):
        h.value = h.value + x
        return jnp.sin(x)

    jaxpr, states = brainx.transform.make_jaxpr(bump)(1.0)  # the name survives the replay
    assert _stacks(jaxpr) == {"bump"} and states == (h,)
    assert float(jit(bump)(2.0)) == pytest.approx(float(jnp.sin(2.0)))
    assert float(h.value) == 2.0
    labelled = named_call(lambda x: x * 2, name="double")
    assert _stacks(jax.make_jaxpr(labelled)(1.0)) == {"double"}

    class Layer:
        @named_scope("dense", static_argnums=0)
        def __call__(self, x):
            return x + 1.0

    assert _stacks(jax.make_jaxpr(Layer())(1.0)) == {"dense"}
    assert Layer.__call__.static_argnums == 0
    with pytest.raises(TypeError, match="name must be a string"):
        named_scope(3)
    with pytest.raises(TypeError, match="static_argnums"):
        named_scope("x", static_argnums=["a"])


def test_state_finder_usage_filters_and_keys():
    w = brainx.ParamState(jnp.ones(()), name="w")
    b = brainx.ParamState(jnp.zeros(()), name="b", tag="bias")
    h = brainx.HiddenState(jnp.zeros(()), name="h")

    def step(x):
        h.value = w.value * x + b.value
        return h.value

    assert StateFinder(step)(2.0) == {0: w, 1: b, 2: h}  # first-touch order
    assert StateFinder(step, usage="read", return_type="tuple")(2.0) == (w, b)
    both = StateFinder(step, brainx.ParamState, usage="both", return_type="list")(2.0)
    assert both == {"read": [w, b], "write": []}
    assert StateFinder(step, "bias", return_type="list")(2.0) == [b]
    assert StateFinder(step, key_fn=lambda i, s: "same")(2.0) == {"same": w, "b": b, "h": h}
    assert float(h.value) == 0.0  # traced, not run
    with pytest.raises(ValueError, match="usage"):
        StateFinder(step, usage="some")


def test_eval_shape_state_shapes_and_abstract_models():
    h = brainx.HiddenState(jnp.zeros(2))
    m = brainx.State({"a": jnp.zeros(3, jnp.int32), "tag": "x"})

    def step(x):
        h.value = h.value + x
        return h.value.sum() + m.value["a"][0]

    want = jax.eval_shape(lambda x: (jnp.zeros(2) + x).sum() + 0, jnp.ones((3, 1)))
    states, out = eval_shape(step, jnp.ones((3, 1)), return_state_shapes=True)
    assert out == want
    assert states[h] == jax.ShapeDtypeStruct((3, 2), jnp.float32)
    assert states[m] == {"a": jax.ShapeDtypeStruct((3,), jnp.int32), "tag": "x"}
    assert h.value.shape == (2,)
    net = eval_shape(lambda: brainx.nn.Linear(3, 4))
    assert isinstance(net, brainx.nn.Linear)
    assert net.weight.value["weight"] == jax.ShapeDtypeStruct((3, 4), jnp.float32)


def test_jit_name():
    h = brainx.State(jnp.zeros(()))

    @jit(name="integrate")
    def step(x):
        h.value = h.value + x
        return h.value

    assert float(step(1.0)) == 1.0 and float(step(2.0)) == 3.0
    assert "integrate" in step.lower(1.0).as_text().splitlines()[0]
    assert step.stateful.name == "jit(integrate)" and step.__name__ == "step"
    with pytest.raises(TypeError, match="name must be a string"):
        jit(lambda x: x, name=1)


def test_progress_bar_arguments_as_brainstate():
    bar = ProgressBar(freq=3, mininterval=5, miniters=2, file=io.StringIO())
    assert bar.print_freq == 3 and bar.print_count is None and set(bar.kwargs) == {"file"}
    assert ProgressBar(count=4).print_count == 4
    with pytest.raises(ValueError, match="positive int"):
        ProgressBar(freq=0)
    with pytest.raises(ValueError, match="not both"):
        ProgressBar(freq=1, count=2)
    with pytest.raises(ValueError, match="pair"):
        ProgressBar(desc=("a", len, 3))
    with pytest.raises(TypeError, match="format string"):
        ProgressBar(desc=(1, len))
    with pytest.raises(TypeError, match="function"):
        ProgressBar(desc=("{i}", 2))
    out = io.StringIO()  # a freq larger than the loop is fine (brainstate raises)
    ys = for_loop(lambda x: x + 1, jnp.arange(3.0), pbar=ProgressBar(freq=10, file=out))
    assert ys.tolist() == [1.0, 2.0, 3.0] and "3/3" in out.getvalue()
