"""A delay of a state with units, filled with a plain initial history (as brainstate's clients do).

brainstate keeps the history as mantissas in the state's unit, so a plain init (zeros, or any
number) is a value in that unit. Reference: a NumPy buffer of mantissas in the state's unit.
"""

import brainunit as u
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


class Neuron(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def init_state(self, batch_size=None, **kwargs):
        self.V = brainx.HiddenState(jnp.full((self.n,), -70.0) * u.mV)


@pytest.mark.parametrize("init, mantissa", [
    (jnp.zeros(3), 0.0),                                           # plain zeros
    (lambda shape, dtype=None: jnp.zeros(shape, dtype), 0.0),      # a client's initialiser
    (nn.init.ZeroInit(), 0.0),
    (-65.0, -65.0),                                                # a plain number: in mV
    (-0.065 * u.volt, -65.0),                                      # a Quantity: converted
], ids=["zeros", "callable", "ZeroInit", "number", "quantity"])
def test_a_plain_init_is_read_in_the_state_unit(init, mantissa):
    neuron = Neuron(3)
    swd = nn.StateWithDelay(neuron, "V", init=init)
    swd.register_entry("lag", 2 * DT * u.ms)
    nn.init_all_states(neuron)
    swd.init_state()
    history = [np.full(3, mantissa, np.float32)] * swd.max_length  # the NumPy reference buffer
    assert swd.at("lag").unit == u.mV
    np.testing.assert_allclose(swd.at("lag").mantissa, history[0])
    for k in range(4):
        neuron.V.value = (jnp.arange(3.0) + k) * u.mV
        swd.update()
        history = [np.arange(3.0, dtype=np.float32) + k] + history[:-1]
        np.testing.assert_allclose(swd.at("lag").to_decimal(u.mV), history[2])
        np.testing.assert_allclose(swd.retrieve_at_step(0).to_decimal(u.mV), history[0])


def test_delay_of_a_quantity_takes_plain_zeros_and_still_refuses_a_wrong_unit():
    delay = nn.Delay(jnp.zeros(2) * u.mV, time=DT * u.ms, init=jnp.zeros(2))
    nn.init_all_states(delay)
    assert delay.retrieve_at_step(1).unit == u.mV
    np.testing.assert_array_equal(delay.retrieve_at_step(1).mantissa, [0.0, 0.0])
    delay.update(jnp.array([1.0, 2.0]) * u.mV)
    np.testing.assert_array_equal(delay.retrieve_at_step(0).mantissa, [1.0, 2.0])
    with pytest.raises(u.UnitMismatchError, match="holds values in mV, but its init"):
        nn.init_all_states(nn.Delay(jnp.zeros(2) * u.mV, time=DT * u.ms, init=jnp.zeros(2) * u.ms))
    with pytest.raises(u.UnitMismatchError, match="holds values in mV"):
        delay.update(jnp.ones(2) * u.ms)


class Fixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.V = brainx.HiddenState(jnp.zeros(3) * u.mV)             # made in __init__: unbatched


def test_an_unbatched_state_keeps_its_shape_when_the_model_is_batched():
    mod = Fixed()
    swd = nn.StateWithDelay(mod, "V", init=jnp.zeros(3))
    swd.register_entry("lag", DT * u.ms)
    swd.init_state(batch_size=2)                                     # as init_all_states(m, 2) does
    assert swd.history.value.shape == (swd.max_length, 3)            # not (rows, 2) of V[0]
    mod.V.value = jnp.array([1.0, 2.0, 3.0]) * u.mV
    swd.update()
    mod.V.value = jnp.zeros(3) * u.mV
    swd.update()
    np.testing.assert_array_equal(swd.at("lag").to_decimal(u.mV), [1.0, 2.0, 3.0])
    swd.reset_state(batch_size=2)
    assert swd.history.value.shape == (swd.max_length, 3)
    assert not np.asarray(u.get_mantissa(swd.history.value)).any()
