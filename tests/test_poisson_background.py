"""`PoissonBackground` against the Poisson distribution (scipy) and against its own contract."""

import brainunit as u
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import brainx
from brainx import nn

DT = 0.1 * u.ms


def draw(bg, steps):
    @brainx.transform.jit
    def run():
        return brainx.transform.for_loop(lambda i: bg.counts(), jnp.arange(steps))
    return np.asarray(run())


@pytest.mark.parametrize("lam", [0.168, 1.68, 4.0])
def test_counts_follow_the_poisson_distribution(lam):
    """Chi-square against scipy's pmf; lam 0.168 and 1.68 are the microcircuit's (0.1 and 1)."""
    rate = lam / 1e-4 * u.Hz                          # lam = rate * dt with dt = 0.1 ms
    with brainx.environ.context(dt=DT):
        bg = nn.PoissonBackground(2000, rate=rate, weight=1.0 * u.pA, seed=3)
        c = draw(bg, 200).ravel()                     # 400 000 counts
    assert c.min() >= 0
    k_max = int(scipy.stats.poisson.ppf(1 - 1e-4, lam))
    observed = np.bincount(np.minimum(c, k_max), minlength=k_max + 1)
    pmf = scipy.stats.poisson.pmf(np.arange(k_max), lam)
    expected = np.append(pmf, 1 - pmf.sum()) * c.size
    chi2, p = scipy.stats.chisquare(observed, expected)
    assert p > 1e-3, (chi2, p, observed, expected.round())
    assert c.mean() == pytest.approx(lam, rel=5 * np.sqrt(lam / c.size) / lam)


def test_per_neuron_rates_weights_and_independence():
    rates = np.array([1000.0, 5000.0, 20000.0, 0.0] * 250)
    weights = np.array([1.0, 2.0, -3.0, 5.0] * 250)
    with brainx.environ.context(dt=DT):
        bg = nn.PoissonBackground(1000, rate=rates * u.Hz, weight=weights * u.pA, seed=1)

        @brainx.transform.jit
        def run():
            return brainx.transform.for_loop(lambda i: bg.update().to_decimal(u.pA),
                                             jnp.arange(300))
        x = np.asarray(run())
    n = x / weights                                   # back to counts
    assert np.allclose(n, np.round(n)) and np.all(n[:, 3] == 0)
    lam = rates * 1e-4
    for j in range(3):
        cols = n[:, j::4]
        assert cols.mean() == pytest.approx(lam[j], rel=6 * np.sqrt(1 / (lam[j] * cols.size)))
        assert cols.var() == pytest.approx(lam[j], rel=0.1)
    # no correlation between neighbours nor between consecutive steps
    a = n[:, 2::4]
    assert abs(np.corrcoef(a[:-1].ravel(), a[1:].ravel())[0, 1]) < 0.02
    assert abs(np.corrcoef(n[:, 1::4].ravel(), n[:, 2::4].ravel())[0, 1]) < 0.02


def test_seeded_module_repeats_and_default_generator_is_used_without_seed():
    with brainx.environ.context(dt=DT):
        a = draw(nn.PoissonBackground(50, rate=10000 * u.Hz, weight=1.0, seed=7), 20)
        b = draw(nn.PoissonBackground(50, rate=10000 * u.Hz, weight=1.0, seed=7), 20)
        assert np.array_equal(a, b)
        brainx.random.seed(11)
        c = np.asarray(nn.PoissonBackground(50, rate=10000 * u.Hz, weight=1.0).counts(batch_size=2))
        brainx.random.seed(11)
        d = np.asarray(nn.PoissonBackground(50, rate=10000 * u.Hz, weight=1.0).counts(batch_size=2))
    assert c.shape == (2, 50) and np.array_equal(c, d)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="rate must be finite and >= 0"):
        nn.PoissonBackground(3, rate=-1 * u.Hz, weight=1 * u.pA)
    with pytest.raises(u.UnitMismatchError, match="'bg': weight must be in units like pA"):
        nn.PoissonBackground(3, rate=1 * u.Hz, weight=1 * u.mV, name="bg")
    with pytest.raises(ValueError, match="does not broadcast"):
        nn.PoissonBackground(3, rate=np.ones(4) * u.Hz, weight=1 * u.pA)
