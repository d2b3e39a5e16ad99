"""The structural and prior regularisers brainstate has (GroupLasso, TotalVariation, ..., ChainedReg)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

import brainx
from brainx import nn

X = np.array([0.3, -1.2, 2.0, 0.7, -0.1], np.float32)


def close(got, want):
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-6)


def test_structural_penalties_match_numpy():
    padded = np.concatenate([X, [0.0]]).reshape(-1, 2)
    close(nn.GroupLassoReg(0.5, group_size=2).loss(X), 0.5 * np.sqrt((padded ** 2).sum(1)).sum())
    close(nn.TotalVariationReg(0.5).loss(X), 0.5 * np.abs(np.diff(X)).sum())
    close(nn.TotalVariationReg(0.5, order=2).loss(X), 0.5 * np.abs(np.diff(X, 2)).sum())
    norm = np.linalg.norm(X)
    close(nn.MaxNormReg(2.0, max_value=1.0).loss(X), 2.0 * (norm - 1.0) ** 2)
    assert float(nn.MaxNormReg(max_value=10.0).loss(X)) == 0.0
    W = np.random.RandomState(0).randn(4, 3).astype(np.float32)
    close(nn.OrthogonalReg(0.1).loss(W), 0.1 * ((W.T @ W - np.eye(3)) ** 2).sum())
    sigma = np.linalg.svd(W, compute_uv=False)[0]
    close(nn.SpectralNormReg(0.1, max_value=1.0).loss(W), 0.1 * (sigma - 1.0) ** 2)
    close(nn.UniformReg(1.0, lower=-1.0, upper=1.0).loss(X), 0.2 ** 2 + 1.0 ** 2)


def test_prior_penalties_match_numpy():
    s, nu = 0.7, 3.0
    close(nn.CauchyReg(0.2, scale=s).loss(X), 0.2 * (np.log1p((X / s) ** 2).sum() + X.size * np.log(s)))
    close(nn.HorseshoeReg(0.2, tau=s).loss(X), 0.2 * (np.log1p((X / s) ** 2).sum() + X.size * np.log(s)))
    norm = np.log(s) + special.gammaln(nu / 2) + 0.5 * np.log(nu * np.pi) - special.gammaln((nu + 1) / 2)
    data = (0.5 * (nu + 1) * np.log1p((X / s) ** 2 / nu)).sum()
    close(nn.StudentTReg(0.2, df=nu, scale=s).loss(X), 0.2 * (data + X.size * norm))
    spike, slab = 0.01, 1.0
    mix = 0.5 * np.exp(-0.5 * (X / spike) ** 2) / spike + 0.5 * np.exp(-0.5 * (X / slab) ** 2) / slab
    close(nn.SpikeAndSlabReg().loss(X), -np.log(mix + 1e-8).sum())
    alpha = np.array([2.0, 3.0, 1.0, 1.0, 4.0])
    log_p = X - np.log(np.exp(X).sum())
    close(nn.DirichletReg(0.5, alpha=alpha).loss(X), -0.5 * ((alpha - 1) * log_p).sum())


def test_chain_sums_and_takes_the_first_prior():
    chain = nn.ChainedReg(nn.L1Reg(0.1), nn.UniformReg(lower=0.0, upper=1.0), weight=2.0)
    close(chain.loss(X), 2.0 * (nn.L1Reg(0.1).loss(X) + nn.UniformReg(lower=0.0, upper=1.0).loss(X)))
    assert chain.reset_value() == 0.0 and nn.ChainedReg().loss(X) == 0.0
    assert nn.ChainedReg(nn.UniformReg(lower=0.0, upper=2.0)).reset_value() == 1.0


def test_errors_and_param_integration():
    with pytest.raises(ValueError, match="group_size"):
        nn.GroupLassoReg(group_size=0)
    with pytest.raises(ValueError, match="order"):
        nn.TotalVariationReg(order=3)
    p = nn.Param(jnp.array([0.3, 0.3, 0.4]), reg=nn.DirichletReg(alpha=jnp.ones(3), weight=0.1))
    assert float(p.reg_loss()) == pytest.approx(0.0, abs=1e-6)
    grad = jax.grad(nn.OrthogonalReg().loss)(jnp.eye(3) * 1.1)
    assert grad.shape == (3, 3) and bool(jnp.all(jnp.isfinite(grad)))


@pytest.mark.parametrize("reg", [
    nn.GroupLassoReg(), nn.TotalVariationReg(), nn.MaxNormReg(max_value=2.0), nn.OrthogonalReg(),
    nn.SpectralNormReg(max_value=2.0), nn.StudentTReg(), nn.CauchyReg(), nn.UniformReg(),
    nn.HorseshoeReg(), nn.SpikeAndSlabReg(), nn.DirichletReg(alpha=2.0),
])
def test_samples_have_the_shape_and_are_finite(reg):
    brainx.random.seed(1)
    draw = reg.sample_init((4, 3))
    assert draw.shape == (4, 3) and bool(jnp.all(jnp.isfinite(draw)))
    assert np.isfinite(float(reg.loss(draw)))
