"""``brainx.compat.private``: brainstate's private helpers, checked against plain JAX, and how
``install_as_brainstate`` serves their private import paths."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.compat.private import transform as mapping_core


def test_remove_axis_is_one_lane_of_the_input():
    x = jnp.arange(24.0).reshape(2, 3, 4)
    for axis in (0, 1, 2, -1, -3):
        np.testing.assert_array_equal(mapping_core._remove_axis(x, axis), jnp.take(x, 0, axis))
    with pytest.raises(ValueError, match="out of bounds"):
        mapping_core._remove_axis(x, 3)
    with pytest.raises(ValueError, match="not an array"):
        mapping_core._remove_axis(1.0, 0)
    with pytest.raises(TypeError):
        mapping_core._remove_axis(x, "0")


def test_batch_size_comes_from_arguments_states_or_axis_size():
    s = brainx.ShortTermState(jnp.zeros((3, 2)))
    size = mapping_core._get_batch_size
    assert size(({"a": jnp.ones((4, 5)), "b": jnp.ones(2)},), ({"a": 0, "b": None},), {}) == 4
    assert size((), (), {0: [s]}) == 3 and size((), (), {}, axis_size=7) == 7
    assert size((jnp.ones(2),), 0, {}, kwargs={"y": jnp.ones(2)}) == 2
    with pytest.raises(ValueError, match="different sizes"):
        size((jnp.ones(4), jnp.ones(3)), (0, 0), {})
    with pytest.raises(ValueError, match="disagrees"):
        size((jnp.ones(4),), 0, {}, axis_size=5)
    with pytest.raises(ValueError, match="axis_size"):
        size((), (), {})


def test_state_axes_are_read_and_checked_between_in_and_out():
    a, b = brainx.ShortTermState(jnp.zeros(2)), brainx.ShortTermState(jnp.zeros(2))
    axis_to, to_axis = mapping_core._flatten_in_out_states({0: {"a": a}, 1: {"b": b}})
    assert axis_to == {0: [a], 1: [b]} and to_axis == {a: 0, b: 1}
    assert mapping_core._flatten_in_out_states(None) == ({}, {})
    *_, axis_to_out, out_to_axis = mapping_core._format_state_axes({0: {"a": a}}, None)
    assert out_to_axis == {a: 0} and axis_to_out == {0: [a]}
    with pytest.raises(brainx.BatchAxisError, match="axis 0 in in_states"):
        mapping_core._format_state_axes({0: {"a": a}}, {1: {"a": a}})
    predicates = mapping_core.normalize_state_axes({0: a, 1: brainx.ParamState})
    assert predicates[0]((), a) and not predicates[0]((), b)
    assert predicates[1]((), brainx.ParamState(1.0)) and not predicates[1]((), a)


def test_leaf_batch_dim_reads_the_batch_dimension_under_vmap():
    seen = []

    def f(x, y):
        seen.append((mapping_core.leaf_batch_dim({"x": x, "c": jnp.ones(())}),
                     mapping_core.leaf_batch_dim(jnp.ones(3))))
        return x

    jax.vmap(f, in_axes=(1, None))(jnp.ones((2, 4)), 1.0)
    assert seen == [(1, None)]

    def mixed(x, y):
        mapping_core.leaf_batch_dim([x, y])
        return x

    with pytest.raises(brainx.BatchAxisError, match="different dimensions"):
        jax.vmap(mixed, in_axes=(0, 1))(jnp.ones((4, 4)), jnp.ones((4, 4)))


def test_make_hashable_turns_containers_into_hashable_ones():
    key = mapping_core._make_hashable({"b": [1, {2}], "a": (3,)})
    assert key == (("a", (3,)), ("b", (1, frozenset({2})))) and hash(key) is not None

    class Opaque:
        __hash__ = None

    with pytest.raises(TypeError, match="Opaque"):
        mapping_core._make_hashable(Opaque())


def test_install_serves_the_private_paths_with_these_modules():
    code = textwrap.dedent("""
        import brainx.compat
        brainx.compat.install_as_brainstate()
        import brainstate.transform._mapping_core as mc
        import brainx.compat.private.transform as mine
        assert mc is mine
        from brainstate.transform._make_jaxpr import CacheKey, StatefulFunction
        assert StatefulFunction is brainx.transform.StatefulFunction
        try:
            from brainstate.nn._delay import _no_such_helper
        except ImportError as e:
            assert "_no_such_helper" in str(e)
        else:
            raise AssertionError("a missing private name imported")
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
