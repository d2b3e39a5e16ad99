"""What instance sharing holds, what it sees, and how to turn it off.

A ``@transform.jit`` method keeps, per graph definition, a template (trace and
compiled function) that later instances of the class reuse. These tests check
that

* no cache keeps a dropped instance or its states alive (the templates, the
  compiled functions, the keys, the per-instance jitted method), whether the
  instances share one template or each makes its own;
* a module global that the method's code names, or a method of the class,
  rebound before a second instance's first call, is seen: that instance
  traces anew;
* ``transform.jit(..., share_instances=False)`` and a class's
  ``__brainx_share_jit__ = False`` make each instance trace its own, so a
  per-instance value kept outside the instance (a ``WeakKeyDictionary``)
  is respected.

Results are compared with the same method run eagerly under
``jax.disable_jit()`` on fresh instances, or with plain JAX.
"""

import collections
import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform
from brainx.transform.core import method_binding
from sharing_support import close, eager

#: Traces per class name, counted in the methods' Python bodies.
TRACES = collections.Counter()

N_BIG = 2 ** 18  # float32 elements: a 1 MB state


# -- 1. nothing keeps a dropped instance alive ------------------------------------------------

def big_class(**jit_options):
    """A new class each time (no template from another test), holding a 1 MB state."""

    class Big(brainx.nn.Module):
        def __init__(self, extra):
            super().__init__()
            self.h = brainx.State(jnp.zeros(N_BIG + extra, jnp.float32))

        @transform.jit(**jit_options)
        def step(self, x):
            self.h.value = self.h.value + x
            return self.h.value.sum()

    return Big


def make_and_drop(make, n, distinct):
    """Weak references to ``n`` instances (and their states), each called twice, then dropped."""
    instances, states = [], []
    x = jnp.float32(1.5)
    for i in range(n):
        m = make(i if distinct else 0)
        m.step(x)
        out = m.step(x)
        if i < 2 or i == n - 1:  # against plain JAX: two steps from zeros
            want = jnp.zeros(N_BIG + (i if distinct else 0), jnp.float32) + x + x
            close(m.h.value, want)
            close(out, want.sum())
        instances.append(weakref.ref(m))
        states.append(weakref.ref(m.h))
        del m
    gc.collect()
    return ([r for r in instances if r() is not None], [r for r in states if r() is not None])


@pytest.mark.parametrize("distinct, n", [
    pytest.param(False, 300, id="graph-equal-300"),  # one template, shared by all
    pytest.param(True, 20, id="distinct-shapes-20"),  # a template (and a compilation) each
])
@pytest.mark.parametrize("options", [
    pytest.param({}, id="default"),
    pytest.param(dict(donate_states=True), id="donate_states"),
    # one in_sharding for every argument: the compiled function is made per number of arguments
    pytest.param("one-in-sharding", id="one-in-sharding"),
])
def test_dropped_instances_and_their_states_are_freed(distinct, n, options):
    if options == "one-in-sharding":
        options = dict(in_shardings=jax.sharding.SingleDeviceSharding(jax.devices()[0]))
    Big = big_class(**options)
    alive, states = make_and_drop(Big, n, distinct)
    assert not alive, f"{len(alive)} of {n} dropped instances are still alive"
    assert not states, f"{len(states)} of {n} dropped states are still alive"


class Helper:
    """An attribute compared by identity (each instance has its own), referring back."""

    def __init__(self, owner):
        self.owner = owner


def test_an_attribute_compared_by_identity_does_not_keep_its_instance_alive():
    class WithHelper(brainx.nn.Module):
        def __init__(self, extra):
            super().__init__()
            self.helper = Helper(self)  # in the graph key by identity
            self.h = brainx.State(jnp.zeros(N_BIG + extra, jnp.float32))

        @transform.jit
        def step(self, x):
            self.h.value = self.h.value + x
            return self.h.value.sum()

    alive, states = make_and_drop(WithHelper, 10, distinct=False)
    assert not alive and not states


def test_instances_of_a_plain_class_are_freed():
    class Plain:  # not a Module: the instance itself is in the key by identity
        def __init__(self, extra):
            self.h = brainx.State(jnp.zeros(N_BIG + extra, jnp.float32))

        @transform.jit
        def step(self, x):
            self.h.value = self.h.value + x
            return self.h.value.sum()

    alive, states = make_and_drop(Plain, 10, distinct=False)
    assert not alive and not states


def test_slotted_instances_are_kept_only_up_to_a_bound(monkeypatch):
    # An instance with no __dict__ keeps its jitted methods in a table on the method, and a
    # bound method holds its instance: the table keeps only the most recent ones.
    class Slotted:
        __slots__ = ("h", "__weakref__")

        def __init__(self, extra):
            self.h = brainx.State(jnp.zeros(4 + extra, jnp.float32))

        @transform.jit
        def step(self, x):
            self.h.value = self.h.value + x
            return self.h.value.sum()

    monkeypatch.setattr(method_binding, "_SLOTS_LIMIT", 8)  # each instance traces: keep it short
    n = method_binding._SLOTS_LIMIT + 5
    refs = []
    for _ in range(n):
        m = Slotted(0)
        m.step(1.0)
        refs.append(weakref.ref(m))
        del m
    gc.collect()
    assert sum(r() is not None for r in refs) <= method_binding._SLOTS_LIMIT
    assert all(r() is None for r in refs[:5])  # the oldest were let go
    kept = next(r() for r in reversed(refs))
    close(kept.step(1.0), (jnp.zeros(4, jnp.float32) + 1.0 + 1.0).sum())


# -- 2. what a shared method sees -----------------------------------------------------------

GAIN = 2.0


def reads_gain_class():
    class ReadsGain(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.h = brainx.State(jnp.zeros(3))

        @transform.jit
        def step(self, x):
            TRACES["ReadsGain"] += 1
            self.h.value = self.h.value + GAIN * x
            return self.h.value

    return ReadsGain


@pytest.mark.counts_traces
@pytest.mark.parametrize("new_gain", [pytest.param(3.0, id="float"),
                                      pytest.param(jnp.float32(3.0), id="array")])
def test_a_module_global_rebound_before_a_second_instance_is_seen(new_gain):
    global GAIN
    x = jnp.arange(3.0)
    ReadsGain = reads_gain_class()
    TRACES.clear()
    old = GAIN
    try:
        a = ReadsGain()
        a.step(x)
        b = ReadsGain()
        b.step(x)
        assert TRACES["ReadsGain"] == 1  # unchanged: shared
        GAIN = new_gain
        c = ReadsGain()
        got = c.step(x)
        assert TRACES["ReadsGain"] == 2  # traced anew
        close(got, eager(lambda: ReadsGain().step(x)))
        close(got, np.asarray(new_gain) * np.arange(3.0))
    finally:
        GAIN = old


def test_a_method_rebound_on_the_class_before_a_second_instance_is_seen():
    class Calls(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.h = brainx.State(jnp.zeros(3))

        def helper(self, x):
            return x + 1.0

        @transform.jit
        def step(self, x):
            self.h.value = self.h.value + self.helper(x)
            return self.h.value

    x = jnp.arange(3.0)
    Calls().step(x)
    Calls.helper = lambda self, y: 10.0 * y
    got = Calls().step(x)
    close(got, eager(lambda: Calls().step(x)))
    close(got, 10.0 * np.arange(3.0))


# -- 3. turning sharing off -----------------------------------------------------------------

#: Per-instance gains kept outside the instances: no graph definition can see them.
OUTSIDE = weakref.WeakKeyDictionary()


def outside_class(share_instances=True, class_switch=None):
    class Outside(brainx.nn.Module):
        def __init__(self, gain):
            super().__init__()
            OUTSIDE[self] = gain
            self.h = brainx.State(jnp.zeros(3))

        @transform.jit(share_instances=share_instances)
        def step(self, x):
            TRACES["Outside"] += 1
            self.h.value = self.h.value + OUTSIDE[self] * x
            return self.h.value

    if class_switch is not None:
        Outside.__brainx_share_jit__ = class_switch
    return Outside


def two_gains(Outside, x):
    a, b = Outside(2.0), Outside(5.0)
    return a.step(x), b.step(x)


@pytest.mark.counts_traces
def test_by_default_a_value_outside_the_instance_is_not_seen():
    # The documented limit the switches are for: the second instance reuses the first's trace.
    TRACES.clear()
    two_gains(outside_class(), jnp.arange(3.0))
    assert TRACES["Outside"] == 1


@pytest.mark.counts_traces
@pytest.mark.parametrize("make", [
    pytest.param(lambda: outside_class(share_instances=False), id="jit-share_instances=False"),
    pytest.param(lambda: outside_class(class_switch=False), id="class-__brainx_share_jit__"),
])
def test_with_sharing_off_a_value_outside_the_instance_is_respected(make):
    x = jnp.arange(3.0)
    Outside = make()
    TRACES.clear()
    got = two_gains(Outside, x)
    assert TRACES["Outside"] == 2  # one trace each
    want = eager(lambda: two_gains(Outside, x))
    for g, w in zip(got, want):
        close(g, w)
    close(got[1], 5.0 * np.arange(3.0))


@pytest.mark.counts_traces
def test_the_class_switch_on_a_subclass_leaves_the_base_sharing():
    Outside = outside_class()

    class Private(Outside):
        __brainx_share_jit__ = False

    x = jnp.arange(3.0)
    TRACES.clear()
    Outside(2.0).step(x)
    Outside(2.0).step(x)
    assert TRACES["Outside"] == 1
    p, q = Private(3.0), Private(7.0)
    got = (p.step(x), q.step(x))
    assert TRACES["Outside"] == 3
    close(got[0], 3.0 * np.arange(3.0))
    close(got[1], 7.0 * np.arange(3.0))
