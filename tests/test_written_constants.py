"""A state written with a constant inside a transform holds a JAX array afterwards."""

import jax
import jax.numpy as jnp
import pytest

import brainx
from brainx import transform

CASES = {
    "jit": lambda f: transform.jit(f)(jnp.ones(3)),
    "checkpoint": lambda f: transform.checkpoint(f)(jnp.ones(3)),
    "vmap": lambda f: transform.vmap(f)(jnp.ones((2, 3))),
    "grad": lambda f: transform.grad(lambda x: f(x).sum())(jnp.ones(3)),
    "for_loop": lambda f: transform.for_loop(f, jnp.ones((2, 3))),
}


@pytest.mark.parametrize("how", list(CASES))
@pytest.mark.parametrize("const", [2.0, jnp.float32(2.0), 2])
def test_constant_write_gives_a_jax_array(how, const):
    s = brainx.State(jnp.zeros(()) if not isinstance(const, int) else 0)

    def f(x):
        s.value = const
        return x * 1.0

    CASES[how](f)
    assert isinstance(s.value, jax.Array), type(s.value)
    assert float(s.value) == 2.0
    assert s.value.weak_type == jax.typeof(jnp.asarray(const)).weak_type
