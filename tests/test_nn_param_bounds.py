"""Param built under a trace (jax.grad of a model builder) and Param given a value on its bound.

References: a central finite difference of the same builder for the gradient; the transform's
own forward of the stored value, and its inverse a step inside the bound, for the nudge.
"""

import warnings

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brainx import nn


def loss_of_a_model_built_from(v):
    # a model built inside the differentiated function, as in a finite-difference check
    tau = nn.Param(v, t=nn.SoftplusT(0.0))
    gain = nn.Param(v / 4.0, t=nn.SigmoidT(0.0, 1.0))
    return jnp.sum(jnp.exp(-1.0 / tau.value()) * gain.value())


def test_a_param_built_from_a_tracer_differentiates_like_finite_differences():
    v = jnp.array([0.5, 1.0, 2.0], jnp.float32)
    g = jax.grad(loss_of_a_model_built_from)(v)
    eps = 1e-3
    fd = [(loss_of_a_model_built_from(v.at[i].add(eps)) - loss_of_a_model_built_from(v.at[i].add(-eps)))
          / (2 * eps) for i in range(3)]
    np.testing.assert_allclose(g, fd, rtol=2e-2)
    jitted = jax.jit(jax.grad(loss_of_a_model_built_from))(v)         # and under jit
    np.testing.assert_allclose(jitted, g, rtol=1e-5)


@pytest.mark.parametrize("t, value", [
    (nn.SigmoidT(0.0, 1.0), jnp.ones(4)),
    (nn.SigmoidT(0.0, 1.0), jnp.array([0.0, 0.25, 1.0])),
    (nn.TanhT(-1.0, 1.0), jnp.array([-1.0, 1.0])),
    (nn.SoftplusT(0.0), jnp.zeros(3)),
    (nn.ExpT(0.0), jnp.zeros(2)),
    (nn.SoftplusT(-70.0 * u.mV), jnp.array([-70.0, -60.0]) * u.mV),
], ids=["sigmoid_top", "sigmoid_both", "tanh", "softplus", "exp", "softplus_mV"])
def test_a_value_on_the_bound_is_nudged_inside_with_a_warning(t, value):
    with pytest.warns(UserWarning, match="lie on the bound .* moved just inside"):
        p = nn.Param(value, t=t)
    stored = np.asarray(u.get_mantissa(p.val.value))
    assert np.all(np.isfinite(stored))
    read = p.value()
    np.testing.assert_allclose(u.get_mantissa(read), u.get_mantissa(t.forward(p.val.value)))
    # what is read back is the value given, to within the nudge (1e-7 of the range's scale)
    np.testing.assert_allclose(np.asarray(u.get_mantissa(read)), np.asarray(u.get_mantissa(value)),
                               atol=1e-5, rtol=1e-6)
    g = jax.grad(lambda x: jnp.sum(u.get_mantissa(t.forward(x))))(p.val.value)
    assert np.all(np.isfinite(np.asarray(u.get_mantissa(g))))        # trainable, not NaN


def test_values_inside_pass_silently_and_outside_are_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = nn.Param(jnp.array([0.2, 0.8]), t=nn.SigmoidT(0.0, 1.0))
    np.testing.assert_allclose(p.val.value, np.log([0.25, 4.0]), rtol=1e-5)
    for t, bad in [(nn.SoftplusT(0.0), -1.0), (nn.SigmoidT(0.0, 1.0), jnp.array([0.5, 1.5]))]:
        with pytest.raises(ValueError, match="outside the range"):
            nn.Param(bad, t=t)
