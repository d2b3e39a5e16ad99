"""Modes compare and hash by class *and* parameters (brainstate 0.6), so a jit retraces on a new static mode."""

import jax.numpy as jnp
import pytest

import brainx
from brainx.mixin import Batching, JointMode, Mode, Training


def test_batching_equal_only_with_equal_parameters():
    assert Batching(2, 0) == Batching(2, 0) and hash(Batching(2, 0)) == hash(Batching(2, 0))
    assert Batching(2) != Batching(5)
    assert Batching(2, 0) != Batching(2, 1)
    assert len({Batching(2), Batching(5), Batching(2)}) == 2


def test_joint_mode_equal_by_its_modes_in_any_order():
    assert JointMode(Training(), Batching(2)) == JointMode(Batching(2), Training())
    assert hash(JointMode(Training(), Batching(2))) == hash(JointMode(Batching(2), Training()))
    assert JointMode(Training(), Batching(2)) != JointMode(Training(), Batching(3))
    assert JointMode(Training(), Batching(2)) != JointMode(Batching(2))


def test_comparing_with_a_non_mode_is_false():
    t = Training()
    assert (t == None) is False  # noqa: E711
    assert t != "Training"
    assert t not in [None, 1]


def test_a_subclass_with_parameters_overrides_eq_key():
    class Precision(Mode):
        def __init__(self, bits):
            self.bits = bits

        def _eq_key(self):
            return self.bits

    assert Precision(16) == Precision(16) and hash(Precision(16)) == hash(Precision(16))
    assert Precision(16) != Precision(32)
    assert Precision(16) != Mode()


@pytest.mark.parametrize("by_name", [False, True])
def test_jit_with_a_static_mode_retraces_when_its_parameters_change(by_name):
    traces = []

    def scale(x, mode):
        traces.append(mode)
        return x * mode.batch_size + mode.batch_axis

    if by_name:
        jitted = brainx.transform.jit(scale, static_argnames="mode")
        call = lambda x, mode: jitted(x, mode=mode)
    else:
        jitted = brainx.transform.jit(scale, static_argnums=1)
        call = jitted
    x = jnp.arange(3.0)
    modes = [Batching(2), Batching(5), Batching(5, 1), Batching(2)]
    for mode in modes:
        eager = x * mode.batch_size + mode.batch_axis
        assert jnp.allclose(call(x, mode), eager), mode
    # Batching(2) seen again: served from the first trace
    assert traces == modes[:3]


def test_jit_with_a_static_joint_mode_retraces_on_a_component_change():
    def scale(x, mode):
        return x * mode.batch_size * (10.0 if mode.has(Training) else 1.0)

    jitted = brainx.transform.jit(scale, static_argnums=1)
    for mode in (JointMode(Training(), Batching(2)), JointMode(Training(), Batching(3)),
                 JointMode(Batching(3))):
        assert float(jitted(1.0, mode)) == float(scale(1.0, mode))
