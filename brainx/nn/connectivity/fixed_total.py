"""The fixed-total-number connector, drawn straight into source order (no sort).

NEST's ``fixed_total_number`` rule joins a source population of ``n_pre`` neurons
to a target population of ``n_post`` with exactly ``total`` synapses, each of
which picks its source and its target uniformly and independently, with
replacement (autapses and multapses allowed). Drawn that way, the synapses come
in random order and would need a sort of ``total`` entries to be grouped by
source, the layout the delayed kernel reads (:class:`~brainx.nn.DelayedCSR`).

The same distribution can be drawn already grouped: the number of synapses of
each source (its out-degree) is multinomial, ``Multinomial(total, 1/n_pre, ...)``,
and given the out-degrees the targets are independent and uniform. So
:func:`fixed_total_number` draws ``n_pre`` out-degrees (their cumulative sum is
``indptr``) and ``total`` uniform targets, and is done: memory is the result, the
time a few passes over it.

:func:`fixed_total_number_blocks` does the same for populations: a matrix of
totals ``counts[y, x]`` between source populations ``x`` and target populations
``y``, every synapse with a weight (normal, redrawn until its sign is right) and a
delay (normal, redrawn below a minimum, rounded to the step) drawn from its
pair's parameters, written chunk by chunk into the final arrays (the cortical
microcircuit: 300 M synapses in one CSR, with a progress bar). The chunks run on
up to four threads, each with its own generator spawned from the seed, so the
result depends on the seed alone. Where the native kernels are available a chunk
is drawn in one pass by ``synapse_draws.cc`` (Philox4x32-10, the polar method for
the normal numbers; ctypes releases the GIL), else by NumPy in about 25 passes
(its generators and ufuncs release the GIL too): the same law, other synapses.

Examples
--------
>>> import numpy as np
>>> from brainx.nn import fixed_total_number
>>> indptr, targets = fixed_total_number(n_pre=4, n_post=3, total=10, seed=0)
>>> int(indptr[-1]), targets.dtype, bool(np.all(np.diff(indptr) >= 0))
(10, dtype('int32'), True)
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Sequence, Tuple

import brainunit as u
import numpy as np

from brainx.nn.connectivity.delayed_csr import DelayedCSR, smallest_delay_dtype
from brainx.nn.connectivity.native import build

__all__ = ["fixed_total_number", "fixed_total_number_blocks"]

_CHUNK = 1 << 23          # synapses drawn at once: bounds the temporaries (~100 MiB)


def _generator(seed: Any) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def fixed_total_number(n_pre: int, n_post: int, total: int,
                       seed: Any = None) -> Tuple[np.ndarray, np.ndarray]:
    """``total`` synapses, sources and targets uniform with replacement, grouped by source.

    Parameters
    ----------
    n_pre, n_post : int
        Source and target sizes (at least 1 each when ``total > 0``).
    total : int
        The exact number of synapses.
    seed : int or numpy.random.Generator, optional
        The draw's seed (``None``: fresh entropy).

    Returns
    -------
    indptr : numpy.ndarray
        ``int64 (n_pre + 1,)``: source ``i``'s synapses are ``indptr[i]:indptr[i + 1]``.
    targets : numpy.ndarray
        ``int32 (total,)``.
    """
    _check_sizes(n_pre, n_post, total, "fixed_total_number")
    rng = _generator(seed)
    counts = _out_degrees(rng, total, n_pre)
    indptr = np.zeros(n_pre + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    targets = rng.integers(0, max(n_post, 1), size=total, dtype=np.int32)
    return indptr, targets


def _check_sizes(n_pre, n_post, total, who: str) -> None:
    for name, v in (("n_pre", n_pre), ("n_post", n_post), ("total", total)):
        if not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{who}: {name} must be a non-negative int, got {v!r}.")
    if total > 0 and (n_pre == 0 or n_post == 0):
        raise ValueError(f"{who}: {total} synapses between {n_pre} sources and {n_post} targets; "
                         "a population with synapses needs at least one neuron.")


def _out_degrees(rng, total: int, n_pre: int) -> np.ndarray:
    """Multinomial(total; 1/n_pre each): how many of the synapses each source has."""
    if n_pre == 0:
        return np.zeros(0, np.int64)
    return rng.multinomial(total, np.full(n_pre, 1.0 / n_pre))


class _Arrays:
    """The result, filled chunk by chunk (disjoint slices, one thread each)."""

    def __init__(self, targets, delays, weights):
        self.targets, self.delays, self.weights = targets, delays, weights


class _Pairs:
    """Each population pair's parameters, as the chunks read them."""

    def __init__(self, sizes_post, w_mean, w_sd, d_mean, d_sd, d_min, dt, shared):
        self.size_f = sizes_post.astype(np.float64)
        edges = np.concatenate([[0], np.cumsum(sizes_post)])
        self.offset_f, self.last = edges[:-1].astype(np.float64), edges[1:] - 1
        self.size_i = np.ascontiguousarray(sizes_post, np.int64)
        self.offset_i = np.ascontiguousarray(edges[:-1], np.int64)
        self.w_mean, self.w_sd, self.d_mean, self.d_sd = w_mean, w_sd, d_mean, d_sd
        self.d_min, self.dt, self.shared = d_min, dt, shared


def _threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def _seed_entropy(seed):
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2 ** 63))
    return seed


def _fill(out: _Arrays, pair: _Pairs, x: int, rows: np.ndarray, start: int,
          seed: np.random.SeedSequence) -> int:
    """Draw the synapses of a block of consecutive rows of source population ``x``."""
    rng = np.random.default_rng(seed)
    # each row's synapses grouped by target population: labels in row order
    labels = np.repeat(np.tile(np.arange(rows.shape[1], dtype=np.intp), rows.shape[0]),
                       rows.ravel())
    end = start + labels.size
    # uniform targets in each synapse's population (float64: exact for int32 sizes)
    pick = rng.random(labels.size)
    pick *= pair.size_f[labels]
    pick += pair.offset_f[labels]
    np.minimum(pick, pair.last[labels], out=pick)
    out.targets[start:end] = pick
    del pick
    if not pair.shared:
        out.weights[start:end] = _weights(rng, pair.w_mean[:, x], pair.w_sd[:, x], labels)
    out.delays[start:end] = _delays(rng, labels.size, pair.d_mean[x], pair.d_sd[x], pair.d_min,
                                    pair.dt, out.delays.dtype)
    return labels.size


def _native_fill():
    """The native chunk filler (``synapse_draws.cc``), or ``None`` where the kernels are not
    available (no compiler, ``BRAINX_NATIVE=0``): then the NumPy path draws."""
    lib = build.load()
    if lib is None:
        return None
    fn = lib.brainx_fill_synapses
    if fn.restype is not ctypes.c_int64:
        ptr = ctypes.c_void_p
        fn.argtypes = [ptr, ctypes.c_int64, ctypes.c_int64, ptr, ptr, ptr, ptr, ctypes.c_double,
                       ctypes.c_double, ctypes.c_double, ctypes.c_double, ctypes.c_int32,
                       ctypes.c_uint32, ctypes.c_uint32, ptr, ptr, ptr]
        fn.restype = ctypes.c_int64
    return fn


def _fill_native(fn, out: _Arrays, pair: _Pairs, x: int, rows: np.ndarray, start: int,
                 seed: np.random.SeedSequence) -> int:
    """:func:`_fill` by the native filler: one Philox call and one pair of normal numbers (the
    polar method) a synapse."""
    rows = np.ascontiguousarray(rows, np.int64)
    n = int(rows.sum())
    key = seed.generate_state(2, np.uint32)
    addr = lambda a, at=0: a.ctypes.data + at * a.itemsize if a is not None else None  # noqa: E731
    w_mean = None if pair.shared else np.ascontiguousarray(pair.w_mean[:, x])
    w_sd = None if pair.shared else np.ascontiguousarray(pair.w_sd[:, x])
    got = fn(addr(rows), rows.shape[0], rows.shape[1], addr(pair.size_i), addr(pair.offset_i),
             addr(w_mean), addr(w_sd), float(pair.d_mean[x]), float(pair.d_sd[x]),
             float(pair.d_min), float(pair.dt), out.delays.itemsize, int(key[0]), int(key[1]),
             addr(out.targets, start), addr(out.delays, start),
             None if pair.shared else addr(out.weights, start))
    if got == -1:
        raise ValueError("fixed_total_number_blocks: a delay (12 SD above its mean?) does not "
                         "fit the delays' type.")
    if got != n:
        raise RuntimeError(f"fixed_total_number_blocks: the native filler wrote {got} of {n} "
                           "synapses.")
    return n


def _weights(rng, mean, sd, labels) -> np.ndarray:
    """float32 ``N(mean, sd)`` of each synapse's pair, redrawn (not clipped) until its sign is
    its mean's."""
    w = rng.standard_normal(labels.size, dtype=np.float32)
    w *= sd[labels]
    w += mean[labels]
    negative = mean < 0          # excitatory weights >= 0, inhibitory <= 0
    wrong = np.flatnonzero(np.where(negative[labels], w > 0, w < 0))
    while wrong.size:
        lab = labels[wrong]
        w[wrong] = mean[lab] + sd[lab] * rng.standard_normal(wrong.size, dtype=np.float32)
        wrong = wrong[np.where(negative[lab], w[wrong] > 0, w[wrong] < 0)]
    return w


def fixed_total_number_blocks(sizes_pre: Sequence[int], sizes_post: Sequence[int], counts: Any,
                              weight_mean: Any, weight_sd: Any, delay_mean: Any, delay_sd: Any,
                              dt: Any, delay_min: Any = None, seed: Any = None,
                              progress: Optional[bool] = None,
                              unit: Optional[u.Unit] = None,
                              native: Optional[bool] = None) -> DelayedCSR:
    """Fixed-total-number synapses between populations, with weights and delays, as one CSR.

    Parameters
    ----------
    sizes_pre, sizes_post : sequence of int
        Population sizes; neurons are numbered population after population.
    counts : array
        ``(len(sizes_post), len(sizes_pre))`` int: the synapses from source population ``x``
        to target population ``y`` (``counts[y, x]``; NEST's matrices are [target, source]).
    weight_mean, weight_sd : array
        ``(targets, sources)``: each synapse's weight is ``N(mean, sd)``, redrawn (not clipped)
        until its sign is the mean's (``>= 0`` for a positive mean, ``<= 0`` for a negative).
    delay_mean, delay_sd : array
        ``(sources,)``, times (or numbers in ``dt``'s unit): ``N(mean, sd)`` redrawn while below
        ``delay_min``, then rounded to whole steps of ``dt`` (halves up, at least one step).
    dt : float or Quantity
        The step.
    delay_min : float or Quantity, optional
        Default: half a step.
    seed : int or numpy.random.Generator, optional
        The draw's seed.
    progress : bool, optional
        Show a tqdm bar (tqdm is optional); default: when more than 20 M synapses.
    unit : brainunit.Unit, optional
        The weights' unit; taken from ``weight_mean`` when it is a Quantity.
    native : bool, optional
        Draw with the native filler (``True``), with NumPy (``False``), or the native one
        where the kernels are available (default). Both draw the same law, from the seed
        alone, but not the same synapses: the native filler uses Philox4x32-10 and one pair
        of normal numbers a synapse (one pass; 1.5-2.5x faster on two cores, the microcircuit's
        299 M synapses in about 20-30 s), NumPy its PCG64 streams. Save a network
        (``brainx.io``) to have the very same synapses anywhere.

    Returns
    -------
    DelayedCSR
        Rows are all the sources, each row's synapses grouped by target population.

    Examples
    --------
    >>> import numpy as np
    >>> from brainx.nn import fixed_total_number_blocks
    >>> conn = fixed_total_number_blocks([3, 2], [4], counts=[[5, 7]], weight_mean=[[1.0, -2.0]],
    ...                                  weight_sd=[[0.1, 0.2]], delay_mean=[1.5, 0.75],
    ...                                  delay_sd=[0.75, 0.375], dt=0.1, seed=1)
    >>> conn.nnz, int(conn.indptr[3]), bool(np.all(conn.weights[conn.indptr[3]:] <= 0))
    (12, 5, True)
    """
    weight_mean, weight_sd, delay_mean, delay_sd, delay_min, dt, unit = _in_units(
        weight_mean, weight_sd, delay_mean, delay_sd, delay_min, dt, unit)
    sizes_pre = np.asarray(sizes_pre, np.int64)
    sizes_post = np.asarray(sizes_post, np.int64)
    counts = np.asarray(counts, np.int64)
    shape = (sizes_post.size, sizes_pre.size)
    w_mean, w_sd = (np.broadcast_to(np.asarray(a, np.float64), shape) for a in (weight_mean,
                                                                               weight_sd))
    d_mean, d_sd = (np.broadcast_to(np.asarray(a, np.float64), (shape[1],)) for a in (delay_mean,
                                                                                      delay_sd))
    if counts.shape != shape:
        raise ValueError(f"fixed_total_number_blocks: counts must be (targets, sources) = {shape},"
                         f" got {counts.shape}.")
    for x, y in np.argwhere(counts.T > 0):
        _check_sizes(int(sizes_pre[x]), int(sizes_post[y]), int(counts[y, x]),
                     f"fixed_total_number_blocks, pair (target {y}, source {x})")
    dt = float(dt)
    d_min = 0.5 * dt if delay_min is None else float(delay_min)
    _check_laws(w_mean, w_sd, d_mean, d_sd, d_min, dt, counts)
    seeds = np.random.SeedSequence(_seed_entropy(seed))
    rng = np.random.default_rng(seeds.spawn(1)[0])
    total = int(counts.sum())
    # out-degrees of every source, by target population: (sources, target populations)
    degrees = [np.stack([_out_degrees(rng, int(counts[y, x]), int(sizes_pre[x]))
                         for y in range(shape[0])], axis=1) for x in range(shape[1])]
    row_sizes = np.concatenate([d.sum(axis=1) for d in degrees]) if degrees else np.zeros(0)
    indptr = np.zeros(row_sizes.size + 1, np.int64)
    np.cumsum(row_sizes, out=indptr[1:])
    top = int(np.ceil((d_mean + 12 * d_sd).max() / dt)) if shape[1] else 1
    out = _Arrays(np.empty(total, np.int32), np.empty(total, smallest_delay_dtype(max(top, 1))),
                  None)
    shared = bool(np.all(w_sd == 0)) and np.unique(w_mean[counts > 0]).size <= 1
    out.weights = (np.float32(w_mean[counts > 0][0] if total else 0.0) if shared
                   else np.empty(total, np.float32))
    pair = _Pairs(sizes_post, w_mean.astype(np.float32), w_sd.astype(np.float32), d_mean, d_sd,
                  d_min, dt, shared)
    jobs, start = [], 0
    for x in range(shape[1]):
        for rows in _row_chunks(degrees[x]):
            jobs.append((x, rows, start))
            start += int(rows.sum())
    # one generator per chunk (spawned from the seed): the result does not depend on threads
    job_seeds = seeds.spawn(len(jobs) + 1)[1:]
    filler = None if native is False else _native_fill()
    if native and filler is None:
        raise RuntimeError("fixed_total_number_blocks: native=True, but the native kernels are "
                           f"not available: {build.unavailable_reason()}.")
    fill = _fill if filler is None else functools.partial(_fill_native, filler)
    with _progress(total, progress) as bar, ThreadPoolExecutor(_threads()) as pool:
        for n in pool.map(lambda job: fill(out, pair, *job[0], job[1]),
                          [(job, s) for job, s in zip(jobs, job_seeds)]):
            bar.update(n)
    targets, delays, weights = out.targets, out.delays, out.weights
    return DelayedCSR(indptr, targets, delays, weights, int(sizes_post.sum()), unit)


def _in_units(weight_mean, weight_sd, delay_mean, delay_sd, delay_min, dt, unit):
    """The laws as plain numbers: weights in ``unit`` (``weight_mean``'s when a Quantity),
    delays in ``dt``'s unit; returns them with ``dt`` as a float and the unit."""
    if isinstance(weight_mean, u.Quantity):
        unit = unit or u.get_unit(weight_mean)
        weight_sd = u.Quantity(weight_sd).to_decimal(unit)
        weight_mean = weight_mean.to_decimal(unit)
    if isinstance(dt, u.Quantity):
        to = lambda v: u.Quantity(v).to_decimal(u.get_unit(dt))     # noqa: E731
        delay_mean, delay_sd = to(delay_mean), to(delay_sd)
        delay_min = None if delay_min is None else to(delay_min)
        dt = dt.to_decimal(u.get_unit(dt))
    return weight_mean, weight_sd, delay_mean, delay_sd, delay_min, float(dt), unit


def _check_laws(w_mean, w_sd, d_mean, d_sd, d_min, dt, counts) -> None:
    """Refuse parameters whose draws would never end or would not be numbers."""
    who = "fixed_total_number_blocks"
    used = counts > 0
    if not (np.isfinite(dt) and dt > 0 and np.isfinite(d_min)):
        raise ValueError(f"{who}: dt must be a positive time and delay_min finite; got dt={dt}, "
                         f"delay_min={d_min}.")
    if not (np.all(np.isfinite(w_mean[used])) and np.all(np.isfinite(w_sd[used]))
            and np.all(w_sd[used] >= 0)):
        raise ValueError(f"{who}: weight_mean must be finite and weight_sd finite and >= 0 for "
                         "every pair with synapses.")
    sources = used.any(axis=0)
    if not (np.all(np.isfinite(d_mean[sources])) and np.all(np.isfinite(d_sd[sources]))
            and np.all(d_sd[sources] >= 0)):
        raise ValueError(f"{who}: delay_mean must be finite and delay_sd finite and >= 0.")
    stuck = sources & (d_sd == 0) & (d_mean < d_min)
    if np.any(stuck):
        x = int(np.flatnonzero(stuck)[0])
        raise ValueError(f"{who}: source population {x}'s delays are always {d_mean[x]}, below "
                         f"delay_min {d_min}: a redraw could never end.")


def _delays(rng, n, mean, sd, d_min, dt, dtype) -> np.ndarray:
    """Steps of ``N(mean, sd)`` delays redrawn below ``d_min``, rounded (NEST: ms * steps per
    ms, halves up), at least one step."""
    d = rng.standard_normal(n, dtype=np.float32)
    d *= np.float32(sd)
    d += np.float32(mean)
    low = np.flatnonzero(d < d_min)
    while low.size:
        d[low] = mean + sd * rng.standard_normal(low.size, dtype=np.float32)
        low = low[d[low] < d_min]
    d *= np.float32(1.0 / dt)
    d += np.float32(0.5)
    top = float(d.max(initial=1.0))
    if top >= np.iinfo(dtype).max + 1:
        raise ValueError(f"fixed_total_number_blocks: a delay of {int(top)} steps (12 SD above "
                         "its mean?) does not fit the delays' type.")
    return np.maximum(d, 1.0, out=d).astype(dtype)        # positive: truncation is floor


def _row_chunks(degrees: np.ndarray):
    """Consecutive blocks of rows of ``degrees`` holding about ``_CHUNK`` synapses each."""
    ends = np.cumsum(degrees.sum(axis=1))
    start_row, done = 0, 0
    while start_row < degrees.shape[0]:
        stop = int(np.searchsorted(ends, done + _CHUNK, side="right"))
        stop = max(stop, start_row + 1)
        yield degrees[start_row:stop]
        done = int(ends[stop - 1])
        start_row = stop


@contextlib.contextmanager
def _progress(total: int, show: Optional[bool]):
    show = total > 20_000_000 if show is None else show
    bar = None
    if show:
        try:
            from tqdm.auto import tqdm        # optional dependency
            bar = tqdm(total=total, unit="syn", unit_scale=True, desc="synapses", leave=False)
        except ImportError:
            bar = None
    try:
        yield bar if bar is not None else _NoBar()
    finally:
        if bar is not None:
            bar.close()


class _NoBar:
    def update(self, n: int) -> None:
        pass
