"""``vmap_new_states``: what it says about a pre-existing state written per lane (brainstate 0.6.0's wording)."""

import jax
import jax.numpy as jnp
import pytest

import brainx
from brainx.transform import vmap_new_states


def test_a_pre_existing_state_written_per_lane_is_named_and_left_unchanged():
    counter = brainx.ShortTermState(jnp.zeros(()), name="counter")

    @vmap_new_states(in_axes=0, axis_size=4)
    def build(x):
        counter.value = counter.value + x
        return brainx.ShortTermState(x * 2.0).value

    with pytest.raises(ValueError, match=r"pre-existing state.*Create it inside") as info:
        build(jnp.arange(4.0))
    assert isinstance(info.value, brainx.BatchAxisError)
    assert "vmap(build)" in str(info.value) and "counter" in str(info.value)
    assert not isinstance(counter.value, jax.core.Tracer) and float(counter.value) == 0.0


def test_a_pre_existing_state_written_one_value_for_all_lanes_is_kept():
    counter = brainx.ShortTermState(jnp.zeros(()))

    @vmap_new_states(in_axes=0, axis_size=4)
    def build(x):
        counter.value = counter.value + 1.0
        return brainx.ShortTermState(x * 2.0).value

    out = build(jnp.arange(4.0))
    assert jnp.allclose(out, jnp.arange(4.0) * 2.0) and float(counter.value) == 1.0


def test_plain_vmap_keeps_its_advice():
    s = brainx.ShortTermState(jnp.zeros(()))

    def f(x):
        s.value = s.value + x
        return x

    with pytest.raises(brainx.BatchAxisError, match="Declare it in out_states") as info:
        brainx.transform.vmap(f)(jnp.arange(3.0))
    assert "pre-existing" not in str(info.value)
