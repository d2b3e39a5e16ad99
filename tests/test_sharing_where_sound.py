"""Instances of a class do share a ``@transform.jit`` method's trace where that is sound.

The other side of test_sharing_soundness.py: simple modules, module-level
activation functions and per-instance lambdas with equal closures run the
second instance on the first one's trace (the trace counter does not move),
and still compute what the same method gives eagerly under
``jax.disable_jit()`` on fresh twins; lambdas with other closures do not share.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform
from sharing_support import TRACES, close, eager, pair_results


def lif_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class LIF(brainx.nn.Module):
        def __init__(self, n=4, tau=10.0):
            super().__init__()
            self.n = n
            self.tau = tau
            self.v_th = 0.3
            self.w = brainx.ParamState(jnp.linspace(0.5, 1.5, n))
            self.v = brainx.HiddenState(jnp.zeros(n))

        @transform.jit
        def step(self, x):
            TRACES[type(self).__name__] += 1
            noise = brainx.random.rand(self.n) * 0.1
            v = self.v.value + (x * self.w.value + noise - self.v.value) / self.tau
            spike = (v > self.v_th).astype(jnp.float32)
            self.v.value = v * (1.0 - spike)
            return spike

    return LIF


@pytest.mark.counts_traces
def test_simple_modules_share_one_trace():
    xs = [jnp.full(4, 2.0), jnp.full(4, 3.5), jnp.full(4, 1.0)]
    LIF = lif_class()

    def scenario():
        brainx.random.seed(42)
        a, b = LIF(), LIF()
        outs = [a.step(xs[0])]
        before = TRACES['LIF']
        for x in xs:
            outs.append(b.step(x))
        outs.append(a.step(xs[1]))
        return outs, before, [a.v.value, b.v.value]

    outs, before, vs = scenario()
    assert TRACES['LIF'] == before               # b's calls ran no trace of their own
    want_outs, _, want_vs = eager(scenario)
    for a, b in zip(outs + vs, want_outs + want_vs):
        close(a, b)


def activated_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class Activated(brainx.nn.Module):
        def __init__(self, act):
            super().__init__()
            self.act = act
            self.h = brainx.State(jnp.zeros(3))

        @transform.jit
        def step(self, x):
            TRACES[type(self).__name__] += 1
            self.h.value = self.act(x + self.h.value)
            return self.h.value

    return Activated


@pytest.mark.counts_traces
@pytest.mark.parametrize("act", [jnp.tanh, jax.nn.relu], ids=["jnp.tanh", "jax.nn.relu"])
def test_module_level_activation_functions_share(act):
    x = jnp.array([-1.0, 0.5, 2.0])
    Activated = activated_class()
    a, b = Activated(act), Activated(act)
    ra = a.step(x)
    before = TRACES['Activated']
    rb = [b.step(x), b.step(x)]
    assert TRACES['Activated'] == before

    def twins():
        a2, b2 = Activated(act), Activated(act)
        return [a2.step(x), b2.step(x), b2.step(x)]

    for got, want in zip([ra] + rb, eager(twins)):
        close(got, want)


def closure_class():
    """A new class each time: a test starts with none of its traces shared yet."""

    class Closure(brainx.nn.Module):
        def __init__(self, k):
            super().__init__()
            self.f = lambda x: x * k                  # one line, a new function per instance
            self.h = brainx.State(jnp.zeros(2))

        @transform.jit
        def step(self, x):
            TRACES[type(self).__name__] += 1
            self.h.value = self.h.value + self.f(x)
            return self.h.value

    return Closure


@pytest.mark.counts_traces
def test_per_instance_lambdas_with_equal_closures_share():
    x = jnp.array([1.0, 2.0])
    Closure = closure_class()
    a, b = Closure(3.0), Closure(3.0)
    a.step(x)
    before = TRACES['Closure']
    rb = b.step(x)
    assert TRACES['Closure'] == before
    close(rb, eager(lambda: Closure(3.0).step(x)))


def test_per_instance_lambdas_with_other_closures_do_not_share():
    x = jnp.array([1.0, 2.0])
    Closure = closure_class()
    (ra, rb), (ea, eb) = pair_results(lambda: Closure(3.0), lambda: Closure(-0.5),
                                      lambda m: m.step(x))
    close(ra, ea)
    close(rb, eb)
    close(rb, np.array([-0.5, -1.0], np.float32))
