"""``BatchNorm(track_running_stats=False)`` normalises with the batch's statistics, ``fit`` set or not (brainstate 0.6)."""

import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import environ, nn


def numpy_batchnorm(x, axes, eps=1e-5):
    return (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)


def test_no_running_stats_needs_no_fit_setting():
    assert environ.get("fit", None) is None
    x = np.random.RandomState(0).randn(3, 5, 4).astype(np.float32)
    bn = nn.BatchNorm1d((5, 4), track_running_stats=False, affine=False)
    np.testing.assert_allclose(bn(jnp.asarray(x)), numpy_batchnorm(x, (0, 1)), rtol=1e-4, atol=1e-5)
    jitted = brainx.transform.jit(bn)(jnp.asarray(x))
    np.testing.assert_allclose(jitted, numpy_batchnorm(x, (0, 1)), rtol=1e-4, atol=1e-5)
    for fit in (True, False):
        with environ.context(fit=fit):
            np.testing.assert_allclose(bn(jnp.asarray(x)), numpy_batchnorm(x, (0, 1)),
                                       rtol=1e-4, atol=1e-5)


def test_running_stats_still_ask_for_fit():
    bn = nn.BatchNorm1d((5, 4))
    with pytest.raises(KeyError, match="fit"):
        bn(jnp.ones((3, 5, 4)))


@pytest.mark.parametrize("feature_axis", [0, -1])
def test_running_statistics_keep_their_shape(feature_axis):
    in_size = (10, 20) if feature_axis == 0 else (20, 10)
    bn = nn.BatchNorm1d(in_size, feature_axis=feature_axis)
    shape = bn.running_mean.value.shape
    x = np.random.RandomState(1).randn(4, *in_size).astype(np.float32)
    with environ.context(fit=True):
        bn(jnp.asarray(x))
    assert bn.running_mean.value.shape == shape and bn.running_var.value.shape == shape
    axes = (0, 2) if feature_axis == 0 else (0, 1)
    expected = (1 - bn.momentum) * x.mean(axes)          # from zeros, one step of the average
    np.testing.assert_allclose(np.ravel(bn.running_mean.value), expected, rtol=1e-4, atol=1e-6)
