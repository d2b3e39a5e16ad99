"""brainx's own objects through the pretty-repr protocol: states, snapshots, graph nodes,
modules, modes and parameter transforms print what brainstate 0.6.0 prints for the same
objects (its tests and docstrings give the texts)."""

import jax
import jax.numpy as jnp
import brainunit as u
import pytest

import brainx
from brainx.mixin import Batching, JointMode, Mode, Training
from brainx.util import repr_options


def test_state_value_first_then_metadata():
    assert repr(brainx.ParamState(jnp.zeros((2, 3)))) == "ParamState(f32[2,3])"
    assert repr(brainx.HiddenState(jnp.zeros(2, jnp.int32))) == "HiddenState(i32[2])"
    assert repr(brainx.HiddenState(jnp.zeros(3) * u.mV)) == "HiddenState(f32[3] mV)"
    assert repr(brainx.ShortTermState(jnp.asarray(1.5))) == "ShortTermState(f32[])"
    assert repr(brainx.ShortTermState(None)) == "ShortTermState(None)"
    assert repr(brainx.ShortTermState("text")) == "ShortTermState('text')"
    value = {"weight": jnp.zeros((2, 3)), "bias": jnp.zeros(3), "a-b": jnp.zeros(1)}
    assert repr(brainx.ParamState(value)) == "ParamState{'a-b': f32[1], bias: f32[3], weight: f32[2,3]}"
    assert repr(brainx.ParamState({"w": jnp.zeros(2)}, name="p", tag="t")) == \
        "ParamState({'w': f32[2]}, name='p', tag={'t'})"
    s = brainx.State(jnp.ones(2), name="a", tag=["z", "b"], note="x")
    assert repr(s) == str(s) == "State(f32[2], name='a', tag={'b', 'z'}, note='x')"


def test_state_repr_inside_a_trace_and_without_read_hooks():
    texts = []
    jax.jit(lambda x: texts.append(repr(brainx.ShortTermState(x))) or x)(jnp.zeros(4))
    assert texts == ["ShortTermState(f32[4])"]
    w = brainx.ParamState(jnp.zeros(3))
    reads = []
    w.register_hook("read", lambda ctx: reads.append(ctx))
    repr(w), repr(brainx.graph.Node.__new__(brainx.graph.Node))
    assert reads == []


def test_a_state_subclass_shows_an_attribute_once_it_is_set():
    class DiffEq(brainx.HiddenState):  # braincell's DiffEqSingleState keeps a derivative
        def __init__(self, value):
            super().__init__(value)
            self.derivative = None

    st = DiffEq(jnp.zeros(3) * u.mV)
    assert repr(st) == "DiffEq(f32[3] mV)"
    st.derivative = jnp.ones(3) * (u.mV / u.ms)
    assert repr(st) == "DiffEq(f32[3] mV, derivative=f32[3] mV / ms)"


def test_snapshot():
    ref = brainx.ParamState(jnp.zeros(3), name="w").to_state_ref()
    assert repr(ref) == "TreefyState(type=ParamState, value=f32[3], name='w')"


def test_graph_node_summary_footer_and_references():
    class Net(brainx.graph.Node):
        def __init__(self):
            self.w = brainx.ParamState(jnp.zeros((2, 3)))
            self.b = brainx.ParamState({"x": jnp.zeros(4, jnp.float16)})
            self.h = brainx.HiddenState(jnp.zeros(5, jnp.int32))
            self.same = self.w
            self.none = None

    s = Net().__pretty_repr_summary__()
    assert (s.n_params, s.param_bytes, s.n_state_values, s.state_bytes) == (10, 32, 5, 20)
    assert repr(Net()) == ("Net(\n  w=ParamState(f32[2,3]),\n  b=ParamState{x: f16[4]},\n"
                           "  h=HiddenState(i32[5]),\n  same=<shared: .w>,\n"
                           ")  # 10 params (32 B), 5 state values (20 B)")
    with repr_options(summary=False):
        assert repr(Net()).endswith("same=<shared: .w>,\n)")

    class Root(brainx.graph.Node):
        def __init__(self):
            self.a = brainx.graph.Node()
            self.b = self.a
            self.me = self
    assert repr(Root()) == "Root(a=Node(), b=<shared: .a>, me=<cycle: .>)"  # no recursion


def test_module_repr():
    model = brainx.nn.Sequential(brainx.nn.Linear(3, 4), brainx.nn.ReLU(), brainx.nn.Linear(4, 2))
    assert repr(model) == (
        "Sequential(\n"
        "  (3,) -> (2,),\n"
        "  layers=[\n"
        "    [0] Linear((3,) -> (4,), weight=ParamState{bias: f32[4], weight: f32[3,4]}),"
        "  # 16 params\n"
        "    [1] ReLU(),\n"
        "    [2] Linear((4,) -> (2,), weight=ParamState{bias: f32[2], weight: f32[4,2]}),"
        "  # 10 params\n"
        "  ],\n"
        ")  # 26 params (104 B)")
    with repr_options(max_depth=0):
        assert repr(brainx.nn.Sequential(brainx.nn.Linear(3, 4), brainx.nn.ReLU())) == \
            "Sequential((3,) -> (4,), layers=[Linear(...), ReLU(...)])  # 16 params (64 B)"
    assert repr(brainx.nn.Module(name="enc")) == "Module(name='enc')"
    assert repr(brainx.nn.Module()) == "Module()"
    m = brainx.nn.Module()
    assert m.__pretty_repr_item__("_in_size", (3,)) == ("in_size", (3,))
    assert m.__pretty_repr_item__("w_mask", None) is None

    class OnlyIn(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.in_size = (3,)
    assert repr(OnlyIn()) == "OnlyIn(in_size=(3,))"
    with repr_options(color=True):
        assert "\x1b[" not in repr(model)


def test_modes_and_param_transforms():
    assert repr(Training()) == "Training" and repr(Mode()) == "Mode"
    assert repr(Batching(64, 1)) == "Batching(batch_size=64, batch_axis=1)"
    joint = JointMode(Training(), Batching(8))
    assert repr(joint) == str(joint) == "JointMode(Training, Batching(batch_size=8, batch_axis=0))"
    nn = brainx.nn
    assert repr(nn.SoftplusT(0.0)) == "SoftplusT(lower=0.0)"
    assert repr(nn.SigmoidT(0.0, 1.0)) == "SigmoidT(lower=0.0, upper=1.0)"
    assert repr(nn.Param(jnp.ones(2), t=nn.SoftplusT(0.0))) == \
        "Param(t=SoftplusT(lower=0.0), fit=True, val=ParamState(f32[2]))  # 2 params (8 B)"
    param = nn.Param(jnp.ones(1))
    assert param.__pretty_repr_item__("precompute", None) is None
    assert param.__pretty_repr_item__("_cached", (1, 2)) is None
    assert param.__pretty_repr_item__("_name", "foo") == ("name", "foo")


@pytest.mark.parametrize("short, text", [(True, "f32[3]"), (False, "float32[3]")])
def test_options_reach_object_reprs(short, text):
    with repr_options(short_dtypes=short):
        assert repr(brainx.ParamState(jnp.zeros(3))) == f"ParamState({text})"
