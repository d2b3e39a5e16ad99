"""A state lent to a raw JAX trace of one thread, read from another thread meanwhile.

Thread A traces a raw ``jax.jit`` (or a ``custom_vjp`` forward rule under
``transform.grad``) that writes a state, and then waits inside the trace (a Python
call made at trace time blocks on a ``threading.Event``). While it waits, the main
thread (B) reads the state. Only thread A can tell whether its trace still runs:
B must see the value from before the write (never A's tracer), without an error,
and without putting that value back under A's running trace.

Every wait has a timeout, and A is a daemon thread, so a deadlock fails the test
instead of hanging it.
"""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from thread_support import TIMEOUT, run_in_a
from brainx.state.lending import LENT


class Pause:
    """Called at trace time: the first call in thread A blocks until B releases it."""

    def __init__(self):
        self.inside = threading.Event()
        self.release = threading.Event()

    def __call__(self):
        if threading.current_thread().name != "A" or self.inside.is_set():
            return
        self.inside.set()
        if not self.release.wait(TIMEOUT):
            raise TimeoutError("thread B never released thread A")


def triple_in_raw_jit(s, pause):
    """``jax.jit`` of a function that writes ``s`` (never putting it back), pauses, reads it."""

    @jax.jit
    def f():
        s.value = s.value * 3.0
        pause()                        # Python at trace time: A's trace is running
        return s.value

    return f()


def read(state):
    """``(exception type or None, value)`` of reading ``state.value``."""
    try:
        return None, state.value
    except Exception as e:  # noqa: BLE001 - compared with the one-thread run
        return type(e), None


def test_another_threads_read_does_not_give_back_a_state_lent_to_a_running_trace():
    # what one thread gives: A's result, then what reading the state afterwards does
    ref = brainx.State(jnp.asarray(2.0), name="s")
    ref_out = triple_in_raw_jit(ref, lambda: None)
    ref_after = read(ref)
    ref_then = ref.value
    assert float(ref_out) == 6.0

    s = brainx.State(jnp.asarray(2.0), name="s")
    pause = Pause()
    join = run_in_a(lambda: triple_in_raw_jit(s, pause))
    assert pause.inside.wait(TIMEOUT), "thread A never reached the pause"
    try:
        seen = read(s)                 # B, while A's trace holds s
        lent_meanwhile = id(s) in LENT
    finally:
        pause.release.set()
    out = join()

    assert seen[0] is None, f"B's read raised {seen[0]}"
    assert not isinstance(seen[1], jax.core.Tracer), seen[1]
    assert float(seen[1]) == 2.0       # the value from before A's write
    assert float(out) == 6.0           # A's trace read its own write
    assert lent_meanwhile              # B's read left s lent to A's trace
    after = read(s)                    # A's thread has ended: given back, as in one thread
    assert after[0] is ref_after[0]
    assert float(s.value) == float(ref_then) == 2.0
    assert id(s) not in LENT and id(ref) not in LENT


def test_another_threads_transform_call_does_not_give_back_what_a_running_forward_rule_lent():
    # thread A: transform.grad runs a custom_vjp whose forward rule writes w and pauses there;
    # B runs a brainx transform reading w, whose end must not give w back under A's trace
    w = brainx.ParamState(jnp.array([1.0, 2.0]), name="w")
    pause = Pause()
    a_saw = []

    @jax.custom_vjp
    def f(x):
        return x * w.value

    def f_fwd(x):
        w.value = w.value * 2.0                 # not put back: lent to the forward trace
        pause()
        a_saw.append(isinstance(w.value, jax.core.Tracer))
        return x * w.value, x

    def f_bwd(x, g):
        return (g * jnp.array([2.0, 4.0]),)

    f.defvjp(f_fwd, f_bwd)
    x = jnp.ones(2)
    join = run_in_a(lambda: brainx.transform.grad(lambda x: f(x).sum())(x))
    assert pause.inside.wait(TIMEOUT), "thread A never reached the pause"
    try:
        b_out = brainx.transform.jit(lambda: w.value * 10.0)()
    finally:
        pause.release.set()
    g = join()
    np.testing.assert_array_equal(b_out, [10.0, 20.0])     # the value from before A's write
    assert a_saw == [True]                                  # A still read its own tracer
    np.testing.assert_array_equal(g, [2.0, 4.0])
    np.testing.assert_array_equal(w.value, [1.0, 2.0])      # given back at the end of A's call
    assert id(w) not in LENT


@pytest.mark.parametrize("policy", ["error", "restore"])
def test_a_state_lent_by_a_thread_that_has_ended_is_given_back_by_any_thread(policy):
    from brainx.state.lending import set_ended_write_policy

    s = brainx.State(jnp.asarray(2.0), name="s")
    join = run_in_a(lambda: triple_in_raw_jit(s, lambda: None))
    assert float(join()) == 6.0
    assert id(s) in LENT
    previous = set_ended_write_policy(policy)
    try:
        if policy == "error":
            with pytest.raises(brainx.TracerLeakError, match="'s'.*has ended"):
                s.value
        assert float(s.value) == 2.0
    finally:
        set_ended_write_policy(previous)
    assert id(s) not in LENT
