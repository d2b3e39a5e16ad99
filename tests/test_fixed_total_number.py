"""The fixed-total-number connector against its rule: exact totals, uniform sources and targets
with replacement (chi-square), in- and out-degrees multinomial (Poisson-like mean and variance),
source independent of target; the population blocks' weights and delays against scipy."""

from __future__ import annotations

import brainunit as u
import numpy as np
import pytest
from scipy import stats

from brainx.nn import fixed_total_number, fixed_total_number_blocks
from brainx.nn.connectivity.native import build

ALPHA = 1e-4            # a false alarm once in 10 000 runs per check (the draws are seeded)


def test_exact_total_and_csr_shape():
    indptr, targets = fixed_total_number(50, 30, 12345, seed=0)
    assert indptr.shape == (51,) and indptr[0] == 0 and indptr[-1] == 12345
    assert np.all(np.diff(indptr) >= 0)
    assert targets.dtype == np.int32 and targets.shape == (12345,)
    assert targets.min() >= 0 and targets.max() < 30


def test_seeded_and_different_seeds_differ():
    a = fixed_total_number(20, 20, 500, seed=3)
    b = fixed_total_number(20, 20, 500, seed=3)
    c = fixed_total_number(20, 20, 500, seed=4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[1], c[1])


def test_sources_and_targets_uniform_chi_square():
    n_pre, n_post, total = 200, 150, 300_000
    indptr, targets = fixed_total_number(n_pre, n_post, total, seed=1)
    out_deg = np.diff(indptr)
    in_deg = np.bincount(targets, minlength=n_post)
    assert stats.chisquare(out_deg).pvalue > ALPHA
    assert stats.chisquare(in_deg).pvalue > ALPHA


def test_degrees_have_multinomial_mean_and_variance():
    """Each degree is Binomial(total, 1/n): mean total/n, variance total/n (1 - 1/n) ~ Poisson."""
    n_pre, n_post, total = 2000, 1000, 400_000
    indptr, targets = fixed_total_number(n_pre, n_post, total, seed=2)
    for deg, n in ((np.diff(indptr), n_pre), (np.bincount(targets, minlength=n_post), n_post)):
        mean, var = total / n, total / n * (1 - 1 / n)
        assert deg.sum() == total and abs(deg.mean() - mean) < 1e-9
        # sample variance of n values: its SD is about var * sqrt(2 / (n - 1))
        assert abs(deg.var(ddof=1) - var) < 5 * var * np.sqrt(2 / (n - 1))


def test_source_independent_of_target():
    """A contingency table of (source group, target group): no dependence (chi-square)."""
    indptr, targets = fixed_total_number(40, 40, 200_000, seed=5)
    sources = np.repeat(np.arange(40), np.diff(indptr))
    table = np.zeros((8, 8))
    np.add.at(table, (sources // 5, targets // 5), 1)
    assert stats.chi2_contingency(table).pvalue > ALPHA


def test_autapses_and_multapses_occur():
    indptr, targets = fixed_total_number(10, 10, 2000, seed=6)
    sources = np.repeat(np.arange(10), np.diff(indptr))
    assert np.any(sources == targets)                                 # autapses
    pairs = sources * 10 + targets
    assert np.unique(pairs).size < pairs.size                        # multapses


PATHS = [pytest.param(True, id="native", marks=pytest.mark.skipif(
             build.load() is None, reason="no native kernels here")),
         pytest.param(False, id="numpy")]


def block_network(seed=7, native=None):
    sizes_pre, sizes_post = [300, 100], [200, 50, 80]
    counts = np.array([[30_000, 12_000], [5_000, 0], [8_000, 4_000]])
    w_mean = np.array([[87.8, -351.2], [175.6, -351.2], [87.8, -351.2]])
    conn = fixed_total_number_blocks(sizes_pre, sizes_post, counts, w_mean * u.pA,
                                     0.1 * np.abs(w_mean) * u.pA, [1.5, 0.75] * u.ms,
                                     [0.75, 0.375] * u.ms, dt=0.1 * u.ms,
                                     delay_min=0.05 * u.ms, seed=seed, native=native)
    return conn, sizes_pre, sizes_post, counts, w_mean


def pair_of_each_synapse(conn, sizes_pre, sizes_post):
    src = np.repeat(np.arange(conn.n_pre), np.diff(conn.indptr))
    x = np.searchsorted(np.cumsum(sizes_pre), src, side="right")
    y = np.searchsorted(np.cumsum(sizes_post), conn.targets, side="right")
    return src, x, y


@pytest.mark.parametrize("native", PATHS)
def test_blocks_exact_pair_counts_and_uniform_targets(native):
    conn, sizes_pre, sizes_post, counts, _ = block_network(native=native)
    assert conn.nnz == counts.sum() and conn.n_post == sum(sizes_post)
    src, x, y = pair_of_each_synapse(conn, sizes_pre, sizes_post)
    got = np.zeros_like(counts)
    np.add.at(got, (y, x), 1)
    np.testing.assert_array_equal(got, counts)
    off_pre, off_post = np.cumsum([0] + sizes_pre), np.cumsum([0] + sizes_post)
    for yy, xx in np.argwhere(counts > 0):
        sel = (x == xx) & (y == yy)
        assert stats.chisquare(np.bincount(conn.targets[sel] - off_post[yy],
                                           minlength=sizes_post[yy])).pvalue > ALPHA
        assert stats.chisquare(np.bincount(src[sel] - off_pre[xx],
                                           minlength=sizes_pre[xx])).pvalue > ALPHA


@pytest.mark.parametrize("native", PATHS)
def test_blocks_weights_normal_with_sign(native):
    conn, sizes_pre, sizes_post, counts, w_mean = block_network(native=native)
    _, x, y = pair_of_each_synapse(conn, sizes_pre, sizes_post)
    assert conn.weights.dtype == np.float32 and u.get_unit(conn.unit * 1.0) == u.pA
    for yy, xx in np.argwhere(counts > 0):
        w = conn.weights[(x == xx) & (y == yy)].astype(np.float64)
        m = w_mean[yy, xx]
        assert np.all(w >= 0) if m > 0 else np.all(w <= 0)
        # at a 10 % SD the sign redraw never matters: the draws are N(m, 0.1|m|)
        assert stats.kstest(w, stats.norm(m, 0.1 * abs(m)).cdf).pvalue > ALPHA


@pytest.mark.parametrize("native", PATHS)
def test_blocks_delays_discretized_truncated_normal(native):
    conn, sizes_pre, sizes_post, counts, _ = block_network(native=native)
    _, x, _ = pair_of_each_synapse(conn, sizes_pre, sizes_post)
    assert conn.delays.dtype == np.uint8 and conn.delays.min() >= 1
    for xx, (mean, sd) in enumerate(((1.5, 0.75), (0.75, 0.375))):
        d = conn.delays[x == xx].astype(np.int64)
        # P(k steps) = P((k - 0.5) dt <= D < (k + 0.5) dt) for D ~ N(mean, sd) cut below 0.05 ms
        law = stats.truncnorm((0.05 - mean) / sd, np.inf, loc=mean, scale=sd)
        ks = np.arange(1, d.max() + 1)
        p = law.cdf((ks + 0.5) * 0.1) - law.cdf(np.maximum((ks - 0.5) * 0.1, 0.05))
        p[-1] += 1 - p.sum()                                       # the upper tail
        observed = np.bincount(d, minlength=ks[-1] + 1)[1:]
        keep = p * d.size >= 5                                      # chi-square's rule
        f_obs = np.append(observed[keep], observed[~keep].sum())
        f_exp = np.append(p[keep], p[~keep].sum()) * d.size
        assert stats.chisquare(f_obs, f_exp).pvalue > ALPHA


@pytest.mark.parametrize("native", PATHS)
def test_blocks_seeded_independent_of_threads(monkeypatch, native):
    from brainx.nn.connectivity import fixed_total
    a = block_network(seed=11, native=native)[0]
    monkeypatch.setattr(fixed_total, "_threads", lambda: 1)
    b = block_network(seed=11, native=native)[0]
    for name in ("indptr", "targets", "delays", "weights"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.targets, block_network(seed=12, native=native)[0].targets)


def test_parameters_whose_draws_cannot_end_are_refused():
    with pytest.raises(ValueError, match="source population 0's delays are always 0.01"):
        fixed_total_number_blocks([3], [4], [[5]], [[1.0]], [[0.1]], [0.01], [0.0], dt=0.1,
                                  delay_min=0.05)
    with pytest.raises(ValueError, match="weight_sd finite and >= 0"):
        fixed_total_number_blocks([3], [4], [[5]], [[1.0]], [[np.nan]], [1.0], [0.1], dt=0.1)


def test_blocks_shared_weight_is_one_scalar():
    conn = fixed_total_number_blocks([10], [10], [[100]], [[2.0]], [[0.0]], [1.0], [0.2],
                                     dt=0.1, seed=0)
    assert conn.weights.shape == () and float(conn.weights) == 2.0


def test_bad_input_errors():
    with pytest.raises(ValueError, match="total must be a non-negative int"):
        fixed_total_number(3, 3, -1)
    with pytest.raises(ValueError, match="at least one neuron"):
        fixed_total_number(0, 3, 5)
    with pytest.raises(ValueError, match=r"counts must be \(targets, sources\)"):
        fixed_total_number_blocks([3, 2], [4], [[5]], [[1.0, 1.0]], [[0.1, 0.1]], [1.0, 1.0],
                                  [0.1, 0.1], dt=0.1)
    with pytest.raises(ValueError, match="pair \\(target 0, source 1\\)"):
        fixed_total_number_blocks([3, 0], [4], [[5, 2]], [[1.0, 1.0]], [[0.1, 0.1]], [1.0, 1.0],
                                  [0.1, 0.1], dt=0.1)


@pytest.mark.parametrize("native", PATHS)
def test_redrawn_weights_and_delays_follow_the_truncated_normals(native):
    """A weight law half below zero and a delay law mostly below its minimum: every redraw
    path is taken, and what comes out is the normal cut at the bound."""
    conn = fixed_total_number_blocks([200], [100], [[20_000]], [[0.2]], [[1.0]], [0.1], [0.2],
                                     dt=0.01, delay_min=0.15, seed=3, native=native)
    w = conn.weights.astype(np.float64)
    assert np.all(w >= 0)
    assert stats.kstest(w, stats.truncnorm(-0.2, np.inf, loc=0.2, scale=1.0).cdf).pvalue > ALPHA
    d = conn.delays.astype(np.int64)
    assert d.min() >= 15                     # 0.15 ms in steps of 0.01 ms, halves up
    law = stats.truncnorm((0.15 - 0.1) / 0.2, np.inf, loc=0.1, scale=0.2)
    assert abs(d.mean() * 0.01 - law.mean()) < 4 * law.std() / np.sqrt(d.size) + 0.005
