"""brainx.util: filters, DottedPath keys, FlattedDict / NestedDict, against hand-built expectations."""

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import HiddenState, ParamState, ShortTermState, State
from brainx.util import (
    All, Any, DottedPath, Everything, FlattedDict, NestedDict, Not, Nothing, OfType,
    PathContains, PathGlob, PathRegex, WithTag, flat_mapping, nest_mapping, to_predicate,
)

W = ParamState(jnp.ones(2), tag="fast")
H = HiddenState(jnp.zeros(2), tag={"fast", "rec"})
S = ShortTermState(jnp.zeros(()))
ITEMS = [(("enc", "w"), W), (("blocks", 0, "h"), H), (("blocks", 1, "s"), S)]


def pick(f):
    pred = to_predicate(f)
    return [DottedPath(p).dotted for p, x in ITEMS if pred(p, x)]


@pytest.mark.parametrize("f, want", [
    (ParamState, ["enc.w"]),
    (ShortTermState, ["blocks.0.h", "blocks.1.s"]),             # HiddenState is a ShortTermState
    (OfType(HiddenState), ["blocks.0.h"]),
    ("fast", ["enc.w", "blocks.0.h"]),                          # a tag (brainstate)
    (WithTag("rec"), ["blocks.0.h"]),
    ("blocks.*", ["blocks.0.h", "blocks.1.s"]),                 # a path glob (brainx)
    (PathGlob("*.?.s"), ["blocks.1.s"]),
    (PathRegex(r"blocks\.\d\.[hs]"), ["blocks.0.h", "blocks.1.s"]),
    (PathRegex(r"blocks"), []),                                 # the whole path must match
    (PathContains(0), ["blocks.0.h"]),
    (PathContains("0"), ["blocks.0.h"]),
    (PathContains("w"), ["enc.w"]),
    ((ParamState, "rec"), ["enc.w", "blocks.0.h"]),             # a tuple: any of them
    ([ParamState, PathContains(1)], ["enc.w", "blocks.1.s"]),
    (Any(ParamState, PathContains(1)), ["enc.w", "blocks.1.s"]),
    (All(ShortTermState, "fast"), ["blocks.0.h"]),
    (Not(ShortTermState), ["enc.w"]),
    (Not(Any(ParamState, "rec")), ["blocks.1.s"]),
    (..., ["enc.w", "blocks.0.h", "blocks.1.s"]),
    (True, ["enc.w", "blocks.0.h", "blocks.1.s"]),
    (Everything(), ["enc.w", "blocks.0.h", "blocks.1.s"]),
    (None, []), (False, []), (Nothing(), []),
    (lambda path, x: path[-1] == "s", ["blocks.1.s"]),
])
def test_filters_pick_by_type_tag_and_path(f, want):
    assert pick(f) == want


def test_filter_objects_compare_hash_and_refuse_bad_input():
    assert to_predicate(ParamState) == OfType(ParamState)
    assert to_predicate(...) == Everything() and to_predicate(None) == Nothing()
    assert Any(ParamState, "x") == Any(ParamState, "x") != All(ParamState, "x")
    assert len({Not(ParamState), Not(ParamState), WithTag("a"), WithTag("a")}) == 2
    assert repr(Not(ParamState)) == "Not(OfType(<class 'brainx.state.state.ParamState'>))"
    with pytest.raises(TypeError, match="Unsupported filter 3"):
        to_predicate(3)
    with pytest.raises(TypeError, match="must be a string"):
        WithTag(["a"])
    with pytest.raises(Exception):
        PathRegex("(")


def test_filters_exclude_states_from_catch_new_states():
    with brainx.catch_new_states(state_to_exclude=Any(ParamState, "skip")) as catcher:
        a = ParamState(jnp.ones(1))
        b = HiddenState(jnp.ones(1))
        c = State(jnp.ones(1), tag="skip")
        d = State(jnp.ones(1))
    assert catcher.get_states() == (b, d)
    assert a is not None and c is not None


def test_dotted_path_is_a_tuple_that_prints_as_dots():
    p = DottedPath(("blocks", 0, "w"))
    assert tuple(p) == ("blocks", 0, "w") and p[1] == 0 and p[-1] == "w" and len(p) == 3
    assert str(p) == "blocks.0.w" and repr(p) == "'blocks.0.w'" and f"{p:>12}" == "  blocks.0.w"
    assert p == "blocks.0.w" and p == ("blocks", 0, "w") and p != "blocks.0"
    # hashes as its tuple, as brainstate's path tuples: a set or dict of paths takes tuples
    assert {p: 1}[("blocks", 0, "w")] == 1 and hash(p) == hash(("blocks", 0, "w"))
    assert {p} == {("blocks", 0, "w")}
    assert sorted([DottedPath(("b",)), DottedPath(("a", 2)), DottedPath(("a", 10))]) == [
        "a.10", "a.2", "b"]
    assert pickle.loads(pickle.dumps(p)) == p and type(pickle.loads(pickle.dumps(p))) is DottedPath
    assert DottedPath("a.b") == ("a", "b") and p + ("x",) == "blocks.0.w.x"


def test_flatted_dict_lookup_filter_split_merge():
    flat = FlattedDict(ITEMS)
    assert list(flat) == ["enc.w", "blocks.0.h", "blocks.1.s"]
    assert flat["enc", "w"] is W and flat["enc.w"] is W and flat[("blocks", 0, "h")] is H
    assert ("blocks", 1, "s") in flat and "blocks.1.s" in flat and ("nope",) not in flat
    assert flat.get(("enc", "w")) is W and flat.get("x") is None
    assert list(flat.filter(ShortTermState)) == ["blocks.0.h", "blocks.1.s"]
    p, h = flat.filter(ParamState, HiddenState)
    assert (p, h) == ({"enc.w": W}, {"blocks.0.h": H})      # a FlattedDict equals by dotted key
    assert (dict(p), dict(h)) == ({("enc", "w"): W}, {("blocks", 0, "h"): H})
    p, rest = flat.split(ParamState, ...)
    assert list(rest) == ["blocks.0.h", "blocks.1.s"]
    with pytest.raises(ValueError, match=r"leave out 1 item\(s\) \(blocks.1.s\)"):
        flat.split(ParamState, HiddenState)
    with pytest.raises(ValueError, match="can only be the last"):
        flat.split(..., ParamState)
    assert dict(p | rest) == dict(flat) and list(flat - p) == list(rest)
    assert FlattedDict.merge(p, rest.to_nest()) == flat
    nested = flat.to_nest()
    assert nested["blocks"][0]["h"] is H and nested.enc.w is W
    assert FlattedDict.from_nest(nested) == flat
    values = flat.to_dict_values()
    assert np.array_equal(values["enc", "w"], np.ones(2))     # a plain dict: tuple keys
    flat.assign_dict_values({"enc.w": jnp.full(2, 3.0), ("blocks", 0, "h"): jnp.ones(2),
                             "blocks.1.s": jnp.ones(())})
    assert W.value.tolist() == [3.0, 3.0] and H.value.tolist() == [1.0, 1.0]
    with pytest.raises(KeyError, match="no value given"):
        flat.assign_dict_values({})
    W.value, H.value, S.value = jnp.ones(2), jnp.zeros(2), jnp.zeros(())


def test_nested_dict_round_trips_and_splits():
    nested = NestedDict({"enc": {"w": 1, "b": 2}, "out": {0: 3}})
    assert nested.to_dict() == {"enc": {"w": 1, "b": 2}, "out": {0: 3}}
    assert type(nested.to_dict()["enc"]) is dict and nested.enc.b == 2
    assert nested.to_flat() == FlattedDict({("enc", "w"): 1, ("enc", "b"): 2, ("out", 0): 3})
    assert NestedDict.from_flat({"enc.w": 1}).to_dict() == {"enc": {"w": 1}}
    big, small = nested.split(lambda p, v: v > 1, ...)
    assert big.to_dict() == {"enc": {"b": 2}, "out": {0: 3}} and small.to_dict() == {"enc": {"w": 1}}
    assert (big | small).to_flat() == nested.to_flat()
    assert (nested - small).to_dict() == big.to_dict()
    assert nested.filter(PathContains("out")).to_dict() == {"out": {0: 3}}
    assert flat_mapping({"a": {"b": 1}}, sep="/") == {"a/b": 1}
    assert nest_mapping({"a/b": 1}, sep="/").to_dict() == {"a": {"b": 1}}
    with pytest.raises(ValueError, match="holds a leaf"):
        nest_mapping({("a",): 1, ("a", "b"): 2})


def test_mappings_are_pytrees_keeping_their_keys():
    flat = FlattedDict({("b", 0): jnp.ones(2), ("a",): jnp.zeros(1)})
    doubled = jax.tree.map(lambda x: x + 1, flat)
    assert type(doubled) is FlattedDict and set(doubled) == {("b", 0), ("a",)}
    assert doubled["b", 0].tolist() == [2.0, 2.0] and doubled["a"].tolist() == [1.0]
    paths = [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_leaves_with_path(flat)]
    assert paths == ["['a']", "['b.0']"]
    nested = NestedDict({"x": {"y": jnp.ones(1)}})
    out = jax.jit(lambda t: jax.tree.map(lambda v: 2 * v, t))(nested)
    assert type(out) is NestedDict and type(out["x"]) is NestedDict and out.x.y.tolist() == [2.0]


def test_one_filter_language_states_by_identity_everywhere():
    """A State, or a collection of States, picks those states by identity, in to_predicate and
    so in every place that takes a filter (states(), StateFinder, vmap's state axes)."""
    import brainx
    from brainx.util import IsState, to_predicate

    w, h = brainx.ParamState(jnp.ones(2)), brainx.HiddenState(jnp.zeros(2), tag="rec")
    twin = brainx.ParamState(jnp.ones(2))                      # equal value, another state
    for f in (w, [w], (w,), {w}, frozenset([w])):
        pick = to_predicate(f)
        assert pick((), w) and not pick((), twin) and not pick((), h)
    assert isinstance(to_predicate([w, h]), IsState)
    mixed = to_predicate([w, "rec"])                            # states and other filters: any
    assert mixed((), w) and mixed((), h) and not mixed((), twin)

    def step():
        return w.value.sum() + h.value.sum() + twin.value.sum()

    finder = brainx.transform.StateFinder(step, {h, twin})
    assert set(map(id, finder().values())) == {id(h), id(twin)}
    # vmap: the states given by identity are batched, the others shared
    batched = brainx.transform.vmap(lambda x: h.value + x + w.value, in_states={0: h})
    hs = jnp.arange(6.0).reshape(3, 2)
    h.value = hs
    out = batched(jnp.ones((3, 2)))
    np.testing.assert_allclose(out, hs + 1.0 + 1.0)


def test_a_string_filter_is_a_withtag_that_also_globs_paths():
    from brainx.util import TagOrPathGlob, WithTag, to_predicate
    pred = to_predicate("fast")
    assert isinstance(pred, WithTag) and isinstance(pred, TagOrPathGlob) and pred.tag == "fast"
    tagged, plain = brainx.State(0.0, tag="fast"), brainx.State(0.0)
    assert pred((), tagged) and not pred(("slow",), plain) and pred(("fast",), plain)
    with pytest.raises(TypeError, match="Invalid collection filter. Unsupported filter 42"):
        to_predicate(42)
