r"""`IafPscExp`: NEST's ``iaf_psc_exp``, a LIF neuron with exponential current synapses, integrated exactly.

The membrane potential ``V`` and the synaptic current ``I`` obey

.. math::
    \frac{dI}{dt} = -\frac{I}{\tau_{syn}} + \sum_k w_k \delta(t - t_k), \qquad
    \frac{dV}{dt} = -\frac{V - E_L}{\tau_m} + \frac{I + I_e}{C_m}

which is linear between spikes, so one step of ``h = dt`` is an exact map (Rotter &
Diesmann 1999) with the propagators

=========  ==========================================================================
``P22``    ``exp(-h / tau_m)``: the membrane's decay over a step
``P11``    ``exp(-h / tau_syn)``: the current's decay over a step
``P21``    ``tau_syn tau_m / (C_m (tau_m - tau_syn)) (P22 - P11)``: current to voltage
``P20``    ``tau_m / C_m (1 - P22)``: the constant current ``I_e`` to voltage
=========  ==========================================================================

computed once, in float64, from ``brainx.environ``'s ``dt`` when the step is traced: the compiled
step is four multiply-adds, a comparison and two selects on plain float32 arrays (no unit
arithmetic is left in it; the states are wrapped in their units outside the arithmetic).

Each step does what NEST does, in NEST's order, so that a spike train given to both gives the
same membrane trace:

1. unless refractory, ``V <- E_L + P22 (V - E_L) + P21 I + P20 I_e`` (the *old* current);
   a refractory neuron counts its clamp down instead and keeps ``V = V_reset``;
2. ``I <- P11 I``;
3. ``I <- I + x``: the current jumps arriving in this step (a spike emitted in step ``k`` over a
   delay of ``d`` steps arrives in step ``k + d``; it first moves ``V`` in step ``k + d + 1``);
4. where ``V >= V_th``: a spike (the step's output), ``V <- V_reset`` and ``round(t_ref / dt)``
   refractory steps start.

NEST keeps excitatory and inhibitory currents apart (by the sign of the weight). With one
``tau_syn`` for both (the default, and the microcircuit's) their sum is the same linear
variable, so one current ``I`` is exact; give ``tau_syn_in`` a different value and the neuron
keeps two, ``I`` fed by ``x`` and ``I_in`` fed by ``x_in``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx import environ
from brainx.nn.dynamics.base import Dynamics
from brainx.nn.dynamics.neuron import _select_reset
from brainx.nn.init import Constant, param
from brainx.nn.surrogate import ReluGrad, Surrogate
from brainx.state.state import HiddenState, ShortTermState

__all__ = ["IafPscExp", "iaf_psc_exp_propagators"]

# the units a parameter given without one is read in, and the units of the states (NEST's)
_UNITS = {"C_m": u.pF, "tau_m": u.ms, "tau_syn_ex": u.ms, "tau_syn_in": u.ms, "t_ref": u.ms,
          "E_L": u.mV, "V_th": u.mV, "V_reset": u.mV, "I_e": u.pA}


def iaf_psc_exp_propagators(dt_ms: float, C_m: Any, tau_m: Any, tau_syn: Any) -> dict:
    """The exact one-step propagators ``P11, P21, P22, P20`` of ``iaf_psc_exp`` (float64 NumPy).

    Arguments
    ---------
    dt_ms : float
        The step ``h`` in ms.
    C_m, tau_m, tau_syn : float or array
        Capacitance (pF) and time constants (ms); arrays give per-neuron propagators.

    Returns
    -------
    ``{"P11": ..., "P21": ..., "P22": ..., "P20": ...}`` (``P21`` and ``P20`` in mV/pA).
    Where ``tau_syn == tau_m`` ``P21`` is its limit ``h / C_m exp(-h / tau_m)``.

    Example
    -------
    >>> p = iaf_psc_exp_propagators(0.1, 250.0, 10.0, 0.5)
    >>> round(float(p["P21"]), 10), round(float(p["P22"]), 10)
    (0.0003606717, 0.9900498337)
    """
    h = np.float64(dt_ms)
    C_m, tau_m, tau_syn = (np.asarray(v, np.float64) for v in (C_m, tau_m, tau_syn))
    P22 = np.exp(-h / tau_m)
    P11 = np.exp(-h / tau_syn)
    close = np.isclose(tau_m, tau_syn, rtol=1e-10, atol=0.0)
    safe = np.where(close, tau_m + 1.0, tau_m)           # no division by zero where close
    P21 = np.where(close, h / C_m * P22,
                   tau_syn * safe / (C_m * (safe - tau_syn)) * (np.exp(-h / safe) - P11))
    P20 = tau_m / C_m * -np.expm1(-h / tau_m)
    return {"P11": P11, "P21": P21, "P22": P22, "P20": P20}


def _mantissa_in(owner: str, name: str, value: Any, unit: Any) -> np.ndarray:
    """``value`` as a float64 array in ``unit`` (a plain number is taken to be in ``unit``)."""
    if isinstance(value, u.Quantity):
        if value.dim != unit.dim:
            raise u.UnitMismatchError(f"{owner}: {name} must be in units like {unit}, "
                                      f"got {value}.")
        return np.asarray(value.to_decimal(unit), np.float64)
    if isinstance(value, jax.core.Tracer):
        raise TypeError(f"{owner}: {name} must be a concrete number or array (a parameter), "
                        "not a traced value.")
    return np.asarray(value, np.float64)


class IafPscExp(Dynamics):
    """NEST's ``iaf_psc_exp``: LIF with exponential current synapses, exact integration, NEST's order.

    The step is described in :mod:`brainx.nn.dynamics.iaf_psc_exp`. Parameters are numbers
    with units or arrays of the population's shape (one value per neuron); a plain number is
    read in NEST's units (pF, ms, mV, pA). The defaults are NEST's.

    Parameters
    ----------
    in_size : int or tuple of int
        Population shape.
    C_m : capacitance
        Membrane capacitance (default 250 pF).
    tau_m : time
        Membrane time constant (default 10 ms).
    tau_syn_ex : time
        Decay time of the synaptic current (default 2 ms).
    tau_syn_in : time, optional
        Decay time of a separate inhibitory current (default: the same as ``tau_syn_ex``,
        and one summed current).
    E_L, V_th, V_reset : voltage
        Resting potential (default -70 mV), threshold (-55 mV) and reset (-70 mV);
        ``V_reset < V_th``.
    t_ref : time
        Absolute refractory period (default 2 ms), rounded to whole steps.
    I_e : current
        Constant input current (default 0 pA), e.g. a DC background.
    V_initializer : initialiser or array-like
        Initial ``V`` (default ``E_L``); see :func:`brainx.nn.init.param`.
    spk_fun : Surrogate
        Spike function of :mod:`brainx.nn.surrogate` for gradients (default ``ReluGrad()``);
        the forward pass is ``V >= V_th``.
    name : str, optional
        Shown in ``repr`` and in error messages.

    States
    ------
    V : HiddenState
        Membrane potential in mV.
    I : HiddenState
        Synaptic current in pA (the excitatory one when ``tau_syn_in`` differs).
    I_in : HiddenState (only with a different ``tau_syn_in``)
        Inhibitory synaptic current in pA.
    refractory : ShortTermState
        Remaining refractory steps (int32; 0 when free).

    Examples
    --------
    >>> import brainunit as u, jax.numpy as jnp, brainx
    >>> with brainx.environ.context(dt=0.1 * u.ms):
    ...     n = brainx.nn.init_all_states(brainx.nn.IafPscExp(1, I_e=500.0 * u.pA))
    ...     spikes = [float(n.update()[0]) for _ in range(400)]
    >>> [k for k, s in enumerate(spikes) if s]        # every 13.9 + 2 ms (refractory)
    [138, 297]
    """

    def __init__(self, in_size, C_m=250.0 * u.pF, tau_m=10.0 * u.ms, tau_syn_ex=2.0 * u.ms,
                 tau_syn_in=None, E_L=-70.0 * u.mV, V_th=-55.0 * u.mV, V_reset=-70.0 * u.mV,
                 t_ref=2.0 * u.ms, I_e=0.0 * u.pA, V_initializer=None,
                 spk_fun: Callable = ReluGrad(), name: Optional[str] = None):
        super().__init__(in_size, name=name)
        if not isinstance(spk_fun, Surrogate):
            raise TypeError(f"{self._who()}: spk_fun must be a surrogate of brainx.nn.surrogate "
                            f"(e.g. ReluGrad()), got {spk_fun!r}.")
        given = dict(C_m=C_m, tau_m=tau_m, tau_syn_ex=tau_syn_ex,
                     tau_syn_in=tau_syn_ex if tau_syn_in is None else tau_syn_in, E_L=E_L,
                     V_th=V_th, V_reset=V_reset, t_ref=t_ref, I_e=I_e)
        self._p = {}
        for key, value in given.items():
            m = _mantissa_in(self._who(), key, value, _UNITS[key])
            param(m, self.varshape)                # checks that it broadcasts to the population
            self._p[key] = m
            setattr(self, key, u.maybe_decimal(u.Quantity(m, unit=_UNITS[key])))
        for key in ("C_m", "tau_m", "tau_syn_ex", "tau_syn_in"):
            if np.any(self._p[key] <= 0):
                raise ValueError(f"{self._who()}: {key} must be positive, got {given[key]}.")
        if np.any(self._p["t_ref"] < 0):
            raise ValueError(f"{self._who()}: t_ref must be >= 0, got {t_ref}.")
        if np.any(self._p["V_reset"] >= self._p["V_th"]):
            raise ValueError(f"{self._who()}: V_reset ({V_reset}) must be below V_th ({V_th}), "
                             "as in NEST.")
        self.two_currents = bool(np.any(self._p["tau_syn_in"] != self._p["tau_syn_ex"]))
        self.spk_fun = spk_fun
        self.V_initializer = V_initializer

    def _who(self) -> str:
        return "IafPscExp" + (f" {self.name!r}" if getattr(self, "name", None) else "")

    # -- states ------------------------------------------------------------------------------
    def _initial(self, batch_size):
        """Initial ``V`` (mV, float32), zero current and refractory counts."""
        init = self.V_initializer
        if init is None:
            init = Constant(u.Quantity(self._p["E_L"].astype(np.float32), unit=u.mV))
        V = param(init, self.varshape, batch_size, broadcast=True)
        if isinstance(V, u.Quantity):
            if V.dim != u.mV.dim:
                raise u.UnitMismatchError(f"{self._who()}: V_initializer must give voltages, "
                                          f"got unit {V.unit}.")
            V = V.to_decimal(u.mV)
        V = jnp.asarray(V, jnp.float32)
        return V, jnp.zeros(V.shape, jnp.float32), jnp.zeros(V.shape, jnp.int32)

    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        V, zero, ref = self._initial(batch_size)
        self.V = HiddenState(u.Quantity(V, unit=u.mV))
        self.I = HiddenState(u.Quantity(zero, unit=u.pA))
        if self.two_currents:
            self.I_in = HiddenState(u.Quantity(zero, unit=u.pA))
        self.refractory = ShortTermState(ref)

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self._require()
        V, zero, ref = self._initial(batch_size)
        self.V.value = u.Quantity(V, unit=u.mV)
        self.I.value = u.Quantity(zero, unit=u.pA)
        if self.two_currents:
            self.I_in.value = u.Quantity(zero, unit=u.pA)
        self.refractory.value = ref

    def _require(self) -> None:
        names = ["V", "I", "refractory"] + (["I_in"] if self.two_currents else [])
        missing = [n for n in names if n not in self.__dict__]
        if missing:
            raise RuntimeError(
                f"{self._who()} has no state {', '.join(missing)}: call init_state() on it (or "
                "brainx.nn.init_all_states(model)) before reset_state() or update().")

    # -- the step ----------------------------------------------------------------------------
    def _constants(self, dtype):
        """The step's constants for the current ``dt``, as NumPy arrays of ``dtype``."""
        dt = environ.get_dt()
        dt_ms = float(u.Quantity(dt).to_decimal(u.ms)) if isinstance(dt, u.Quantity) else float(dt)
        p = self._p
        ex = iaf_psc_exp_propagators(dt_ms, p["C_m"], p["tau_m"], p["tau_syn_ex"])
        inh = iaf_psc_exp_propagators(dt_ms, p["C_m"], p["tau_m"], p["tau_syn_in"])
        # V <- P22 V + P21 I + c, with c = E_L (1 - P22) + P20 I_e in one rounding
        c = -p["E_L"] * np.expm1(-dt_ms / p["tau_m"]) + ex["P20"] * p["I_e"]
        cast = lambda a: np.asarray(a, dtype)
        return dict(P22=cast(ex["P22"]), P21=cast(ex["P21"]), P11=cast(ex["P11"]),
                    P21_in=cast(inh["P21"]), P11_in=cast(inh["P11"]), c=cast(c),
                    V_th=cast(p["V_th"]), V_reset=cast(p["V_reset"]),
                    ref_steps=np.asarray(np.rint(p["t_ref"] / dt_ms), np.int32))

    def _jumps(self, x, like, what):
        """The input ``x`` (a current in pA, or a plain array read in pA) as ``like``'s dtype."""
        if x is None:
            return None
        if isinstance(x, u.Quantity):
            if x.dim != u.pA.dim:
                raise u.UnitMismatchError(
                    f"{self._who()}: {what} must be a current (the jumps of the synaptic "
                    f"current arriving this step, e.g. w * u.pA), got unit {x.unit}.")
            x = x.to_decimal(u.pA)
        return jnp.asarray(x, like.dtype)

    def update(self, x=None, x_in=None):
        """One step with the current jumps ``x`` arriving now (pA); returns this step's spikes.

        Arguments
        ---------
        x : current or array, optional
            What the synaptic current jumps by in this step (pA), shape broadcastable to the
            population; ``None``: nothing arrives.
        x_in : current or array, optional
            Jumps of the inhibitory current, only with a separate ``tau_syn_in``.

        Returns
        -------
        Spikes, ``1.0`` where ``V`` crossed ``V_th`` in this step (float32, surrogate gradient).
        """
        self._require()
        V = u.get_mantissa(self.V.value)
        I = u.get_mantissa(self.I.value)
        r = self.refractory.value
        k = self._constants(V.dtype)
        V_free = k["P22"] * V + k["P21"] * I + k["c"]
        if self.two_currents:
            I_in = u.get_mantissa(self.I_in.value)
            V_free = V_free + k["P21_in"] * I_in
            I_in = k["P11_in"] * I_in
            x_in = self._jumps(x_in, V, "x_in")
            if x_in is not None:
                I_in = I_in + x_in
        free = r == 0
        V = jnp.where(free, V_free, V)
        r = jnp.where(free, r, r - 1)
        I = k["P11"] * I
        x = self._jumps(x, V, "x")
        if x_in is not None and not self.two_currents:      # one current holds both
            x_in = self._jumps(x_in, V, "x_in")
            x = x_in if x is None else x + x_in
        if x is not None:
            I = I + x
        scale = k["V_th"] - k["V_reset"]
        spikes = self.spk_fun.spike_at(V, k["V_th"], scale)
        spiked = V >= k["V_th"]
        V = _select_reset(V, jnp.broadcast_to(k["V_reset"], V.shape).astype(V.dtype),
                          spikes, spiked)
        r = jnp.where(spiked, k["ref_steps"], r)
        self.V.value = u.Quantity(V, unit=u.mV)
        self.I.value = u.Quantity(I, unit=u.pA)
        if self.two_currents:
            self.I_in.value = u.Quantity(I_in, unit=u.pA)
        self.refractory.value = r
        return spikes
