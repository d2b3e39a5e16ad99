"""Property: every loop of a checkpointed step with delay buffers gives the plain gradient.

Random buffer lengths, read positions (how far back), write positions at the start (so
that the buffer wraps around at different steps), a second buffer the rule does not apply
to (an accumulating one, kept whole), and every loop: ``for_loop``, ``scan`` in reverse and
each ``checkpointed_for_loop`` strategy, against the no-remat ``for_loop`` of the plain step.
Read and write positions are arguments of the compiled gradients, so one compilation serves
every example of a buffer length and loop (a few seconds in all).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

import brainx
from brainx import nn, transform as bt

N, T = 5, 13
LOOPS = ["for_loop", "scan_reverse", "remat", "nested", "binomial", "nested_remat", "no_remat"]


@functools.lru_cache(maxsize=None)
def _model(length: int):
    k = jax.random.split(jax.random.PRNGKey(length), 2)
    W = brainx.ParamState(jax.random.normal(k[0], (N, N)) * 0.5, name="W")
    delay = nn.Delay(jnp.zeros(N), name="spikes")
    delay.max_length = length
    nn.init_all_states(delay)
    acc = brainx.DelayState(jnp.zeros((length, N)), name="acc")  # accumulating: left as it is

    def step(x, back):
        now = jnp.tanh(delay.retrieve_at_step(back) @ W.value + acc.value[delay.write_ptr.value] + x)
        slot = delay.write_ptr.value
        acc.value = acc.value.at[(slot + 2) % length].add(0.3 * now).at[slot].set(0.0)
        delay.update(now)
        return jnp.sum(now ** 2)

    return W, delay, acc, step


@functools.lru_cache(maxsize=None)
def _gradient(length: int, loop: str):
    W, delay, acc, step = _model(length)
    f = step if loop == "plain" else bt.checkpoint(step)

    def loss(xs, back, start):
        delay.history.value = jnp.zeros((length, N))
        delay.write_ptr.value = start
        acc.value = jnp.zeros((length, N))
        one = lambda x: f(x, back)
        if loop in ("plain", "for_loop"):
            ys = bt.for_loop(one, xs)
        elif loop == "scan_reverse":
            ys = bt.scan(lambda c, x: (c, one(x)), 0.0, xs, reverse=True)[1][::-1]
        else:
            ys = bt.checkpointed_for_loop(one, xs, checkpoint=loop)
        return jnp.sum(ys * jnp.linspace(0.5, 1.5, T))

    return bt.jit(bt.grad(loss, grad_states=W))


@settings(max_examples=8, deadline=None, derandomize=True)
@given(length=st.sampled_from([3, 6]), loop=st.sampled_from(LOOPS), data=st.data())
def test_gradients_equal_the_no_remat_program(length, loop, data):
    back = data.draw(st.integers(0, length - 1), label="read steps back")
    start = data.draw(st.integers(0, length - 1), label="write position at the start")
    seed = data.draw(st.integers(0, 2 ** 16), label="inputs")
    xs = jax.random.normal(jax.random.PRNGKey(seed), (T, N))
    args = (xs, jnp.int32(back), jnp.int32(start))
    reverse = loop == "scan_reverse"
    ref = _gradient(length, "plain")(xs[::-1] if reverse else xs, *args[1:])
    got = _gradient(length, loop)(*args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=2e-5, atol=1e-6)
