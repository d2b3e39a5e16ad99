"""Recording spikes as a packed bit raster: one bit per neuron and step, not a float or bool per neuron and step.

A long run of a large network cannot keep its spikes as a dense ``(steps, neurons)`` array: one
model second of the full microcircuit (77 169 neurons, 10 000 steps of 0.1 ms) is 770 M
booleans. Inside the loop, :func:`pack_spikes` turns a step's spikes into ``ceil(n / 8)``
bytes (``jnp.packbits``); a ``for_loop`` that returns them stacks the bytes, eight times
smaller than booleans and 32 times smaller than float32 spikes. Outside the loop,
:class:`SpikeRaster` holds those bytes with the step length and answers in events (the step
and the neuron of each spike), counts per neuron, or time windows, unpacking a block of
steps at a time. :mod:`brainx.nn.spike_stats` computes rates, ISI CVs and correlations from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional, Tuple

import brainunit as u
import jax.numpy as jnp
import numpy as np

__all__ = ["pack_spikes", "SpikeRaster"]


def pack_spikes(spikes: Any) -> Any:
    """One step's spikes (nonzero = spike) as bits: ``uint8`` of shape ``(..., ceil(n / 8))``.

    Arguments
    ---------
    spikes : array
        Spikes of the last axis' neurons (bool, or numbers where nonzero is a spike).

    Returns
    -------
    The packed bits, big-endian within each byte (``jnp.packbits``); the last byte is padded.

    Example
    -------
    >>> import jax.numpy as jnp
    >>> pack_spikes(jnp.array([1., 0, 0, 0, 0, 0, 0, 1, 1])).tolist()
    [129, 128]
    """
    return jnp.packbits(jnp.asarray(spikes) != 0, axis=-1)


def _ms(value: Any, what: str) -> float:
    if isinstance(value, u.Quantity):
        return float(value.to_decimal(u.ms))
    return float(value)


@dataclass(frozen=True)
class SpikeRaster:
    """Spikes of ``n_neurons`` over ``n_steps`` steps of ``dt``, as packed bits (NumPy).

    Parameters
    ----------
    packed : array of uint8, shape ``(n_steps, ceil(n_neurons / 8))``
        What a loop over :func:`pack_spikes` returned.
    n_neurons : int
        How many neurons the bits stand for (the rest of the last byte is padding).
    dt : time
        The step (a number is read in ms).
    t0 : time
        The time of the first step's start (default 0).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> spikes = jnp.zeros((5, 10), bool).at[1, 3].set(True).at[4, 9].set(True)
    >>> r = SpikeRaster(pack_spikes(spikes), 10, dt=0.1)
    >>> r.events()
    (array([1, 4]), array([3, 9]))
    >>> r.counts().tolist()
    [0, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    """

    packed: np.ndarray
    n_neurons: int
    dt: Any = 0.1
    t0: Any = 0.0

    def __post_init__(self):
        packed = np.asarray(self.packed)
        if packed.dtype != np.uint8 or packed.ndim != 2:
            raise ValueError(f"SpikeRaster: packed must be uint8 of shape (steps, bytes), got "
                             f"{packed.dtype} {packed.shape}: stack pack_spikes' results.")
        if packed.shape[1] != -(-int(self.n_neurons) // 8):
            raise ValueError(f"SpikeRaster: {packed.shape[1]} bytes per step do not hold "
                             f"{self.n_neurons} neurons (need ceil(n / 8) = "
                             f"{-(-int(self.n_neurons) // 8)}).")
        object.__setattr__(self, "packed", packed)
        object.__setattr__(self, "dt", _ms(self.dt, "dt"))
        object.__setattr__(self, "t0", _ms(self.t0, "t0"))

    @property
    def n_steps(self) -> int:
        return self.packed.shape[0]

    @property
    def duration_ms(self) -> float:
        return self.n_steps * self.dt

    def window(self, t_start: Any = None, t_stop: Any = None) -> "SpikeRaster":
        """The steps whose start lies in ``[t_start, t_stop)`` (ms or a time)."""
        first = 0 if t_start is None else int(round((_ms(t_start, "t_start") - self.t0) / self.dt))
        last = self.n_steps if t_stop is None else int(round((_ms(t_stop, "t_stop") - self.t0)
                                                             / self.dt))
        first, last = max(first, 0), min(last, self.n_steps)
        return SpikeRaster(self.packed[first:last], self.n_neurons, self.dt,
                           self.t0 + first * self.dt)

    def blocks(self, steps_per_block: int = 1000) -> Iterator[Tuple[int, np.ndarray]]:
        """``(first step, bool array (steps, n_neurons))`` for consecutive blocks of steps."""
        for first in range(0, self.n_steps, steps_per_block):
            bits = np.unpackbits(self.packed[first:first + steps_per_block], axis=1,
                                 count=self.n_neurons)
            yield first, bits.astype(bool)

    def events(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(steps, neurons)``: the step index and the neuron of every spike, sorted by step."""
        steps, neurons = [], []
        for first, block in self.blocks():
            s, n = np.nonzero(block)
            steps.append(s + first)
            neurons.append(n)
        if not steps:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(steps), np.concatenate(neurons)

    def spike_times(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(times in ms, neurons)``; a spike of step ``k`` is at the step's end, as NEST stamps it."""
        steps, neurons = self.events()
        return self.t0 + (steps + 1) * self.dt, neurons

    def counts(self) -> np.ndarray:
        """Spikes per neuron (int64, shape ``(n_neurons,)``)."""
        total = np.zeros(self.n_neurons, np.int64)
        for _, block in self.blocks():
            total += block.sum(axis=0)
        return total
