"""nn.Delay's older brainstate arguments, delay_method and interp_method (hit by brainstate's
tutorials, tests/compat/run_tutorials.py), against NumPy references."""

import brainunit as u
import jax.numpy as jnp
import numpy as np
import pytest

from brainx import environ, nn

DT = 0.1  # ms


@pytest.fixture(autouse=True)
def dt_context():
    with environ.context(dt=DT * u.ms):
        yield



# -- Delay: brainstate's older arguments delay_method / interp_method ------------------------
def _ramp(delay, n):
    """Write 0, 1, ..., n-1 (one per step) and leave t at the last step's time."""
    for i in range(n):
        delay.update(jnp.array([float(i)]))
    return environ.context(t=(n - 1) * DT * u.ms)


@pytest.mark.parametrize("method", ["rotation", "concat", None])
def test_delay_method_kinds_all_read_the_same_ring_buffer(method):
    if method == "concat":   # deprecated, as in brainstate 0.6: one ring buffer for all
        with pytest.warns(DeprecationWarning, match="deprecated"):
            delay = nn.Delay(jnp.zeros(1), time=0.5 * u.ms, delay_method=method)
    else:
        delay = nn.Delay(jnp.zeros(1), time=0.5 * u.ms, delay_method=method)
    delay.register_entry("three", 0.3 * u.ms)
    nn.init_all_states(delay)
    got = []
    for i in range(9):
        delay.update(jnp.array([float(i)]))
        got.append(float(delay.at("three")[0]))
    # three steps back, zeros before anything was written
    np.testing.assert_array_equal(got, [0, 0, 0, 0, 1, 2, 3, 4, 5])
    assert delay.delay_method == "rotation"


def test_delay_method_unknown_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="'rotation' or 'concat'"):
        nn.Delay(jnp.zeros(1), time=1.0 * u.ms, delay_method="shift")


def test_interp_method_round_reads_the_nearest_step_in_retrieve_at_time():
    delay = nn.init_all_states(nn.Delay(jnp.zeros(1), time=5.0 * u.ms, interp_method="round"))
    with _ramp(delay, 100):
        now = 99 * DT * u.ms
        for back, expected in ((2.5, 99 - 25), (2.54, 99 - 25), (2.56, 99 - 26), (0.04, 99)):
            got = delay.retrieve_at_time(now - back * u.ms)
            assert float(got[0]) == pytest.approx(expected), back


def test_interp_method_linear_interp_is_the_default_and_interpolates():
    for kw in ({}, {"interp_method": "linear_interp"}):
        delay = nn.init_all_states(nn.Delay(jnp.zeros(1), time=5.0 * u.ms, **kw))
        with _ramp(delay, 100):
            got = delay.retrieve_at_time(99 * DT * u.ms - 2.54 * u.ms)
        assert float(got[0]) == pytest.approx(99 - 25.4, abs=1e-3)   # a ramp: linear is exact


def test_interp_method_does_not_change_registered_entries_which_round_up():
    """As in brainstate, a registered fractional delay reads ceil(t / dt) steps back."""
    for method in ("round", "linear_interp"):
        delay = nn.Delay(jnp.zeros(1), time=1.0 * u.ms, interp_method=method)
        delay.register_entry("frac", 0.24 * u.ms)                  # 2.4 steps -> 3
        nn.init_all_states(delay)
        with _ramp(delay, 10):
            assert float(delay.at("frac")[0]) == 9 - 3


def test_interpolation_wins_over_interp_method():
    delay = nn.init_all_states(nn.Delay(jnp.zeros(1), time=5.0 * u.ms, interpolation="linear",
                                        interp_method="round"))
    with _ramp(delay, 100):
        got = delay.retrieve_at_time(99 * DT * u.ms - 2.54 * u.ms)
    assert float(got[0]) == pytest.approx(99 - 25.4, abs=1e-3)


def test_interp_method_unknown_names_the_choices():
    with pytest.raises(ValueError, match=r"interp_method='spline' is not a known .*'cubic'"):
        nn.Delay(jnp.zeros(1), time=1.0 * u.ms, interp_method="spline")
    assert nn.Delay(jnp.zeros(1), time=1.0 * u.ms, interp_method="cubic").interp_method == "cubic"


def test_registered_entries_map_names_to_whole_steps_and_indices():
    delay = nn.Delay(jnp.zeros(3), time=1.0 * u.ms)
    delay.register_entry("now", 0.0 * u.ms)
    delay.register_entry("frac", 0.25 * u.ms)
    idx = jnp.arange(3)
    delay.register_entry("each", jnp.array([0.1, 0.2, 0.3]) * u.ms, idx)
    entries = delay._registered_entries
    assert list(entries) == ["now", "frac", "each"]
    assert entries["now"] == (0,) and entries["frac"] == (3,)
    np.testing.assert_array_equal(entries["each"][0], [1, 2, 3])
    assert entries["each"][1] is idx


def test_state_with_delay_takes_delay_method():
    class Leaky(nn.Dynamics):
        def init_state(self, batch_size=None):
            from brainx import HiddenState
            self.V = HiddenState(jnp.zeros(self.varshape))

        def update(self, x):
            self.V.value = self.V.value * 0.5 + x
            return self.V.value

    cell = nn.init_all_states(Leaky(2))
    tracked = nn.StateWithDelay(target=cell, item="V", delay_method="rotation")
    tracked.register_entry("two", 0.2 * u.ms)
    nn.init_all_states(tracked)
    V = np.zeros(2)
    history = []
    for i in range(6):
        x = np.array([1.0, 2.0]) * i
        cell.update(jnp.asarray(x))
        tracked.update()
        V = V * 0.5 + x
        history.append(V.copy())
    np.testing.assert_allclose(tracked.at("two"), history[-3], rtol=1e-6)
