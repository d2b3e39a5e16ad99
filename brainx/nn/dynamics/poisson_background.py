"""`PoissonBackground`: many independent Poisson sources per neuron, drawn as one count per neuron and step.

A neuron that receives ``K`` independent Poisson spike trains of rate ``nu`` through synapses of
one weight ``w`` and one delay receives, in each step of length ``dt``, ``w`` times a
Poisson(``nu K dt``) number of spikes, independent from step to step and from neuron to neuron
(a delay only shifts a stationary process). That is what NEST's ``poisson_generator`` delivers
to each of its targets, and what this layer draws: one uniform number per neuron and step,
turned into a count by the inverse of the Poisson distribution function (no per-source work, no
rejection loop). The count is capped at the smallest ``k`` whose upper tail ``P(N > k)`` is
below ``2**-30``: far below what a float32 uniform number resolves.

The random numbers come from a :class:`brainx.random.RandomState` (the module's own when it is
given a ``seed``, else the default generator), so they thread through ``jit`` and ``for_loop``
like any state.
"""

from __future__ import annotations

from typing import Any, Optional

import brainunit as u
import jax.numpy as jnp
import numpy as np
import scipy.stats

from brainx import environ
from brainx import random as brainx_random
from brainx.nn.dynamics.base import Dynamics
from brainx.nn.init import param

__all__ = ["PoissonBackground"]

_TAIL = 2.0 ** -30


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
                 name: Optional[str] = None):
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

    def _table(self, dtype):
        """``lam = rate dt``, ``exp(-lam)`` and the cap on the count, for the current ``dt``."""
        dt = environ.get_dt()
        dt_ms = float(u.Quantity(dt).to_decimal(u.ms)) if isinstance(dt, u.Quantity) else float(dt)
        lam = self._rate_hz * dt_ms * 1e-3
        cap = int(scipy.stats.poisson.isf(_TAIL, float(np.max(lam)))) + 1 if np.max(lam) > 0 else 0
        return np.asarray(lam, dtype), np.asarray(np.exp(-lam), dtype), cap

    def counts(self, batch_size: Optional[int] = None) -> Any:
        """This step's Poisson counts, shape ``(batch_size, *in_size)`` or ``in_size`` (int32)."""
        lam, p0, cap = self._table(np.float32)
        shape = self.varshape if batch_size is None else (int(batch_size),) + self.varshape
        gen = self.rng if self.rng is not None else brainx_random.DEFAULT
        U = gen.random(size=shape, dtype=jnp.float32)
        n = jnp.zeros(shape, jnp.int32)
        p, F = jnp.asarray(p0), jnp.asarray(p0)
        for k in range(1, cap + 1):                  # n = #{k: U >= F(k-1)}: the inverse CDF
            n = n + (U >= F)
            p = p * (lam / k)
            F = F + p
        return n

    def update(self, batch_size: Optional[int] = None) -> Any:
        """This step's current jumps (pA): ``weight`` times a Poisson count per neuron."""
        n = self.counts(batch_size)
        return u.Quantity(n * np.asarray(self._weight_pa, np.float32), unit=u.pA)
