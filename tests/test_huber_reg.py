"""``nn.HuberReg``: quadratic near zero, linear beyond ``delta`` (brainstate's regulariser)."""

import jax
import jax.numpy as jnp
import numpy as np

import brainx
from brainx.nn import HuberReg, L2Reg, Param


def numpy_huber(x, delta):
    a = np.abs(x)
    return np.where(a <= delta, 0.5 * x ** 2, delta * (a - 0.5 * delta)).sum()


def test_loss_matches_numpy_on_both_pieces():
    x = np.array([0.2, -0.9, 1.0, 2.5, -7.0], np.float32)
    for delta in (0.5, 1.0, 3.0):
        got = HuberReg(weight=0.3, delta=delta).loss(jnp.asarray(x))
        np.testing.assert_allclose(got, 0.3 * numpy_huber(x, delta), rtol=1e-5)


def test_gradient_is_x_inside_and_clipped_outside():
    x = jnp.array([0.5, -0.5, 4.0, -4.0])
    grad = jax.grad(HuberReg(weight=1.0, delta=1.0).loss)(x)
    np.testing.assert_allclose(grad, [0.5, -0.5, 1.0, -1.0], rtol=1e-5)
    assert float(HuberReg(delta=1.0).loss(x)) < float(L2Reg(weight=0.5).loss(x))  # outliers weigh less


def test_param_reg_loss_and_prior():
    p = Param(jnp.array([1.0, 2.0]), reg=HuberReg(delta=1.0, weight=0.1))
    np.testing.assert_allclose(p.reg_loss(), 0.1 * numpy_huber(np.array([1.0, 2.0]), 1.0), rtol=1e-5)
    reg = HuberReg(weight=4.0)
    assert reg.reset_value() == 0.0
    brainx.random.seed(0)
    draws = reg.sample_init((20000,))
    assert draws.shape == (20000,) and abs(float(jnp.std(draws)) - 0.5) < 0.02   # 1 / sqrt(weight)
