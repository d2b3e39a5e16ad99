"""A state read and written by another thread while a transform is tracing over it.

Thread A calls a transformed function that writes a state and then blocks
inside the trace (on a ``threading.Event``). While it waits, the main thread
(B) reads the state, which must give the real, concrete value (never A's
tracer), writes it, and lets A finish. A's trace must not put its traced or
stale value over B's write: afterwards the state holds what some order of the
two calls gives (B's value, or A's function applied to B's value), never A's
function applied to the value B replaced (a lost update).

Every wait has a timeout, and A is a daemon thread, so a deadlock fails the
test instead of hanging it.
"""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from thread_support import TIMEOUT, run_in_a
from brainx import transform

S0 = jnp.array([1.0, 2.0])
S1 = jnp.array([10.0, -4.0])
X = jnp.array([0.5, 0.25])
XS = jnp.array([[0.5, 0.25], [1.0, -1.0]])


class Gate:
    """Blocks thread A the first time A reaches it; B waits for that and opens it."""

    def __init__(self):
        self.inside = threading.Event()
        self.release = threading.Event()
        self.used = False

    def block(self):
        if threading.current_thread().name != "A" or self.used:
            return
        self.used = True
        self.inside.set()
        if not self.release.wait(TIMEOUT):
            raise TimeoutError("thread B never released thread A")


def concrete(value, want):
    for leaf in jax.tree.leaves(value):
        assert isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer), leaf
    np.testing.assert_allclose(np.asarray(value), np.asarray(want), rtol=1e-6)


def one_of(value, candidates):
    assert any(np.allclose(value, c, rtol=1e-6) for c in candidates), (value, candidates)


# Each transform calls the step ``f`` (which writes ``s`` once per call) in its own way;
# ``final(v)`` is what ``s`` holds after the call when it starts from ``v``.
def _step_final(v, xs):
    for x in xs:
        v = v * 2.0 + x
    return v


CALLS = {
    "jit": (lambda f, w: transform.jit(f)(X), lambda v: _step_final(v, [X])),
    "checkpoint": (lambda f, w: transform.checkpoint(f)(X), lambda v: _step_final(v, [X])),
    "grad": (lambda f, w: transform.grad(lambda x: jnp.sum(f(x)), grad_states=w)(X),
             lambda v: _step_final(v, [X])),
    "for_loop": (lambda f, w: transform.for_loop(f, XS), lambda v: _step_final(v, XS)),
    "cond": (lambda f, w: transform.cond(True, f, lambda x: x * 0.0, X),
             lambda v: _step_final(v, [X])),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_another_thread_sees_the_real_value_and_its_write_is_not_lost(name):
    call, final = CALLS[name]
    s = brainx.State(S0, name="s")
    w = brainx.ParamState(jnp.ones(2), name="w")
    gate = Gate()

    def f(x):
        s.value = s.value * 2.0 + x * w.value  # A's write, held in A's trace only
        gate.block()
        return s.value

    join = run_in_a(lambda: call(f, w))
    assert gate.inside.wait(TIMEOUT), "thread A never reached the gate"
    concrete(s.value, S0)  # B: the real value, not A's tracer
    concrete(w.value, jnp.ones(2))
    s.value = S1
    concrete(s.value, S1)
    gate.release.set()
    join()
    concrete(w.value, jnp.ones(2))
    # A before B: B's value. B before A: A's step applied to B's value. Never A's step of S0.
    one_of(s.value, [S1, final(S1)])
    assert not np.allclose(s.value, final(S0))


def test_a_jit_that_only_reads_does_not_overwrite_the_other_threads_write():
    s = brainx.State(S0, name="s")
    t = brainx.State(jnp.zeros(2), name="t")
    gate = Gate()

    @transform.jit
    def f(x):
        t.value = s.value * x
        gate.block()
        return t.value.sum()

    join = run_in_a(lambda: f(X))
    assert gate.inside.wait(TIMEOUT)
    concrete(s.value, S0)
    concrete(t.value, jnp.zeros(2))
    s.value = S1
    gate.release.set()
    join()
    concrete(s.value, S1)
    one_of(t.value, [S0 * X, S1 * X])
    # later calls use the value B wrote
    np.testing.assert_allclose(f(X), (S1 * X).sum(), rtol=1e-6)
    concrete(t.value, S1 * X)


def test_the_other_thread_runs_transforms_over_the_same_state_meanwhile():
    s = brainx.State(S0, name="s")
    u = brainx.State(jnp.zeros(2), name="u")
    gate = Gate()

    @transform.jit
    def f(x):
        s.value = s.value + x
        gate.block()  # only thread A blocks; B runs f straight through
        return s.value

    @transform.jit
    def g(x):
        u.value = s.value * x
        return u.value

    join = run_in_a(lambda: f(X))
    assert gate.inside.wait(TIMEOUT)
    concrete(g(X), S0 * X)  # B's own transform sees the real value
    concrete(u.value, S0 * X)
    concrete(f(X), S0 + X)  # B calls the function A is tracing
    concrete(s.value, S0 + X)
    concrete(transform.grad(lambda: jnp.sum(s.value ** 2), grad_states=s)(), 2 * (S0 + X))
    gate.release.set()
    concrete(join(), S0 + 2 * X)
    concrete(s.value, S0 + 2 * X)
    concrete(f(X), S0 + 3 * X)
