"""brainx.nn delays against a hand-rolled NumPy buffer, plain-JAX gradients and a plain-JAX network."""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import environ, nn

DT = 0.1  # ms


@pytest.fixture(autouse=True)
def dt_context():
    with environ.context(dt=DT * u.ms):
        yield


def delayed(written, k, d, init):
    """What a buffer read ``d`` steps back returns after ``k + 1`` writes (NumPy reference)."""
    return written[k - d] if k - d >= 0 else init


# -- integer-step delays --------------------------------------------------------------------
def test_entries_match_a_numpy_buffer_for_zero_to_max_delay_inside_for_loop():
    steps = {"zero": 0, "one": 1, "three": 3, "max": 5}
    init = np.array([-1.0, -2.0, -3.0], np.float32)
    delay = nn.Delay(jnp.zeros(3), init=init,
                     entries={k: s * DT * u.ms for k, s in steps.items()})
    nn.init_all_states(delay)
    assert delay.max_length == 6 and delay.history.value.shape == (6, 3)
    xs = np.random.RandomState(0).randn(14, 3).astype(np.float32)

    def step(x):
        delay.update(x)
        return {k: delay.at(k) for k in steps}

    got = brainx.transform.for_loop(step, jnp.asarray(xs))
    for k, s in steps.items():
        ref = np.stack([delayed(xs, i, s, init) for i in range(len(xs))])
        np.testing.assert_array_equal(np.asarray(got[k]), ref, err_msg=k)
    # the ring wrapped twice: reading by step agrees with the entries
    np.testing.assert_array_equal(delay.retrieve_at_step(4), xs[-5])


def test_reset_state_refills_init_and_rewinds_the_pointer():
    delay = nn.init_all_states(nn.Delay(jnp.zeros(2), time=2 * DT * u.ms, init=7.0))
    for i in range(5):
        delay.update(jnp.full(2, float(i)))
    nn.reset_all_states(delay)
    assert int(delay.write_ptr.value) == 0
    np.testing.assert_array_equal(delay.retrieve_at_step(2), [7.0, 7.0])
    delay.update(jnp.ones(2))
    np.testing.assert_array_equal(delay.retrieve_at_step(0), [1.0, 1.0])
    np.testing.assert_array_equal(delay.retrieve_at_step(1), [7.0, 7.0])


def test_times_become_steps_robustly_and_buffers_grow_with_entries():
    delay = nn.Delay(jnp.zeros(1))
    assert delay.register_delay(1.5 * u.ms)[0] == 15        # 1.5 / 0.1 = 15.000000000000002
    assert delay.register_delay(0.25 * u.ms)[0] == 3        # not whole: rounded up
    assert delay.max_length == 16 and delay.max_time == 1.5 * u.ms
    with pytest.raises(u.UnitMismatchError, match="same dimension"):
        delay.register_delay(3.0 * u.mV)
    with pytest.raises(ValueError, match="non-negative"):
        delay.register_delay(-1.0 * u.ms)


def test_step_ratios_whole_up_to_round_off_are_whole_and_others_round_up():
    """brainstate 0.6's rule: within 1e-6 * max(1, n) of a whole n is n, else the ceiling."""
    from brainx.nn.dynamics.delay_steps import delay_steps
    for k in (1, 3, 7, 9, 29, 57, 99, 113):          # k * 0.01 / 0.01 is k up to round-off
        assert int(delay_steps(k * 0.01, 0.01)) == k, k
    assert 0.07 / 0.01 > 7 and int(np.ceil(0.07 / 0.01)) == 8   # what a bare ceiling gives
    f32 = [int(delay_steps(jnp.asarray(k * 0.01, jnp.float32), 0.01)) for k in range(1, 200)]
    assert f32 == list(range(1, 200))                            # a float32 time: 9.000001 is 9
    assert int(delay_steps(0.25, 0.1)) == 3
    assert delay_steps(jnp.asarray([0.05, 0.1, 0.11]), 0.1).tolist() == [1, 1, 2]
    # the tolerance is relative to max(1, n): 1 + 5e-6 is a fraction (2 steps); around 1e5
    # it is 0.1 steps: 1e5 + 0.5 rounds up, 1e5 + 0.05 is 1e5
    assert int(delay_steps(1.000005, 1.0)) == 2
    assert int(delay_steps(1e5 + 0.5, 1.0)) == 100_001
    assert int(delay_steps(1e5 + 0.05, 1.0)) == 100_000
    with environ.context(dt=0.01):
        assert nn.Delay(jnp.zeros(2), time=0.07).max_length == 8    # 7 steps back + the latest


def test_pytree_and_quantity_values_keep_their_units():
    delay = nn.Delay({"V": jnp.zeros(2) * u.mV, "s": jnp.zeros(2)}, time=DT * u.ms)
    nn.init_all_states(delay)
    delay.update({"V": jnp.array([1.0, 2.0]) * u.volt, "s": jnp.ones(2)})
    delay.update({"V": jnp.array([3.0, 4.0]) * u.mV, "s": jnp.zeros(2)})
    old = delay.retrieve_at_step(1)
    assert old["V"].unit == u.mV
    np.testing.assert_allclose(old["V"].mantissa, [1000.0, 2000.0])
    np.testing.assert_array_equal(old["s"], [1.0, 1.0])
    with pytest.raises(u.UnitMismatchError, match="holds values in mV"):
        delay.update({"V": jnp.ones(2) * u.ms, "s": jnp.ones(2)})
    plain = nn.init_all_states(nn.Delay(jnp.zeros(2), time=DT * u.ms))
    with pytest.raises(u.UnitMismatchError, match="take_aware_unit"):
        plain.update(jnp.ones(2) * u.mV)
    learns = nn.init_all_states(nn.Delay(jnp.zeros(2), time=DT * u.ms, take_aware_unit=True))
    learns.update(jnp.ones(2) * u.mV)
    assert learns.retrieve_at_step(0).unit == u.mV


# -- per-element and per-connection delays -----------------------------------------------------
def test_per_neuron_and_per_connection_delays_match_numpy():
    rng = np.random.RandomState(1)
    n_pre, n_post = 4, 3
    per_neuron = np.array([0, 2, 5, 1])
    per_conn = rng.randint(0, 6, size=(n_pre, n_post))
    delay = nn.Delay(jnp.zeros(n_pre))
    delay.register_entry("neuron", per_neuron * DT * u.ms, jnp.arange(n_pre))
    delay.register_entry("conn", per_conn * DT * u.ms, jnp.arange(n_pre)[:, None])
    nn.init_all_states(delay)
    xs = rng.rand(9, n_pre).astype(np.float32)
    for k, x in enumerate(xs):
        delay.update(x)
        ref_neuron = [delayed(xs, k, per_neuron[i], np.zeros(n_pre))[i] for i in range(n_pre)]
        ref_conn = [[delayed(xs, k, per_conn[i, j], np.zeros(n_pre))[i] for j in range(n_post)]
                    for i in range(n_pre)]
        np.testing.assert_array_equal(delay.at("neuron"), ref_neuron)
        np.testing.assert_array_equal(delay.at("conn"), ref_conn)


def test_batched_buffer_reads_each_lane_with_per_neuron_delays():
    steps = np.array([1, 0, 2])
    delay = nn.Delay(jnp.zeros(3))
    delay.register_entry("d", steps * DT * u.ms, jnp.arange(3))
    nn.init_all_states(delay, batch_size=2)
    assert delay.history.value.shape == (3, 2, 3)
    xs = np.arange(4 * 2 * 3, dtype=np.float32).reshape(4, 2, 3)
    for x in xs:
        delay.update(x)
    ref = np.stack([xs[3 - steps[i], :, i] for i in range(3)], axis=-1)
    np.testing.assert_array_equal(delay.at("d"), ref)
    np.testing.assert_array_equal(delay.retrieve_at_step(1), xs[2])


# -- continuous time -------------------------------------------------------------------------
def test_linear_interpolation_of_fractional_delays_and_retrieve_at_time():
    delay = nn.Delay(jnp.zeros(2), interpolation="linear")
    delay.register_entry("frac", 1.25 * DT * u.ms)
    delay.register_entry("whole", 2 * DT * u.ms)
    nn.init_all_states(delay)
    xs = np.random.RandomState(2).rand(5, 2).astype(np.float32)
    for x in xs:
        delay.update(x)
    np.testing.assert_allclose(delay.at("frac"), 0.75 * xs[-2] + 0.25 * xs[-3], rtol=1e-6)
    np.testing.assert_array_equal(delay.at("whole"), xs[-3])
    # the latest value is at time t; one 0.6 steps further back mixes the two around it
    with environ.context(t=10.0 * u.ms):
        got = delay.retrieve_at_time(10.0 * u.ms - 0.6 * DT * u.ms)
        np.testing.assert_allclose(got, 0.4 * xs[-1] + 0.6 * xs[-2], rtol=1e-5)
        np.testing.assert_array_equal(delay.retrieve_at_time(10.0 * u.ms - 2 * DT * u.ms), xs[-3])
    rounding = nn.Delay(jnp.zeros(2), interpolation="nearest", time=2 * DT * u.ms)
    rounding.register_entry("near", 1.4 * DT * u.ms)
    nn.init_all_states(rounding)
    for x in xs:
        rounding.update(x)
    np.testing.assert_array_equal(rounding.at("near"), xs[-2])
    default = nn.Delay(jnp.zeros(2), entries={"up": 1.4 * DT * u.ms})   # brainstate: round up
    nn.init_all_states(default)
    for x in xs:
        default.update(x)
    np.testing.assert_array_equal(default.at("up"), xs[-3])


# -- gradients -----------------------------------------------------------------------------
def test_gradient_through_a_delayed_read_in_for_loop_matches_plain_jax():
    rng = np.random.RandomState(3)
    inputs = jnp.asarray(rng.randn(12, 3).astype(np.float32))
    coef = jnp.asarray(rng.randn(12, 3).astype(np.float32))
    w0 = jnp.asarray([0.5, -1.0, 2.0])
    w = brainx.ParamState(w0)
    delay = nn.init_all_states(nn.Delay(jnp.zeros(3), entries={"d": 3 * DT * u.ms,
                                                              "f": 1.5 * DT * u.ms},
                                        interpolation="linear"))

    def loss():
        nn.reset_all_states(delay)

        def step(x, c):
            delay.update(jnp.tanh(w.value * x))
            return jnp.sum(c * delay.at("d") ** 2) + jnp.sum(delay.at("f"))

        return brainx.transform.for_loop(step, inputs, coef).sum()

    grad = brainx.transform.jit(brainx.transform.grad(loss, grad_states=w))()

    def ref_loss(wv):
        h = jnp.tanh(wv * inputs)
        pad = jnp.concatenate([jnp.zeros((3, 3)), h])            # zeros before t0
        d3 = pad[:-3]                                            # h[k - 3]
        f = 0.5 * pad[2:-1] + 0.5 * pad[1:-2]                    # h[k - 1.5]
        return jnp.sum(coef * d3 ** 2) + jnp.sum(f)

    np.testing.assert_allclose(grad, jax.grad(ref_loss)(w0), rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(grad) != 0)


# -- a spiking network with axonal delays ------------------------------------------------------
N, TAU, V_TH, DELAY_MS = 30, 10.0, 1.0, 1.5


class DelayedNet(nn.Module):
    def __init__(self, W):
        super().__init__()
        self.lif = nn.LIF(N, tau=TAU * u.ms, V_th=V_TH * u.mV, spk_reset="hard")
        self.W = W
        self.axon = self.lif.output_delay(DELAY_MS * u.ms)       # spikes 1.5 ms ago

    def update(self, ext):
        rec = self.axon() @ self.W                                # delayed recurrent input
        return self.lif((ext + rec) * u.mA)


def network_reference(W, ext, delay_steps):
    """The same network in plain JAX: lax.scan over an explicit spike history."""
    decay = np.exp(-DT / TAU)
    n_steps = ext.shape[0]

    def step(carry, inp):
        V, hist, k = carry
        spk_prev = (V >= V_TH).astype(jnp.float32)               # the spikes of the last step
        row = k - 1 - delay_steps                                 # written delay_steps before
        past = jnp.where(row >= 0, hist[jnp.maximum(row, 0)], 0.0)
        x = inp + past @ W
        V = jnp.where(spk_prev > 0, 0.0, V)                       # hard reset to V_reset = 0
        V = x + (V - x) * decay
        spk = (V >= V_TH).astype(jnp.float32)
        hist = hist.at[k].set(spk)
        return (V, hist, k + 1), spk

    init = (jnp.zeros(N), jnp.zeros((n_steps, N)), 0)
    return jax.lax.scan(step, init, ext)[1]


def test_network_with_1p5_ms_axonal_delays_matches_a_plain_jax_scan():
    rng = np.random.RandomState(4)
    W = jnp.asarray(rng.uniform(-0.5, 0.8, size=(N, N)).astype(np.float32))
    ext = jnp.asarray(rng.uniform(1.0, 3.0, size=(300, N)).astype(np.float32))
    net = nn.init_all_states(DelayedNet(W))
    assert net.lif.get_after_update("output-delay-None").max_length == 16
    assert any("output-delay-None.history" in str(p) for p in net.states())
    spikes = np.asarray(brainx.transform.for_loop(net.update, ext))
    ref = np.asarray(network_reference(W, ext, 15))
    assert 100 < spikes.sum() < spikes.size / 3
    np.testing.assert_array_equal(spikes, ref)
    # the delay matters: one step shorter gives other spike times
    assert np.any(np.asarray(network_reference(W, ext, 14)) != ref)


# -- states that follow a module ----------------------------------------------------------------
def test_prefetch_delay_records_the_state_after_each_step_in_a_jitted_step():
    lif = nn.LIF(2, tau=5.0 * u.ms)
    V_late = lif.prefetch_delay("V", 3 * DT * u.ms)
    V_now = lif.prefetch("V")
    nn.init_all_states(lif, batch_size=4)
    step = brainx.transform.jit(lambda x: (lif(x), V_now(), V_late()))
    xs = np.random.RandomState(5).uniform(0, 3, size=(8, 4, 2)).astype(np.float32) * u.mA
    Vs, lates = [], []
    for x in xs:
        _, v, late = step(x)
        Vs.append(v.to_decimal(u.mV))
        lates.append(late.to_decimal(u.mV))
    for k in range(8):
        ref = Vs[k - 3] if k >= 3 else np.zeros((4, 2))
        np.testing.assert_allclose(lates[k], ref, rtol=1e-6)
    delay = lif.get_after_update("V-prefetch-delay-None")
    assert isinstance(delay, nn.StateWithDelay) and delay.history.value.shape == (4, 4, 2)
    nn.reset_all_states(lif, batch_size=4)
    np.testing.assert_array_equal(V_late().to_decimal(u.mV), np.zeros((4, 2)))


def test_delay_errors_say_what_to_do():
    with brainx.environ.context(dt=DT * u.ms), pytest.raises(ValueError, match="at least dt"):
        nn.Delay(jnp.zeros(2), update_every=DT / 2 * u.ms)
    with pytest.raises(ValueError, match="interpolation"):
        nn.Delay(jnp.zeros(2), interpolation="cubic-ish")
    delay = nn.Delay(jnp.zeros(2), time=DT * u.ms)
    with pytest.raises(RuntimeError, match="call init_state"):
        delay.update(jnp.ones(2))
    nn.init_all_states(delay)
    with pytest.raises(RuntimeError, match="Register every delay before init_state"):
        delay.register_entry("long", 5 * DT * u.ms)
    with pytest.raises(KeyError, match="no entry 'nope'.*register_entry"):
        delay.at("nope")
    with pytest.raises(ValueError, match=r"outside \[0, 1\]"):
        delay.retrieve_at_step(2)
    with pytest.raises(ValueError, match="shape"):
        delay.update(jnp.ones(3))
    with pytest.raises(TypeError, match="Dynamics"):
        nn.PrefetchDelayAt(nn.Linear(2, 2), "weight", 1.0 * u.ms)
    lif = nn.LIF(2)
    reader = lif.prefetch_delay("nothing", DT * u.ms)
    with pytest.raises(TypeError, match="not a State"):
        nn.init_all_states(lif)
    assert reader.state_delay is lif.get_after_update("nothing-prefetch-delay-None")


def test_a_cloned_module_records_its_own_state():
    lif = nn.LIF(2, tau=5.0 * u.ms)
    V_late = lif.prefetch_delay("V", DT * u.ms)
    nn.init_all_states(lif)
    twin = brainx.graph.clone(lif)
    twin_delay = twin.get_after_update("V-prefetch-delay-None")
    assert twin_delay.state is twin.V and twin_delay.history is not V_late.state_delay.history
    twin(2.0 * u.mA)
    twin(2.0 * u.mA)
    np.testing.assert_allclose(twin_delay.retrieve_at_step(1).to_decimal(u.mV),
                               2.0 * -np.expm1(-DT / 5.0), rtol=1e-5)
    np.testing.assert_array_equal(V_late().to_decimal(u.mV), [0.0, 0.0])   # the original: untouched


def test_traced_delay_steps_are_checked_under_jit_error_check():
    delay = nn.init_all_states(nn.Delay(jnp.zeros(2), time=2 * DT * u.ms))
    read = brainx.transform.jit(lambda s: delay.retrieve_at_step(s))
    np.testing.assert_array_equal(read(1), [0.0, 0.0])
    with environ.context(jit_error_check=True):
        checked = brainx.transform.jit(lambda s: delay.retrieve_at_step(s))
        with pytest.raises(Exception, match=r"outside \[0, 2\]"):
            jax.block_until_ready(checked(3))


def test_retrieve_at_time_with_a_traced_clock_inside_for_loop():
    delay = nn.init_all_states(nn.Delay(jnp.zeros(1), time=3 * DT * u.ms))
    xs = np.random.RandomState(6).rand(10, 1).astype(np.float32)

    def step(i, x):
        with environ.context(t=i * DT * u.ms):
            delay.update(x)
            return delay.retrieve_at_time((i - 1.5) * DT * u.ms)

    got = np.asarray(brainx.transform.for_loop(step, jnp.arange(10), jnp.asarray(xs)))
    pad = np.concatenate([np.zeros((2, 1), np.float32), xs])
    np.testing.assert_allclose(got, 0.5 * (pad[1:-1] + pad[:-2]), rtol=1e-5, atol=1e-6)


# -- interpolation methods of retrieve_at_time ---------------------------------------------
@pytest.mark.parametrize("method, exact_for", [("cubic", 2), ("hermite", 2), ("polynomial2", 2),
                                               ("polynomial3", 3)])
def test_registered_interpolations_reproduce_the_polynomials_they_fit(method, exact_for):
    """Each method is exact on the polynomials it fits (Catmull-Rom: up to quadratics); the
    value between rows is compared with the polynomial itself at that time."""
    poly = (lambda s: 0.5 * s * s - s + 2.0) if exact_for == 2 else (lambda s: s ** 3 - s)
    delay = nn.Delay(jnp.zeros(2), time=2.0 * u.ms, interpolation=method)
    nn.init_all_states(delay)
    for i in range(25):                          # the value written at step i is poly(i)
        delay.update(jnp.full(2, poly(float(i))))
    now = 24 * DT
    for back in (3.25, 7.5, 12.8):               # steps back, between rows
        with environ.context(t=now * u.ms):
            got = delay.retrieve_at_time((now - back * DT) * u.ms)
        np.testing.assert_allclose(got, np.full(2, poly(24 - back)), rtol=1e-4, atol=1e-4)


def test_a_custom_interpolation_by_function_or_registered_name_and_bad_ones():
    def floor_row(history, indices, float_idx, max_length):   # brainstate's protocol
        row = (jnp.floor(float_idx).astype(jnp.int32) % max_length,) + indices
        return jax.tree.map(lambda h: h[row], history)

    nn.InterpolationRegistry.register("floor_for_test", floor_row)
    assert nn.InterpolationRegistry.get("floor_for_test") is floor_row
    for how in (floor_row, "floor_for_test"):
        delay = nn.Delay(jnp.zeros(1) * u.mV, time=2.0 * u.ms, interpolation=how)
        nn.init_all_states(delay)
        for i in range(30):
            delay.update(jnp.full(1, float(i)) * u.mV)
        with environ.context(t=2.9 * u.ms):        # 29 is now: 4.5 steps back is row 24.5
            got = delay.retrieve_at_time(2.45 * u.ms)
        assert u.math.allclose(got, jnp.full(1, 24.0) * u.mV)   # floor of row 24.5, in mV
        assert delay.register_entry(f"e{id(how)}", 0.25 * u.ms)[0] == 3     # entries round up
    with pytest.raises(TypeError, match="method name or a function"):
        nn.Delay(jnp.zeros(1), interpolation=123)
    with pytest.raises(ValueError, match="'spline' is not a known interpolation method"):
        nn.Delay(jnp.zeros(1), interpolation="spline")
    with pytest.raises(ValueError, match="Unknown interpolation method"):
        nn.InterpolationRegistry.get("spline")


def test_init_forms_and_reads_of_the_future():
    """An initialiser taking ``dtype`` gets it (brainstate's ``init(shape, dtype)``), one taking
    the shape alone works too; anything else is refused; a time after now is an error."""
    seen = []

    def with_dtype(shape, dtype):
        seen.append((shape, dtype))
        return jnp.full(shape, 7.0, dtype)

    delay = nn.Delay(jnp.zeros(2, jnp.float32), time=0.2 * u.ms, init=with_dtype)
    nn.init_all_states(delay)
    assert seen == [((3, 2), jnp.float32)]
    np.testing.assert_array_equal(delay.history.value, np.full((3, 2), 7.0))
    shape_only = nn.init_all_states(nn.Delay(jnp.zeros(2), time=0.1 * u.ms,
                                             init=nn.init.Constant(3.0)))
    np.testing.assert_array_equal(shape_only.history.value, np.full((2, 2), 3.0))
    with pytest.raises(TypeError, match="init must be None, a number"):
        nn.Delay(jnp.zeros(2), time=0.1 * u.ms, init="not-valid")
    with environ.context(t=1.0 * u.ms):
        assert delay.retrieve_at_time(1.0 * u.ms).shape == (2,)        # now: the latest
        for ahead in (0.1, 0.01):
            with pytest.raises(ValueError, match="after the current time"):
                delay.retrieve_at_time((1.0 + ahead) * u.ms)
