"""A small network and plain-JAX references shared by the loop tests."""

import jax
import jax.numpy as jnp
import numpy as np

import brainx


N = 3


class Net:
    """A small recurrent net: v and count are written every step, w and b only read."""

    def __init__(self, seed=0):
        k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
        self.w = brainx.ParamState(jax.random.normal(k1, (N, N)) * 0.6, name="w")
        self.b = brainx.ParamState(jax.random.normal(k2, (N,)) * 0.1, name="b")
        self.v = brainx.HiddenState(jnp.zeros(N), name="v")
        self.count = brainx.ShortTermState(jnp.zeros((), jnp.int32), name="count")

    def step(self, x):
        self.v.value = jnp.tanh(self.v.value @ self.w.value + x + self.b.value)
        self.count.value = self.count.value + 1
        return self.v.value.sum()

    def scan_step(self, acc, x):
        y = self.step(x)
        return acc + y * y, self.v.value

    def params(self):
        return self.w.value, self.b.value

    def states(self):
        return self.v.value, self.count.value


def ref_step(params, states, x):
    w, b = params
    v, count = states
    v = jnp.tanh(v @ w + x + b)
    return (v, count + 1), v.sum()


def ref_for_loop(params, states, xs, reverse=False):
    return jax.lax.scan(lambda s, x: ref_step(params, s, x), states, xs, reverse=reverse)


def ref_scan(params, states, acc, xs, reverse=False):
    def body(carry, x):
        s, acc = carry
        s, y = ref_step(params, s, x)
        return (s, acc + y * y), s[0]
    (states, acc), vs = jax.lax.scan(body, (states, acc), xs, reverse=reverse)
    return states, acc, vs


def inputs(length, seed=1):
    return jax.random.normal(jax.random.PRNGKey(seed), (length, N))


def assert_tree_close(a, b, rtol=1e-5, atol=1e-6):
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def snapshot(*states):
    return [jax.tree.map(np.array, s.value) for s in states]


def assert_unchanged(states, before):
    for s, b in zip(states, before):
        assert_tree_close(s.value, b, rtol=0, atol=0)


class CompileCounter:
    def __enter__(self):
        self.count = 0
        self._listener = lambda name, *a, **k: (
            setattr(self, "count", self.count + 1) if name.endswith("backend_compile_duration") else None)
        jax.monitoring.register_event_duration_secs_listener(self._listener)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self._listener)
