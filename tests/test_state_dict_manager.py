"""StateDictManager: a dict of states by name, read and written value-wise."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx


@pytest.fixture
def states():
    w = brainx.ParamState(jnp.ones(3), name="w")
    h = brainx.ShortTermState(jnp.zeros(2), name="h")
    return w, h, brainx.StateDictManager(w=w, h=h)


def test_is_a_dict_of_the_same_state_objects(states):
    w, h, mgr = states
    assert isinstance(mgr, dict) and list(mgr) == ["w", "h"]
    assert mgr["w"] is w and mgr["h"] is h
    assert brainx.StateDictManager is brainx.state.StateDictManager


def test_collect_values_reads_each_value(states):
    w, h, mgr = states
    values = mgr.collect_values()
    assert type(values) is dict and list(values) == ["w", "h"]
    assert values["w"] is w.value and values["h"] is h.value
    assert mgr.to_dict_values().keys() == values.keys()


def test_assign_values_writes_through_the_setter(states):
    w, h, mgr = states
    mgr.assign_values({"h": jnp.full(2, 5.0)}, {"w": jnp.arange(3.0)})
    np.testing.assert_array_equal(h.value, [5.0, 5.0])
    np.testing.assert_array_equal(w.value, [0.0, 1.0, 2.0])


def test_assign_values_inside_jit_is_recorded_like_any_write(states):
    w, h, mgr = states

    @brainx.transform.jit
    def step(x):
        mgr.assign_values({"h": mgr["h"].value + x})

    step(jnp.ones(2))
    step(jnp.ones(2))
    np.testing.assert_array_equal(h.value, [2.0, 2.0])
    assert not isinstance(h.value, jax.core.Tracer)


def test_assign_values_refuses_non_dicts_and_unknown_names(states):
    w, h, mgr = states
    with pytest.raises(TypeError, match="dictionaries"):
        mgr.assign_values([("h", jnp.ones(2))])
    with pytest.raises(KeyError, match="'nope'.*\\['w', 'h'\\]"):
        mgr.assign_values({"nope": 1.0})
    np.testing.assert_array_equal(h.value, [0.0, 0.0])


def test_every_way_in_refuses_a_non_state():
    mgr = brainx.StateDictManager()
    with pytest.raises(TypeError, match="under 'x'.*brainx.State"):
        mgr["x"] = 3
    with pytest.raises(TypeError):
        brainx.StateDictManager(x=jnp.ones(2))
    with pytest.raises(TypeError):
        mgr.update({"x": 1.0})
    with pytest.raises(TypeError):
        mgr.setdefault("x", 1.0)
    with pytest.raises(TypeError):
        mgr.add_unique_value("x", 1.0)
    assert len(mgr) == 0


def test_add_unique_key_and_value(states):
    w, h, mgr = states
    mgr.add_unique_key("w", w)  # the same state again: fine
    with pytest.raises(ValueError, match="already holds"):
        mgr.add_unique_key("w", h)
    assert mgr.add_unique_value("w2", w) is False  # w is already here, under "w"
    assert "w2" not in mgr
    extra = brainx.State(jnp.ones(1))
    assert mgr.add_unique_value("extra", extra) is True and mgr["extra"] is extra


def test_split_values_and_split_group_by_type_first_match(states):
    w, h, mgr = states
    params, rest = mgr.split_values(brainx.ParamState)
    assert list(params) == ["w"] and list(rest) == ["h"]
    assert params["w"] is w.value
    short, long_, rest = mgr.split(brainx.ShortTermState, brainx.LongTermState)
    assert isinstance(short, brainx.StateDictManager)
    assert list(short) == ["h"] and list(long_) == ["w"] and len(rest) == 0
    only = mgr.subset(lambda s: s.name == "w")
    assert list(only) == ["w"] and list(mgr.not_subset(brainx.ParamState)) == ["h"]
    with pytest.raises(TypeError, match="predicate"):
        mgr.subset(3)


def test_unique_and_copies(states):
    w, h, mgr = states
    mgr["again"] = w
    assert list(mgr.unique()) == ["w", "h"] and len(mgr) == 3
    assert mgr.unique_() is mgr and list(mgr) == ["w", "h"]
    for c in (mgr.copy(), copy.copy(mgr)):
        assert type(c) is brainx.StateDictManager and c == mgr and c is not mgr
    assert type(mgr.to_dict()) is dict
    mgr.pop_by_keys(["h", "missing"])
    assert list(mgr) == ["w"]


def test_is_a_pytree_of_its_states(states):
    w, h, mgr = states
    leaves, tree = jax.tree.flatten(mgr)
    assert leaves[0] is w and leaves[1] is h
    again = jax.tree.unflatten(tree, leaves)
    assert type(again) is brainx.StateDictManager and again["w"] is w
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(mgr)[0]]
    assert paths == ["['w']", "['h']"]
