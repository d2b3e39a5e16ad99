"""Per-step settings (``t``, ``i``, array values) are inputs of a compiled step, not in its key.

A step called under ``with environ.context(t=...)`` each time must compile once and see every
``t``; a setting that changes the program (``dt``) must still trace again. The references are
the same functions run eagerly under the same settings (plain JAX has no settings), and, for
the model, a run that traces afresh for every ``t`` (``set_per_step("t", False)``).
"""

import threading

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import monitoring

import brainx
from brainx import environ, transform
from brainx.environ.reads import PER_STEP
from brainx.environ.step_values import UnsetStepValueError, is_per_step

_COMPILES = [0]


def _count(name, duration, **kwargs):
    if name == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


monitoring.register_event_duration_secs_listener(_count)


def _compiles(run):
    before = _COMPILES[0]
    out = run()
    return _COMPILES[0] - before, out


@pytest.fixture
def per_step_default():
    yield
    for key in ("t", "i", "gain", "drive", "phase"):
        environ.set_per_step(key, None)


# -- a step reading t -----------------------------------------------------------------------
@pytest.mark.counts_traces
def test_a_jitted_step_reading_t_compiles_once_and_matches_the_eager_step():
    h = brainx.HiddenState(jnp.zeros(3))
    traces = []

    def step(x):
        traces.append(1)
        h.value = h.value * 0.9 + x * jnp.sin(environ.get("t"))
        return h.value

    jitted = transform.jit(step)
    xs = jnp.linspace(0.0, 1.0, 3)
    with environ.context(t=0.0):
        jitted(xs)                                   # the first call compiles
    compiled = []

    def run():
        for i in range(1, 101):
            with environ.context(t=i * 0.1):
                compiled.append(jitted(xs))

    n, _ = _compiles(run)
    assert n == 0 and len(traces) == 1
    h.value = jnp.zeros(3)
    with environ.context(t=0.0):
        step(xs)
    for i in range(1, 101):   # each step from the same state (XLA fuses x * a + b: the last
        with environ.context(t=i * 0.1):               # bit may differ from op by op)
            np.testing.assert_allclose(compiled[i - 1], step(xs), rtol=1e-6, atol=1e-7)
        h.value = compiled[i - 1]
    assert jitted._entries[()].env_reads["t"] is PER_STEP  # an input: not keyed by its value


def test_a_quantity_time_and_an_integer_index_are_inputs_too():
    h = brainx.HiddenState(jnp.zeros(2) * u.mV)
    xs = jnp.arange(5.0)

    def step():
        t, i = environ.get("t"), environ.get("i")
        h.value = h.value + xs[i] * (t / u.ms) * u.mV
        return h.value

    jitted = transform.jit(step)
    dt = 0.1 * u.ms
    with environ.context(t=0 * dt, i=0):
        jitted()
    n, outs = _compiles(lambda: [_call_at(jitted, t=i * dt, i=i) for i in range(1, 5)])
    assert n == 0
    h.value = jnp.zeros(2) * u.mV
    with environ.context(t=0 * dt, i=0):
        step()
    for i, out in zip(range(1, 5), outs):
        with environ.context(t=i * dt, i=i):
            expected = step()
        assert u.math.allclose(out, expected)


def _call_at(f, **settings):
    with environ.context(**settings):
        return f()


# -- a refractory LIF written as brainpy.state writes it ---------------------------------------
class RefractoryLIF(brainx.nn.Module):
    """An LIF neuron whose refractory period reads the current time, as brainpy.state's LIFRef."""

    def __init__(self, n, tau=1.0 * u.ms, tau_ref=0.5 * u.ms, V_th=1.0 * u.mV):
        super().__init__()
        self.n, self.tau, self.tau_ref, self.V_th = n, tau, tau_ref, V_th

    def init_state(self, *args, **kwargs):
        self.V = brainx.HiddenState(jnp.zeros(self.n) * u.mV)
        self.last_spike_time = brainx.HiddenState(jnp.full(self.n, -1e7) * u.ms)

    def update(self, x):
        t, dt = environ.get("t"), environ.get_dt()
        V = self.V.value + (x - self.V.value) / self.tau * dt
        refractory = (t - self.last_spike_time.value) <= self.tau_ref
        V = u.math.where(refractory, self.V.value, V)
        spike = V >= self.V_th
        self.last_spike_time.value = u.math.where(spike, t, self.last_spike_time.value)
        self.V.value = u.math.where(spike, 0.0 * u.mV, V)
        return spike


def _simulate(step, neuron, drive, n_steps=100):
    neuron.V.value = jnp.zeros(neuron.n) * u.mV
    neuron.last_spike_time.value = jnp.full(neuron.n, -1e7) * u.ms
    dt = environ.get_dt()
    spikes, last = [], []
    for i in range(n_steps):
        with environ.context(t=i * dt, i=i):
            spikes.append(np.asarray(step(drive)))
        last.append(np.asarray(neuron.last_spike_time.value.to_decimal(u.ms)))
    return np.stack(spikes), np.stack(last), neuron.V.value


def test_a_refractory_lif_compiles_once_and_spikes_as_the_eager_run(per_step_default):
    neuron = brainx.nn.init_all_states(RefractoryLIF(4))
    drive = jnp.asarray([0.5, 1.5, 4.0, 20.0]) * u.mV
    with environ.context(dt=0.1 * u.ms):
        eager = _simulate(neuron.update, neuron, drive)
        jitted = transform.jit(neuron.update)
        with environ.context(t=0 * environ.get_dt(), i=0):
            jitted(drive)                                # compile before counting
        n, compiled = _compiles(lambda: _simulate(jitted, neuron, drive))
        environ.set_per_step("t", False)                 # brainstate's way, traced afresh
        afresh = _simulate(transform.jit(neuron.update), neuron, drive, n_steps=12)
    assert n == 0
    assert eager[0].any() and eager[0][:, 1:].sum() > 4  # the drives make several spikes
    np.testing.assert_array_equal(compiled[0], eager[0])
    np.testing.assert_array_equal(compiled[1], eager[1])
    np.testing.assert_allclose(compiled[2].mantissa, eager[2].mantissa, rtol=1e-6)
    np.testing.assert_array_equal(afresh[0], eager[0][:12])
    np.testing.assert_array_equal(afresh[1], eager[1][:12])


@pytest.mark.counts_traces
def test_dt_still_traces_again_when_it_changes():
    h = brainx.HiddenState(jnp.ones(3))
    traces = []

    @transform.jit
    def decay():
        traces.append(1)
        h.value = h.value * jnp.exp(-environ.get_dt() / 10.0) + environ.get("t")
        return h.value

    outs = []
    for dt in (1.0, 2.0, 1.0):
        with environ.context(dt=dt, t=dt * 3):
            outs.append(decay())
    assert len(traces) == 2                              # dt=1.0's trace kept for the third call
    assert environ.get_per_step("dt") is None and not is_per_step("dt", 0.1 * u.ms)
    h.value = jnp.ones(3)
    for dt, out in zip((1.0, 2.0, 1.0), outs):
        with environ.context(dt=dt, t=dt * 3):
            np.testing.assert_allclose(out, decay.__wrapped__(), rtol=1e-6)


# -- what a per-step value cannot do, and the way out --------------------------------------------
def test_a_python_branch_on_t_needs_t_static(per_step_default):
    def step():
        return jnp.ones(2) if environ.get("t") > 5 else jnp.zeros(2)

    with environ.context(t=10.0):
        with pytest.raises(jax.errors.TracerBoolConversionError):
            transform.jit(step)()
    environ.set_per_step("t", False)
    jitted = transform.jit(step)
    for t in (10.0, 1.0, 10.0):
        with environ.context(t=t):
            np.testing.assert_array_equal(jitted(), step())
    assert len(jitted._entries) == 1 and len(jitted._entries[()].env_reads) == 1


def test_a_compiled_step_called_without_t_says_how_to_set_it():
    jitted = transform.jit(lambda x: x * environ.get("t"))
    with environ.context(t=2.0):
        jitted(jnp.ones(2))
    with pytest.raises(UnsetStepValueError, match=r"reads the setting 't'.*environ.context\(t="):
        jitted(jnp.ones(2))
    with pytest.raises(KeyError, match="not found in the environment"):
        transform.jit(lambda x: x * environ.get("t"))(jnp.ones(2))   # unset at trace time


def test_set_per_step_refuses_other_values():
    with pytest.raises(TypeError, match="True, False or None"):
        environ.set_per_step("t", "yes")


# -- array and quantity settings, custom keys, type changes ----------------------------------
def test_an_array_setting_is_an_input_and_a_custom_key_can_be_made_one(per_step_default):
    jitted = transform.jit(lambda x: x * environ.get("drive") + environ.get("gain"))
    environ.set_per_step("gain", True)
    x = jnp.ones(3)
    with environ.context(drive=jnp.arange(3.0), gain=1.0):
        jitted(x)
    values = [(jnp.arange(3.0) * k, float(k)) for k in range(2, 6)]
    n, outs = _compiles(lambda: [_call_at(lambda: jitted(x), drive=d, gain=g)
                                 for d, g in values])
    assert n == 0 and jitted._entries[()].env_reads == {"drive": PER_STEP, "gain": PER_STEP}
    for (d, g), out in zip(values, outs):
        np.testing.assert_array_equal(out, x * d + g)


def test_a_value_of_another_type_gives_the_eager_result():
    fun = lambda x: x * environ.get("t") * 2          # noqa: E731
    jitted = transform.jit(fun)
    x = jnp.ones(2)
    for t in (1.5, 2, 3.0 * u.ms, jnp.asarray([1.0, 2.0]), 0.5 * u.second, 4.0):
        with environ.context(t=t):
            expected, out = fun(x), jitted(x)
        if isinstance(expected, u.Quantity):
            assert isinstance(out, u.Quantity) and out.unit == expected.unit
            np.testing.assert_allclose(out.mantissa, expected.mantissa, rtol=1e-6)
        else:
            np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_a_non_numeric_t_stays_in_the_key():
    jitted = transform.jit(lambda: jnp.asarray(len(environ.get("t"))))
    for t in ("noon", "midnight", "noon"):
        with environ.context(t=t):
            assert int(jitted()) == len(t)
    assert len(jitted._entries[()].env_reads) == 1


def test_environ_all_inside_a_trace_gives_the_current_t():
    jitted = transform.jit(lambda: environ.all()["t"] * 2.0)
    for t in (1.0, 5.0, -2.0):
        with environ.context(t=t):
            assert float(jitted()) == float(environ.all()["t"] * 2.0)
    assert jitted._entries[()].env_reads["t"] is PER_STEP


# -- transforms: loops, vmap, grad, nested jit, shared methods, threads --------------------------
def test_a_context_opened_inside_a_loop_body_is_the_body_s_own():
    h = brainx.HiddenState(jnp.zeros(()))

    def body(i):
        with environ.context(t=i * 0.5):
            h.value = h.value + environ.get("t")
        return h.value

    with environ.context(t=100.0):                       # outside value: never seen by the body
        eager = transform.for_loop(body, jnp.arange(4))
        h.value = jnp.zeros(())
        jitted = transform.jit(lambda xs: transform.for_loop(body, xs))(jnp.arange(4))
    expected = np.cumsum(np.arange(4) * 0.5)
    np.testing.assert_allclose(eager, expected)
    np.testing.assert_allclose(jitted, expected)


def test_loops_vmap_and_grad_read_the_t_of_each_call():
    h = brainx.HiddenState(jnp.zeros(()))

    def body(x):
        h.value = h.value + environ.get("t") * x
        return h.value

    run = transform.jit(lambda xs: transform.for_loop(body, xs))
    w = brainx.ParamState(jnp.asarray(1.5))
    loss = lambda: (w.value * environ.get("t")) ** 2  # noqa: E731
    grad = transform.grad(loss, grad_states=w)
    jitted_grad = transform.jit(grad)
    vmapped = transform.vmap(lambda x: x * environ.get("t"))
    xs = jnp.arange(4.0)
    for t in (1.0, 2.0, 3.0):
        with environ.context(t=t):
            h.value = jnp.zeros(())
            eager_loop = transform.for_loop(body, xs)
            h.value = jnp.zeros(())
            np.testing.assert_allclose(run(xs), eager_loop)
            np.testing.assert_allclose(eager_loop, np.cumsum(t * np.arange(4.0)), rtol=1e-6)
            expected = jax.grad(lambda v: (v * t) ** 2)(1.5)
            np.testing.assert_allclose(grad(), expected, rtol=1e-6)
            np.testing.assert_allclose(jitted_grad(), expected, rtol=1e-6)
            np.testing.assert_allclose(vmapped(xs), jax.vmap(lambda x: x * t)(xs))


def test_a_jitted_function_called_by_another_reads_the_outer_call_s_t():
    inner = transform.jit(lambda x: x * environ.get("t"))
    outer = transform.jit(lambda x: inner(x) + 1.0)
    x = jnp.ones(2)
    for t in (1.0, 2.0, 3.0):
        with environ.context(t=t):
            np.testing.assert_allclose(outer(x), x * t + 1.0)
            np.testing.assert_allclose(inner(x), x * t)
    assert len(outer._entries) == 1


def test_a_context_with_a_raw_jax_tracer_of_t():
    step = transform.jit(lambda x: x * environ.get("t"))

    @jax.jit
    def raw(t, x):
        with environ.context(t=t):
            return step(x)

    for t in (2.0, 3.0):
        np.testing.assert_allclose(raw(t, jnp.ones(2)), np.full(2, t))


class _Cell(brainx.nn.Module):
    def __init__(self):
        super().__init__()
        self.v = brainx.HiddenState(jnp.zeros(2))

    @transform.jit
    def step(self, x):
        self.v.value = self.v.value + x * environ.get("t")
        return self.v.value


def test_instances_sharing_a_jitted_method_read_the_t_of_each_call():
    a, b = _Cell(), _Cell()
    x = jnp.ones(2)
    ref = np.zeros(2)
    for t in (1.0, 2.0, 0.5):
        with environ.context(t=t):
            a.step(x)
            b.step(x)
        ref = ref + np.ones(2) * t
    np.testing.assert_allclose(a.v.value, ref)
    np.testing.assert_allclose(b.v.value, ref)


def test_instances_share_one_compiled_method_that_reads_t():
    a, b = _Cell(), _Cell()
    with environ.context(t=1.0):
        a.step(jnp.ones(2))
        b.step(jnp.ones(2))
    assert a.step._entries[()].jitted is b.step._entries[()].jitted


def test_threads_see_their_own_t():
    jitted = transform.jit(lambda x: x * environ.get("t"))
    with environ.context(t=1.0):
        jitted(jnp.ones(2))
    results, errors = {}, []

    def work(t):
        try:
            for _ in range(20):
                with environ.context(t=t):
                    results.setdefault(t, []).append(np.asarray(jitted(jnp.ones(2))))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(float(t),)) for t in range(1, 5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    for t, outs in results.items():
        for out in outs:
            np.testing.assert_array_equal(out, np.full(2, t))


# -- the setting's state is brainx's, not the program's (issue 42) ---------------------------
def test_a_state_class_filter_in_vmap2_does_not_select_a_setting():
    h = brainx.HiddenState(jnp.zeros(3))

    def f(x):
        h.value = h.value + x * environ.get("t")
        return h.value

    mapped = transform.vmap2(f, state_in_axes={0: brainx.State})
    with environ.context(t=2.0):
        out = mapped(jnp.arange(3.0))
    np.testing.assert_allclose(out, np.arange(3.0) * 2.0)   # lane by lane: h[k] + x[k] * t
    np.testing.assert_allclose(h.value, np.arange(3.0) * 2.0)
