r"""Spiking neuron models on :class:`~brainx.nn.Dynamics`: `LIF` (optional refractory period), `LIFRef`, `ALIF`.

All follow brainstate's conventions: each step first resets the neurons that
spiked on the previous step, then integrates the membrane equation over one
time step ``dt`` (from :mod:`brainx.environ`) exactly (the input held over the
step), adds the delta inputs to ``V``, and returns the spikes of the new
potential through a surrogate spike function.

The input current is the argument ``x`` plus the registered current inputs
(:meth:`~brainx.nn.Dynamics.add_current_input`); a callable input is called
with the membrane potential, so a conductance-based input
``g * (E - V)`` enters the step with its dependence on ``V``:
:func:`~brainx.nn.exp_euler_step` sees that the equation stays affine in ``V``
and takes its closed form. Voltages, times and currents are brainunit
quantities; plain numbers work too as long as they are consistent.

What one step compiles to is what one would write by hand: the decay
``exp(-dt / tau)`` is a constant; with a surrogate of
:mod:`brainx.nn.surrogate` and ``V_th > V_reset`` the spike is the comparison
``V >= V_th`` on the forward pass (:func:`threshold_spike`), the surrogate
enters the gradient only, and a hard reset is a select.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from typing import Any, Callable, Optional

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from brainx import environ
from brainx.nn import plain_arrays as plain
from brainx.nn.dynamics.base import Dynamics
from brainx.nn.dynamics.affine import is_concrete
from brainx.nn.dynamics.exp_euler import exp_euler_step
from brainx.nn.trace_time_values import as_literal, known_value, plus, times
from brainx.nn.init import Constant, param
from brainx.nn.surrogate import ReluGrad, Surrogate
from brainx.state.state import HiddenState, ShortTermState
from brainx.util.tracing import current_jax_trace

__all__ = ["Neuron", "LIF", "LIFRef", "ALIF", "exp_decay", "threshold_spike"]


def exp_decay(tau: Any) -> Any:
    """``exp(-dt / tau)`` for the current ``dt``: the one-step decay of a linear variable."""
    with _now(tau):                       # a constant of the compiled step when tau is one
        ratio = -environ.get_dt() / tau
        known = known_value(ratio)
        if known is not None:             # a number now: NumPy's exp, nothing run by JAX
            value, weak = known
            decay = np.exp(np.float64(value)).astype(value.dtype)
            return decay.item() if weak else decay
        return as_literal(u.math.exp(ratio))


def _now(*values):
    """Evaluate at trace time when every value is concrete (parameters, not states)."""
    if is_concrete(*(u.get_mantissa(v) for v in values)):
        return jax.ensure_compile_time_eval()
    return contextlib.nullcontext()


def threshold_spike(spk_fun: Callable, V: Any, V_th: Any, scale: Any) -> Any:
    """``spk_fun((V - V_th) / scale)``: the spikes of ``V`` against the threshold ``V_th``.

    With one of :mod:`brainx.nn.surrogate`'s functions and a positive ``scale``
    known when the step is traced (a parameter, as ``V_th - V_reset`` is), the
    forward pass is the comparison ``V >= V_th``
    (:meth:`~brainx.nn.surrogate.Surrogate.spike_at`) and the surrogate enters
    the gradient only. Any other ``spk_fun`` is called as written.
    """
    if _compares(spk_fun, scale):
        return spk_fun.spike_at(V, V_th, scale)
    return spk_fun((V - V_th) / scale)


def _compares(spk_fun: Callable, scale: Any) -> bool:
    """Whether :func:`threshold_spike`'s forward pass is ``V >= V_th``."""
    if not isinstance(spk_fun, Surrogate):
        return False
    mantissa = u.get_mantissa(scale)
    return is_concrete(mantissa) and bool(np.all(np.asarray(mantissa) > 0))


# The spikes each neuron computed last, with what they were computed from: the objects (by
# identity), the parameters and the JAX trace. A recurrent model's ``lif.get_spike()`` and the
# step's own test of the same potential then make one spike function call: one surrogate
# evaluation on the backward pass, one residual (issue 21: the second copy cost 12.5 MiB).
_LAST_SPIKES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _spikes_once(neuron, inputs: tuple, params: tuple, compute: Callable) -> Any:
    """``compute()``, or what it gave for the same ``inputs`` and ``params`` in this trace.

    Only traced inputs are remembered (what a compiled step is made of); with concrete
    ones the spikes are computed each time, as an eager step would.
    """
    arrays = tuple(u.get_mantissa(x) for x in inputs)      # a Quantity: its array, its unit
    if is_concrete(*arrays):
        return compute()
    trace = current_jax_trace()
    units = tuple(u.get_unit(x) for x in inputs)
    last = _LAST_SPIKES.get(neuron)
    if last is not None:
        refs, last_units, last_params, last_trace, spikes_ref = last
        if (len(refs) == len(arrays) and all(r() is x for r, x in zip(refs, arrays))
                and last_units == units and all(p is q for p, q in zip(last_params, params))
                and last_trace == trace and spikes_ref() is not None):
            return spikes_ref()
    spikes = compute()
    try:       # weak references only: a finished trace's tracers are not kept alive
        _LAST_SPIKES[neuron] = (tuple(weakref.ref(x) for x in arrays), units, params, trace,
                                weakref.ref(spikes))
    except TypeError:                          # a concrete number beside a tracer
        _LAST_SPIKES.pop(neuron, None)
    return spikes


def _hard_reset(V, V_reset, spikes, spiked):
    """``where(spiked, V_reset, V)``, differentiated as ``V - (stop_gradient(V) - V_reset) * spikes``."""
    unit = u.get_unit(V)
    v = u.get_mantissa(V)
    v_reset = jnp.asarray(u.get_mantissa(u.Quantity(V_reset).to(unit) if not unit.is_unitless
                                         else V_reset), v.dtype)
    return u.maybe_decimal(u.Quantity(_select_reset(v, v_reset, spikes, spiked), unit=unit))


@jax.custom_jvp
def _select_reset(v, v_reset, spikes, spiked):
    return jnp.where(spiked, v_reset, v)


def _select_reset_jvp(primals, tangents):
    v, v_reset, spikes, spiked = primals
    tv, tr, ts, _ = (None if type(t) is SymbolicZero else t for t in tangents)
    out = _select_reset(v, v_reset, spikes, spiked)
    tangent = jnp.zeros(out.shape, out.dtype)
    if tv is not None:
        tangent = tangent + tv
    if ts is not None:
        tangent = tangent - (v - v_reset) * ts
    if tr is not None:
        tangent = tangent + spikes * tr
    return out, tangent


_select_reset.defjvp(_select_reset_jvp, symbolic_zeros=True)


class Neuron(Dynamics):
    """Base class of spiking neurons: a :class:`~brainx.nn.Dynamics` with a spike function and a reset mode.

    Parameters
    ----------
    in_size : int or tuple of int
        The shape of the population (without batch).
    spk_fun : callable
        Maps the dimensionless distance to threshold to spikes; one of
        :mod:`brainx.nn.surrogate` (default ``ReluGrad()``).
    spk_reset : {"soft", "hard"}
        ``"soft"`` subtracts ``V_th - V_reset`` after a spike (the gradient
        flows through the reset); ``"hard"`` sets ``V`` to ``V_reset`` and
        blocks the gradient through the reset amount.
    """

    def __init__(self, in_size, spk_fun: Callable = ReluGrad(), spk_reset: str = "soft",
                 name: Optional[str] = None):
        super().__init__(in_size, name=name)
        if spk_reset not in ("soft", "hard"):
            raise ValueError(f"spk_reset must be 'soft' or 'hard', got {spk_reset!r}.")
        if not callable(spk_fun):
            raise TypeError(f"spk_fun must be callable, got {spk_fun!r}.")
        self.spk_fun = spk_fun
        self.spk_reset = spk_reset

    def _set_params(self, **values) -> None:
        """Each value (a number, array or Quantity) as an attribute, checked against the size."""
        for key, value in values.items():
            setattr(self, key, param(value, self.varshape))

    def _require(self, *names: str) -> None:
        missing = [n for n in names if not hasattr(self, n)]
        if missing:
            raise RuntimeError(
                f"{self!r} has no state {', '.join(missing)}: call init_state() on it (or "
                "brainx.nn.init_all_states(model)) before reset_state() or update().")

    def _spike_scale(self):
        """``V_th - V_reset``: the distance to threshold that the surrogate sees as 1."""
        with _now(self.V_th, self.V_reset):
            return self.V_th - self.V_reset

    def _spiked(self, V, spikes, V_th):
        """Where ``spikes`` (those of ``V``) are 1, as booleans, with no gradient."""
        if _compares(self.spk_fun, self._spike_scale()):
            return V >= V_th                  # what the spikes are: one comparison for both
        return jax.lax.stop_gradient(spikes) > 0

    def _reset(self, last_v, last_spk, spiked, V_th):
        """``last_v`` after the spikes ``last_spk`` (``spiked()``: the same as booleans).

        ``spiked`` is called only where it is needed (a hard reset), so a soft
        reset traces no comparison it would not use.

        Soft: ``V - (V_th - V_reset) * spike``. Hard: ``V - (V - V_reset) * spike``
        with no gradient through the first ``V`` of the amount; when the spikes
        are the comparison, that is ``V_reset`` where the neuron fired (a select)
        with the same derivatives.
        """
        if self.spk_reset == "soft":
            return last_v - times(V_th - self.V_reset, last_spk)
        if _compares(self.spk_fun, self._spike_scale()):
            return _hard_reset(last_v, self.V_reset, last_spk, spiked())
        return last_v - (jax.lax.stop_gradient(last_v) - self.V_reset) * last_spk

    def _check_input_unit(self, x) -> None:
        """Refuse an input ``x`` for which ``R * x`` is not a voltage, saying what to pass.

        It runs on every eager step, so the common case compares dimensions only (a
        couple of microseconds; building units costs ~50 us); the units are built
        for the message.
        """
        have_dim = _dim(x)
        want_dim = _input_dim(_dim(self.V_rest), _dim(self.R))  # a current when R is in ohm
        if have_dim is want_dim or have_dim == want_dim:
            return
        want = u.get_unit(self.V_rest) / u.get_unit(self.R)
        have = u.get_unit(x)
        who = type(self).__name__ + (f" {self.name!r}" if getattr(self, "name", None) else "")
        given = "no unit" if have.is_unitless else f"unit {have}"
        if want.is_unitless:
            fix = "pass a unitless input, as this neuron's R and V_rest have no units."
        else:
            name = str(want)
            fix = f"pass a current, e.g. x * u.{name}" if name.isidentifier() else \
                f"pass a current, in {name}"
            if have.is_unitless:
                fix += " (or give R, V_th, V_reset and V_rest no units, for unitless inputs)"
            fix += "."
        raise u.UnitMismatchError(
            f"{who}: the input has {given}, but R * input must be a voltage like V_rest "
            f"({u.get_unit(self.V_rest)}) with R = {self.R}: {fix}")

    def _membrane_step(self, V, x, tau):
        """``V`` after one step of ``tau dV/dt = V_rest - V + R I``, then the delta inputs.

        ``I`` is ``x`` plus the current inputs. Without current inputs the
        step is the closed form (the input is constant over the step); with
        them, :func:`~brainx.nn.exp_euler_step`, which takes the same closed form
        for inputs affine in ``V`` (COBA, CUBA) and the general scheme otherwise.
        """
        if x is not None:
            self._check_input_unit(x)
        if not self.current_inputs:
            V_inf = self.V_rest if x is None else plus(self.V_rest, times(self.R, x))
            V = V_inf + (V - V_inf) * exp_decay(tau)
        else:
            x0 = 0.0 * (u.get_unit(self.V_th) / u.get_unit(self.R)) if x is None else x
            V = exp_euler_step(
                lambda v: (self.V_rest - v + self.R * self.sum_current_inputs(x0, v)) / tau, V)
        return self.sum_delta_inputs(V)


def _dim(value: Any) -> Any:
    """The physical dimension of ``value`` (dimensionless for a plain number or array)."""
    return value.dim if isinstance(value, u.Quantity) else u.DIMENSIONLESS


@functools.lru_cache(maxsize=64)
def _input_dim(v_dim: Any, r_dim: Any) -> Any:
    """The dimension of an input ``I`` with ``R * I`` a voltage: ``dim(V) / dim(R)``."""
    return v_dim / r_dim


class LIF(Neuron):
    r"""Leaky integrate-and-fire neuron.

    .. math::  \tau \frac{dV}{dt} = -(V - V_{rest}) + R\,I(t)

    A spike is emitted when ``V >= V_th``; on the next step ``V`` is reset
    (see ``spk_reset``). With ``tau_ref``, ``V`` is then clamped to ``V_reset``
    for ``tau_ref`` (rounded to whole steps): the input is ignored and the
    neuron cannot spike.

    ``R``, ``tau``, ``V_th``, ``V_reset``, ``V_rest`` and ``tau_ref`` are each a
    number (with its unit) or an array of the population's shape: one value per
    neuron. With ``R``, the potentials and ``V_initializer`` given without units
    (``tau`` keeps its time unit, as ``dt`` has one), inputs and ``V`` are unitless.

    Parameters
    ----------
    in_size : int or tuple of int
        Population shape, without the batch axis.
    R : resistance
        Membrane resistance (default ``1 ohm``): the input ``x`` is a current
        and ``R * x`` the voltage it adds to the resting potential.
    tau : time
        Membrane time constant (default ``5 ms``): how fast ``V`` relaxes.
    V_th : voltage
        Firing threshold (default ``1 mV``): a spike when ``V >= V_th``.
    V_reset : voltage
        Reset potential (default ``0 mV``): ``V`` after a hard reset; a soft
        reset lowers ``V`` by ``V_th - V_reset``.
    V_rest : voltage
        Resting potential (default ``0 mV``): where ``V`` settles without input.
    tau_ref : time, optional
        Refractory period, rounded to whole steps (default ``None``: none).
    V_initializer : initialiser or array-like
        Initial ``V`` (default ``0 mV``; see :func:`brainx.nn.init.param`).
    spk_fun : callable
        Surrogate spike function of :mod:`brainx.nn.surrogate` (default
        ``ReluGrad()``): a step on the forward pass, its surrogate in gradients.
    spk_reset : {"soft", "hard"}
        How ``V`` is reset after a spike (default ``"soft"``; see :class:`Neuron`).
    name : str, optional
        Shown in ``repr`` and in error messages.

    States
    ------
    V : HiddenState
        Membrane potential, shape ``(batch_size, *in_size)`` or ``in_size``.
    t_ref : ShortTermState (only with ``tau_ref``)
        Remaining refractory time.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> with brainx.environ.context(dt=1.0 * u.ms):
    ...     lif = brainx.nn.init_all_states(brainx.nn.LIF(2, tau=10 * u.ms))
    ...     spikes = [lif(2.0 * u.mA) for _ in range(8)]
    >>> [int(s[0]) for s in spikes]
    [0, 0, 0, 0, 0, 0, 1, 0]
    """

    def __init__(self, in_size, R=1.0 * u.ohm, tau=5.0 * u.ms, V_th=1.0 * u.mV,
                 V_reset=0.0 * u.mV, V_rest=0.0 * u.mV, tau_ref=None,
                 V_initializer=Constant(0.0 * u.mV), spk_fun: Callable = ReluGrad(),
                 spk_reset: str = "soft", name: Optional[str] = None):
        super().__init__(in_size, spk_fun=spk_fun, spk_reset=spk_reset, name=name)
        self._set_params(R=R, tau=tau, V_th=V_th, V_reset=V_reset, V_rest=V_rest,
                         tau_ref=tau_ref)
        self.V_initializer = V_initializer

    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self.V = HiddenState(param(self.V_initializer, self.varshape, batch_size, broadcast=True))
        if self.tau_ref is not None:
            self.t_ref = ShortTermState(self._no_refractory(batch_size))

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self._require("V")
        self.V.value = param(self.V_initializer, self.varshape, batch_size, broadcast=True)
        if self.tau_ref is not None:
            self._require("t_ref")
            self.t_ref.value = self._no_refractory(batch_size)

    def _no_refractory(self, batch_size):
        return param(Constant(0.0 * self.tau_ref), self.varshape, batch_size, broadcast=True)

    def get_spike(self, V=None):
        """The spikes of potential ``V`` (default: the current one)."""
        V = self.V.value if V is None else V
        return _spikes_once(self, (V,), (self.spk_fun, self.V_th, self.V_reset),
                            lambda: threshold_spike(self.spk_fun, V, self.V_th,
                                                    self._spike_scale()))

    def update(self, x=None):
        """One step with input current ``x`` (``None``: no input); returns the spikes."""
        self._require("V")
        last_v = self.V.value
        last_spk = self.get_spike(last_v)
        spiked = functools.cache(lambda: self._spiked(last_v, last_spk, self.V_th))
        V = self._reset(last_v, last_spk, spiked, self.V_th)
        V_new = self._membrane_step(V, x, self.tau)
        if self.tau_ref is not None:
            V_new = self._refractory(V_new, spiked)
        self.V.value = V_new
        return self.get_spike(V_new)

    def _refractory(self, V_new, spiked):
        dt = environ.get_dt()
        # plain_arrays: brainunit's where/maximum import torch to rule it out (issue 45)
        t_ref = plain.where(spiked(), self.tau_ref, self.t_ref.value)
        V_new = plain.where(t_ref > dt / 2, self.V_reset, V_new)
        self.t_ref.value = plain.maximum(t_ref - dt, 0.0 * dt)
        return V_new


class LIFRef(LIF):
    """:class:`LIF` with a refractory period by default (``tau_ref = 5 ms``), as in brainstate."""

    def __init__(self, in_size, R=1.0 * u.ohm, tau=5.0 * u.ms, tau_ref=5.0 * u.ms,
                 V_th=1.0 * u.mV, V_reset=0.0 * u.mV, V_rest=0.0 * u.mV,
                 V_initializer=Constant(0.0 * u.mV), spk_fun: Callable = ReluGrad(),
                 spk_reset: str = "soft", name: Optional[str] = None):
        super().__init__(in_size, R=R, tau=tau, V_th=V_th, V_reset=V_reset, V_rest=V_rest,
                         tau_ref=tau_ref, V_initializer=V_initializer, spk_fun=spk_fun,
                         spk_reset=spk_reset, name=name)


class ALIF(Neuron):
    r"""Adaptive LIF: each spike raises the threshold, which relaxes back with ``tau_a``.

    .. math::
        \tau \frac{dV}{dt} = -(V - V_{rest}) + R\,I(t), \qquad
        \tau_a \frac{da}{dt} = -a

    A spike is emitted when ``V >= V_th + beta * a``; on the next step ``V`` is
    reset and ``a`` grows by one.

    Parameters
    ----------
    tau_a : time
        Adaptation time constant.
    beta : voltage
        Threshold increase per unit of adaptation.
    a_initializer : initialiser or array-like
        Initial (dimensionless) adaptation.
    Others
        As :class:`LIF`.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> with brainx.environ.context(dt=1.0 * u.ms):
    ...     alif = brainx.nn.init_all_states(brainx.nn.ALIF(1, tau=10 * u.ms, beta=0.5 * u.mV))
    ...     spikes = [int(alif(3.0 * u.mA)[0]) for _ in range(30)]
    >>> spikes.index(1), sum(spikes) < 10
    (4, True)
    """

    def __init__(self, in_size, R=1.0 * u.ohm, tau=5.0 * u.ms, tau_a=100.0 * u.ms,
                 V_th=1.0 * u.mV, V_reset=0.0 * u.mV, V_rest=0.0 * u.mV, beta=0.1 * u.mV,
                 spk_fun: Callable = ReluGrad(), spk_reset: str = "soft",
                 V_initializer=Constant(0.0 * u.mV), a_initializer=Constant(0.0),
                 name: Optional[str] = None):
        super().__init__(in_size, spk_fun=spk_fun, spk_reset=spk_reset, name=name)
        self._set_params(R=R, tau=tau, tau_a=tau_a, V_th=V_th, V_reset=V_reset, V_rest=V_rest,
                         beta=beta)
        self.V_initializer = V_initializer
        self.a_initializer = a_initializer

    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self.V = HiddenState(param(self.V_initializer, self.varshape, batch_size, broadcast=True))
        self.a = HiddenState(param(self.a_initializer, self.varshape, batch_size, broadcast=True))

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self._require("V", "a")
        self.V.value = param(self.V_initializer, self.varshape, batch_size, broadcast=True)
        self.a.value = param(self.a_initializer, self.varshape, batch_size, broadcast=True)

    def get_spike(self, V=None, a=None):
        """The spikes of potential ``V`` with adaptation ``a`` (default: the current ones)."""
        V = self.V.value if V is None else V
        a = self.a.value if a is None else a
        return _spikes_once(self, (V, a), (self.spk_fun, self.V_th, self.V_reset, self.beta),
                            lambda: threshold_spike(self.spk_fun, V, self.V_th + self.beta * a,
                                                    self._spike_scale()))

    def update(self, x=None):
        """One step with input current ``x`` (``None``: no input); returns the spikes."""
        self._require("V", "a")
        last_v, last_a = self.V.value, self.a.value
        last_spk = self.get_spike(last_v, last_a)
        spiked = functools.cache(
            lambda: self._spiked(last_v, last_spk, self.V_th + self.beta * last_a))
        V = self._reset(last_v, last_spk, spiked, self.V_th)
        a = last_a + last_spk
        V = self._membrane_step(V, x, self.tau)
        a = a * exp_decay(self.tau_a)
        self.V.value = V
        self.a.value = a
        return self.get_spike(V, a)

