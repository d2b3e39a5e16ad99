"""``nn.LPPool1d/2d/3d``: ``(mean |x|^p)^(1/p)`` per window (brainstate's power-average pooling)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brainx import nn


def numpy_lp_1d(x, p, k, s):
    out = [(np.abs(x[i:i + k]) ** p).mean() ** (1 / p) for i in range(0, len(x) - k + 1, s)]
    return np.asarray(out)


@pytest.mark.parametrize("p", [1.0, 2.0, 3.5])
def test_matches_numpy(p):
    x = np.random.RandomState(0).randn(9).astype(np.float32)
    got = nn.LPPool1d(p, 3, stride=2, channel_axis=None)(jnp.asarray(x))
    np.testing.assert_allclose(got, numpy_lp_1d(x, p, 3, 2), rtol=1e-5)


def test_2d_with_channels_and_batch_and_large_p_approaches_max():
    x = jnp.asarray(np.random.RandomState(1).rand(2, 4, 4, 3).astype(np.float32) + 0.1)
    pool = nn.LPPool2d(2.0, 2, in_size=(4, 4, 3))
    assert pool.out_size == (2, 2, 3) and pool(x).shape == (2, 2, 2, 3)
    window = np.asarray(x)[0, :2, :2, 0]
    np.testing.assert_allclose(pool(x)[0, 0, 0, 0], np.sqrt((window ** 2).mean()), rtol=1e-5)
    big, peak = np.asarray(nn.LPPool2d(60.0, 2)(x)), np.asarray(nn.MaxPool2d(2)(x))
    assert np.all(big <= peak * (1 + 1e-5)) and np.all(big >= peak * 0.25 ** (1 / 60) * (1 - 1e-5))


def test_gradient_is_finite_on_zero_windows_and_bad_p_is_refused():
    grad = jax.grad(lambda x: nn.LPPool1d(2.0, 2, channel_axis=None)(x).sum())(jnp.zeros(4))
    np.testing.assert_array_equal(grad, np.zeros(4))
    for p in (0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="norm_type"):
            nn.LPPool1d(p, 2)
