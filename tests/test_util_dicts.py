"""brainx.util: DotDict, DictManager, flatten/unflatten/merge, BoundedCache, helpers."""

import copy
import pickle
import threading
from collections import namedtuple

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings, strategies as st

from brainx.util import (
    BoundedCache, DictManager, DotDict, flatten_dict, get_unique_name, is_instance_eval,
    merge_dicts, not_instance_eval, split_total, unflatten_dict,
)
from brainx.util.helpers import NAME

names = st.text(alphabet="abcxyz_", min_size=1, max_size=4)
nested = st.recursive(st.integers(), lambda kids: st.dictionaries(names, kids, min_size=1, max_size=3),
                      max_leaves=10)
nested_dicts = st.dictionaries(names, nested, max_size=4)


# -- DotDict -------------------------------------------------------------------------------------
def test_dotdict_attribute_access_and_nested_conversion():
    Point = namedtuple("Point", "x y")
    d = DotDict({"a": {"b": 1}, "l": [{"c": 2}], "t": ({"e": 3},), "p": Point({"q": 1}, 2)},
                z=5)
    assert d.a.b == 1 and d.z == 5
    assert isinstance(d.a, DotDict) and isinstance(d.l[0], DotDict) and isinstance(d.t[0], DotDict)
    assert isinstance(d.p, Point) and isinstance(d.p.x, DotDict)
    d.new = {"k": 1}
    assert isinstance(d["new"], DotDict)
    del d.new
    assert "new" not in d
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        d.missing
    with pytest.raises(AttributeError, match="built-in method"):
        d.keys = 3
    assert not hasattr(d, "missing")


def test_dotdict_update_merges_nested_and_to_dict_is_plain():
    d = DotDict(a={"x": 1})
    d.update({"a": {"y": 2}}, b=3)
    assert d.to_dict() == {"a": {"x": 1, "y": 2}, "b": 3}
    assert type(d.to_dict()["a"]) is dict
    merged = {"q": 0} | d
    assert isinstance(merged, DotDict) and merged.q == 0
    with pytest.raises(TypeError):
        d.update(1, 2)


def test_dotdict_copies_and_pickle():
    d = DotDict(a={"b": [1, 2]})
    shallow, deep = copy.copy(d), d.deepcopy()
    assert shallow.a is d.a and deep.a is not d.a and deep == d
    back = pickle.loads(pickle.dumps(d))
    assert back == d and isinstance(back.a, DotDict)


def test_dotdict_is_a_pytree_under_jit():
    d = DotDict(w=jnp.ones(3), sub={"b": jnp.arange(3.0)}, n=2)
    out = jax.jit(lambda t: jax.tree.map(lambda x: x * 2, t))(d)
    assert isinstance(out, DotDict) and isinstance(out.sub, DotDict)
    assert out.sub.b.tolist() == [0.0, 2.0, 4.0] and int(out.n) == 4
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(d)[0]]
    assert paths == ["['w']", "['sub']['b']", "['n']"]


@settings(max_examples=40, deadline=None)
@given(nested_dicts)
def test_dotdict_to_dict_round_trip(d):
    assert DotDict(d).to_dict() == d


# -- flatten / unflatten / merge -------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(nested_dicts)
def test_flatten_unflatten_round_trip(d):
    flat = flatten_dict(d, sep="/")
    assert all(not isinstance(v, dict) or v == {} for v in flat.values())
    assert unflatten_dict(flat, sep="/") == d


def test_flatten_and_unflatten_errors():
    with pytest.raises(ValueError, match="duplicate key 'a.b'"):
        flatten_dict({"a.b": 1, "a": {"b": 2}})
    with pytest.raises(TypeError):
        flatten_dict([1])
    with pytest.raises(ValueError, match="empty part"):
        unflatten_dict({"a..b": 1})
    with pytest.raises(ValueError, match="scalar key prefix"):
        unflatten_dict({"a": 1, "a.b": 2})
    with pytest.raises(ValueError, match="overwrite mapping"):
        unflatten_dict({"a.b": 1, "a": 2})


def test_merge_dicts():
    a, b = {"m": {"x": 1, "y": 1}}, {"m": {"y": 2}, "n": 3}
    assert merge_dicts(a, b) == {"m": {"x": 1, "y": 2}, "n": 3}
    assert merge_dicts(a, b, recursive=False) == {"m": {"y": 2}, "n": 3}
    assert a == {"m": {"x": 1, "y": 1}}   # inputs untouched
    with pytest.raises(TypeError, match="must be dicts"):
        merge_dicts(a, [1])


# -- DictManager -----------------------------------------------------------------------------------
class Checked(DictManager):
    def _check_elem(self, elem):
        if not isinstance(elem, int):
            raise TypeError("ints only")


def test_dict_manager_selection_and_identity():
    w = [0]
    m = DictManager(a=1, b="s", c=w, d=w, e=2.0)
    assert list(m.subset(int)) == ["a"] and list(m.subset(lambda v: v == "s")) == ["b"]
    assert list(m.not_subset((int, float))) == ["b", "c", "d"]
    ints, strs, rest = m.split(int, str)
    assert (list(ints), list(strs), list(rest)) == (["a"], ["b"], ["c", "d", "e"])
    assert list(m.unique()) == ["a", "b", "c", "e"]
    assert list(m.difference_by_values([w])) == ["a", "b", "e"]
    assert list(m.intersection_by_values([1], by="value")) == ["a"]
    with pytest.raises(ValueError, match="Invalid comparison"):
        m.difference_by_values([w], by="nope")
    m.pop_by_keys(["a", "zzz"])
    m.unique_()
    assert list(m) == ["b", "c", "e"]
    with pytest.raises(ValueError, match="duplicate"):
        m.map_keys(lambda k: "same")


def test_dict_manager_add_unique_and_subclass_type_kept():
    m = Checked()
    assert m.add_unique_value("a", 1000) is True
    obj = m["a"]
    assert m.add_unique_value("b", obj) is False and "b" not in m
    m.add_unique_key("a", obj)   # same object: fine
    with pytest.raises(ValueError, match="already holds another object"):
        m.add_unique_key("a", 1001)
    with pytest.raises(TypeError, match="ints only"):
        m.add_unique_key("c", "x")
    assert type(m.subset(int)) is Checked and type(m + {"z": 1}) is Checked
    assert type(copy.deepcopy(m)) is Checked and type(pickle.loads(pickle.dumps(m))) is Checked


def test_dict_manager_pytree():
    m = DictManager(x=jnp.ones(2), y=jnp.zeros(2))
    out = jax.jit(lambda t: jax.tree.map(lambda v: v + 1, t))(m)
    assert type(out) is DictManager and out["y"].tolist() == [1.0, 1.0]


# -- BoundedCache ----------------------------------------------------------------------------------
def test_bounded_cache_lru_and_errors():
    c = BoundedCache(maxsize=2)
    c.set("a", 1); c.set("b", 2)
    assert c.get("a") == 1
    c.set("c", 3)
    assert c.keys() == ["a", "c"] and "b" not in c
    with pytest.raises(ValueError, match="already exists"):
        c.set("a", 9)
    c.replace("a", 9)
    with pytest.raises(KeyError, match="does not exist"):
        c.replace("zz", 1)
    with pytest.raises(ValueError, match="Available 2 keys"):
        c.get("zz", raise_on_miss=True)
    assert c.get_stats()["hits"] == 1 and c.get_stats()["misses"] == 1
    assert c.pop("a") == 9 and len(c) == 1
    c.clear()
    assert len(c) == 0 and c.get_stats()["hits"] == 0
    zero = BoundedCache(0)
    zero.set("a", 1)
    assert len(zero) == 0
    with pytest.raises(ValueError):
        BoundedCache(-1)
    with pytest.raises(TypeError):
        BoundedCache(1.5)


def test_bounded_cache_threads():
    c = BoundedCache(maxsize=50)

    def work(i):
        for j in range(100):
            key = (i, j % 60)
            if c.get(key) is None:
                try:
                    c.set(key, j)
                except ValueError:
                    pass
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(c) == 50


# -- helpers ---------------------------------------------------------------------------------------
@given(st.integers(1, 10_000), st.floats(0, 1))
def test_split_total_fraction_in_range(total, fraction):
    assert 0 <= split_total(total, fraction) <= total


def test_split_total_errors():
    assert split_total(10, 3) == 3
    for bad, err in [((10, 1.5), ValueError), ((10, 11), ValueError), ((10, -1), ValueError),
                     ((0, 0.5), ValueError), ((10.0, 0.5), TypeError), ((True, 0.5), TypeError),
                     ((10, True), TypeError), ((10, "a"), TypeError)]:
        with pytest.raises(err):
            split_total(*bad)


def test_unique_names_and_instance_predicates():
    NAME.reset("UtilTest")
    assert [get_unique_name("UtilTest") for _ in range(2)] == ["UtilTest0", "UtilTest1"]
    assert get_unique_name("UtilTest", prefix="p_") == "p_UtilTest2"
    other = []
    t = threading.Thread(target=lambda: other.append(get_unique_name("UtilTest")))
    t.start(); t.join()
    assert other == ["UtilTest0"]   # counters are per thread
    assert is_instance_eval(int, str)("a") and not not_instance_eval(int, str)(1)
    assert pickle.loads(pickle.dumps(is_instance_eval(int)))(3)


def test_flat_mapping_keeps_empty_nodes_and_stops_at_chosen_leaves():
    from brainx.util import flat_mapping, nest_mapping
    from brainx.util.mappings import empty_node
    tree = {"a": {}, "b": {"c": 1, "d": {"e": 2}}}
    assert {tuple(k): v for k, v in flat_mapping(tree).items()} == {("b", "c"): 1,
                                                                     ("b", "d", "e"): 2}
    kept = flat_mapping(tree, keep_empty_nodes=True)
    assert kept[("a",)] is empty_node
    assert nest_mapping(kept).to_dict() == tree
    stopped = flat_mapping(tree, is_leaf=lambda path, m: path == ("b", "d"))
    assert {tuple(k): v for k, v in stopped.items()} == {("b", "c"): 1, ("b", "d"): {"e": 2}}


def test_flat_and_nested_operators_follow_brainstate():
    from brainx.util import FlattedDict, NestedDict
    flat, nested = FlattedDict({("a",): 1, ("b",): 2}), NestedDict({"a": 1, "b": {"c": 2}})
    assert flat | FlattedDict() is flat and flat - FlattedDict() is flat      # self, unchanged
    assert nested | NestedDict() is nested and nested - NestedDict() is nested
    assert (flat - FlattedDict({("a",): 0})).to_dict() == {("b",): 2}
    assert (nested | NestedDict({"d": 3})).to_dict() == {"a": 1, "b": {"c": 2}, "d": 3}
    for mine, plain in ((flat, {("a",): 1}), (nested, {"a": 1})):
        for op in ("__or__", "__sub__"):
            with pytest.raises(TypeError, match="FlattedDict or a NestedDict"):
                getattr(mine, op)(plain)
        with pytest.raises(TypeError):
            mine | plain            # a plain dict on the right is refused, not merged by dict
    with pytest.raises(KeyError):
        nested.missing              # brainstate's KeyError, and hasattr still answers
    assert not hasattr(nested, "missing")


def test_replace_by_pure_dict_sets_states_in_place():
    import brainx
    from brainx.util import NestedDict
    w = brainx.ParamState(jnp.ones(2))
    nested = NestedDict({"layer": {"w": w}, "n": 1})
    nested.replace_by_pure_dict({"layer": {"w": jnp.zeros(2)}, "n": 4})
    assert nested["layer"]["w"] is w and float(w.value.sum()) == 0.0 and nested["n"] == 4
    nested.replace_by_pure_dict({"n": 2}, replace_fn=lambda old, new: old + new)
    assert nested["n"] == 6
    with pytest.raises(ValueError, match="'?layer.b'? is not a leaf"):
        nested.replace_by_pure_dict({"layer": {"b": 0}})
