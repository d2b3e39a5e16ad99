"""``Delay(update_every=T)``: one recorded value per period ``T``, rows ``T`` apart (brainstate's hold rule)."""

import warnings

import brainunit as u
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import environ, nn
from brainx.nn.dynamics.prefetch import PrefetchDelayAt, init_maybe_prefetch


def _reference(values, period, delay_periods):
    """What a hold-rule buffer read ``delay_periods`` back returns after each step, in plain NumPy."""
    out, recorded = [], []
    for i, v in enumerate(values):
        if i % period == 0:
            recorded.append(v)
        back = len(recorded) - 1 - delay_periods
        out.append(recorded[back] if back >= 0 else 0.0)
    return np.asarray(out)


def test_period_in_steps_and_rows_in_periods():
    with environ.context(dt=0.1):
        d = nn.Delay(jnp.zeros(2), time=1.0, update_every=0.5)
        assert d.update_every_step == 5 and d.max_length == 3   # 1.0 / 0.5 periods + the latest
        assert nn.Delay(jnp.zeros(2), time=1.2, update_every=0.3).update_every_step == 3  # 2.9999...
        assert nn.Delay(jnp.zeros(2), time=1.0).update_every_step == 1


def test_pointer_counts_steps_and_buffer_holds_one_value_per_period():
    with environ.context(dt=0.1):
        d = brainx.nn.init_all_states(nn.Delay(jnp.zeros(1), time=1.0, update_every=0.5))
        for i in range(11):
            d.update(jnp.full(1, float(i)))
        assert sorted(np.ravel(d.history.value).tolist()) == [0.0, 5.0, 10.0]
        for i in range(11, 20):
            d.update(jnp.full(1, float(i)))
        assert int(d.write_ptr.value) == 20 % (3 * 5)


@pytest.mark.parametrize("delay_periods", [0, 1, 2])
def test_registered_read_matches_a_numpy_reference_under_for_loop(delay_periods):
    with environ.context(dt=1.0 * u.ms):
        d = nn.Delay(jnp.zeros(()), entries={"late": delay_periods * 3.0 * u.ms},
                     update_every=3.0 * u.ms)
        brainx.nn.init_all_states(d)

        def step(x):
            d.update(x)
            return d.at("late")

        xs = jnp.arange(1.0, 21.0)
        got = brainx.transform.for_loop(step, xs)
    np.testing.assert_allclose(got, _reference(np.asarray(xs), 3, delay_periods))


def test_retrieve_at_time_counts_in_periods():
    with environ.context(dt=0.1):
        d = nn.Delay(jnp.zeros(1), time=1.0, update_every=0.5, interpolation="nearest")
        brainx.nn.init_all_states(d)
        for i in range(11):
            d.update(jnp.full(1, float(i)))
        with environ.context(t=1.0):
            assert float(d.retrieve_at_time(1.0)[0]) == 10.0
            assert float(d.retrieve_at_time(0.5)[0]) == 5.0
            assert float(d.retrieve_at_time(0.0)[0]) == 0.0


def test_period_shorter_than_dt_is_an_error_and_an_odd_period_warns():
    with environ.context(dt=0.1):
        with pytest.raises(ValueError, match="at least dt"):
            nn.Delay(jnp.zeros(2), time=1.0, update_every=0.06)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            d = nn.Delay(jnp.zeros(2), time=1.0, update_every=0.25)
        assert d.update_every_step == 2
        assert any("not a whole number of steps" in str(w.message) for w in caught)
    with environ.context(dt=0.1 * u.ms), pytest.raises(u.UnitMismatchError, match="update_every"):
        nn.Delay(jnp.zeros(2), time=1.0 * u.ms, update_every=0.5)


def test_a_ratio_off_by_float_round_off_is_a_whole_step():
    with environ.context(dt=0.01):
        assert nn.Delay(jnp.zeros(2), time=0.07).max_length == 8    # 0.07 / 0.01 = 7.000000000000001


def test_prefetch_delay_with_update_every_and_init_maybe_prefetch():
    with environ.context(dt=0.1 * u.ms):
        lif = nn.LIF(3)
        reader = PrefetchDelayAt(lif, "V", 1.0 * u.ms, update_every=0.2 * u.ms)
        assert reader.state_delay.update_every_step == 2
        init_maybe_prefetch(lif.prefetch("V").delay)                # found under its update_every
        with pytest.raises(KeyError, match="LIF has no delay buffer for 'spike'"):
            init_maybe_prefetch(lif.prefetch("spike").delay)
        PrefetchDelayAt(lif, "V", 1.0 * u.ms, update_every=0.5 * u.ms)
        with pytest.raises(ValueError, match="several update_every"):
            init_maybe_prefetch(lif.prefetch("V").delay)
        lif.prefetch_delay("V", 1.0 * u.ms)                         # the every-step buffer wins
        init_maybe_prefetch(lif.prefetch("V").delay)
