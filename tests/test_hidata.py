"""``nn.HiData``: named children as attributes or items, immutable, a JAX pytree (subclasses too)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.nn import HiData


def cell():
    return HiData(name="cell", v=jnp.arange(3.0), na=HiData(name="na", m=jnp.ones(3), h=None))


def test_children_by_attribute_or_item_and_the_merge_of_kwargs():
    d = HiData({"a": 1, "b": 2}, name="n", b=3, c=4)
    assert (d.a, d["b"], d.c, len(d), d.name) == (1, 3, 4, 3, "n")
    assert "a" in d and "z" not in d
    assert list(d.keys()) == ["a", "b", "c"] and list(d.values()) == [1, 3, 4]
    with pytest.raises(AttributeError, match="no child 'z'"):
        d.z
    with pytest.raises(KeyError):
        d["z"]
    assert dataclasses.is_dataclass(HiData)


def test_immutable_copies_keep_the_name_and_the_subclass():
    class Gate(HiData):
        pass

    g = Gate(name="g", m=1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="replace"):
        g.m = 2
    for copy in (g.replace(m=2), g.add({"h": 3}, HiData(k=5), j=4), g.pop("m"), g.clone()):
        assert type(copy) is Gate and copy.name == "g"
    assert g.replace(m=2).m == 2 and g.m == 1
    assert sorted(g.add({"h": 3}, HiData(k=5), j=4).keys()) == ["h", "j", "k", "m"]
    with pytest.raises(KeyError):
        g.pop("absent")
    with pytest.raises(AssertionError, match="HiData or dicts"):
        g.add(123)


def test_state_size_dtype_and_dict_round_trip():
    d = cell()                                                    # v and na.m count, na.h is None
    assert d.state_size == 2 and d.dtype == jnp.float32
    with pytest.raises(ValueError, match="no array child"):
        HiData(a=1).dtype
    plain = d.to_dict()
    assert isinstance(plain["na"], dict) and plain["na"]["h"] is None
    back = HiData.from_dict(plain)
    np.testing.assert_array_equal(back.na.m, d.na.m)


def test_a_pytree_through_jit_and_tree_map_with_the_name_static():
    d = cell()
    leaves, treedef = jax.tree.flatten(d)
    assert len(leaves) == 2                                       # v and na.m (None is no leaf)
    doubled = brainx.transform.jit(lambda x: jax.tree.map(lambda a: 2 * a, x))(d)
    assert isinstance(doubled, HiData) and doubled.name == "cell" and doubled.na.name == "na"
    np.testing.assert_array_equal(doubled.v, 2 * d.v)
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(d)[0]]
    assert paths == ["['na']['m']", "['v']"]                      # sorted by name, as a dict


def test_children_added_in_another_order_combine_as_dicts_do():
    # brainstate 0.5.4 flattens the children as a dict (sorted names): the order they were
    # added in is not part of the structure. The reference: the same maps over plain dicts.
    a = HiData(name="cell", v=jnp.arange(3.0), na=HiData(m=jnp.ones(3), h=jnp.full(3, 2.0)))
    b = HiData(name="cell", na=HiData(h=jnp.full(3, 5.0), m=jnp.zeros(3)), v=jnp.ones(3))
    assert jax.tree.structure(a) == jax.tree.structure(b)
    summed = jax.tree.map(lambda x, y: x + 10 * y, a, b)
    expected = jax.tree.map(lambda x, y: x + 10 * y, a.to_dict(), b.to_dict())
    assert jax.tree.all(jax.tree.map(np.array_equal, summed.to_dict(), expected))
    assert list(summed.keys()) == ["na", "v"] and summed.name == "cell"

    def body(carry, x):        # returns its children in the other order
        return HiData(name="cell", na=carry.na, v=carry.v + x), carry.v.sum()

    carry, ys = jax.lax.scan(body, a, jnp.arange(4.0))
    np.testing.assert_array_equal(carry.v, a.v + jnp.arange(4.0).sum())
    np.testing.assert_array_equal(ys, [a.v.sum() + 3 * jnp.arange(4.0)[:i].sum() for i in range(4)])
    assert HiData(a=1, b=2) == HiData(b=2, a=1)


def test_a_subclass_is_a_pytree_too():
    class Gate(HiData):
        pass

    g = Gate(name="g", m=jnp.ones(2))
    mapped = jax.tree.map(lambda a: a + 1, g)                     # brainstate: one opaque leaf
    assert type(mapped) is Gate and float(mapped.m[0]) == 2.0


def test_repr_as_brainstate_0_6_prints_it():
    assert repr(HiData(name="config", lr=0.01, batch_size=32)) == \
        "HiData(name='config', lr=0.01, batch_size=32)"
    nested = HiData(name="config", optimizer=HiData(name="optimizer", lr=0.001, momentum=0.9),
                    model=HiData(name="model", weights=np.array([1, 2, 3], np.int64)))
    assert repr(nested) == ("HiData(\n  name='config',\n"
                            "  optimizer=HiData(name='optimizer', lr=0.001, momentum=0.9),\n"
                            "  model=HiData(name='model', weights=i64[3]),\n)")
    assert repr(HiData(s="x" * 100)) == f"HiData(name=None, s='{'x' * 56}...)"
