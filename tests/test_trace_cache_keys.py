"""The trace caches without sharing: weak types in every key, hooks edited after a first call."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform
from sharing_support import close, double_write

# -- 9. weak types ----------------------------------------------------------------------------

def _same(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert bool(getattr(got, "weak_type", False)) == bool(getattr(want, "weak_type", False))
    np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))


@pytest.mark.parametrize("calls", [
    pytest.param([(jnp.array([100], jnp.int8), 100),
                  (jnp.array([100], jnp.int8), jnp.int32(100))], id="int8+weak-int-then-int32"),
    pytest.param([(jnp.array([100], jnp.int8), jnp.int32(100)),
                  (jnp.array([100], jnp.int8), 100)], id="int8+int32-then-weak-int"),
    pytest.param([(jnp.array([1.5, 2.5], jnp.bfloat16), 2.5),
                  (jnp.array([1.5, 2.5], jnp.bfloat16), jnp.float32(2.5))],
                 id="bf16+weak-float-then-float32"),
    pytest.param([(jnp.array([1.5, 2.5], jnp.bfloat16), jnp.float32(2.5)),
                  (jnp.array([1.5, 2.5], jnp.bfloat16), 2.5)],
                 id="bf16+float32-then-weak-float"),
])
def test_weak_typed_arguments_are_not_confused_with_strong_ones(calls):
    f = transform.jit(lambda x, y: x + y)
    ref = jax.jit(lambda x, y: x + y)
    for x, y in calls:
        _same(f(x, y), ref(x, y))
    int_case = calls[-1][0].dtype == jnp.int8 and not isinstance(calls[-1][1], int)
    if int_case:
        np.testing.assert_array_equal(np.asarray(f(*calls[-1])), np.array([200], np.int32))


def _weak(v):
    x = jnp.array(v)            # a Python float made an array: weakly typed float32
    assert x.weak_type
    return x


@pytest.mark.parametrize("weak_first", [True, False])
def test_a_state_value_s_weak_type_is_part_of_the_trace(weak_first):
    weak, strong = _weak(2.0), jnp.float32(2.0)
    assert not strong.weak_type
    s = brainx.State(weak if weak_first else strong)
    f = transform.jit(lambda x: x + s.value)
    ref = jax.jit(lambda x, v: x + v)
    x = jnp.array([1.5, 2.5], jnp.bfloat16)
    for value in ((weak, strong) if weak_first else (strong, weak)):
        s.value = value
        _same(f(x), ref(x, s.value))


@pytest.mark.parametrize("weak_first", [True, False])
def test_an_eager_for_loop_reading_a_weak_then_strong_state(weak_first):
    weak, strong = _weak(2.0), jnp.float32(2.0)
    s = brainx.State(weak if weak_first else strong)
    xs = jnp.array([[1.5, 2.5], [0.5, -1.0], [3.0, 4.0]], jnp.bfloat16)

    def body(x):
        return x + s.value

    for value in ((weak, strong) if weak_first else (strong, weak)):
        s.value = value
        got = transform.for_loop(body, xs)
        v = s.value
        want = jax.lax.scan(lambda c, x: (c, x + v), None, xs)[1]
        python = jnp.stack([x + v for x in xs])
        _same(got, want)
        assert got.dtype == python.dtype


# -- 10. hooks registered after the first call -------------------------------------------------

@pytest.mark.parametrize("scope", ["state", "global"])
def test_a_hook_registered_after_the_first_call_applies(scope):
    def world():
        s = brainx.State(jnp.zeros(2))

        def step(x):
            s.value = s.value + x
            return s.value

        return s, step

    def register(s):
        if scope == "state":
            return s.register_hook("write_before", double_write)
        return brainx.register_state_hook("write_before", double_write)

    def scenario(jitted):
        s, step = world()
        f = transform.jit(step) if jitted else step
        x = jnp.array([1.0, 2.0])
        outs = [f(x)]
        handle = register(s)
        try:
            outs.append(f(x))
        finally:
            handle.remove()
        outs.append(f(x))
        return outs + [s.value]

    got = scenario(jitted=True)
    want = scenario(jitted=False)    # plain Python: no trace at all
    assert not brainx.has_state_hooks()
    for a, b in zip(got, want):
        close(a, b)
    close(want[1], np.array([4.0, 8.0], np.float32))    # (1 + 1) * 2
    close(want[2], np.array([5.0, 10.0], np.float32))


