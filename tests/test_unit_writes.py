"""A write that drops or changes a Quantity's unit is refused, naming the state (eager, jit,
loops, trees)."""


import brainunit as u
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform as bt


# -- 5. a write that drops a unit names the state ----------------------------------------------
def _mv_state():
    return brainx.State(jnp.arange(3.0) * u.mV, name="membrane")


def _assert_kept(s):
    assert s.value.unit == u.mV
    np.testing.assert_array_equal(s.value.mantissa, np.arange(3.0))


DROPPED = r"State\(.*name='membrane'.*drops its unit: from mV to dimensionless"


def test_eager_write_dropping_a_unit_names_the_state():
    s = _mv_state()
    with pytest.raises(brainx.StateTypeError, match=DROPPED):
        s.value = jnp.ones(3)
    _assert_kept(s)
    with pytest.raises(brainx.StateTypeError, match=r"changes its unit: from mV to mA"):
        s.value = jnp.ones(3) * u.mA
    _assert_kept(s)
    # a unit of the same dimension is a write as brainunit computes it
    s.value = s.value + 1 * u.volt
    assert u.math.allclose(s.value, jnp.arange(3.0) * u.mV + 1 * u.volt)


def test_jit_write_dropping_a_unit_names_the_state_and_changes_nothing():
    s = _mv_state()

    @bt.jit
    def reset():
        s.value = jnp.zeros(3)                       # never read: the old value is not traced
    with pytest.raises(brainx.StateTypeError, match=DROPPED):
        reset()
    _assert_kept(s)

    @bt.jit
    def strip():
        s.value = s.value.mantissa * 2
    with pytest.raises(brainx.StateTypeError, match=DROPPED):
        strip()
    _assert_kept(s)

    @bt.jit
    def good():
        s.value = s.value * 2                        # keeps mV: as eager brainunit
    good()
    assert u.math.allclose(s.value, jnp.arange(3.0) * 2 * u.mV)


def test_loop_write_dropping_a_unit_names_the_state():
    s = _mv_state()

    def step(x):
        s.value = s.value.mantissa + x
        return x
    with pytest.raises(brainx.StateTypeError, match=DROPPED):
        bt.for_loop(step, jnp.ones((4, 3)))
    _assert_kept(s)

    def good(x):
        s.value = s.value + x * u.mV
        return s.value.mantissa.sum()
    out = bt.for_loop(good, jnp.ones((4, 3)))        # eager: the value after step k is v0 + k
    np.testing.assert_allclose(out, [np.sum(np.arange(3.0) + k) for k in range(1, 5)])
    assert s.value.unit == u.mV
    np.testing.assert_allclose(s.value.mantissa, np.arange(3.0) + 4)


def test_a_unit_dropped_in_a_tree_names_the_leaf_and_plain_states_take_units():
    net = brainx.nn.Linear(3, 2, w_init=jnp.ones((3, 2)) * u.mA)
    old = net.weight.value
    with pytest.raises(brainx.StateTypeError, match=r"drops its unit at leaf \['weight'\]"):
        net.weight.value = {"weight": jnp.ones((3, 2)), "bias": old["bias"]}
    assert net.weight.value is old
    plain = brainx.State(jnp.zeros(3))
    plain.value = jnp.ones(3) * u.mV                 # no unit to keep: may be given one
    assert plain.value.unit == u.mV
    dimensionless = brainx.State(u.Quantity(jnp.zeros(3)))
    dimensionless.value = jnp.ones(3)                # no unit to drop
