"""``brainx.compat.private.nn`` and ``.random``: brainstate's private helpers of ``brainstate.nn``
(``_delay``, ``_dynamics``, ``_normalizations``, ``_common``) and ``brainstate.random._state``,
checked against plain JAX / NumPy and the exact results brainstate 0.6.0 documents."""

import brainunit as u
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import brainx
from brainx import environ, nn
from brainx.compat.private import nn as pnn
from brainx.compat.private import random as prandom


class _Neuron(nn.Dynamics):
    def init_state(self, *args, **kwargs):
        self.V = brainx.HiddenState(jnp.zeros(self.varshape))

    def update(self, x=0.0):
        self.V.value = self.V.value + x
        return self.V.value


# -- nn._delay ------------------------------------------------------------------------------
def test_get_delay_rounds_whole_ratios_to_them_and_others_up():
    for k in (1, 3, 7, 9, 29, 57, 99, 113):
        time, steps = pnn._get_delay(k * 0.01, 0.01)
        assert time == k * 0.01 and int(steps) == k
    assert [int(pnn._get_delay(jnp.asarray(k * 0.01, jnp.float32), 0.01)[1])
            for k in range(1, 200)] == list(range(1, 200))
    assert int(pnn._get_delay(0.25, 0.1)[1]) == 3
    steps = pnn._get_delay(jnp.asarray([0.05, 0.1, 0.11]), 0.1)[1]
    assert steps.tolist() == [1, 1, 2] and steps.dtype == environ.ditype()
    assert int(pnn._get_delay(1.5 * u.ms, 0.1 * u.ms)[1]) == 15
    assert pnn._get_delay(None, 0.1) == (0.0, 0)


def test_interpolation_functions_read_the_ring_buffer_like_numpy():
    history = jnp.arange(10.0).reshape(5, 2)              # 5 rows of 2 values
    np.testing.assert_allclose(pnn._nearest_interpolation(history, (), 2.6, 5), [6.0, 7.0])
    np.testing.assert_allclose(pnn._nearest_interpolation(history, (), -0.4, 5), [0.0, 1.0])
    # between row 4 and row 5 = row 0 (the ring wraps): 0.25 of the way
    np.testing.assert_allclose(pnn._linear_interpolation(history, (), 4.25, 5),
                               0.75 * np.array([8.0, 9.0]) + 0.25 * np.array([0.0, 1.0]))
    np.testing.assert_allclose(pnn._linear_interpolation(history, (jnp.array([1]),), 1.5, 5),
                               [0.5 * 3.0 + 0.5 * 5.0])


# -- nn._dynamics ---------------------------------------------------------------------------
def test_prefetch_helpers_find_the_delay_whatever_its_update_every():
    assert pnn._get_prefetch_delay_key("V", None) == "V-prefetch-delay-None"
    assert pnn._get_output_delay_key(None) == "output-delay-None"
    with environ.context(dt=0.1 * u.ms):
        plain = _Neuron(3)
        plain.prefetch_delay("V", 1.0 * u.ms)
        delay = pnn._get_prefetch_item_delay(plain.prefetch("V").delay)
        assert delay is plain.get_after_update("V-prefetch-delay-None")
        assert isinstance(delay, nn.StateWithDelay)

        slow = _Neuron(3)
        nn.PrefetchDelayAt(slow, "V", 1.0 * u.ms, update_every=0.2 * u.ms)
        key = pnn._get_prefetch_delay_key("V", 0.2 * u.ms)
        assert pnn._get_prefetch_item_delay(slow.prefetch("V").delay) is slow.get_after_update(key)
        nn.PrefetchDelayAt(slow, "V", 1.0 * u.ms, update_every=0.5 * u.ms)
        with pytest.raises(ValueError, match="several"):
            pnn._get_prefetch_item_delay(slow.prefetch("V").delay)

        with pytest.raises(KeyError, match="no delay buffer for 'V'"):
            pnn._get_prefetch_item_delay(_Neuron(3).prefetch("V").delay)

        class NotDynamics:
            module, item = object(), "V"

        with pytest.raises(AssertionError):
            pnn._get_prefetch_item_delay(NotDynamics())
        ready = nn.init_all_states(_Neuron(2))
        assert pnn._get_prefetch_item(ready.prefetch("V")) is ready.V
        with pytest.raises(AttributeError, match="'W'"):
            pnn._get_prefetch_item(ready.prefetch("W"))


# -- nn._normalizations ---------------------------------------------------------------------
def test_compute_stats_matches_numpy_with_the_reduced_axes_removed():
    rng = np.random.RandomState(0)
    x = rng.randn(8, 3, 4).astype(np.float32)
    for fast in (True, False):
        mean, var = pnn._compute_stats(x, (0, -1), dtype=None, use_fast_variance=fast)
        assert mean.shape == var.shape == (3,)
        np.testing.assert_allclose(mean, x.mean(axis=(0, 2)), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(var, x.var(axis=(0, 2)), rtol=1e-4, atol=1e-6)
    mean, var = pnn._compute_stats(jnp.arange(12, dtype=jnp.int32).reshape(3, 4), (0,), None)
    assert mean.dtype == jnp.float32 and mean.tolist() == [4.0, 5.0, 6.0, 7.0]
    # over a named axis: the statistics of all lanes together
    lanes = rng.randn(2, 6, 4).astype(np.float32)
    mus, vs = jax.vmap(lambda xi: pnn._compute_stats(xi, (0,), None, axis_name="b"),
                       axis_name="b")(lanes)
    np.testing.assert_allclose(mus[0], lanes.reshape(12, 4).mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vs[1], lanes.reshape(12, 4).var(0), rtol=1e-4, atol=1e-6)


def test_dtype_and_axis_helpers():
    assert pnn.canonicalize_dtype(jnp.array([1, 2])) == jnp.float32
    assert pnn.canonicalize_dtype(jnp.array([1, 2]), None, dtype=jnp.float16) == jnp.float16
    assert pnn.canonicalize_dtype(jnp.array([1, 2]), inexact=False) == jnp.int32
    with pytest.raises(ValueError, match="inexact"):
        pnn.canonicalize_dtype(jnp.array([1.0]), dtype=jnp.int32)
    assert pnn._canonicalize_axes(3, (-1, -2)) == (2, 1)          # in the order given
    with pytest.raises(ValueError, match="Invalid axis 5"):
        pnn._canonicalize_axes(2, (5,))
    np.testing.assert_allclose(pnn._abs_sq(jnp.array([3 + 4j], jnp.complex64)), [25.0])
    np.testing.assert_allclose(pnn._abs_sq(jnp.array([2.0, -3.0])), [4.0, 9.0])


# -- nn._common -----------------------------------------------------------------------------
def test_filter_states_and_to_predicate_select_states():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = brainx.ParamState(jnp.ones(3))
            self.s = brainx.ShortTermState(jnp.zeros(3))

    m = M()
    assert pnn._filter_states(m, None) is None
    assert list(pnn._filter_states(m, brainx.ParamState).values()) == [m.p]
    by_axis = pnn._filter_states(m, {brainx.ParamState: 0, brainx.ShortTermState: 1})
    assert list(by_axis[0].values()) == [m.p] and list(by_axis[1].values()) == [m.s]
    pick = pnn.ToPredicate([m.p])
    assert pick(("p",), m.p) and not pick(("s",), m.s)
    assert list(m.states(pick).values()) == [m.p]
    assert pnn._MapCaller is nn.modules.map_module.MapCaller


# -- random._state --------------------------------------------------------------------------
def test_random_helpers():
    key = prandom.formalize_key(42)
    np.testing.assert_array_equal(jr.key_data(key), jr.key_data(jr.key(42)))
    assert prandom.formalize_key(key) is key
    raw = np.array([0, 7], np.uint32)
    np.testing.assert_array_equal(jr.key_data(prandom.formalize_key(raw)), raw)
    for bad in ("invalid", np.array([1, 2, 3], np.uint32), np.array([1, 2], np.int32)):
        with pytest.raises(TypeError):
            prandom.formalize_key(bad)
    assert prandom._size2shape(None) == () and prandom._size2shape(5) == (5,)
    assert prandom._size2shape([2, 3, 4]) == (2, 3, 4)
    assert prandom._check_py_seq([1, 2, 3]).tolist() == [1, 2, 3]
    scalar = 3.0
    assert prandom._check_py_seq(scalar) is scalar
    assert prandom.RandomState is brainx.random.RandomState
