"""Helpers shared by the sharing tests: eager ground truth, exact comparison, a trace counter."""

import collections

import jax
import numpy as np


def eager(fn):
    """``fn()`` with every ``transform.jit`` running the Python function itself."""
    with jax.disable_jit():
        return fn()


def close(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-5, equal_nan=True)
    # 0.0 and -0.0 compare equal: their signs must match too
    zeros = (expected == 0) & (actual == 0)
    np.testing.assert_array_equal(np.signbit(actual[zeros]), np.signbit(expected[zeros]))


def scale(k, x):
    return k * x


def shift(x, *, by):
    return x + by


def one():
    return 1.0


def two():
    return 2.0


#: Traces per class name, counted by the methods' Python bodies (a module-level counter, not a
#: class attribute: a class attribute that changes at each trace would itself tell the
#: instances apart).
TRACES = collections.Counter()


def pair_results(make_a, make_b, call):
    """``call`` on instances ``make_a()`` then ``make_b()``, jitted, and on eager twins."""
    a, b = make_a(), make_b()
    got = (call(a), call(b))

    def run():
        a2, b2 = make_a(), make_b()
        return call(a2), call(b2)

    return got, eager(run)


def double_write(ctx):
    """A ``write_before`` hook that doubles what is written."""
    ctx.transformed_value = ctx.transformed_value * 2.0
