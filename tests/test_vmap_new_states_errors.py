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


def test_the_states_it_returns_live_at_the_callers_level():
    """States built inside belong to the caller afterwards: stack_level is the caller's depth,
    batched or shared (excluded) alike, and one level down when the call is itself traced."""
    made = {}

    @vmap_new_states(in_axes=0, axis_size=4,
                     state_to_exclude=brainx.util.filter.OfType(brainx.state.NonBatchState))
    def build(x):
        made["shared"] = brainx.state.NonBatchState(jnp.ones(2))
        made["batched"] = brainx.ShortTermState(x)
        return x

    build(jnp.arange(4.0))
    assert made["shared"].stack_level == 0 and made["batched"].stack_level == 0
    assert jnp.allclose(made["shared"].value, 1.0) and made["batched"].value.shape == (4,)

    levels = []

    @brainx.transform.jit
    def outer(x):
        build(x)
        levels.append((made["batched"].stack_level, brainx.State(x).stack_level))
        return x

    outer(jnp.arange(4.0))
    assert levels == [(1, 1)]


def test_a_shared_state_given_per_lane_values_is_refused_not_poisoned():
    """A deliberate difference from brainstate 0.6.0, which returns and leaves such a state
    unreadable: brainx refuses the call, as both do for a NonBatchState given a per-lane value."""
    made = {}

    @vmap_new_states(in_axes=0, axis_size=4,
                     state_to_exclude=brainx.util.filter.OfType(brainx.state.NonBatchState))
    def build(x):
        made["shared"] = brainx.state.NonBatchState(x * 0.0)
        return brainx.ShortTermState(x).value

    with pytest.raises(brainx.BatchAxisError, match="shared by all lanes"):
        build(jnp.arange(4.0))
