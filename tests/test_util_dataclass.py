"""brainx.util: dataclass/field/PyTreeNode, FrozenDict and friends, pretty reprs, tracer, memory."""

import dataclasses
import pickle

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings, strategies as st

import brainx
from brainx.util import (
    FrozenDict, MappingReprMixin, PrettyAttr, PrettyDict, PrettyList, PrettyMapping, PrettyObject,
    PrettyRepr, PrettyType, PyTreeNode, yield_unique_pretty_repr_items, StateJaxTracer, breakpoint_if, clear_buffer_memory, copy,
    dataclass, field, freeze, is_dataclass, pop, pretty_repr, unfreeze,
)

keys = st.text(alphabet="abcd", min_size=1, max_size=3)
trees = st.dictionaries(keys, st.recursive(st.integers(), lambda k: st.dictionaries(keys, k, max_size=3),
                                           max_leaves=8), max_size=4)


# -- dataclass / field / PyTreeNode ------------------------------------------------------------------
@dataclass
class Opt:
    mu: jax.Array
    count: jax.Array
    name: str = field(pytree_node=False, default="adam")


class Layer(PyTreeNode):
    w: jax.Array
    act: str = field(pytree_node=False, default="relu")


class Deeper(Layer):
    b: jax.Array = None


def test_dataclass_pytree_static_fields_and_jit():
    o = Opt(jnp.zeros(2), jnp.array(0))
    assert len(jax.tree.leaves(o)) == 2
    calls = []

    @jax.jit
    def step(o):
        calls.append(1)
        return o.replace(mu=o.mu + 1, count=o.count + 1)

    o2 = step(o)
    assert o2.mu.tolist() == [1.0, 1.0] and int(o2.count) == 1 and o2.name == "adam"
    step(o2)
    assert len(calls) == 1                  # same static fields: no retrace
    step(o2.replace(name="sgd"))
    assert len(calls) == 2                  # a static field is part of the cache key
    assert o.mu.tolist() == [0.0, 0.0]      # replace did not mutate
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(o)[0]]
    assert paths == [".mu", ".count"]


def test_dataclass_frozen_and_decorator_forms():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Opt(1, 2).mu = 3

    @dataclass(frozen=False)
    class Mutable:
        x: int
    m = Mutable(1)
    m.x = 2
    assert dataclass(Mutable) is Mutable and is_dataclass(Mutable) and is_dataclass(m)
    assert not is_dataclass(dataclasses.dataclass(type("Plain", (), {"__annotations__": {"x": int}})))

    class Spoof:
        _brainx_dataclass = True
    assert not is_dataclass(Spoof)


def test_field_metadata():
    meta = {"doc": "x"}
    f = field(pytree_node=False, metadata=meta, default=1)
    assert f.metadata["pytree_node"] is False and meta == {"doc": "x"}
    with pytest.raises(ValueError, match="pytree_node"):
        field(pytree_node=True, metadata={"pytree_node": False})


def test_pytree_node_subclasses():
    with pytest.raises(NotImplementedError, match="base class"):
        PyTreeNode()
    d = Deeper(w=jnp.ones(2), b=jnp.zeros(1))
    assert [f.name for f in dataclasses.fields(Deeper)] == ["w", "act", "b"]
    assert len(jax.tree.leaves(d)) == 2
    doubled = jax.tree.map(lambda x: x * 2, d)
    assert isinstance(doubled, Deeper) and doubled.w.tolist() == [2.0, 2.0]
    assert is_dataclass(Layer) and is_dataclass(Deeper)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.w = 1


# -- FrozenDict and friends -----------------------------------------------------------------------
def test_frozendict_immutability_and_views():
    fd = FrozenDict({"a": 1, "b": {"c": 2}})
    with pytest.raises(TypeError, match="item assignment"):
        fd["a"] = 2
    with pytest.raises(TypeError, match="item deletion"):
        del fd["a"]
    with pytest.raises(AttributeError, match="immutable"):
        fd.x = 1
    assert isinstance(fd["b"], FrozenDict) and fd.get("z", 7) == 7
    assert list(fd.keys()) == ["a", "b"] and list(fd.keys()) == ["a", "b"]   # re-iterable
    assert repr(fd.keys()) == "FrozenDict.keys(['a', 'b'])"
    assert fd == {"a": 1, "b": {"c": 2}} and fd != {"a": 1}
    assert {fd: 1}[FrozenDict(b={"c": 2}, a=1)] == 1
    assert pickle.loads(pickle.dumps(fd)) == fd
    with pytest.raises(TypeError):
        hash(FrozenDict(a=[1]))


def test_copy_pop_leave_the_input_alone():
    fd = freeze({"a": 1, "b": 2})
    fd2 = copy(fd, {"a": 10, "c": 3})
    assert isinstance(fd2, FrozenDict) and fd2 == {"a": 10, "b": 2, "c": 3} and fd["a"] == 1
    rest, value = pop(fd, "a")
    assert value == 1 and rest == {"b": 2} and "a" in fd
    d = {"a": 1}
    assert copy(d, {"b": 2}) == {"a": 1, "b": 2} and d == {"a": 1}
    assert pop(d, "a") == ({}, 1) and d == {"a": 1}
    with pytest.raises(KeyError):
        pop(fd, "zz")
    with pytest.raises(TypeError, match="FrozenDict or dict"):
        copy([1])


def test_frozendict_pytree_under_jit_and_tree_map():
    fd = freeze({"w": jnp.ones(2), "sub": {"b": jnp.zeros(2)}})
    out = jax.jit(lambda t: jax.tree.map(lambda x: x + 1, t))(fd)
    assert isinstance(out, FrozenDict) and isinstance(out["sub"], FrozenDict)
    assert out["sub"]["b"].tolist() == [1.0, 1.0]
    # keys are sorted like a dict's, so insertion order does not change the structure
    assert jax.tree.structure(FrozenDict(a=1, b=2)) == jax.tree.structure(FrozenDict(b=1, a=2))
    assert jax.tree.leaves(FrozenDict({1: "x", "a": "y"}))   # mixed key types still flatten
    # a FrozenDict of hashables can be a static argument
    f = jax.jit(lambda x, cfg: x * cfg["k"], static_argnums=1)
    assert float(f(2.0, freeze({"k": 3}))) == 6.0


@settings(max_examples=60, deadline=None)
@given(trees)
def test_freeze_unfreeze_round_trip(d):
    fd = freeze(d)
    assert unfreeze(fd) == d and fd == d and freeze(fd) is fd
    assert FrozenDict(unfreeze(fd)) == fd and hash(FrozenDict(unfreeze(fd))) == hash(fd)
    assert jax.tree.map(lambda x: x, fd) == fd


def test_pretty_repr_functions():
    text = pretty_repr({"a": {"b": 1}})
    assert text == "{\n  'a': {\n    'b': 1\n  }\n}"
    assert repr(FrozenDict()) == "FrozenDict({})"
    assert repr(FrozenDict(a=1)) == "FrozenDict({\n  'a': 1\n})"
    assert pretty_repr(3) == "3"


# -- pretty-repr protocol and containers -----------------------------------------------------------
def test_pretty_repr_protocol_and_cycles():
    class Node(PrettyRepr):
        def __init__(self):
            self.next = self

        def __pretty_repr__(self):
            def attrs(node):
                yield PrettyAttr("next", node.next)
            yield from yield_unique_pretty_repr_items(self, repr_attr=attrs)
    assert repr(Node()) == "Node(next=<cycle: .>)"

    class Bad(PrettyRepr):
        def __pretty_repr__(self):
            yield PrettyAttr("x", 1)
    with pytest.raises(TypeError, match="must be PrettyType"):
        repr(Bad())
    assert repr(PrettyMapping({"a": 1}, type_name="M")) == "M{'a': 1}"


def test_pretty_containers():
    d = PrettyDict({"a": 1, "l": [1, {"x": 2}]})
    assert d.a == 1 and d.to_dict() == {"a": 1, "l": [1, {"x": 2}]}
    with pytest.raises(KeyError):
        d.missing
    with pytest.raises(AttributeError):
        d.missing
    assert not hasattr(d, "missing") and not hasattr(d, "__deepcopy__")
    assert "'x': 2" in repr(d)
    with pytest.raises(NotImplementedError):
        d.split(...)
    lst = jax.tree.map(lambda x: x + 1, PrettyList([1, 2]))
    assert isinstance(lst, PrettyList) and lst == [2, 3]

    class Obj(PrettyObject):
        def __init__(self):
            self.shown, self.hidden, self.me = 1, 2, self

        def __pretty_repr_item__(self, k, v):
            return None if k == "hidden" else (k, v)
    text = repr(Obj())
    assert "shown=1" in text and "hidden" not in text and "me=<cycle: .>" in text


def test_mapping_repr_mixin():
    class Table(MappingReprMixin, PrettyRepr):
        def __getitem__(self, k):
            return {"a": 1}[k]

        def __iter__(self):
            return iter(["a"])

        def __len__(self):
            return 1
    assert repr(Table()) == "{'a': 1}"


# -- tracer, memory, breakpoint_if ------------------------------------------------------------------
def test_state_jax_tracer():
    outer = StateJaxTracer()
    assert outer.is_valid() and outer == StateJaxTracer() and hash(outer) == hash(StateJaxTracer())
    seen = {}

    @jax.jit
    def f(x):
        inner = StateJaxTracer()
        seen.update(inner=inner.is_valid(), outer=outer.is_valid(), eq=inner == outer)
        seen["tracer"] = inner
        return x
    f(1.0)
    assert seen == {"inner": True, "outer": False, "eq": False, "tracer": seen["tracer"]}
    assert not seen["tracer"].is_valid()
    assert "StateJaxTracer" in repr(outer)


def test_clear_buffer_memory(monkeypatch):
    x, y = jnp.ones(3) + 1, jnp.ones(2)
    clear_buffer_memory(array=False, compilation=True)
    assert float(x.sum()) == 6.0
    # only let it see ``x``: deleting every live array would break the rest of the test session
    monkeypatch.setattr(jax, "live_arrays", lambda platform=None: [x])
    clear_buffer_memory()
    assert x.is_deleted() and not y.is_deleted()


def test_breakpoint_if_is_transforms():
    assert breakpoint_if is brainx.transform.breakpoint_if
    ns = {}
    exec("from brainx.util import *", ns)
    assert ns["breakpoint_if"] is breakpoint_if and "FrozenDict" in ns


def test_pytreenode_replace_on_a_non_dataclass_is_not_implemented():
    from brainx.util import PyTreeNode
    with pytest.raises(NotImplementedError, match="PyTreeNode subclass"):
        PyTreeNode.replace(object())
