"""`DelayedEventConn`: an event-driven projection in which every synapse has its own delay.

A per-projection :class:`~brainx.nn.Delay` delays a whole spike vector by one
time; biological (and NEST's) synapses each have their own. This projection
keeps, for its postsynaptic neurons, a ring buffer of ``max_delay + 1`` slots
(NEST's scheme, :mod:`brainx.nn.connectivity.native.delivery`): a spike of step
``k`` over a synapse of delay ``d`` adds the synapse's weight into the slot of
step ``k + d``. One step of a network is then::

    I = proj.current()        # what arrives in this step (its weights' unit, e.g. pA)
    spikes = neurons(I)       # the neurons use it and fire
    proj.update(spikes)       # deliver this step's spikes at their delays

Its states: ``weight`` (a :class:`~brainx.ParamState`, one per synapse or one
shared), the layout ``indptr``, ``targets``, ``delays`` (``LongTermState`` s: the
compiled step reads them as arguments, not as constants compiled in), and the
hidden ``buffer`` ``(..., slots, n_post)``, ``arriving`` ``(..., n_post)`` (the
current step's slot, read by the kernel in the same call that updates the buffer,
which XLA then does in place) and ``step`` (an int32 counter). They go through ``jit``, ``for_loop``, ``vmap`` (batched buffers) and
``grad`` (the derivative with respect to the weights and float spikes is that of
the delayed product, so BPTT works).

Examples
--------
>>> import jax.numpy as jnp, brainunit as u, brainx
>>> from brainx.nn import DelayedCSR, DelayedEventConn
>>> conn = DelayedCSR([0, 2, 3], targets=[0, 1, 1], delays=[1, 3, 2], weights=[1., 2., 4.],
...                   n_post=2, unit=u.pA)
>>> proj = DelayedEventConn(conn)
>>> proj.init_state()
>>> arrived = []
>>> for k in range(4):
...     arrived.append(proj.current().to_decimal(u.pA).tolist())
...     _ = proj.update(jnp.array([k == 0, k == 0]))
>>> arrived        # step 1: synapse 0; step 2: synapse 2; step 3: synapse 1
[[0.0, 0.0], [1.0, 0.0], [0.0, 4.0], [0.0, 2.0]]
"""

from __future__ import annotations

from typing import Any, Optional

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx.nn.connectivity.delayed_csr import DelayedCSR
from brainx.nn.connectivity.native.delivery import DelayedRows, deliver
from brainx.nn.modules.module import Module
from brainx.state.state import HiddenState, LongTermState, ParamState
from brainx.transform.remat.ring_writes import accumulating

__all__ = ["DelayedEventConn"]


class DelayedEventConn(Module):
    """Spikes delivered over synapses with per-synapse delays, into a postsynaptic ring buffer.

    Parameters
    ----------
    conn : DelayedCSR
        The synapses (targets, delays in steps, weights and their unit).
    release : bool
        Drop ``conn``'s arrays as each is copied to the device (``conn`` is unusable
        after): a large network then never holds two copies of its synapses.
    event : bool
        Spikes are events (``True``: bool, or floats whose ``> 0`` entries fire, each
        adding its weights once) or scale the weights (``False``: ``x @ W``, delayed).
    input_unit : brainunit.Unit, optional
        With ``event=False``: the unit of the input (the buffer holds the weights' unit
        times it). Default: unitless.
    native : bool, optional
        Use the native kernel (``True``), the plain-JAX scatter-add (``False``), or
        choose: native on CPU where it builds (default).
    param_type : type
        The State class of the weights.
    name : str, optional
        A label.

    Examples
    --------
    See the module's docstring.
    """

    def __init__(self, conn: DelayedCSR, release: bool = False, event: bool = True,
                 input_unit: Optional[u.Unit] = None, native: Optional[bool] = None,
                 param_type: type = ParamState, name: Optional[str] = None):
        super().__init__(name=name)
        if not isinstance(conn, DelayedCSR):
            raise TypeError(f"DelayedEventConn: conn must be a DelayedCSR, got "
                            f"{type(conn).__name__}; build one with DelayedCSR.from_coo / "
                            "from_fixed or fixed_total_number_blocks.")
        self.in_size, self.out_size = (conn.n_pre,), (conn.n_post,)
        self.n_pre, self.n_post, self.nnz = conn.n_pre, conn.n_post, conn.nnz
        self.unit = conn.unit
        self.event, self.native = event, native
        if event and input_unit is not None:
            raise ValueError("DelayedEventConn: input_unit is for event=False (events have no "
                             "unit: each adds its synapses' weights).")
        self.input_unit = u.UNITLESS if input_unit is None else input_unit
        self.current_unit = self.unit if event else self.unit * self.input_unit
        rows = _device_rows(conn, release)
        # the layout as states: a compiled step takes them as arguments (closed over, XLA would
        # copy 1.5 GiB of constants into the program of a 300 M-synapse projection)
        self.indptr = LongTermState(rows.indptr, name="indptr")
        self.targets = LongTermState(rows.post, name="targets")
        self.delays = LongTermState(rows.delay, name="delays")
        self.rows = rows
        weights = _device_copy(conn.weights, np.float32)
        if release:
            conn.weights = None
        self.weight = param_type(u.maybe_decimal(u.Quantity(weights, unit=self.unit)))

    @property
    def slots(self) -> int:
        """The ring buffer's length, ``max_delay + 1``."""
        return self.rows.slots

    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        lead = () if batch_size is None else (int(batch_size),)
        def zeros(*shape):
            return u.maybe_decimal(u.Quantity(jnp.zeros(lead + shape, jnp.float32),
                                              unit=self.current_unit))
        self.buffer = HiddenState(zeros(self.slots, self.n_post))
        self.arriving = HiddenState(zeros(self.n_post))
        self.step = HiddenState(jnp.zeros((), jnp.int32))

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        self.init_state(batch_size)

    def current(self):
        """What arrives in this step, ``(..., n_post)``, in the weights' unit."""
        self._require_state()
        return self.arriving.value

    def update(self, spikes: Any):
        """Deliver this step's ``spikes`` (``(..., n_pre)``) at their delays; advance one step.

        Returns the next step's arrivals (what :meth:`current` reads next).
        """
        self._require_state()
        x = self._input(spikes)
        buffer = u.get_mantissa(self.buffer.value)
        # declared accumulating: a checkpointed loop keeps the consumed slot and the spikes
        # per step, not the buffer (brainx.transform.remat.ring_writes)
        buffer, arriving = accumulating(
            self._deliver, buffer, self.step.value % self.slots, x,
            u.get_mantissa(self.weight.value), self.step.value, self.indptr.value,
            self.targets.value, self.delays.value, axis=buffer.ndim - 2)
        unit = self.current_unit
        self.buffer.value = u.maybe_decimal(u.Quantity(buffer, unit=unit))
        self.arriving.value = u.maybe_decimal(u.Quantity(arriving, unit=unit))
        self.step.value = self.step.value + 1
        return self.arriving.value

    def _deliver(self, buffer, slot, x, weight, step, indptr, targets, delays):
        """:func:`deliver` over the layout arrays given (``slot`` is ``step mod slots``)."""
        rows = self.rows.with_arrays(indptr, targets, delays)
        return deliver(buffer, x, weight, rows, step, event=self.event, native=self.native)

    def _input(self, x):
        if self.event or not isinstance(x, u.Quantity):
            if not self.event and not self.input_unit.is_unitless:
                raise u.UnitMismatchError(f"DelayedEventConn: the input must be in units of "
                                          f"{self.input_unit} (input_unit), got a plain array.")
            return u.get_mantissa(x)
        try:
            return x.to_decimal(self.input_unit)
        except Exception as err:
            raise u.UnitMismatchError(f"DelayedEventConn: the input must be in units of "
                                      f"{self.input_unit} (input_unit), got {x.unit}.") from err

    def _require_state(self) -> None:
        if not hasattr(self, "buffer"):
            raise AttributeError(f"DelayedEventConn {self.name or ''}: no ring buffer yet; call "
                                 "init_state() (or brainx.nn.init_all_states(model)) first.")


def _device_rows(conn: DelayedCSR, release: bool) -> DelayedRows:
    """``conn``'s layout copied to the device, one array at a time (each host array dropped
    after its copy when ``release``). ``conn`` checked its arrays when it was made."""
    max_delay = conn.max_delay
    copies = []
    for name, dtype in (("indptr", np.int32), ("targets", np.int32), ("delays", None)):
        copies.append(_device_copy(getattr(conn, name), dtype))
        if release:
            setattr(conn, name, None)
    return DelayedRows(conn.n_pre, conn.n_post, *copies, max_delay=max_delay)


def _device_copy(host, dtype) -> jax.Array:
    """A device copy of a host array, finished before the host array may be dropped.

    ``jax.device_put`` copies once (``jnp.array(copy=True)`` held two copies at its peak), but
    in the background: without the wait, a released host array stayed alive, and the copies
    were all made at the first step (the full microcircuit peaked 2.1 GiB higher)."""
    return jax.block_until_ready(jax.device_put(np.asarray(host, dtype)))
