r"""Synapse models on :class:`~brainx.nn.Dynamics`: `Expon`, `Alpha`, `DualExpon`.

Each holds the synaptic variable of a postsynaptic population and steps it
by one ``dt`` (from :mod:`brainx.environ`): the decays are integrated exactly
(``exp(-dt / tau)``), then the step's input ``x`` (a spike-weighted
conductance or current, e.g. the output of a projection) is added as a jump.
Delta inputs (:meth:`~brainx.nn.Dynamics.add_delta_input`) add to the same
variable as ``x``; current inputs to :class:`Expon` are integrated as a
drive ``tau dg/dt = -g + I`` by exponential Euler. The variable takes the
unit of ``g_initializer`` (unitless by default; ``0. * u.mA`` for a current,
``0. * u.nS`` for a conductance, then turned into a current by
:class:`~brainx.nn.COBA` or :class:`~brainx.nn.CUBA`).
"""

from __future__ import annotations

from typing import Any, Optional

import brainunit as u

from brainx.nn.dynamics.base import Dynamics
from brainx.nn.dynamics.exp_euler import exp_euler_step
from brainx.nn.init import Constant, param
from brainx.nn.dynamics.neuron import exp_decay
from brainx.state.state import HiddenState

__all__ = ["Synapse", "Expon", "Alpha", "DualExpon"]


class Synapse(Dynamics):
    """Base class of synapse models: a :class:`~brainx.nn.Dynamics` whose states have ``varshape``."""

    def _initial(self, init: Any, batch_size: Optional[int]):
        return param(init, self.varshape, batch_size, broadcast=True)

    def _require(self, *names: str) -> None:
        missing = [n for n in names if not hasattr(self, n)]
        if missing:
            raise RuntimeError(f"{self!r} has no state {', '.join(missing)}: call init_state() on "
                               "it (or brainx.nn.init_all_states(model)) first.")


class Expon(Synapse):
    r"""Exponential synapse: :math:`\tau \frac{dg}{dt} = -g + \sum_k \delta(t - t_k)\,x_k`.

    Each step decays ``g`` by ``exp(-dt / tau)`` and adds the input ``x``
    (spike-weighted conductances or currents).

    Parameters
    ----------
    in_size : int or tuple of int
        Shape of ``g`` (without batch).
    tau : time
        Decay time constant.
    g_initializer : initialiser or array-like
        Initial ``g`` (its unit is ``g``'s unit).

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
        super().__init__(in_size, name=name)
        self.tau = param(tau, self.varshape)
        self.g_initializer = g_initializer

    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self.g = HiddenState(self._initial(self.g_initializer, batch_size))

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self._require("g")
        self.g.value = self._initial(self.g_initializer, batch_size)

    def update(self, x=None):
        """Decay ``g`` by one step (driven by any current inputs), add the delta inputs and ``x``."""
        self._require("g")
        if not self.current_inputs:
            g = self.g.value * exp_decay(self.tau)
        else:
            g = exp_euler_step(lambda g: self.sum_current_inputs(-g, g) / self.tau, self.g.value)
        g = self.sum_delta_inputs(g)
        if x is not None:
            g = g + x
        self.g.value = g
        return g


class Alpha(Synapse):
    r"""Alpha synapse: :math:`\tau \frac{dh}{dt} = -h`, :math:`\tau \frac{dg}{dt} = -g + h`.

    The input ``x`` jumps ``h``; ``g`` (the output) rises and falls back, close
    to :math:`x\,\frac{t}{\tau}e^{-t/\tau}` (peak near ``t = tau``). Each step
    decays ``h`` and integrates ``g`` by exponential Euler with the ``h`` of
    the step's start.

    Parameters
    ----------
    in_size : int or tuple of int
        Shape of ``g`` and ``h``.
    tau : time
        Time constant.
    g_initializer : initialiser or array-like
        Initial ``g`` and ``h`` (their unit).

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> with brainx.environ.context(dt=1.0 * u.ms):
    ...     syn = brainx.nn.init_all_states(brainx.nn.Alpha(1, tau=2.0 * u.ms))
    ...     g = [float(syn(x)[0]) for x in (1.0, 0.0, 0.0, 0.0, 0.0)]
    >>> int(max(range(5), key=g.__getitem__))          # the peak, steps after the input
    2
    """

    def __init__(self, in_size, tau=8.0 * u.ms, g_initializer=Constant(0.0),
                 name: Optional[str] = None):
        super().__init__(in_size, name=name)
        self.tau = param(tau, self.varshape)
        self.g_initializer = g_initializer

    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self.g = HiddenState(self._initial(self.g_initializer, batch_size))
        self.h = HiddenState(self._initial(self.g_initializer, batch_size))

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self._require("g", "h")
        self.g.value = self._initial(self.g_initializer, batch_size)
        self.h.value = self._initial(self.g_initializer, batch_size)

    def update(self, x=None):
        """Step ``g`` with the current ``h``, decay ``h``, add delta inputs and ``x`` to ``h``."""
        self._require("g", "h")
        h = self.h.value
        self.g.value = exp_euler_step(lambda g: (h - g) / self.tau, self.g.value)
        h = self.sum_delta_inputs(h * exp_decay(self.tau))
        self.h.value = h if x is None else h + x
        return self.g.value


class DualExpon(Synapse):
    r"""Dual-exponential synapse: ``g = A (g_decay - g_rise)``, both decaying, both jumped by ``x``.

    .. math::  \tau_r \frac{dg_r}{dt} = -g_r, \quad \tau_d \frac{dg_d}{dt} = -g_d, \quad
               g = A\,(g_d - g_r)

    so a jump ``x`` at time 0 gives :math:`g(t) = A x (e^{-t/\tau_d} - e^{-t/\tau_r})`.

    Parameters
    ----------
    in_size : int or tuple of int
        Shape of the variables.
    tau_decay, tau_rise : time
        Decay and rise time constants (``tau_rise < tau_decay``).
    A : number, optional
        Scale. ``None`` (default): the one that makes the peak of the response
        to ``x = 1`` equal 1.
    g_initializer : initialiser or array-like
        Initial ``g_rise`` and ``g_decay`` (their unit).

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> with brainx.environ.context(dt=0.1 * u.ms):
    ...     syn = brainx.nn.init_all_states(brainx.nn.DualExpon(1, tau_decay=5 * u.ms,
    ...                                                          tau_rise=1 * u.ms))
    ...     g = [float(syn(1.0 if i == 0 else None)[0]) for i in range(60)]
    >>> round(max(g), 3), g.index(max(g))                # peak 1 at 2.0 ms after the jump
    (1.0, 20)
    """

    def __init__(self, in_size, tau_decay=10.0 * u.ms, tau_rise=1.0 * u.ms, A=None,
                 g_initializer=Constant(0.0), name: Optional[str] = None):
        super().__init__(in_size, name=name)
        self.tau_decay = param(tau_decay, self.varshape)
        self.tau_rise = param(tau_rise, self.varshape)
        if A is None:
            ratio = self.tau_rise / self.tau_decay
            peak = ratio ** (self.tau_rise / (self.tau_decay - self.tau_rise)) * (1 - ratio)
            A = 1.0 / peak
        self.A = A
        self.g_initializer = g_initializer

    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self.g_rise = HiddenState(self._initial(self.g_initializer, batch_size))
        self.g_decay = HiddenState(self._initial(self.g_initializer, batch_size))

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self._require("g_rise", "g_decay")
        self.g_rise.value = self._initial(self.g_initializer, batch_size)
        self.g_decay.value = self._initial(self.g_initializer, batch_size)

    def update(self, x=None):
        """Decay both variables, add delta inputs and ``x`` to both, return ``A (g_decay - g_rise)``."""
        self._require("g_rise", "g_decay")
        g_rise = self.g_rise.value * exp_decay(self.tau_rise)
        g_decay = self.g_decay.value * exp_decay(self.tau_decay)
        jump = self.sum_delta_inputs(0.0 * g_rise)
        if x is not None:
            jump = jump + x
        self.g_rise.value = g_rise + jump
        self.g_decay.value = g_decay + jump
        return self.A * (self.g_decay.value - self.g_rise.value)
