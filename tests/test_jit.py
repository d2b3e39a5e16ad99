"""`transform.jit` against plain `jax.jit` with explicit state passing."""

import gc

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import brainx
from brainx import transform


def _close(a, b):
    return jax.tree.all(jax.tree.map(lambda x, y: np.allclose(x, y, rtol=1e-5, atol=1e-6), a, b))


def test_matches_explicit_state_passing_over_several_calls():
    w = brainx.ParamState(jnp.array([0.5, -1.0, 2.0]), name="w")
    h = brainx.HiddenState(jnp.zeros(3), name="h")
    n = brainx.State(jnp.zeros((), jnp.int32), name="n")

    @transform.jit
    def step(x):
        h.value = jnp.tanh(0.9 * h.value + w.value * x)
        n.value = n.value + 1
        return h.value.sum()

    @jax.jit
    def pure(w, h, n, x):
        h = jnp.tanh(0.9 * h + w * x)
        return h.sum(), h, n + 1

    ph, pn = jnp.zeros(3), jnp.zeros((), jnp.int32)
    for t in range(5):
        x = jnp.float32(t) / 3
        out = step(x)
        pout, ph, pn = pure(w.value, ph, pn, x)
        assert _close(out, pout)
        assert _close(h.value, ph) and int(n.value) == int(pn)
    assert np.array_equal(w.value, jnp.array([0.5, -1.0, 2.0]))  # read-only state untouched


def test_only_written_states_are_outputs():
    w = brainx.ParamState(jnp.ones(2))
    h = brainx.HiddenState(jnp.zeros(2))

    def step(x):
        h.value = h.value + w.value * x

    jaxpr, states = transform.make_jaxpr(step, return_only_write=True)(1.0)
    assert states == (h, w)
    assert len(jaxpr.in_avals) == 3 and len(jaxpr.out_avals) == 1
    everything, _ = transform.make_jaxpr(step)(1.0)      # brainstate's default: every state
    assert len(everything.out_avals) == 2
    sig = transform.StatefulFunction(step).signature((1.0,), {})
    assert sig.write_states == (h,) and sig.read_only_states == (w,)


def test_states_holding_pytrees_and_quantities():
    v = brainx.HiddenState(jnp.full(3, -65.0) * u.mV, name="V")
    p = brainx.State({"a": jnp.ones(2), "b": (jnp.zeros(()),)})

    @transform.jit
    def step(i):
        v.value = v.value + i * u.mV
        p.value = {"a": p.value["a"] * 2, "b": (p.value["b"][0] + 1,)}
        return v.value.mean()

    out = step(jnp.ones(3))
    assert isinstance(out, u.Quantity) and out.unit == u.mV
    assert np.allclose(v.value.to_decimal(u.mV), -64.0)
    assert np.allclose(p.value["a"], 2.0) and float(p.value["b"][0]) == 1.0


@pytest.mark.counts_traces
def test_dispatch_from_cache_without_retracing():
    traces = []
    h = brainx.HiddenState(jnp.zeros(2))

    @transform.jit
    def step(x):
        traces.append(1)
        h.value = h.value + x
        return h.value

    for _ in range(5):
        step(jnp.ones(2))
    # one trace (it finds the states and is what jax.jit compiles), then cached dispatch
    assert len(traces) == 1
    assert np.allclose(h.value, 5.0)


@pytest.mark.parametrize("change", ["shape", "dtype", "tree"])
def test_recompiles_when_a_state_changes_type(change):
    traces = []
    s = brainx.State(jnp.zeros(2))

    @transform.jit
    def step():
        traces.append(1)
        s.value = jax.tree.map(lambda v: v + 1, s.value)

    step()
    n = len(traces)
    if change == "shape":
        s.value = jnp.zeros(3)
    elif change == "dtype":
        s.value = jnp.zeros(2, jnp.int32)
    else:
        s.value = (jnp.zeros(2), jnp.zeros(2))
    step()
    assert len(traces) > n
    leaves = jax.tree.leaves(s.value)
    assert all(np.array_equal(l, np.ones_like(l)) for l in leaves)
    if change == "dtype":
        assert s.value.dtype == jnp.int32


def test_static_argnums_positional_and_static_argnames_keyword():
    h = brainx.HiddenState(jnp.zeros(()))
    traces = []

    @transform.jit(static_argnums=1, static_argnames="mode")
    def step(x, scale, mode="add"):
        traces.append((scale, mode))
        h.value = h.value + x * scale if mode == "add" else h.value - x * scale
        return h.value

    step(1.0, 2)
    step(1.0, 2)
    step(1.0, 3)
    step(1.0, 3, mode="sub")
    assert float(h.value) == 2 + 2 + 3 - 3
    assert sorted(set(traces)) == [(2, "add"), (3, "add"), (3, "sub")]


@pytest.mark.parametrize("option", [dict(static_argnums=1), dict(static_argnames="flag")])
def test_static_argument_by_position_or_keyword(option):
    traces = []

    @transform.jit(**option)
    def f(x, flag):
        traces.append(flag)
        return x + 1 if flag else x - 1

    assert float(f(1.0, True)) == 2.0
    assert float(f(1.0, flag=True)) == 2.0
    assert float(f(1.0, flag=False)) == 0.0
    assert float(f(1.0, False)) == 0.0
    assert set(traces) == {True, False}


def test_negative_static_argnums_resolved_against_the_signature():
    @transform.jit(static_argnums=-1)
    def f(x, flag):
        return x + 1 if flag else x - 1

    assert float(f(1.0, True)) == 2.0 and float(f(1.0, False)) == 0.0


def test_new_states_after_reinitialisation_are_found():
    """A Module attribute rebound to a new State: jit looks for its states again."""
    class Net(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.h = brainx.HiddenState(jnp.zeros(2))

        def init(self):
            self.h = brainx.HiddenState(jnp.full(2, 10.0))

    net = Net()

    @transform.jit
    def step():
        net.h.value = net.h.value + 1
        return net.h.value

    step()
    old = net.h
    net.init()
    assert np.allclose(step(), 11.0)
    assert np.allclose(net.h.value, 11.0) and np.allclose(old.value, 1.0)


def test_states_swapped_on_a_module_are_found():
    """`net.cur = net.buf_b` creates no state; the Module notices the swap."""
    class Net(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.buf_a = brainx.State(jnp.zeros(()))
            self.buf_b = brainx.State(jnp.zeros(()))
            self.cur = self.buf_a

    net = Net()

    @transform.jit
    def step(x):
        net.cur.value = net.cur.value + x

    step(1.0)
    net.cur = net.buf_b
    step(10.0)
    assert float(net.buf_a.value) == 1.0 and float(net.buf_b.value) == 10.0


def test_plain_object_rebound_to_a_new_state_is_found_when_the_old_one_dies():
    """The jit entry holds its states weakly: a state that died makes it trace again."""
    class Net:
        def __init__(self):
            self.h = brainx.HiddenState(jnp.zeros(2))

    net = Net()

    @transform.jit
    def step():
        net.h.value = net.h.value + 1
        return net.h.value

    step()
    net.h = brainx.HiddenState(jnp.full(2, 10.0))  # the old state is garbage now
    gc.collect()
    assert np.allclose(step(), 11.0)


@pytest.mark.counts_traces
def test_creating_unrelated_states_does_not_retrace():
    traces = []
    h = brainx.HiddenState(jnp.zeros(2))

    @transform.jit
    def step(x):
        traces.append(1)
        h.value = h.value + x

    keep = []
    for _ in range(5):
        keep.append(brainx.State(jnp.zeros(3)))
        step(jnp.ones(2))
    assert len(traces) == 1
    assert np.allclose(h.value, 5.0)


def test_lower_and_compile():
    h = brainx.HiddenState(jnp.zeros(4))

    @transform.jit
    def step(x):
        h.value = h.value + x
        return h.value.sum()

    lowered = step.lower(jnp.ones(4))
    assert "stablehlo" in lowered.as_text() or "func" in lowered.as_text()
    compiled = lowered.compile()
    assert compiled.memory_analysis() is not None
    assert float(compiled(jnp.ones(4))) == 4.0
    assert float(compiled(jnp.ones(4))) == 8.0
    assert np.allclose(h.value, 2.0)
    assert step.eval_shape(jnp.ones(4)).shape == ()
    assert np.allclose(h.value, 2.0)


def test_donate_argnums():
    h = brainx.HiddenState(jnp.zeros(3))

    @transform.jit(donate_argnums=0)
    def step(buf):
        h.value = h.value + buf
        return buf * 2

    out = step(jnp.ones(3))
    assert np.allclose(out, 2.0) and np.allclose(h.value, 1.0)


def test_nested_jit_and_grad_inside_jit():
    w = brainx.ParamState(jnp.array([1.0, 2.0]))
    h = brainx.HiddenState(jnp.zeros(2))

    @transform.jit
    def inner(x):
        h.value = h.value + w.value * x
        return jnp.sum(h.value ** 2)

    @transform.jit
    def outer(x):
        g = transform.grad(inner, grad_states=w)(x)
        inner(x)
        return g

    g = outer(1.0)
    # first inner call: h = w, loss = sum(w^2) -> grad 2w; then h = 2w
    assert np.allclose(g, 2 * jnp.array([1.0, 2.0]))
    assert np.allclose(h.value, 2 * jnp.array([1.0, 2.0]))


def test_method_decorator_binds_each_instance():
    class Counter:
        def __init__(self, start):
            self.n = brainx.State(jnp.asarray(start, jnp.float32))

        @transform.jit(static_argnums=1)
        def add(self, k):
            self.n.value = self.n.value + k
            return self.n.value

    a, b = Counter(0), Counter(100)
    a.add(1), a.add(1), b.add(5)
    assert float(a.n.value) == 2.0 and float(b.n.value) == 105.0


def test_disable_jit_runs_eagerly():
    h = brainx.HiddenState(jnp.zeros(()))
    seen = []

    @transform.jit
    def step(x):
        seen.append(type(x))
        h.value = h.value + x

    with jax.disable_jit():
        step(jnp.ones(()))
    assert float(h.value) == 1.0 and not issubclass(seen[-1], jax.core.Tracer)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(-3, 3, width=32), min_size=1, max_size=6),
       st.integers(1, 4))
def test_property_jit_equals_eager(xs, n_states):
    states = [brainx.State(jnp.float32(i)) for i in range(n_states)]

    def step(x):
        total = 0.0
        for i, s in enumerate(states):
            if i % 2 == 0:
                s.value = s.value * 0.5 + x
            total = total + s.value
        return total

    jitted = transform.jit(step)
    eager_vals = [float(s.value) for s in states]
    for x in xs:
        out = jitted(jnp.float32(x))
        expect = 0.0
        for i in range(n_states):
            if i % 2 == 0:
                eager_vals[i] = eager_vals[i] * 0.5 + np.float32(x)
            expect += eager_vals[i]
        assert np.allclose(out, expect, rtol=1e-5, atol=1e-5)
    assert np.allclose([float(s.value) for s in states], eager_vals, rtol=1e-5, atol=1e-5)


def test_static_arguments_of_equal_value_but_different_type_are_distinct():
    f = transform.jit(lambda x, n: jnp.full((3,), n), static_argnums=1)
    assert f(0, 1).dtype == jnp.int32
    assert f(0, 1.0).dtype == jnp.float32
    assert f(0, True).dtype == jnp.bool_


def test_lower_and_eval_shape_follow_shape_dependent_states():
    a, b = brainx.State(jnp.zeros(())), brainx.State(jnp.zeros(()))

    @transform.jit
    def f(x):
        s = a if x.ndim == 1 else b      # which state depends on the argument's shape
        s.value = s.value + x.sum()
        return x.sum()

    f(jnp.ones(2))
    assert f.eval_shape(jnp.ones((2, 2))).shape == ()
    compiled = f.lower(jnp.ones((2, 2))).compile()
    compiled(jnp.ones((2, 2)))
    assert float(a.value) == 2.0 and float(b.value) == 4.0
    f(jnp.ones((2, 2)))
    assert float(b.value) == 8.0


def test_method_transform_cache_lives_on_the_instance():
    import dataclasses
    import gc
    import weakref

    class Net:
        def __init__(self, v):
            self.h = brainx.State(jnp.asarray(v, jnp.float32))

        def __eq__(self, other):  # every Net "equal": must not share a bound transform
            return True

        def __hash__(self):
            return 0

        @transform.jit
        def step(self, x):
            self.h.value = self.h.value + x
            return self.h.value

    a, b = Net(0.0), Net(0.0)
    a.step(1.0)
    b.step(10.0)
    assert float(a.h.value) == 1.0 and float(b.h.value) == 10.0
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None  # the bound transform does not keep its instance alive

    @dataclasses.dataclass
    class D:  # unhashable (eq=True without frozen)
        h: brainx.State

        @transform.jit
        def step(self, x):
            self.h.value = self.h.value + x

    d = D(brainx.State(jnp.zeros(())))
    assert d.step is d.step
