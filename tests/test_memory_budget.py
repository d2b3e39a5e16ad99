"""`memory_budget=` that no strategy meets raises, naming the smallest budget that fits."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform as bt
from brainx.transform.remat.memory_budget import Budgeted, MemoryBudgetError


# -- 2. a memory budget no strategy meets -------------------------------------------------------
def test_memory_budget_below_every_strategy_names_the_smallest_that_fits():
    T, n = 200, 16
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    w0 = jax.random.normal(k1, (n, n)) * 0.3
    xs = jax.random.normal(k2, (T, n))
    W = brainx.ParamState(w0)
    h = brainx.HiddenState(jnp.zeros(n))

    def step(x):
        h.value = jnp.tanh(h.value @ W.value + x)
        return jnp.sum(h.value ** 2)

    def grad_of(budget):
        def loss(xs):
            h.value = jnp.zeros(n)
            return bt.checkpointed_for_loop(step, xs, memory_budget=budget).sum()
        return bt.jit(bt.grad(loss, grad_states=W))

    with pytest.raises(ValueError, match="no checkpointing strategy fits it") as info:
        grad_of(1024)(xs)
    assert isinstance(info.value, MemoryBudgetError)
    message = str(info.value)
    found = re.search(r"smallest budget that fits this loop is ([\d,]+) bytes, with (\w+)\(",
                      message)
    assert found, message
    smallest, strategy = int(found.group(1).replace(",", "")), found.group(2)
    assert smallest > 1024 and info.value.choice.estimate == smallest
    assert type(info.value.choice.strategy).__name__ == strategy
    np.testing.assert_array_equal(h.value, jnp.zeros(n))   # nothing written

    # that budget fits (the same gradient as plain JAX), one byte less does not
    def raw_loss(w, xs):
        def body(c, x):
            c = jnp.tanh(c @ w + x)
            return c, jnp.sum(c ** 2)
        return jax.lax.scan(body, jnp.zeros(n), xs)[1].sum()
    budget = Budgeted(smallest)
    np.testing.assert_allclose(grad_of(budget)(xs), jax.grad(raw_loss)(w0, xs),
                               rtol=1e-4, atol=1e-5)
    assert budget.choice.estimate <= smallest
    with pytest.raises(MemoryBudgetError, match=f"is {smallest:,} bytes"):
        grad_of(smallest - 1)(xs)
