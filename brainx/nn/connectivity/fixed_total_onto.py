"""The fixed-total-number connector drawn by target block: any block of targets, from the seed alone.

A network partitioned over devices keeps each synapse where its *target* neuron
lives (NEST's scheme): a device needs the synapses onto its own neurons, and no
host should ever hold all of them. :func:`~brainx.nn.fixed_total_number_blocks`
draws by source, so it cannot give one target block without drawing everything.
:func:`fixed_total_number_onto` draws the same distribution (NEST's
``fixed_total_number``: ``counts[y, x]`` synapses from population ``x`` to ``y``,
sources and targets uniform with replacement) the other way round:

1. the in-degree of every target of ``y`` from ``x`` is multinomial,
   ``Multinomial(counts[y, x], 1/N_y, ...)``: one draw of ``N_y`` integers per pair,
   from a generator keyed by the seed and the pair (cheap: a few bytes per neuron,
   the same on every host);
2. given the in-degrees, each synapse's source, weight and delay are independent:
   they are drawn per fixed *chunk* of ``chunk`` targets, from a generator keyed by
   the seed, the pair and the chunk.

A block of targets draws only the chunks it overlaps, so the synapses onto a
neuron are the same whatever blocks the targets are split into (one device or
eight): the connectivity depends on the seed alone. The result is one
:class:`~brainx.nn.DelayedCSR` by source (all sources are rows; targets are
numbered from the block's start), each row's synapses in the order they were
drawn, so a block's rows are the whole network's rows restricted to the block.

It is a different realisation from ``fixed_total_number_blocks`` for the same seed
(same distribution).

Examples
--------
>>> from brainx.nn import fixed_total_number_onto
>>> kw = dict(sizes_pre=[6, 2], sizes_post=[6, 2], counts=[[20, 5], [8, 3]],
...           weight_mean=[[1.0, -2.0], [1.0, -2.0]], weight_sd=0.0, delay_mean=[1.5, 0.8],
...           delay_sd=[0.5, 0.3], dt=0.1, seed=7, chunk=3)
>>> whole = fixed_total_number_onto(**kw)
>>> low, high = fixed_total_number_onto(**kw, targets=(0, 4)), fixed_total_number_onto(**kw, targets=(4, 8))
>>> whole.nnz == low.nnz + high.nnz == 36, low.n_post, high.n_post
(True, 4, 4)
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import brainunit as u
import numpy as np

from brainx.nn.connectivity.delayed_csr import DelayedCSR, smallest_delay_dtype
from brainx.nn.connectivity.fixed_total import (_check_sizes, _delays, _in_units, _seed_entropy,
                                               _weights)

__all__ = ["fixed_total_number_onto"]

_IN_DEGREES, _SYNAPSES = 0, 1        # the two kinds of generator keyed by the seed


def _rng(entropy, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=tuple(key)))


def fixed_total_number_onto(sizes_pre: Sequence[int], sizes_post: Sequence[int], counts: Any,
                            weight_mean: Any, weight_sd: Any, delay_mean: Any, delay_sd: Any,
                            dt: Any, delay_min: Any = None, seed: Any = None,
                            targets: Optional[Tuple[int, int]] = None,
                            n_pre: Optional[int] = None, chunk: int = 4096,
                            position: Any = None, unit: Optional[u.Unit] = None) -> DelayedCSR:
    """The fixed-total-number synapses onto the targets ``targets = (lo, hi)``, drawn from the seed.

    Parameters
    ----------
    sizes_pre, sizes_post, counts, weight_mean, weight_sd, delay_mean, delay_sd, dt, delay_min
        As for :func:`~brainx.nn.fixed_total_number_blocks`: population sizes, the synapse
        counts ``counts[target, source]``, each pair's weight normal (redrawn until its sign
        is the mean's), each source population's delay normal (redrawn below ``delay_min``,
        default half a step, rounded to whole steps of ``dt``).
    seed : int, optional
        The seed. The synapses onto a neuron depend on it alone (not on ``targets``).
    targets : (int, int), optional
        The block of global target indices ``lo <= t < hi`` to draw (default: all).
        ``hi`` may run past the last neuron (padding neurons receive nothing).
    n_pre : int, optional
        Rows of the result (default ``sum(sizes_pre)``; more: padding sources, no synapses).
    chunk : int
        Targets per generator. The same ``chunk`` must be used for every block of one
        network; the draw of a block costs at most two chunks more than its own synapses.
    position : array, optional
        For a recurrent network (``sizes_pre == sizes_post``) whose neurons are stored in
        another order than population after population: ``position[i]`` is where neuron ``i``
        (numbered population after population) is stored, increasing within each population
        (e.g. :func:`brainx.distributed.balanced_order`). ``targets``, the rows and the
        result's targets are then positions; the synapses are the same, relabelled.
    unit : brainunit.Unit, optional
        The weights' unit (taken from ``weight_mean`` when it is a Quantity).

    Returns
    -------
    DelayedCSR
        ``n_pre`` rows (all sources), ``n_post = hi - lo`` targets numbered from ``lo``.

    Examples
    --------
    See the module's docstring.
    """
    w_mean, w_sd, d_mean, d_sd, d_min, dt, unit = _in_units(weight_mean, weight_sd, delay_mean,
                                                            delay_sd, delay_min, dt, unit)
    sizes_pre, sizes_post = np.asarray(sizes_pre, np.int64), np.asarray(sizes_post, np.int64)
    counts = np.asarray(counts, np.int64)
    shape = (sizes_post.size, sizes_pre.size)
    if counts.shape != shape:
        raise ValueError(f"fixed_total_number_onto: counts must be (targets, sources) = {shape}, "
                         f"got {counts.shape}.")
    for y, x in np.argwhere(counts > 0):
        _check_sizes(int(sizes_pre[x]), int(sizes_post[y]), int(counts[y, x]),
                     f"fixed_total_number_onto, pair (target {y}, source {x})")
    w_mean, w_sd = (np.broadcast_to(np.asarray(a, np.float32), shape) for a in (w_mean, w_sd))
    d_mean, d_sd = (np.broadcast_to(np.asarray(a, np.float64), shape[1:]) for a in (d_mean, d_sd))
    d_min = 0.5 * dt if d_min is None else float(d_min)
    n_sources = int(sizes_pre.sum())
    n_pre = n_sources if n_pre is None else int(n_pre)
    lo, hi = (0, int(sizes_post.sum())) if targets is None else (int(targets[0]), int(targets[1]))
    if n_pre < n_sources or not 0 <= lo <= hi:
        raise ValueError(f"fixed_total_number_onto: n_pre={n_pre} must be at least the "
                         f"{n_sources} sources and targets=({lo}, {hi}) an increasing range.")
    if int(chunk) < 1:
        raise ValueError(f"fixed_total_number_onto: chunk must be >= 1, got {chunk}.")
    top = int(np.ceil((d_mean + 12 * d_sd).max() / dt)) if shape[1] else 1
    delay_type = smallest_delay_dtype(max(top, 1))
    entropy = _seed_entropy(seed)
    if entropy is None:
        entropy = np.random.SeedSequence().entropy
    pre_off = np.concatenate([[0], np.cumsum(sizes_pre)])
    post_off = np.concatenate([[0], np.cumsum(sizes_post)])
    pos = _positions(position, sizes_pre, sizes_post)
    parts = []
    for y, x in np.argwhere(counts > 0):
        where = pos[post_off[y]:post_off[y + 1]]            # increasing: a range of local indices
        first, last = np.searchsorted(where, lo), np.searchsorted(where, hi)
        if first >= last:
            continue
        degrees = _rng(entropy, _IN_DEGREES, y, x).multinomial(
            int(counts[y, x]), np.full(int(sizes_post[y]), 1.0 / sizes_post[y]))
        pair = (w_mean[y, x], w_sd[y, x], d_mean[x], d_sd[x], d_min, dt, delay_type)
        for c in range(int(first // chunk), int(-(-last // chunk))):
            parts.append(_draw_chunk(_rng(entropy, _SYNAPSES, y, x, c), degrees, c * chunk,
                                     chunk, int(post_off[y]), int(pre_off[x]),
                                     int(sizes_pre[x]), pair, lo, hi, pos))
    return _by_source(parts, n_pre, hi - lo, delay_type, unit)


def _positions(position, sizes_pre, sizes_post) -> np.ndarray:
    """Where each neuron is stored (``int64``); the identity without ``position``."""
    n = int(sizes_post.sum())
    if position is None:
        return np.arange(max(n, int(sizes_pre.sum())), dtype=np.int64)
    pos = np.asarray(position, np.int64)
    if not np.array_equal(sizes_pre, sizes_post) or pos.shape != (n,):
        raise ValueError(f"fixed_total_number_onto: position is for a recurrent network (the "
                         f"same populations as sources and targets) and needs one entry per "
                         f"neuron ({n}); got sizes {sizes_pre.tolist()} -> {sizes_post.tolist()} "
                         f"and position of shape {pos.shape}.")
    edges = np.cumsum(sizes_post)[:-1]
    rising = np.diff(pos) > 0
    if np.unique(pos).size != n or not np.all(np.delete(rising, edges - 1)):
        raise ValueError("fixed_total_number_onto: position must give every neuron its own "
                         "place, increasing within each population (balanced_order does).")
    return pos


def _draw_chunk(rng, degrees, start, chunk, post_off, pre_off, n_x, pair, lo, hi, pos):
    """The synapses onto targets ``start .. start + chunk`` of the target population (local
    numbering), kept where the target's position is in ``[lo, hi)``: (source position,
    target position - lo, delay, weight)."""
    w_mean, w_sd, d_mean, d_sd, d_min, dt, delay_type = pair
    k = degrees[start:start + chunk]
    tgt = pos[np.repeat(np.arange(start, start + k.size, dtype=np.int64) + post_off, k)]
    n = tgt.size
    src = pos[np.minimum(np.floor(rng.random(n) * n_x), n_x - 1).astype(np.int64) + pre_off]
    labels = np.zeros(n, np.intp)
    w = (_weights(rng, np.array([w_mean]), np.array([w_sd]), labels) if w_sd > 0
         else np.full(n, w_mean, np.float32))
    d = _delays(rng, n, d_mean, d_sd, d_min, dt, delay_type)
    keep = (tgt >= lo) & (tgt < hi)
    return src[keep], (tgt[keep] - lo).astype(np.int32), d[keep], w[keep]


def _by_source(parts, n_pre: int, n_post: int, delay_type, unit) -> DelayedCSR:
    """The drawn synapses grouped by source (a stable sort: each row keeps the drawing order)."""
    if parts:
        src, tgt, d, w = (np.concatenate(a) for a in zip(*parts))
    else:
        src, tgt = np.zeros(0, np.int64), np.zeros(0, np.int32)
        d, w = np.zeros(0, delay_type), np.zeros(0, np.float32)
    order = np.argsort(src, kind="stable")
    indptr = np.zeros(n_pre + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n_pre), out=indptr[1:])
    return DelayedCSR(indptr, tgt[order], d[order], w[order], n_post, unit)
