r"""Synaptic outputs: how a synaptic variable becomes a current, `COBA` or `CUBA`.

A projection computes a synaptic variable ``g`` (a conductance or a scaled
current) and hands it to an output with :meth:`~SynOut.bind_cond`; the
postsynaptic neuron then calls the output with its membrane potential
(register it as a current input: ``neuron.add_current_input(key, out)``):

* :class:`COBA` (conductance-based): :math:`I = g\,(E - V)`;
* :class:`CUBA` (current-based): :math:`I = g \cdot \text{scale}`, ``V`` unused.
"""

from __future__ import annotations

from typing import Any, Optional

from brainx.nn.modules.module import Module

__all__ = ["SynOut", "COBA", "CUBA"]


class SynOut(Module):
    """Base class of synaptic outputs: bind this step's ``g``, then call with the potential."""

    def __init__(self, name: Optional[str] = None):
        super().__init__(name=name)
        self._conductance = None

    def bind_cond(self, conductance: Any) -> None:
        """Set the synaptic variable used by the next calls."""
        self._conductance = conductance

    def unbind_cond(self) -> None:
        self._conductance = None

    def __call__(self, *args, **kwargs):
        if self._conductance is None:
            raise ValueError(f"{self!r} has no conductance for this step: call "
                             "bind_cond(g) on it before the neuron sums its inputs.")
        return self.update(self._conductance, *args, **kwargs)


class COBA(SynOut):
    r"""Conductance-based output :math:`I = g\,(E - V)`.

    Parameters
    ----------
    E : voltage
        The reversal potential.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> out = brainx.nn.COBA(E=0. * u.mV)
    >>> out.bind_cond(2. * u.nS)
    >>> out(-60. * u.mV)
    Quantity(120., "pA")
    """

    def __init__(self, E: Any, name: Optional[str] = None):
        super().__init__(name=name)
        self.E = E

    def update(self, conductance, potential):
        return conductance * (self.E - potential)


class CUBA(SynOut):
    r"""Current-based output :math:`I = g \cdot \text{scale}` (the potential is ignored).

    Parameters
    ----------
    scale : number or Quantity
        Turns ``g`` into a current (``1.0``: ``g`` already is one).

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> out = brainx.nn.CUBA(scale=1.0)
    >>> out.bind_cond(3. * u.mA)
    >>> out(-60. * u.mV)
    Quantity(3., "mA")
    """

    def __init__(self, scale: Any = 1.0, name: Optional[str] = None):
        super().__init__(name=name)
        self.scale = scale

    def update(self, conductance, potential=None):
        return conductance * self.scale
