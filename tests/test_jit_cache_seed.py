"""`transform.jit` hands `jax.jit` the jaxpr discovery found (transform/compiled/jit_cache_seed.py).

Each case runs a fresh jitted function twice over: once as it ships, once
with priming off (``jax.jit`` traces the pure function itself, as before).
Outputs, new state values and the lowered program must be the same, and
with priming on, the pure function must not have been traced at all.
"""

import re

import jax
import jax.experimental
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform
from brainx.transform.compiled import jit_cache_seed, jit_entry

pytestmark = pytest.mark.skipif(not jit_cache_seed.AVAILABLE,
                                reason="this JAX's private jit cache is not the one primed")


@pytest.fixture
def pure_traces(monkeypatch):
    """How often ``jax.jit`` traced an entry's pure function (a list, one item per trace)."""
    traces = []
    make_pure = jit_entry.JitEntry._pure

    def counting_pure(self):
        pure = make_pure(self)

        def traced(*args, **kwargs):
            if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(args)):
                traces.append(pure.__name__)
            return pure(*args, **kwargs)

        traced.__name__ = pure.__name__
        return traced

    monkeypatch.setattr(jit_entry.JitEntry, "_pure", counting_pure)
    return traces


def _without_priming(monkeypatch, run):
    monkeypatch.setattr(jit_cache_seed, "AVAILABLE", False)
    try:
        return run()
    finally:
        monkeypatch.setattr(jit_cache_seed, "AVAILABLE", True)


def _values(tree):
    def value(x):
        x = jnp.asarray(x)
        return jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x

    return jax.tree.map(value, tree)


def _same(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        x, y = jnp.asarray(x), jnp.asarray(y)
        assert (x.dtype, x.shape, x.weak_type) == (y.dtype, y.shape, y.weak_type)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _readable(hlo: str) -> str:
    return re.sub(r"loc\(.*?\)|#loc.*", "", hlo)


# Each builder returns (states, function, args): a fresh model each time.
def _read_write_and_write_only():
    a = brainx.ParamState(jnp.arange(3.0))
    b = brainx.HiddenState(jnp.zeros(3))
    c = brainx.HiddenState(jnp.ones(2))

    def step(x, y):
        b.value = b.value + a.value * x
        c.value = jnp.zeros(2) + y  # written, never read
        return {"sum": b.value.sum(), "none": None, "three": 3.0}

    return (a, b, c), step, (2.0, jnp.float32(1.5))


def _read_in_another_order_than_made():
    states = [brainx.HiddenState(jnp.full((2,), float(i))) for i in range(5)]

    def step(x):
        for s in reversed(states[1:]):
            s.value = s.value * x + states[0].value
        return states[2].value

    return tuple(states), step, (jnp.float32(0.5),)


def _pytree_values_and_ints():
    d = brainx.ShortTermState({"v": jnp.zeros(3), "n": jnp.zeros((), jnp.int32)})
    w = brainx.ParamState([jnp.ones((3, 3)), jnp.arange(3.0)])

    def step(x):
        value = d.value
        d.value = {"v": w.value[0] @ (value["v"] + x) + w.value[1], "n": value["n"] + 1}
        return d.value["n"]

    return (d, w), step, (jnp.ones(3),)


def _closure_constants_and_random():
    table = jnp.linspace(0.0, 1.0, 7)
    s = brainx.HiddenState(jnp.zeros(7))
    rng = brainx.random.RandomState(3)

    def step():
        s.value = s.value + table * rng.uniform(size=(7,))
        return jnp.int32(7)

    return (s, rng), step, ()


def _no_state_at_all():
    def step(x, pair):
        return jnp.sin(x) * pair[0], pair[1] + 1

    return (), step, (jnp.arange(4.0), (2.0, jnp.int8(3)))


def _python_and_numpy_values_with_ordered_effects():
    count = brainx.ShortTermState(0)                     # a Python int: weakly typed int32
    table = brainx.ParamState(np.linspace(0.0, 1.0, 3).astype(np.float32))
    seen = []

    def step(x):
        count.value = count.value + 1
        jax.debug.print("step {c}", c=count.value, ordered=True)
        total = jax.experimental.io_callback(lambda v: (seen.append(v), v)[1],
                                             jax.ShapeDtypeStruct((3,), jnp.float32),
                                             table.value * x, ordered=True)
        return total.sum()

    return (count, table), step, (jnp.float32(2.0),)


CASES = [_read_write_and_write_only, _python_and_numpy_values_with_ordered_effects, _read_in_another_order_than_made, _pytree_values_and_ints,
         _closure_constants_and_random, _no_state_at_all]


@pytest.mark.parametrize("build", CASES, ids=lambda b: b.__name__.strip("_"))
def test_the_first_call_runs_the_found_jaxpr_as_jax_jit_would_have_traced_it(
        build, pure_traces, monkeypatch):
    states, fun, args = build()
    f = transform.jit(fun)
    out = f(*args)
    assert pure_traces == []                      # jax.jit did not trace the pure function
    primed = _values((out, [s.value for s in states], f(*args), [s.value for s in states]))
    hlo = _readable(f.lower(*args).as_text())

    def unprimed():
        states, fun, args = build()
        g = transform.jit(fun)
        out = g(*args)
        return (_values((out, [s.value for s in states], g(*args), [s.value for s in states])),
                _readable(g.lower(*args).as_text()))

    expected, expected_hlo = _without_priming(monkeypatch, unprimed)
    assert pure_traces                            # ... which it does without priming
    _same(primed, expected)
    assert hlo == expected_hlo


def test_another_argument_type_traces_the_pure_function_and_keeps_jax_jit_types(pure_traces):
    """Priming serves only the types it was made for (weak types included, as in jax.jit)."""
    acc = brainx.HiddenState(jnp.zeros(1, jnp.int8))

    def add(x, y):
        acc.value = acc.value + 1
        return x + y

    f = transform.jit(add)
    x = jnp.array([100], jnp.int8)
    first = f(x, 100)                              # weakly typed 100: int8
    assert pure_traces == []
    second = f(x, jnp.int32(100))                  # strong int32: traced anew, int32
    assert pure_traces
    for got, want in ((first, jax.jit(lambda x, y: x + y)(x, 100)),
                      (second, jax.jit(lambda x, y: x + y)(x, jnp.int32(100)))):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(acc.value, [2])


def test_primed_jit_under_grad_and_inside_another_jit(pure_traces):
    w = brainx.ParamState(jnp.array([1.0, -2.0, 0.5]))
    h = brainx.HiddenState(jnp.zeros(3))

    @transform.jit
    def inner(x):
        h.value = jnp.tanh(w.value * x + h.value)
        return (h.value ** 2).sum()

    def pure(wv, hv, x):
        hv = jnp.tanh(wv * x + hv)
        return (hv ** 2).sum(), hv

    x = jnp.array([0.3, 0.1, -0.2])
    grads = transform.grad(inner, grad_states=w)(x)
    want = jax.grad(lambda wv: pure(wv, jnp.zeros(3), x)[0])(w.value)
    np.testing.assert_allclose(grads, want, rtol=1e-6)
    h.value = jnp.zeros(3)

    outer = transform.jit(lambda x: inner(x) + inner(2 * x))
    got = outer(x)
    v1, h1 = pure(w.value, jnp.zeros(3), x)
    v2, h2 = pure(w.value, h1, 2 * x)
    np.testing.assert_allclose(got, v1 + v2, rtol=1e-6)
    np.testing.assert_allclose(h.value, h2, rtol=1e-6)


def test_donated_arguments_and_settings_keep_their_meaning():
    s = brainx.HiddenState(jnp.zeros(4))

    def step(buffer, x):
        s.value = s.value + buffer * x
        return buffer + 1.0

    f = transform.jit(step, donate_argnums=0)
    buffer = jnp.ones(4)
    out = f(buffer, 2.0)
    assert buffer.is_deleted()                     # donated, as jax.jit(donate_argnums=0) does
    np.testing.assert_array_equal(out, np.full(4, 2.0))
    np.testing.assert_array_equal(s.value, np.full(4, 2.0))


def test_instances_sharing_a_method_are_primed_once_and_run_their_own_states(pure_traces):
    class Cell(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.v = brainx.HiddenState(jnp.zeros(2))

        @transform.jit
        def step(self, x):
            self.v.value = 0.5 * self.v.value + x
            return self.v.value

    a, b = Cell(), Cell()
    a.step(jnp.ones(2))
    b.step(jnp.full(2, 4.0))
    b.step(jnp.full(2, 4.0))
    assert pure_traces == []
    np.testing.assert_array_equal(a.v.value, [1.0, 1.0])
    np.testing.assert_array_equal(b.v.value, [6.0, 6.0])
