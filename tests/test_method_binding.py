"""Jitted methods bound to an instance (issue 42.6 and 42.11's repr).

The bindings an instance keeps for its ``@transform.jit`` / ``@checkpoint``
methods were keyed by ``id(transform)``: a method replaced on the class freed
its transform, a new one allocated at the same address got the old binding
(the old function ran), and every replaced function stayed alive. Each case
here is checked against the eager method (the function called on the
instance directly), and freeing with ``gc`` and weak references.
"""

import copy
import gc
import weakref

import jax.numpy as jnp
import numpy as np

import brainx
from brainx import nn, transform
from brainx.graph.node import BOUND_TRANSFORMS_ATTR


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = brainx.ParamState(jnp.arange(3.0))

    @transform.jit
    def step(self, x):
        return (self.w.value * x).sum()


def _scaled(k):
    def step(self, x):
        return (self.w.value * x).sum() * k
    return step


def test_many_replaced_methods_run_the_new_function_and_free_the_old():
    class Local(Net):
        pass

    net = Local()
    refs, results, expected = [], [], []
    for k in range(1, 13):     # 12 replacements, as in the report
        fun = _scaled(float(k))
        refs.append(weakref.ref(fun))
        Local.step = transform.jit(fun)       # the old transform dies here
        del fun
        results.append(float(net.step(2.0)))
        expected.append(float(Local.step.fun(net, 2.0)))  # the eager method
        gc.collect()
    np.testing.assert_allclose(results, expected)
    gc.collect()
    assert sum(r() is not None for r in refs[:-1]) == 0   # only the current one lives
    assert len(vars(net)[BOUND_TRANSFORMS_ATTR]) == 1


def test_a_binding_is_the_same_object_while_its_transform_lives():
    net = Net()
    assert net.step is net.step
    other = Net()
    assert other.step is not net.step
    other.w.value = jnp.ones(3)
    assert float(other.step(1.0)) == 3.0 and float(net.step(1.0)) == 3.0   # 0 + 1 + 2


def test_checkpointed_methods_are_rebound_too():
    class Ck(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = brainx.ParamState(jnp.ones(2))

    net = Ck()
    for k in (2.0, 5.0, 7.0):
        Ck.f = transform.checkpoint(_scaled(k))
        assert float(net.f(1.0)) == 2.0 * k


def test_the_repr_and_the_graph_leave_the_bindings_out():
    net = Net()
    before = repr(net)
    net.step(1.0)
    assert BOUND_TRANSFORMS_ATTR in vars(net)
    assert repr(net) == before and "bound" not in repr(net)
    graphdef, _ = brainx.graph.treefy_split(net)
    assert "bound" not in repr(graphdef)
    assert list(brainx.graph.states(net)) == ["w"]


def test_a_copied_module_runs_on_its_own_states():
    net = Net()
    net.step(1.0)
    for copied in (copy.deepcopy(net), brainx.graph.clone(net), copy.copy(net)):
        copied.w = brainx.ParamState(jnp.full(3, 5.0))
        assert float(copied.step(1.0)) == 15.0
        assert float(net.step(1.0)) == 3.0


def test_a_plain_object_sharing_its_table_with_a_copy_binds_afresh():
    class Plain:
        def __init__(self, v):
            self.h = brainx.State(jnp.full(2, v))

        @transform.jit
        def total(self):
            return self.h.value.sum()

    a = Plain(1.0)
    assert float(a.total()) == 2.0
    b = copy.copy(a)              # shares __dict__'s values, the bindings' table included
    b.h = brainx.State(jnp.full(2, 4.0))
    assert float(b.total()) == 8.0 and float(a.total()) == 2.0
