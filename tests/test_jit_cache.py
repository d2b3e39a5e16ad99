"""`transform.jit`'s cache: instances sharing a compiled method, shapes, static values, slots."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform


TRACES = {"Cell": 0}  # not a class attribute: class data attributes are part of the sharing key


class Cell(brainx.nn.Module):

    def __init__(self, tau=10.0, n=3, bias=None):
        super().__init__()
        self.tau = tau
        self.bias = jnp.zeros(n) if bias is None else bias
        self.v = brainx.HiddenState(jnp.zeros(n))

    @transform.jit
    def step(self, x):
        TRACES["Cell"] += 1
        self.v.value = self.v.value + (x + self.bias - self.v.value) / self.tau
        return self.v.value.sum()


def reference(tau, bias, xs):
    v = np.zeros_like(bias)
    for x in xs:
        v = v + (x + bias - v) / tau
    return v


@pytest.mark.counts_traces
def test_second_instance_reuses_the_trace_and_the_executable():
    a, b = Cell(tau=7.0), Cell(tau=7.0)
    before = TRACES["Cell"]
    a.step(jnp.ones(3))
    assert TRACES["Cell"] == before + 1
    for _ in range(3):
        b.step(2 * jnp.ones(3))
    assert TRACES["Cell"] == before + 1                 # b never ran the Python step
    ea, eb = a.step._entries[()], b.step._entries[()]
    assert ea.jitted is eb.jitted                    # one executable for both
    np.testing.assert_allclose(a.v.value, reference(7.0, np.zeros(3), [np.ones(3)]), rtol=1e-6)
    np.testing.assert_allclose(b.v.value, reference(7.0, np.zeros(3), [np.full(3, 2.0)] * 3),
                               rtol=1e-6)


@pytest.mark.counts_traces
def test_instances_with_other_python_values_are_not_shared():
    a, b = Cell(tau=10.0), Cell(tau=5.0)             # tau is a constant of the trace
    c = Cell(bias=jnp.ones(3))                       # a plain array attribute, also a constant
    a.step(jnp.ones(3))
    for cell in (b, c):
        before = TRACES["Cell"]
        cell.step(jnp.ones(3))
        assert TRACES["Cell"] == before + 1
    np.testing.assert_allclose(b.v.value, reference(5.0, np.zeros(3), [np.ones(3)]), rtol=1e-6)
    np.testing.assert_allclose(c.v.value, reference(10.0, np.ones(3), [np.ones(3)]), rtol=1e-6)


@pytest.mark.counts_traces
def test_other_state_shapes_and_argument_types_are_not_shared():
    a, b = Cell(n=3), Cell(n=4)
    a.step(jnp.ones(3))
    before = TRACES["Cell"]
    b.step(jnp.ones(4))
    assert TRACES["Cell"] == before + 1
    c = Cell(n=3)
    c.step(jnp.ones(3, jnp.int32))                   # same graph, other argument dtype
    assert TRACES["Cell"] == before + 2


def test_a_state_outside_the_instance_is_shared_by_identity():
    total = brainx.State(jnp.zeros(()))

    class Counter(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.own = brainx.State(jnp.zeros(()))

        @transform.jit
        def step(self, x):
            self.own.value = self.own.value + x
            total.value = total.value + x

    a, b = Counter(), Counter()
    a.step(1.0)
    b.step(2.0)
    b.step(3.0)
    assert float(a.own.value) == 1.0 and float(b.own.value) == 5.0 and float(total.value) == 6.0


def test_a_per_instance_function_attribute_is_not_shared():
    class Act(brainx.nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.act = lambda x: x * scale
            self.h = brainx.State(jnp.zeros(()))

        @transform.jit
        def step(self, x):
            self.h.value = self.act(x)

    a, b = Act(2.0), Act(3.0)
    a.step(1.0)
    b.step(1.0)
    assert float(a.h.value) == 2.0 and float(b.h.value) == 3.0


def test_a_shared_executable_still_recompiles_for_new_shapes_per_instance():
    a, b = Cell(), Cell()
    a.step(jnp.ones(3))
    b.step(jnp.ones(3))
    b.v.value = jnp.zeros(5)
    b.bias = jnp.zeros(5)
    b.step(jnp.ones(5))
    np.testing.assert_allclose(b.v.value, reference(10.0, np.zeros(5), [np.ones(5)]), rtol=1e-6)
    a.step(jnp.ones(3))
    np.testing.assert_allclose(a.v.value, reference(10.0, np.zeros(3), [np.ones(3)] * 2),
                               rtol=1e-6)


@pytest.mark.counts_traces
def test_a_method_on_a_class_with_slots_traces_once():
    traces = []

    class Slotted:
        __slots__ = ("h",)

        def __init__(self):
            self.h = brainx.State(jnp.zeros(()))

        @transform.jit
        def step(self, x):
            traces.append(1)
            self.h.value = self.h.value + x

    obj = Slotted()
    for _ in range(4):
        obj.step(1.0)
    assert float(obj.h.value) == 4.0 and len(traces) == 1


@pytest.mark.counts_traces
def test_alternating_shapes_that_touch_different_states_compile_once_each():
    traces = []
    small, large = brainx.State(jnp.zeros(())), brainx.State(jnp.zeros(()))

    @transform.jit
    def step(x):
        traces.append(x.shape)
        target = small if x.shape[0] < 3 else large
        target.value = target.value + x.sum()

    for _ in range(3):
        step(jnp.ones(2))
        step(jnp.ones(4))
    assert len(traces) == 2
    assert float(small.value) == 6.0 and float(large.value) == 12.0


def test_static_values_are_bounded():
    h = brainx.State(jnp.zeros(()))

    @transform.jit(static_argnums=1)
    def step(x, k):
        h.value = h.value + x * k

    step.max_entries = 4
    for k in range(10):
        step(1.0, k)
    assert len(step._entries) == 4
    assert float(h.value) == sum(range(10))
