"""``MaxPool*(return_indices=True)`` and ``MaxUnpool*``: brainstate 0.6's size-independent index layout."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brainx import nn


def numpy_unpool_2d(x: np.ndarray, k: int) -> np.ndarray:
    """Non-overlapping k x k max pooling of ``x`` (H, W, C), then each maximum back in place."""
    out = np.zeros_like(x)
    H, W, C = x.shape
    for i, j, c in itertools.product(range(0, H - k + 1, k), range(0, W - k + 1, k), range(C)):
        window = x[i:i + k, j:j + k, c]
        a, b = np.unravel_index(np.argmax(window), window.shape)   # first maximum on a tie
        out[i + a, j + b, c] = window[a, b]
    return out


@pytest.mark.parametrize("shape", [(4, 6, 2), (5, 7, 2)])        # divisible, and odd lengths
def test_pool_then_unpool_puts_each_maximum_back(shape):
    x = np.random.RandomState(0).randn(*shape).astype(np.float32)
    x[0, 1, 0] = x[0, 0, 0]                                       # a tie in the first window
    y, where = nn.MaxPool2d(2, return_indices=True)(jnp.asarray(x))
    got = nn.MaxUnpool2d(2)(y, where, output_size=shape[:2])
    np.testing.assert_array_equal(got, numpy_unpool_2d(x, 2))
    natural = nn.MaxUnpool2d(2)(y, where)                          # (L - 1) * 2 + 2 per axis
    assert natural.shape == (shape[0] // 2 * 2, shape[1] // 2 * 2, 2)
    np.testing.assert_array_equal(natural, numpy_unpool_2d(x, 2)[:natural.shape[0], :natural.shape[1]])


def test_indices_are_input_positions_when_windows_tile_the_input():
    x = jnp.asarray(np.random.RandomState(1).randn(2, 4, 3).astype(np.float32))   # batch, L, C
    _, where = nn.MaxPool1d(2, return_indices=True)(x)
    xs = np.asarray(x)
    for b, l, c in itertools.product(range(2), range(2), range(3)):
        pos = 2 * l + int(np.argmax(xs[b, 2 * l:2 * l + 2, c]))
        assert int(where[b, l, c]) == np.ravel_multi_index((b, pos, c), xs.shape)


def test_odd_length_layout_does_not_depend_on_the_input_length():
    pool = nn.MaxPool1d(2, return_indices=True, channel_axis=None)
    _, odd = pool(jnp.array([0.0, 1.0, 5.0, 2.0, 9.0]))             # the last element is never pooled
    _, even = pool(jnp.array([0.0, 1.0, 5.0, 2.0]))
    np.testing.assert_array_equal(odd, even)
    assert odd.tolist() == [1, 2]


def test_padded_and_overlapping_windows_round_trip():
    x = jnp.asarray(np.random.RandomState(2).randn(5, 6, 2).astype(np.float32))
    y, where = nn.MaxPool2d(3, stride=2, padding=1, return_indices=True)(x)
    back = nn.MaxUnpool2d(3, stride=2, padding=1)(y, where, output_size=(5, 6))
    kept = np.asarray(back) != 0
    np.testing.assert_array_equal(np.asarray(back)[kept], np.asarray(x)[kept])  # values in place
    assert set(np.asarray(back)[kept].tolist()) == set(np.asarray(y).ravel().tolist())


def test_jit_vmap_and_gradient():
    pool = nn.MaxPool2d(2, return_indices=True, in_size=(5, 5, 3))
    unpool = nn.MaxUnpool2d(2)
    assert pool.out_size == (2, 2, 3)
    x = jax.random.normal(jax.random.PRNGKey(0), (4, 5, 5, 3))
    y, where = pool(x)
    eager = unpool(y, where, output_size=(5, 5))
    jitted = jax.jit(lambda x: unpool(*pool(x), output_size=(5, 5)))(x)
    mapped = jax.vmap(lambda s: unpool(*pool(s), output_size=(5, 5)))(x)
    np.testing.assert_array_equal(jitted, eager)
    np.testing.assert_array_equal(mapped, eager)
    grad = jax.grad(lambda x: pool(x)[0].sum())(x)                # one 1 per window, at its maximum
    np.testing.assert_array_equal(grad, (eager != 0).astype(grad.dtype))
    assert where.dtype == jnp.int32


def test_output_size_forms_and_errors():
    y, where = nn.MaxPool1d(2, return_indices=True)(jnp.ones((1, 6, 2)))
    unpool = nn.MaxUnpool1d(2)
    assert unpool(y, where, output_size=7).shape == (1, 7, 2)
    assert unpool(y, where, output_size=(7,)).shape == (1, 7, 2)
    assert unpool(y, where, output_size=(1, 7, 2)).shape == (1, 7, 2)
    with pytest.raises(ValueError, match="output_size"):
        unpool(y, where, output_size=(7, 7))
    with pytest.raises(ValueError, match="must match"):
        unpool(y, where[:, :1])
    with pytest.raises(TypeError, match="padding"):
        nn.MaxUnpool1d(2, padding="SAME")
    plain = nn.MaxPool1d(2)(jnp.ones((1, 6, 2)))
    assert not isinstance(plain, tuple)                           # return_indices=False: as before
