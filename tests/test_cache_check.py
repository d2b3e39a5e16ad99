"""``BRAINX_CHECK_CACHES``: a cache whose key misses something is caught at its first wrong reuse.

Each test turns the checking mode on, makes a cache's key blind to one thing
(the tree structures, the jaxpr comparison) as the bugs it exists to catch
did, and checks that the reuse raises :class:`CacheReuseError` naming what
differed; and that with the real keys the same calls run clean and give
what ``jax.jit`` gives.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform
from brainx.transform.core import cache_check, stateful
from brainx.transform.core.cache_check import CacheReuseError
from brainx.transform.core.state_values import LEAF, StaticLeaves, is_single_array


@pytest.fixture
def checking():
    previous = cache_check.set_enabled(True)
    yield
    cache_check.set_enabled(previous)


def _tree(value):
    if is_single_array(value):
        return LEAF
    if type(value) is StaticLeaves:
        value = value.tree
    return jax.tree.structure(value)


@pytest.fixture
def blind_keys(monkeypatch):
    """``flat_inputs`` as it was before trees were part of the key: leaves only."""
    real = stateful.JaxprTrace.flat_inputs

    def blind(self, state_values, arg_leaves, arg_tree, exact=False):
        if len(arg_leaves) != len(self.arg_mask):
            return None
        trees = tuple(_tree(state_values[i]) for i in self.inputs)
        seen = dataclasses.replace(self, in_tree=arg_tree, input_trees=trees)
        return real(seen, state_values, arg_leaves, arg_tree, exact)

    monkeypatch.setattr(stateful.JaxprTrace, "flat_inputs", blind)


def _keys_sum(d):
    return d.get("b", 0) * 10 + d.get("c", 0)


def test_jit_reuse_for_another_argument_tree_is_caught(checking, blind_keys):
    f = transform.jit(_keys_sum)
    f({"a": jnp.ones(()), "b": jnp.ones(())})
    with pytest.raises(CacheReuseError, match="jit cache .*the arguments' tree structure"):
        f({"a": jnp.ones(()), "c": jnp.ones(())})


def test_jit_reuse_for_another_state_tree_is_caught(checking, blind_keys):
    d = brainx.State({"a": jnp.ones(()), "b": jnp.ones(())})
    f = transform.jit(lambda: _keys_sum(d.value))
    f()
    d.value = {"a": jnp.ones(()), "c": jnp.ones(())}
    with pytest.raises(CacheReuseError, match="the state values' tree structures"):
        f()
    assert sorted(d.value) == ["a", "c"]  # the failed call changed no state


def test_make_jaxpr_cache_reuse_for_another_state_tree_is_caught(checking, blind_keys):
    d = brainx.State({"a": jnp.ones(()), "b": jnp.ones(())})
    sf = transform.StatefulFunction(lambda x: _keys_sum(d.value) * x)
    sf.make_jaxpr(2.0)
    d.value = {"a": jnp.ones(()), "c": jnp.ones(())}
    with pytest.raises(CacheReuseError, match="make_jaxpr cache"):
        sf.make_jaxpr(2.0)


def test_eager_jaxpr_reuse_of_an_unequal_jaxpr_is_caught(checking, monkeypatch):
    monkeypatch.setattr(stateful, "jaxprs_equal", lambda *args, **kwargs: True)
    scale = [2.0]
    h = brainx.State(jnp.ones(3))

    def step():
        h.value = h.value * scale[0]

    ckpt = transform.checkpoint(step)
    ckpt()
    scale[0] = 3.0
    with pytest.raises(CacheReuseError, match="jaxpr kept per static key.*the jaxpr"):
        ckpt()


def test_the_real_keys_pass_the_check_and_match_jax(checking):
    f, ref = transform.jit(_keys_sum), jax.jit(_keys_sum)
    d = brainx.State({"a": jnp.ones(()), "b": 2 * jnp.ones(())})
    g = transform.jit(lambda: _keys_sum(d.value))
    for keys in (("a", "b"), ("a", "c"), ("a", "b")):
        arg = {k: jnp.float32(i + 1) for i, k in enumerate(keys)}
        np.testing.assert_allclose(f(arg), ref(arg))
        np.testing.assert_allclose(f(arg), ref(arg))  # a reuse, checked
        d.value = arg
        np.testing.assert_allclose(g(), ref(arg))
        np.testing.assert_allclose(g(), ref(arg))
