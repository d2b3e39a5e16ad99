"""``jit`` traces again when a setting (``brainx.environ``) the function read has changed.

A setting read while tracing is baked into the compiled function like any Python value; the
cache compares the settings a trace read with their current values (plain JAX has no settings:
the reference here is the same function run eagerly under the same settings).
"""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import monitoring

import brainx
from brainx import transform

_COMPILES = [0]


def _count(name, duration, **kwargs):
    if name == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


monitoring.register_event_duration_secs_listener(_count)


def test_dropout_follows_the_fit_flag_under_jit():
    drop = brainx.nn.Dropout(0.5)
    step = transform.jit(lambda x: drop(x))
    x = jnp.ones(64)
    with brainx.environ.context(fit=True):
        trained = step(x)
    assert set(np.unique(np.asarray(trained)).tolist()) <= {0.0, 2.0} and (trained == 0).any()
    with brainx.environ.context(fit=False):
        np.testing.assert_array_equal(step(x), x)      # evaluation: the identity, as eagerly
    before, outs = _COMPILES[0], []
    for fit in (True, False, True, False):             # switching back compiles nothing
        with brainx.environ.context(fit=fit):
            outs.append(step(x))
    assert _COMPILES[0] == before
    for fit, out in zip((True, False, True, False), outs):
        assert (np.asarray(out) == 0).any() if fit else (np.asarray(out) == 1).all()


def test_a_new_dt_retraces_a_decay_step():
    h = brainx.HiddenState(jnp.ones(3))
    tau = 10.0

    @transform.jit
    def decay():
        h.value = h.value * jnp.exp(-brainx.environ.get_dt() / tau)
        return h.value

    with brainx.environ.context(dt=1.0):
        decay()
    with brainx.environ.context(dt=2.0):
        decay()
    np.testing.assert_allclose(h.value, np.full(3, np.exp(-0.1) * np.exp(-0.2)), rtol=1e-6)


@pytest.mark.counts_traces
def test_settings_the_function_does_not_read_cost_no_trace():
    traces = []
    h = brainx.HiddenState(jnp.zeros(2))

    @transform.jit
    def step(x):
        traces.append(1)
        h.value = h.value + x
        return h.value

    step(jnp.ones(2))
    for i in range(5):
        with brainx.environ.context(i=i, trial="a"):
            step(jnp.ones(2))
    brainx.environ.set(unrelated_setting=3)
    try:
        step(jnp.ones(2))
    finally:
        brainx.environ.pop("unrelated_setting")
    assert len(traces) == 1
    np.testing.assert_allclose(h.value, np.full(2, 7.0))


def test_an_enclosing_jit_sees_the_settings_of_a_jitted_function_it_calls():
    drop = brainx.nn.Dropout(0.5)
    inner = transform.jit(lambda x: drop(x))
    outer = transform.jit(lambda x: inner(x) * 1.0)
    x = jnp.ones(32)
    with brainx.environ.context(fit=True):
        inner(x)                                      # inner's trace, reused inside outer's
        assert (outer(x) == 0).any()
    with brainx.environ.context(fit=False):
        np.testing.assert_array_equal(outer(x), x)


def test_instances_do_not_share_a_trace_made_under_other_settings():
    class Net(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = brainx.nn.Dropout(0.5)

        @transform.jit
        def step(self, x):
            return self.drop(x)

    x = jnp.ones(32)
    with brainx.environ.context(fit=True):
        assert (Net().step(x) == 0).any()
    with brainx.environ.context(fit=False):
        np.testing.assert_array_equal(Net().step(x), x)   # a new instance, other settings


def test_an_eager_for_loop_follows_the_settings():
    h = brainx.HiddenState(jnp.zeros(()))

    def body(i):
        h.value = h.value + brainx.environ.get_dt()
        return h.value

    with brainx.environ.context(dt=0.5):
        transform.for_loop(body, jnp.arange(4))
    with brainx.environ.context(dt=0.25):
        out = transform.for_loop(body, jnp.arange(4))
    np.testing.assert_allclose(out, 2.0 + 0.25 * np.arange(1, 5))


def test_brainstate_s_make_jaxpr_cache_follows_the_settings():
    drop = brainx.nn.Dropout(0.5)
    sf = transform.StatefulFunction(lambda x: drop(x))
    x = jnp.ones(8)
    with brainx.environ.context(fit=True):
        sf.make_jaxpr(x)
        training = sf.get_jaxpr(x)
    with brainx.environ.context(fit=False):
        evaluation = sf.get_jaxpr(x)           # traced again: the cached one dropped units
    assert evaluation is not training
    assert len(evaluation.jaxpr.eqns) < len(training.jaxpr.eqns)


@pytest.mark.counts_traces
def test_a_context_opened_inside_the_trace_is_not_a_dependency():
    h = brainx.HiddenState(jnp.zeros(()))
    traces = []

    @transform.jit
    def run(xs):
        traces.append(1)

        def step(i, x):
            with brainx.environ.context(i=i, t=i * 0.5):       # the brainstate loop pattern
                h.value = h.value + x * brainx.environ.get("t")
                return h.value

        return transform.for_loop(step, jnp.arange(4), xs)

    run(jnp.ones(4))
    with brainx.environ.context(trial=1):                       # any change of settings
        run(jnp.ones(4))
    assert len(traces) == 1                                     # i and t were the trace's own
    np.testing.assert_allclose(h.value, 2 * 0.5 * (0 + 1 + 2 + 3))
    assert "i" not in run._entries[()].env_reads


def test_the_settings_a_context_yields_inside_a_trace_are_read_as_looked_up():
    h = brainx.HiddenState(jnp.zeros(()))

    @transform.jit
    def run(x):
        with brainx.environ.context(i=1) as settings:
            h.value = h.value + x * settings["gain"]
        return h.value

    eager = lambda gain: gain * 1.0
    with brainx.environ.context(gain=2.0):
        np.testing.assert_allclose(run(jnp.float32(1.0)), eager(2.0))
        with brainx.environ.context(trial=7):      # not looked up: no dependency
            np.testing.assert_allclose(run(jnp.float32(1.0)), 2 * eager(2.0))
            assert "trial" not in run._entries[()].env_reads
    with brainx.environ.context(gain=3.0):        # looked up: traced again
        np.testing.assert_allclose(run(jnp.float32(1.0)), 2 * eager(2.0) + eager(3.0))


# -- a per-step setting follows the innermost context, whatever was traced first (issue 42) ----
def _accumulator(key="t"):
    """A state, the plain step adding the setting ``key`` to it, and its jit."""
    acc = brainx.HiddenState(jnp.zeros(()))

    def add():
        acc.value = acc.value + brainx.environ.get(key)
        return acc.value

    return acc, add, transform.jit(add)


def _loop_over_times(step, steps, key="t", scale=1.0):
    """``step`` called in a for_loop body that sets ``key`` to each of ``steps`` times ``scale``.

    (An integer step times a Python float is weakly typed, as a Python float ``t`` is: the
    step's trace fits both, so only where the value comes from tells them apart.)
    """
    def body(i):
        with brainx.environ.context(**{key: i * scale}):
            return step()

    return transform.for_loop(body, steps)


def _eager_over_times(step, steps, key="t", scale=1.0):
    """The reference: the plain step called once per value, step by step."""
    outs = []
    for i in steps:
        with brainx.environ.context(**{key: i * scale}):
            outs.append(np.asarray(step()))
    return np.stack(outs)


@pytest.mark.parametrize("global_t", [100.0, None])
def test_a_step_traced_at_top_level_reads_the_loop_body_s_t(global_t):
    acc, add, step = _accumulator()
    if global_t is None:
        with brainx.environ.context(t=100.0):
            step()                                    # traced where t is set
    else:
        brainx.environ.set(t=global_t)
    try:
        if global_t is not None:
            step()                                    # traced with the global t
        acc.value = jnp.zeros(())
        out = _loop_over_times(step, jnp.arange(4))
        acc.value = jnp.zeros(())
        expected = _eager_over_times(add, range(4))
        np.testing.assert_allclose(out, expected)    # [0, 1, 3, 6]
        if global_t is not None:                      # and the global t again at top level
            before = float(acc.value)
            np.testing.assert_allclose(step(), before + global_t)
    finally:
        brainx.environ.pop("t", None)


def test_an_array_setting_follows_the_loop_body_s_context():
    acc = brainx.HiddenState(jnp.zeros(2))

    def add():
        acc.value = acc.value + brainx.environ.get("drive")
        return acc.value

    step = transform.jit(add)
    with brainx.environ.context(drive=jnp.asarray([100.0, 100.0])):
        step()
    drives = np.stack([np.arange(4.0), -np.arange(4.0)], axis=1).astype(np.float32)
    acc.value = jnp.zeros(2)
    out = _loop_over_times(step, jnp.asarray(drives), key="drive")
    acc.value = jnp.zeros(2)
    np.testing.assert_allclose(out, _eager_over_times(add, jnp.asarray(drives), key="drive"))


def test_reads_before_and_after_a_context_in_the_body_see_the_outer_t():
    acc, add, step = _accumulator()

    def body(i):
        a = step()                                    # the t around the loop
        with brainx.environ.context(t=i * 1.0):
            b = step()                                # the body's t
        return a, b, step()                           # the t around the loop again

    def eager():
        outs = []
        for i in range(3):
            a = add()
            with brainx.environ.context(t=i * 1.0):
                b = add()
            outs.append((a, b, add()))
        return [np.stack(x) for x in zip(*outs)]

    for first in ("top", "body"):
        acc.value = jnp.zeros(())
        with brainx.environ.context(t=10.0):
            if first == "top":
                step()
                acc.value = jnp.zeros(())
            out = transform.for_loop(body, jnp.arange(3))
            acc.value = jnp.zeros(())
            expected = eager()
        for o, e in zip(out, expected):
            np.testing.assert_allclose(o, e)


def _halving_sum(steps, scale=1.0):
    """The reference of ``acc = acc * 0.5 + t`` over ``t = i * scale``, step by step."""
    ref, out = 0.0, []
    for i in steps:
        ref = ref * 0.5 + i * scale
        out.append(ref)
    return out


def test_a_loop_under_an_outer_jit_reads_the_body_s_t():
    acc = brainx.HiddenState(jnp.zeros(()))

    @transform.jit
    def tick():
        acc.value = acc.value * 0.5 + brainx.environ.get("t")
        return acc.value

    with brainx.environ.context(t=100.0):
        tick()
    acc.value = jnp.zeros(())
    run = transform.jit(lambda steps: _loop_over_times(tick, steps))
    np.testing.assert_allclose(run(jnp.arange(1, 5)), _halving_sum(range(1, 5)))


def test_instances_sharing_a_trace_read_the_body_s_t():
    class Clock(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.acc = brainx.HiddenState(jnp.zeros(()))

        @transform.jit
        def tick(self):
            self.acc.value = self.acc.value * 0.5 + brainx.environ.get("t")
            return self.acc.value

    a, b = Clock(), Clock()
    with brainx.environ.context(t=100.0):
        a.tick()                                      # b may run a's trace: shared
    out = _loop_over_times(b.tick, jnp.arange(1, 5))
    np.testing.assert_allclose(out, _halving_sum(range(1, 5)))
    with brainx.environ.context(t=100.0):             # a, at top level, still reads the global t
        np.testing.assert_allclose(a.tick(), 100.0 * 0.5 + 100.0)


@pytest.mark.counts_traces
def test_the_top_level_trace_is_kept_for_top_level_calls():
    traces = []
    acc = brainx.HiddenState(jnp.zeros(()))

    @transform.jit
    def step():
        traces.append(1)
        acc.value = acc.value + brainx.environ.get("t")
        return acc.value

    for t in (1.0, 2.0):
        with brainx.environ.context(t=t):
            step()
    _loop_over_times(step, jnp.arange(3))             # the body's own t: a trace there
    for t in (3.0, 4.0):
        with brainx.environ.context(t=t):
            step()
    assert len(traces) == 2 and float(acc.value) == 1 + 2 + (0 + 1 + 2) + 3 + 4
    assert not any(e.holds_tracers() for e in step._parked.get((), []))


def test_a_static_minus_zero_and_zero_get_a_trace_each():
    # -0.0 == 0.0 and they hash alike, so jax.jit reuses the first trace (-inf for both);
    # brainx keys a static argument by its type and the sign of a zero as well (decided,
    # documented in jit's caching rules): each gives the eager result, as a setting does.
    f = lambda x, s: x / s                            # noqa: E731
    ours = transform.jit(f, static_argnums=1)
    kw = transform.jit(lambda x, s=1.0: x / s, static_argnames="s")
    for s in (-0.0, 0.0, -0.0):
        with np.errstate(divide="ignore"):
            eager = np.float32(1.0) / np.float32(s)
        assert float(ours(1.0, s)) == eager and float(kw(1.0, s=s)) == eager
    g = transform.jit(lambda x: x / brainx.environ.get("scale"))
    for s, eager in ((-0.0, -np.inf), (0.0, np.inf)):
        with brainx.environ.context(scale=s):
            assert float(g(1.0)) == eager
