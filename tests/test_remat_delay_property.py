"""Property: every loop of a checkpointed step with delay buffers gives the plain gradient.

Random buffer lengths, read positions (how far back), write positions at the start (so
that the buffer wraps around at different steps), a second buffer the rule does not apply
to (an undeclared accumulating one, kept whole), a third declared accumulating
(``ring_writes.accumulating``: rebuilt from the later buffer), and every loop: ``for_loop``, ``scan`` in reverse and
each ``checkpointed_for_loop`` strategy, against the no-remat ``for_loop`` of the plain step.
Read and write positions are arguments of the compiled gradients, so one compilation serves
every example of a buffer length and loop (a few seconds in all).
"""

import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

import brainx
from brainx import nn, transform as bt
from brainx.transform.remat.ring_writes import accumulating

N, T = 5, 13
#: examples per run: a few by default (one compilation per buffer length and loop), more
#: with ``--long`` (make test-long)
EXAMPLES = 40 if "--long" in sys.argv else 8
LOOPS = ["for_loop", "scan_reverse", "remat", "nested", "binomial", "nested_remat", "no_remat"]


@functools.lru_cache(maxsize=None)
def _model(length: int):
    k = jax.random.split(jax.random.PRNGKey(length), 2)
    W = brainx.ParamState(jax.random.normal(k[0], (N, N)) * 0.5, name="W")
    delay = nn.Delay(jnp.zeros(N), name="spikes")
    delay.max_length = length
    nn.init_all_states(delay)
    acc = brainx.DelayState(jnp.zeros((length, N)), name="acc")  # accumulating: left as it is
    declared = brainx.DelayState(jnp.zeros((length, N)), name="declared")

    def add(b, slot, now):           # consume the slot, deliver `now` back + 1 slots later
        return b.at[slot].set(0.0).at[(slot + 1 + back_of(b)) % length].add(now)

    back_of = lambda b: length // 2

    def step(x, back):
        slot = delay.write_ptr.value
        now = jnp.tanh(delay.retrieve_at_step(back) @ W.value + acc.value[slot] + x
                       + jnp.sin(declared.value[slot]))
        acc.value = acc.value.at[(slot + 2) % length].add(0.3 * now).at[slot].set(0.0)
        declared.value = accumulating(add, declared.value, slot, 0.5 * now)
        delay.update(now)
        return jnp.sum(now ** 2)

    return W, delay, (acc, declared), step


@functools.lru_cache(maxsize=None)
def _gradient(length: int, loop: str):
    W, delay, acc, step = _model(length)
    f = step if loop == "plain" else bt.checkpoint(step)

    def loss(xs, back, start):
        delay.history.value = jnp.zeros((length, N))
        delay.write_ptr.value = start
        for a in acc:
            a.value = jnp.zeros((length, N))
        one = lambda x: f(x, back)
        if loop in ("plain", "for_loop"):
            ys = bt.for_loop(one, xs)
        elif loop == "scan_reverse":
            ys = bt.scan(lambda c, x: (c, one(x)), 0.0, xs, reverse=True)[1][::-1]
        else:
            ys = bt.checkpointed_for_loop(one, xs, checkpoint=loop)
        return jnp.sum(ys * jnp.linspace(0.5, 1.5, T))

    return bt.jit(bt.grad(loss, grad_states=W))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
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
