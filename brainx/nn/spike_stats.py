"""Spike-train statistics of a recorded :class:`~brainx.nn.SpikeRaster`: rates, ISI CV, correlations, a raster plot.

The definitions are the ones network models are compared by (e.g. the microcircuit against
NEST), computed in NumPy from the record's events:

========================  ================================================================
``firing_rates``          spikes / (neurons x window), Hz; silent neurons count
``isi_cv``                per neuron ``std(ISI) / mean(ISI)`` (``ddof=0``) over the neurons
                          with at least ``min_spikes`` spikes; a population's value is the mean
``spike_count_correlation``  Pearson correlation of spike counts in bins of ``bin_ms``, over
                          pairs of distinct neurons with a nonzero variance
``raster_plot``           dots of (time, neuron), populations stacked and coloured
========================  ================================================================

A population is a contiguous range of neurons: pass ``populations`` as a mapping from a name to
a ``slice`` or ``(start, stop)`` (:func:`population_slices` makes one from sizes). Without it, the
functions return one value per neuron. The window is the raster's (cut one with
:meth:`SpikeRaster.window`).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from brainx.nn.spike_raster import SpikeRaster

__all__ = ["population_slices", "firing_rates", "isi_cv", "binned_counts",
           "spike_count_correlation", "raster_plot"]

Populations = Mapping[str, Union[slice, Tuple[int, int], range]]


def population_slices(sizes: Union[Mapping[str, int], Sequence[Tuple[str, int]]]) -> Dict[str, slice]:
    """Consecutive neuron ranges from population sizes: ``{"E": 3, "I": 1}`` -> ``{"E": slice(0, 3), "I": slice(3, 4)}``."""
    items = sizes.items() if isinstance(sizes, Mapping) else sizes
    out, start = {}, 0
    for name, n in items:
        out[name] = slice(start, start + int(n))
        start += int(n)
    return out


def _ranges(populations: Populations, n_neurons: int) -> Dict[str, slice]:
    out = {}
    for name, p in populations.items():
        s = p if isinstance(p, slice) else slice(p.start, p.stop) if isinstance(p, range) \
            else slice(int(p[0]), int(p[1]))
        if s.start is None or s.stop is None or not 0 <= s.start <= s.stop <= n_neurons or \
                s.step not in (None, 1):
            raise ValueError(f"population {name!r}: {p!r} is not a contiguous range of the "
                             f"raster's {n_neurons} neurons (give slice(start, stop)).")
        out[name] = s
    return out


def _per_population(values: np.ndarray, populations: Optional[Populations], n: int, reduce):
    if populations is None:
        return values
    return {name: reduce(values[s]) for name, s in _ranges(populations, n).items()}


def firing_rates(raster: SpikeRaster, populations: Optional[Populations] = None):
    """Rates in Hz: per neuron, or each population's mean over its neurons (silent ones included).

    Example
    -------
    >>> import jax.numpy as jnp, brainx
    >>> s = jnp.zeros((10000, 4), bool).at[::1000, 0].set(True)        # 10 spikes in 1 s
    >>> r = brainx.nn.SpikeRaster(brainx.nn.pack_spikes(s), 4, dt=0.1)
    >>> brainx.nn.spike_stats.firing_rates(r, {"a": (0, 2), "b": (2, 4)})
    {'a': 5.0, 'b': 0.0}
    """
    rates = raster.counts() / (raster.duration_ms * 1e-3)
    return _per_population(rates, populations, raster.n_neurons, lambda v: float(v.mean()))


def isi_cv(raster: SpikeRaster, populations: Optional[Populations] = None, min_spikes: int = 3):
    """ISI coefficient of variation: per neuron (NaN below ``min_spikes``), or each population's mean.

    A population without any neuron of ``min_spikes`` spikes gives NaN.
    """
    steps, neurons = raster.events()
    order = np.lexsort((steps, neurons))                        # by neuron, then by time
    steps, neurons = steps[order], neurons[order]
    same = neurons[1:] == neurons[:-1]
    isi = (np.diff(steps) * raster.dt)[same]
    who = neurons[1:][same]
    n = raster.n_neurons
    k = np.bincount(who, minlength=n).astype(np.float64)       # ISIs per neuron
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(who, isi, minlength=n) / k
        var = np.bincount(who, isi * isi, minlength=n) / k - mean ** 2
        cv = np.sqrt(np.maximum(var, 0.0)) / mean
    cv[k + 1 < min_spikes] = np.nan

    def mean_cv(v):
        v = v[~np.isnan(v)]
        return float(v.mean()) if v.size else float("nan")
    return _per_population(cv, populations, n, mean_cv)


def binned_counts(raster: SpikeRaster, bin_ms: float = 5.0) -> np.ndarray:
    """Spike counts in consecutive bins of ``bin_ms`` (a whole number of steps): ``(bins, neurons)``."""
    per = int(round(bin_ms / raster.dt))
    if per < 1 or abs(per * raster.dt - bin_ms) > 1e-9 * max(bin_ms, 1.0):
        raise ValueError(f"bin_ms={bin_ms} is not a whole number of steps of {raster.dt} ms.")
    bins = raster.n_steps // per
    out = np.zeros((bins, raster.n_neurons), np.int32)
    steps, neurons = raster.events()
    keep = steps < bins * per
    np.add.at(out, (steps[keep] // per, neurons[keep]), 1)
    return out


def _mean_correlation(counts: np.ndarray) -> float:
    counts = counts[:, counts.std(axis=0) > 0]
    if counts.shape[1] < 2:
        return float("nan")
    c = np.corrcoef(counts, rowvar=False)
    return float(c[~np.eye(len(c), dtype=bool)].mean())


def spike_count_correlation(raster: SpikeRaster, populations: Optional[Populations] = None,
                            bin_ms: float = 5.0, max_neurons: int = 200, seed: int = 0):
    """Pearson correlations of binned spike counts.

    Without ``populations``: the ``(neurons, neurons)`` matrix (NaN rows for silent neurons).
    With them: each population's mean over pairs of distinct neurons, from at most
    ``max_neurons`` neurons per population drawn with ``seed`` (the pair count grows as the
    square); neurons whose count does not vary are left out.
    """
    counts = binned_counts(raster, bin_ms)
    if populations is None:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.corrcoef(counts, rowvar=False)
    rng = np.random.default_rng(seed)
    out = {}
    for name, s in _ranges(populations, raster.n_neurons).items():
        idx = np.arange(s.start, s.stop)
        if idx.size > max_neurons:
            idx = np.sort(rng.choice(idx, max_neurons, replace=False))
        out[name] = _mean_correlation(counts[:, idx])
    return out


def raster_plot(raster: SpikeRaster, populations: Optional[Populations] = None, ax: Any = None,
                max_neurons: Optional[int] = None, markersize: float = 1.0, seed: int = 0):
    """A raster of (time in ms, neuron) dots, first neuron on top; returns the matplotlib axes.

    ``max_neurons`` keeps at most that many neurons of each population (drawn with ``seed``),
    for readable plots of large networks. Needs matplotlib.
    """
    import matplotlib.pyplot as plt                             # optional dependency

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5))
    times, neurons = raster.spike_times()
    groups = _ranges(populations, raster.n_neurons) if populations is not None else \
        {"": slice(0, raster.n_neurons)}
    rng = np.random.default_rng(seed)
    row, ticks = 0, []
    for i, (name, s) in enumerate(groups.items()):
        idx = np.arange(s.start, s.stop)
        if max_neurons is not None and idx.size > max_neurons:
            idx = np.sort(rng.choice(idx, max_neurons, replace=False))
        pos = np.full(raster.n_neurons, -1)
        pos[idx] = np.arange(idx.size)
        keep = pos[neurons] >= 0
        ax.plot(times[keep], -(row + pos[neurons[keep]]), ".", ms=markersize,
                color=f"C{i % 10}", label=name or None)
        ticks.append((-(row + idx.size / 2), name))
        row += idx.size
    if populations is not None:
        ax.set_yticks([t for t, _ in ticks], [n for _, n in ticks])
    else:
        ax.set_ylabel("neuron")
    ax.set_xlabel("time (ms)")
    ax.set_xlim(raster.t0, raster.t0 + raster.duration_ms)
    return ax
