"""`PoissonBackground`: many independent Poisson sources per neuron, drawn as one count per neuron and step.

A neuron that receives ``K`` independent Poisson spike trains of rate ``nu`` through synapses of
one weight ``w`` and one delay receives, in each step of length ``dt``, ``w`` times a
Poisson(``nu K dt``) number of spikes, independent from step to step and from neuron to neuron
(a delay only shifts a stationary process). That is what NEST's ``poisson_generator`` delivers
to each of its targets, and what this layer draws: one uniform number per neuron and step,
turned into a count by the inverse of the Poisson distribution function (no per-source work, no
rejection loop). The numbers are Philox4x32-10's and the count is read off a table of the
distribution function, on CPU by a native kernel (:mod:`~brainx.nn.dynamics.poisson_draws`:
about ten times cheaper there than jax's threefry numbers), elsewhere in plain JAX, with the same
counts. The count is capped at the smallest ``k`` whose upper tail ``P(N > k)`` is below
``2**-30``: far below what a 24-bit uniform number resolves.

Each step takes a fresh key from a :class:`brainx.random.RandomState` (the module's own when it
is given a ``seed``, else the default generator), so the draws thread through ``jit``,
``for_loop`` and ``vmap`` like any state.
"""

from __future__ import annotations

from typing import Any, Optional

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx import environ
from brainx import random as brainx_random
from brainx.nn.dynamics.base import Dynamics
from brainx.nn.dynamics.poisson_draws import poisson_counts, poisson_table
from brainx.nn.init import param

__all__ = ["PoissonBackground"]


def _in(owner: str, name: str, value: Any, unit: Any) -> np.ndarray:
    if isinstance(value, u.Quantity):
        if value.dim != unit.dim:
            raise u.UnitMismatchError(f"{owner}: {name} must be in units like {unit}, "
                                      f"got {value}.")
        return np.asarray(value.to_decimal(unit), np.float64)
    return np.asarray(value, np.float64)


class PoissonBackground(Dynamics):
    """Poisson background input: each step, ``weight`` times a Poisson(``rate * dt``) count per neuron.

    Parameters
    ----------
    in_size : int or tuple of int
        Population shape.
    rate : frequency
        Total rate of the input spikes of one neuron (``nu * K_ext``; a number is read in Hz),
        a scalar or one per neuron.
    weight : current
        What one input spike adds to the synaptic current (a number is read in pA), scalar or
        one per neuron.
    seed : int, optional
        A seed for this module's own generator (a ``RandomState`` state of the module); by
        default the numbers come from ``brainx.random``'s default generator.
    native : bool, optional
        Draw the counts with the native kernel (``True``), in plain JAX (``False``), or
        choose: native on CPU where it builds (default). Both give the same counts
        (:mod:`~brainx.nn.dynamics.poisson_draws`).
    name : str, optional
        Shown in ``repr`` and in error messages.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> with brainx.environ.context(dt=0.1 * u.ms):
    ...     bg = brainx.nn.PoissonBackground(1000, rate=8 * u.Hz * 2000, weight=87.8 * u.pA, seed=0)
    ...     jumps = bg.update()                     # 87.8 pA times a Poisson(1.6) count each
    >>> jumps.shape, str(jumps.unit)
    ((1000,), 'pA')
    """

    def __init__(self, in_size, rate, weight, seed: Optional[int] = None,
                 native: Optional[bool] = None, name: Optional[str] = None):
        super().__init__(in_size, name=name)
        who = "PoissonBackground" + (f" {name!r}" if name else "")
        self._who = who
        self._rate_hz = _in(who, "rate", rate, u.Hz)
        self._weight_pa = _in(who, "weight", weight, u.pA)
        for key, value in (("rate", self._rate_hz), ("weight", self._weight_pa)):
            param(value, self.varshape)              # broadcasts to the population, or refused
        if np.any(self._rate_hz < 0) or not np.all(np.isfinite(self._rate_hz)):
            raise ValueError(f"{who}: rate must be finite and >= 0 (Hz), got {rate}.")
        self.rate = u.Quantity(self._rate_hz, unit=u.Hz)
        self.weight = u.Quantity(self._weight_pa, unit=u.pA)
        self.rng = None if seed is None else brainx_random.RandomState(seed)
        self.native = native
        self._tables = {}
        self._partition = None

    def _table(self):
        """``(table, group)`` of the Poisson laws ``rate * dt`` (:func:`poisson_table`), for the
        current ``dt`` (made once per ``dt``)."""
        dt = environ.get_dt()
        dt_ms = float(u.Quantity(dt).to_decimal(u.ms)) if isinstance(dt, u.Quantity) else float(dt)
        if self._tables.get("dt_ms") != dt_ms:
            lam = np.broadcast_to(self._rate_hz * dt_ms * 1e-3, self.varshape)
            self._tables = {"dt_ms": dt_ms, "table": poisson_table(lam)}
        return self._tables["table"]

    def counts(self, batch_size: Optional[int] = None) -> Any:
        """This step's Poisson counts, shape ``(batch_size, *in_size)`` or ``in_size`` (int32)."""
        table, group = self._table()
        shape = self.varshape if batch_size is None else (int(batch_size),) + self.varshape
        gen = self.rng if self.rng is not None else brainx_random.DEFAULT
        key = jax.random.bits(gen.split_key(), (2,), jnp.uint32)
        part = self._partition
        if part is not None and batch_size is None and len(self.varshape) == 1:
            return self._block_counts(part, key, table, group)
        flat = poisson_counts(key, table, group, shape[:-len(self.varshape)] + (group.size,),
                              native=self.native)
        return flat.reshape(shape)

    def partition_neurons(self, partition) -> None:
        """Draw each device's block of counts on that device (called by
        :meth:`brainx.distributed.NeuronPartition.shard` for a population of its ``n``): the
        counts are those of one device, but the cost falls as 1 / P. XLA cannot split the
        native call by itself, so without this every device would draw all ``n``."""
        if self.varshape == (partition.n,):
            self._partition = partition

    def _block_counts(self, part, key, table, group):
        from jax.sharding import PartitionSpec
        native = self.native

        def block(key, group_block):
            start = jax.lax.axis_index(part.axis) * part.block
            return poisson_counts(key, table, group_block, (part.block,), native, start=start)

        return jax.shard_map(block, mesh=part.mesh, in_specs=(PartitionSpec(), part.spec(1)),
                             out_specs=part.spec(1), check_vma=False)(key, jnp.asarray(group))

    def update(self, batch_size: Optional[int] = None) -> Any:
        """This step's current jumps (pA): ``weight`` times a Poisson count per neuron."""
        n = self.counts(batch_size)
        return u.Quantity(n * np.asarray(self._weight_pa, np.float32), unit=u.pA)
