"""A per-step time keeps its precision (issue 42, item 5): float64 where x64 is on; with x64 off
brainx warns when float32 loses part of a step, and the step index keeps every step.

The reference is the eager computation in Python floats (float64).
"""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from brainx import environ, transform
from brainx.environ import time_precision
from brainx.environ.time_precision import StepTimePrecisionWarning

DT = 0.1           # ms
HOUR = 36_000_000  # steps of 0.1 ms in an hour


@pytest.fixture(autouse=True)
def fresh_warnings():
    time_precision._WARNED.clear()
    environ.set(dt=DT)
    yield
    environ.pop("dt")
    time_precision._WARNED.clear()


def _eager(i0: int, n: int):
    """Phase ``t % 10`` and spacing of the steps' times, in Python floats."""
    times = [i * DT for i in range(i0, i0 + n)]
    return np.asarray([t % 10 for t in times]), np.diff(times)


def _per_step(fun, i0: int, n: int, **settings):
    """``fun()`` called at each step, under ``context(i=i, t=i * dt)``."""
    outs = []
    for i in range(i0, i0 + n):
        with environ.context(i=i, t=i * DT, **settings):
            outs.append(np.asarray(fun()))
    return np.stack(outs)


@pytest.mark.parametrize("i0", [10_000_033, 10 * HOUR + 7])   # 17 minutes, 10 hours
def test_with_x64_a_python_float_t_stays_float64(i0):
    step = transform.jit(lambda: (environ.get("t") % 10, environ.get("t")))
    want_phase, want_spacing = _eager(i0, 5)
    with environ.context(precision=64):
        got = _per_step(step, i0, 5)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got[:, 0], want_phase)
    np.testing.assert_array_equal(np.diff(got[:, 1]), want_spacing)


def test_without_x64_float32_loses_steps_and_brainx_says_so():
    step = transform.jit(lambda: environ.get("t") % 10)
    with pytest.warns(StepTimePrecisionWarning, match=r"'t' = 1000003\.3.*float32.*step index"):
        got = _per_step(step, 10_000_033, 3)
    want, _ = _eager(10_000_033, 3)
    assert got.dtype == np.float32
    assert np.max(np.abs(got - want)) > DT / 10      # the loss the warning is about
    with warnings.catch_warnings():
        warnings.simplefilter("error")                # once per setting
        _per_step(step, 10_000_033, 3)


def test_a_small_t_gives_no_warning():
    step = transform.jit(lambda: environ.get("t") * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = _per_step(step, 0, 50)                  # up to 5 ms
    np.testing.assert_allclose(out, [2 * i * DT for i in range(50)], rtol=1e-6)


@pytest.mark.parametrize("i0", [10_000_033, 10 * HOUR + 7])
def test_without_x64_the_step_index_keeps_every_step(i0):
    # a neuron's bookkeeping from the index: the phase of a 10 ms rhythm, time since a spike
    i_spike = i0 - 17

    @transform.jit
    def step():
        i = environ.get("i")
        return (i % 100) * environ.get_dt(), (i - i_spike) * environ.get_dt()

    with warnings.catch_warnings():
        warnings.simplefilter("error")                # t is not read: nothing to warn about
        phase, since = np.asarray(_per_step_pairs(step, i0, 5)).T
    want_phase, want_spacing = _eager(i0, 5)
    want_since = np.asarray([i * DT - i_spike * DT for i in range(i0, i0 + 5)])
    np.testing.assert_allclose(phase, want_phase, atol=1e-5)        # float32 of a number < 10
    np.testing.assert_allclose(since, want_since, atol=1e-5)
    np.testing.assert_allclose(np.diff(since), want_spacing, atol=1e-5)   # 0.1 apart, not 0.125


def _per_step_pairs(fun, i0, n):
    """``fun()``'s two outputs at each step, as floats."""
    outs = []
    for i in range(i0, i0 + n):
        with environ.context(i=i, t=i * DT):
            outs.append([float(x) for x in fun()])
    return outs


def test_the_step_index_in_a_loop_body_matches_the_eager_float64_run():
    i0 = 10 * HOUR

    def body(i):
        with environ.context(i=i, t=i * environ.get_dt()):
            return (environ.get("i") % 100) * environ.get_dt()

    got = transform.for_loop(body, jnp.arange(i0, i0 + 20, dtype=jnp.int32))
    want, _ = _eager(i0, 20)
    np.testing.assert_allclose(got, want, atol=1e-5)
