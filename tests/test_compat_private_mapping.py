"""``brainx.compat.private.mapping``: brainstate's private helpers of ``transform._mapping2``."""

import jax.numpy as jnp
import pytest

import brainx
from brainx.compat.private.mapping import (_batch_and_remainder, _build_new_state_resolver,
                                           _ensure_tuple, _validate_leading_lengths)


def test_tuples_and_leading_lengths():
    assert _ensure_tuple(None) == () and _ensure_tuple(3) == (3,) and _ensure_tuple([1, 2]) == (1, 2)
    assert _validate_leading_lengths({"a": jnp.ones(4), "b": jnp.ones((4, 2))}) == 4
    for bad, word in (((), "no xs"), ((jnp.ones(3), jnp.ones(4)), "different"),
                      ((jnp.float32(1.0),), "0-d")):
        with pytest.raises(ValueError, match=word):
            _validate_leading_lengths(bad)


def test_batches_keep_every_row_once():
    xs = {"a": jnp.arange(7.0), "b": jnp.arange(14.0).reshape(7, 2)}
    chunks, rest = _batch_and_remainder(xs, 3)
    assert chunks["a"].shape == (2, 3) and chunks["b"].shape == (2, 3, 2)
    assert jnp.concatenate([chunks["a"].ravel(), rest["a"]]).tolist() == list(range(7))
    assert _batch_and_remainder((jnp.arange(6.0),), 3)[1] is None


def test_new_state_resolver_matches_shared_first_then_axes_then_zero():
    ordered, axes = _build_new_state_resolver({1: brainx.ShortTermState})
    assert axes == [None, 1, 0]
    match = lambda s: next(a for a, pred in ordered if pred((), s))
    assert match(brainx.state.NonBatchState(0.0)) is None
    assert match(brainx.ShortTermState(0.0)) == 1 and match(brainx.ParamState(0.0)) == 0
    assert _build_new_state_resolver(None)[1] == [None, 0]
