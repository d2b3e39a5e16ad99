"""`pack_spikes`/`SpikeRaster` and `spike_stats` against plain NumPy on a dense spike array."""

import brainunit as u
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn
from brainx.nn import spike_stats

DT = 0.1


def dense_spikes(steps=3000, n=37, seed=0):
    """Random spikes with per-neuron rates (some neurons silent, some with one or two spikes)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.02, n)
    p[:3] = 0.0
    s = rng.random((steps, n)) < p
    s[:, 3] = False
    s[[10, 50], 3] = True                  # two spikes: no CV with min_spikes=3
    s[:, 4] = False
    s[[10, 20, 40], 4] = True              # three spikes: ISIs 1 ms and 2 ms
    return s


def raster_of(s):
    return nn.SpikeRaster(np.asarray(nn.pack_spikes(jnp.asarray(s))), s.shape[1], dt=DT)


def test_packed_record_of_a_jitted_loop_gives_back_every_spike():
    n, steps = 21, 400
    with brainx.environ.context(dt=DT * u.ms):
        neurons = nn.init_all_states(nn.IafPscExp(n, tau_syn_ex=0.5 * u.ms,
                                                  I_e=np.linspace(350, 700, n) * u.pA))

        @brainx.transform.jit
        def run():
            def step(i):
                s = neurons.update()
                return nn.pack_spikes(s), s
            return brainx.transform.for_loop(step, jnp.arange(steps))
        packed, dense = run()
    packed, dense = np.asarray(packed), np.asarray(dense) > 0
    assert packed.dtype == np.uint8 and packed.shape == (steps, 3)
    r = nn.SpikeRaster(packed, n, dt=DT * u.ms)
    s, i = r.events()
    ws, wi = np.nonzero(dense)
    assert dense.sum() > 40 and np.array_equal(s, ws) and np.array_equal(i, wi)
    assert np.array_equal(r.counts(), dense.sum(0))
    t, _ = r.spike_times()
    np.testing.assert_allclose(t, (ws + 1) * DT)
    w = r.window(10.0, 20.0)
    assert w.n_steps == 100 and w.t0 == pytest.approx(10.0)
    assert np.array_equal(w.counts(), dense[100:200].sum(0))


def test_rates_and_cv_equal_numpy_per_neuron_and_per_population():
    s = dense_spikes()
    r = raster_of(s)
    T = s.shape[0] * DT * 1e-3
    np.testing.assert_allclose(spike_stats.firing_rates(r), s.sum(0) / T)
    pops = spike_stats.population_slices({"A": 20, "B": 17})
    rates = spike_stats.firing_rates(r, pops)
    assert rates["A"] == pytest.approx(s[:, :20].sum() / (20 * T))
    assert rates["B"] == pytest.approx(s[:, 20:].sum() / (17 * T))
    want = np.full(s.shape[1], np.nan)
    for j in range(s.shape[1]):
        t = np.flatnonzero(s[:, j]) * DT
        if t.size >= 3:
            isi = np.diff(t)
            want[j] = isi.std() / isi.mean()
    got = spike_stats.isi_cv(r)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-9)
    assert got[4] == pytest.approx(np.std([1.0, 2.0]) / 1.5)
    cv = spike_stats.isi_cv(r, pops)
    assert cv["A"] == pytest.approx(np.nanmean(want[:20]))
    assert cv["B"] == pytest.approx(np.nanmean(want[20:]))
    assert np.isnan(spike_stats.isi_cv(r, {"silent": (0, 3)})["silent"])


def test_binned_counts_and_correlations_equal_numpy():
    s = dense_spikes(seed=2)
    common = np.random.default_rng(5).random(s.shape[0]) < 0.01
    s[:, 20:30] |= common[:, None]              # shared input: positive correlations
    r = raster_of(s)
    counts = spike_stats.binned_counts(r, bin_ms=5.0)
    want = s[:counts.shape[0] * 50].reshape(-1, 50, s.shape[1]).sum(1)
    assert np.array_equal(counts, want)
    full = spike_stats.spike_count_correlation(r, bin_ms=5.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        np.testing.assert_allclose(full, np.corrcoef(want, rowvar=False), equal_nan=True)
    c = spike_stats.spike_count_correlation(r, {"shared": (20, 30), "rest": (5, 20)})
    sub = np.corrcoef(want[:, 20:30], rowvar=False)
    assert c["shared"] == pytest.approx(sub[~np.eye(10, dtype=bool)].mean())
    assert c["shared"] > 0.3 > abs(c["rest"])
    with pytest.raises(ValueError, match="not a whole number of steps"):
        spike_stats.binned_counts(r, bin_ms=0.25)


def test_raster_plot_draws_every_spike_of_the_kept_neurons():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    s = dense_spikes(steps=500)
    r = raster_of(s)
    ax = spike_stats.raster_plot(r, {"A": (0, 20), "B": (20, 37)})
    assert sum(len(line.get_xdata()) for line in ax.lines) == s.sum()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["A", "B"]
    ax = spike_stats.raster_plot(r, {"A": (0, 20), "B": (20, 37)}, max_neurons=5)
    assert sum(len(line.get_xdata()) for line in ax.lines) < s.sum()


def test_bad_records_and_populations_are_refused():
    with pytest.raises(ValueError, match="do not hold 20 neurons"):
        nn.SpikeRaster(np.zeros((3, 2), np.uint8), 20)
    with pytest.raises(ValueError, match="must be uint8"):
        nn.SpikeRaster(np.zeros((3, 2), bool), 10)
    r = raster_of(dense_spikes(steps=200))
    with pytest.raises(ValueError, match="population 'X'.*not a contiguous range"):
        spike_stats.firing_rates(r, {"X": (30, 40)})
