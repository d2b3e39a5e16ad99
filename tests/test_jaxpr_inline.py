"""``inline_jit``: the jit calls of a jaxpr replaced by their bodies, computing the same."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brainx.transform import inline_jit

run = jax.extend.core.jaxpr_as_fun
TABLE = np.array([1.0, -2.0, 3.0], np.float32)


def f(x):
    square = jax.jit(lambda v: v * v)
    outer = jax.jit(lambda v: square(v) + jnp.asarray(TABLE) * v)   # nested, with a constant
    return square(x) + square(x + 1.0), outer(x)


def _names(jaxpr):
    return [e.primitive.name for e in jaxpr.eqns]


def test_every_call_inlined_computes_the_same():
    x = jnp.array([0.5, 1.0, -2.0])
    closed = jax.make_jaxpr(f)(x)
    flat = inline_jit(closed)
    assert "jit" not in _names(flat) and "pjit" not in _names(flat)
    got = run(flat)(x)
    for g, w in zip(got, f(x)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_a_predicate_picks_the_calls():
    x = jnp.ones(3)
    closed = jax.make_jaxpr(f)(x)
    small = inline_jit(closed, lambda eqn: len(eqn.params["jaxpr"].eqns) <= 1)
    assert _names(small).count("mul") == 2 and any(n in ("jit", "pjit") for n in _names(small))
    for g, w in zip(run(small)(x), f(x)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_a_plain_jaxpr_stays_a_jaxpr():
    closed = jax.make_jaxpr(lambda x: jax.jit(jnp.sin)(x) * 2.0)(1.0)
    flat = inline_jit(closed.jaxpr)
    assert isinstance(flat, jax.extend.core.Jaxpr) and _names(flat) == ["sin", "mul"]
    assert float(run(jax.extend.core.ClosedJaxpr(flat, []))(0.3)[0]) == pytest.approx(
        2 * np.sin(0.3), rel=1e-6)
