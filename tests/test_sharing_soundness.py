"""Instances of a class share a ``@transform.jit`` method's trace only where that is sound.

Every test calls the jitted method on two instances of one class (the first
one first, so it traces; then the second, which may reuse that trace) and
checks both against ground truth: the same method run eagerly under
``jax.disable_jit()`` on fresh twins built the same way (no sharing can
happen there), or plain JAX arithmetic. A wrong share shows as the second
instance computing with the first one's Python values, hooks or states.
Where sharing does happen is test_sharing_where_sound.py; the property test over
random attribute graphs is in test_sharing_fuzz.py;
weak types and hooks edited after a first call (caches without sharing) in
test_trace_cache_keys.py.
"""

import collections
import functools
import math
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform
from sharing_support import (
    TRACES, close, double_write, eager, one, pair_results, scale, shift, two,
)

# -- 1. partial attributes --------------------------------------------------------------------

def with_fn_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class WithFn(brainx.nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn
            self.h = brainx.State(jnp.zeros(3))

        @transform.jit
        def step(self, x):
            self.h.value = self.h.value + self.fn(x)
            return self.h.value.sum()

    return WithFn


@pytest.mark.parametrize("make", [
    pytest.param(lambda k: functools.partial(scale, k), id="functools.partial-args"),
    pytest.param(lambda k: functools.partial(shift, by=k), id="functools.partial-keywords"),
    pytest.param(lambda k: jax.tree_util.Partial(scale, k), id="tree_util.Partial-args"),
    pytest.param(lambda k: jax.tree_util.Partial(shift, by=k), id="tree_util.Partial-keywords"),
])
def test_partial_attributes_with_other_bound_arguments(make):
    x = jnp.arange(3.0)
    WithFn = with_fn_class()
    (ra, rb), (ea, eb) = pair_results(lambda: WithFn(make(5.0)), lambda: WithFn(make(3.0)),
                                      lambda m: (m.step(x), m.h.value))
    for got, want in ((ra, ea), (rb, eb)):
        close(got[0], want[0])
        close(got[1], want[1])
    close(rb[1], make(3.0)(np.arange(3.0)))


# -- 2. 0.0 and -0.0 -----------------------------------------------------------------------

def inverse_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class Inverse(brainx.nn.Module):
        def __init__(self, tau):
            super().__init__()
            self.tau = tau
            self.h = brainx.State(jnp.zeros(2))

        @transform.jit
        def step(self, x):
            self.h.value = x * (1.0 / jnp.asarray(self.tau, jnp.float32))
            return self.h.value

    return Inverse


@pytest.mark.parametrize("first,second", [(0.0, -0.0), (-0.0, 0.0)])
def test_signed_zero_float_attribute(first, second):
    x = jnp.ones(2)
    Inverse = inverse_class()
    (ra, rb), (ea, eb) = pair_results(lambda: Inverse(first), lambda: Inverse(second),
                                      lambda m: m.step(x))
    close(ra, ea)
    close(rb, eb)
    close(rb, np.full(2, math.copysign(np.inf, second)))


# -- 3. subclasses of dict and float, defaultdict -----------------------------------------------

class GainDict(dict):
    pass


class GainFloat(float):
    pass


def gain_dict(gain):
    d = GainDict(w=1.5)
    d.gain = gain
    return d


def gain_float(gain):
    f = GainFloat(1.5)
    f.gain = gain
    return f


def uses_dict_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class UsesDict(brainx.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.d = d
            self.h = brainx.State(jnp.zeros(2))

        @transform.jit
        def step(self, x):
            self.h.value = x * self.d["w"] * self.d.gain
            return self.h.value

    return UsesDict


def uses_float_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class UsesFloat(brainx.nn.Module):
        def __init__(self, f):
            super().__init__()
            self.f = f
            self.h = brainx.State(jnp.zeros(2))

        @transform.jit
        def step(self, x):
            self.h.value = x * float(self.f) * self.f.gain
            return self.h.value

    return UsesFloat


def uses_default_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class UsesDefault(brainx.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.d = d
            self.h = brainx.State(jnp.zeros(2))

        @transform.jit
        def step(self, x):
            self.h.value = x * self.d["present"] + self.d["missing"]   # default_factory()
            return self.h.value

    return UsesDefault


@pytest.mark.parametrize("make_class,value_a,value_b", [
    pytest.param(uses_dict_class, lambda: gain_dict(2.0), lambda: gain_dict(5.0),
                 id="dict-subclass-attribute"),
    pytest.param(uses_float_class, lambda: gain_float(2.0), lambda: gain_float(5.0),
                 id="float-subclass-attribute"),
    pytest.param(uses_default_class, lambda: collections.defaultdict(one, present=3.0),
                 lambda: collections.defaultdict(two, present=3.0), id="defaultdict-factory"),
])
def test_subclasses_of_builtin_containers_and_scalars(make_class, value_a, value_b):
    x = jnp.array([1.0, -2.0])
    cls = make_class()
    (ra, rb), (ea, eb) = pair_results(lambda: cls(value_a()), lambda: cls(value_b()),
                                      lambda m: (m.step(x), m.h.value))
    for got, want in ((ra, ea), (rb, eb)):
        close(got[0], want[0])
        close(got[1], want[1])
    assert not np.array_equal(np.asarray(ea[0]), np.asarray(eb[0]))   # the case is observable


# -- 4. state metadata ------------------------------------------------------------------------

def coef_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class Coef(brainx.nn.Module):
        def __init__(self, coef):
            super().__init__()
            self.p = brainx.ParamState(jnp.ones(2), coef=coef)
            self.h = brainx.State(jnp.zeros(2))

        @transform.jit
        def step(self, x):
            self.h.value = self.p.value * self.p.coef * x
            return self.h.value

    return Coef


def test_state_metadata_is_part_of_the_trace():
    x = jnp.array([1.0, 2.0])
    Coef = coef_class()
    (ra, rb), (ea, eb) = pair_results(lambda: Coef(10.0), lambda: Coef(0.1),
                                      lambda m: (m.step(x), m.h.value))
    for got, want in ((ra, ea), (rb, eb)):
        close(got[0], want[0])
        close(got[1], want[1])
    close(rb[1], np.array([0.1, 0.2], np.float32))


# -- 5. state hooks ---------------------------------------------------------------------------

def acc_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class Acc(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.h = brainx.State(jnp.zeros(2))

        @transform.jit
        def step(self, x):
            TRACES[type(self).__name__] += 1
            self.h.value = self.h.value + x
            return self.h.value.sum()

    return Acc


@pytest.mark.parametrize("hooked", ["first", "second"])
def test_a_write_before_hook_of_one_instance_is_not_shared(hooked):
    x = jnp.array([1.0, 3.0])
    Acc = acc_class()
    made = []

    def make(with_hook):
        def build():
            m = Acc()
            if with_hook:
                m.h.register_hook("write_before", double_write)
            made.append(m)
            return m
        return build

    def call(m):
        out = m.step(x)
        out = m.step(x)
        return out, m.h.value

    try:
        (ra, rb), (ea, eb) = pair_results(make(hooked == "first"), make(hooked == "second"), call)
    finally:
        for m in made:
            m.h.clear_hooks()
    for got, want in ((ra, ea), (rb, eb)):
        close(got[0], want[0])
        close(got[1], want[1])
    plain = np.array([2.0, 6.0], np.float32)             # x + x
    close((rb if hooked == "first" else ra)[1], plain)
    close((ra if hooked == "first" else rb)[1], np.array([6.0, 18.0], np.float32))  # (2x + x) * 2


# -- 6. an attribute that is a module-level state the method writes by name -------------------

GLOBAL_H = brainx.State(jnp.zeros(2))


def writes_global_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class WritesGlobal(brainx.nn.Module):
        def __init__(self, s):
            super().__init__()
            self.s = s

        @transform.jit
        def step(self, x):
            GLOBAL_H.value = GLOBAL_H.value + x
            self.s.value = self.s.value * 2.0 + x
            return self.s.value

    return WritesGlobal


@pytest.mark.parametrize("global_first", [True, False])
def test_an_attribute_aliasing_a_global_state(global_first):
    x = jnp.array([1.0, -1.0])
    WritesGlobal = writes_global_class()

    def scenario():
        GLOBAL_H.value = jnp.zeros(2)
        own = brainx.State(jnp.zeros(2))
        g, o = WritesGlobal(GLOBAL_H), WritesGlobal(own)
        first, second = (g, o) if global_first else (o, g)
        outs = [first.step(x), second.step(x), first.step(x), second.step(x)]
        return outs, GLOBAL_H.value, own.value

    got = scenario()
    want = eager(scenario)
    for a, b in zip(got[0], want[0]):
        close(a, b)
    close(got[1], want[1])
    close(got[2], want[2])


# -- 7. states found through a registry keyed by id(self) -------------------------------------

REGISTRY = {}


def registered_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class Registered(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.h = brainx.State(jnp.zeros(()))
            REGISTRY[id(self)] = brainx.State(jnp.zeros(()))

        @transform.jit
        def step(self, x):
            r = REGISTRY[id(self)]
            r.value = r.value + x
            self.h.value = self.h.value + 2.0 * x
            return r.value

    return Registered


def test_states_found_through_a_registry_keyed_by_the_instance():
    Registered = registered_class()
    made = []

    def build():
        m = Registered()
        made.append(m)
        return m

    def scenario():
        a, b = build(), build()
        outs = [a.step(1.0), b.step(10.0), b.step(100.0)]
        return outs, [REGISTRY[id(m)].value for m in (a, b)], [m.h.value for m in (a, b)]

    try:
        got = scenario()
        want = eager(scenario)
    finally:
        for m in made:
            REGISTRY.pop(id(m), None)
    for a, b in zip(got[0], want[0]):
        close(a, b)
    for a, b in zip(got[1] + got[2], want[1] + want[2]):
        close(a, b)
    close(got[1][0], 1.0)     # b never touched a's registry state
    close(got[1][1], 110.0)


# -- 8. class attributes ----------------------------------------------------------------------

def test_a_class_attribute_changed_before_the_second_instance():
    class ClassGain(brainx.nn.Module):
        gain = 2.0

        def __init__(self):
            super().__init__()
            self.h = brainx.State(jnp.zeros(2))

        @transform.jit
        def step(self, x):
            self.h.value = x * self.gain
            return self.h.value

    x = jnp.array([1.0, 2.0])
    a = ClassGain()
    close(a.step(x), eager(lambda: ClassGain().step(x)))
    ClassGain.gain = 3.0
    b = ClassGain()
    got = b.step(x)
    close(got, eager(lambda: ClassGain().step(x)))
    close(got, np.array([3.0, 6.0], np.float32))


# -- found by review: dtypes that print alike, True vs 1 as keys, weak registries, rebound globals --

def test_one_byte_float_dtypes_with_the_same_bytes_do_not_share():
    ml_dtypes = pytest.importorskip("ml_dtypes")

    class Q(brainx.nn.Module):
        def __init__(self, dtype):
            super().__init__()
            self.w = np.full((2,), 0x38, np.uint8).view(dtype)   # the same bytes, other dtype
            self.h = brainx.State(jnp.zeros(2))

        @transform.jit
        def step(self, x):
            self.h.value = self.h.value + self.w.astype(jnp.float32) * x
            return self.h.value

    def scenario():
        a, b = Q(ml_dtypes.float8_e4m3fn), Q(ml_dtypes.float8_e4m3b11fnuz)
        return [a.step(jnp.ones(2)), b.step(jnp.ones(2))]

    for got, want in zip(scenario(), eager(scenario)):
        close(got, want)


def test_dict_keys_true_and_one_do_not_share():
    class D(brainx.nn.Module):
        def __init__(self, k):
            super().__init__()
            self.d = {k: 2.0}
            self.h = brainx.State(jnp.zeros(()))

        @transform.jit
        def step(self, x):
            (k, v), = self.d.items()
            self.h.value = self.h.value + v * x
            return jnp.asarray(k)

    a, b = D(True), D(1)
    assert a.step(1.0).dtype == jnp.asarray(True).dtype
    assert b.step(1.0).dtype == jnp.asarray(1).dtype


WEAK_REGISTRY = weakref.WeakValueDictionary()


def test_a_state_reached_through_a_weak_registry_is_not_taken_for_the_instance_s_own():
    class R(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.h = brainx.State(jnp.zeros(()))
            WEAK_REGISTRY.setdefault("h", self.h)        # the first instance's state wins

        @transform.jit
        def step(self, x):
            s = WEAK_REGISTRY["h"]
            s.value = s.value + x
            return s.value

    def scenario():
        WEAK_REGISTRY.clear()
        a, b = R(), R()
        out = [a.step(1.0), b.step(10.0)]
        return out + [a.h.value, b.h.value]

    for got, want in zip(scenario(), eager(scenario)):
        close(got, want)


REBOUND = brainx.State(jnp.zeros(()))


def test_a_module_level_state_rebound_before_the_second_instance_is_the_new_one():
    class GM(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.h = brainx.State(jnp.ones(()))

        @transform.jit
        def step(self, x):
            REBOUND.value = REBOUND.value + x * self.h.value
            return REBOUND.value

    def scenario():
        global REBOUND
        REBOUND = brainx.State(jnp.zeros(()))
        first = GM().step(1.0)
        old = REBOUND
        REBOUND = brainx.State(jnp.full((), 100.0))       # the old one stays alive
        second = GM().step(1.0)
        return [first, second, old.value, REBOUND.value]

    for got, want in zip(scenario(), eager(scenario)):
        close(got, want)
