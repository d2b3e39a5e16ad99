"""Synapse models: `Expon`, the exponentially decaying synaptic variable."""

from __future__ import annotations

from typing import Optional

import brainunit as u

from brainx.nn.init import Constant, param
from brainx.nn.module import Module
from brainx.nn.neuron import exp_decay
from brainx.state.state import HiddenState

__all__ = ["Expon"]


class Expon(Module):
    r"""Exponential synapse: :math:`\tau \frac{dg}{dt} = -g + \sum_k \delta(t - t_k)\,x_k`.

    Each step decays ``g`` by ``exp(-dt / tau)`` and adds the input ``x``
    (spike-weighted conductances or currents). ``g`` takes the unit of
    ``g_initializer`` (unitless by default; ``0. * u.mA`` for a current).

    Parameters
    ----------
    in_size : int or tuple of int
        Shape of ``g`` (without batch).
    tau : time
        Decay time constant.
    g_initializer : initialiser or value
        Initial ``g``.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> with brainx.environ.context(dt=1.0 * u.ms):
    ...     syn = brainx.nn.init_all_states(brainx.nn.Expon(1, tau=1.0 * u.ms))
    ...     g = [float(syn(x)[0]) for x in (1.0, 0.0, 0.0)]
    >>> [round(v, 4) for v in g]
    [1.0, 0.3679, 0.1353]
    """

    def __init__(self, in_size, tau=8.0 * u.ms, g_initializer=Constant(0.0),
                 name: Optional[str] = None):
        super().__init__(name=name)
        self.in_size = in_size
        self.out_size = in_size
        self.tau = param(tau, self.in_size)
        self.g_initializer = g_initializer

    @property
    def varshape(self):
        return self.in_size

    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self.g = HiddenState(param(self.g_initializer, self.varshape, batch_size, broadcast=True))

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        if not hasattr(self, "g"):
            raise RuntimeError(f"{self!r} has no state g: call init_state() (or "
                               "brainx.nn.init_all_states(model)) first.")
        self.g.value = param(self.g_initializer, self.varshape, batch_size, broadcast=True)

    def update(self, x=None):
        """Decay ``g`` by one step, add ``x`` (if given), and return ``g``."""
        g = self.g.value * exp_decay(self.tau)
        if x is not None:
            g = g + x
        self.g.value = g
        return g
