"""Delays: a ring buffer of past values held in states, read back some steps (or some time) ago.

A :class:`Delay` keeps the last ``max_length`` values written by
:meth:`~Delay.update` in a :class:`~brainx.DelayState` (``history``, shape
``(max_length, [batch,] *shape)``) and a write pointer (``write_ptr``, a
:class:`~brainx.ShortTermState`). Both are ordinary brainx states, so a delay
threads through ``jit``, ``for_loop``, ``grad`` and ``vmap`` like any other:
writing is one ``.at[ptr].set``, reading is one gather, and gradients flow
from a delayed read back to the value that was written. That one-row write is
what lets a checkpointed step keep the overwritten row instead of the whole
history (:mod:`brainx.transform.remat.ring_buffers` finds it; nothing to declare).

Step 0 is the value written by the latest :meth:`~Delay.update`, step ``d``
the one written ``d`` updates before; before anything was written a read
returns the ``init`` value. A network that reads the delay before its
neurons step (the usual order) therefore sees the spikes of ``d + 1`` steps
ago at step ``d``: ``d = 0`` is the ordinary one-step lag.

Delays are registered before :meth:`~Delay.init_state`, which sizes the
buffer for the longest. The kinds, and what each keeps and costs:

=====================================  ==============================  ==================================
kind (how to ask)                      keeps                           each read costs
=====================================  ==============================  ==================================
whole steps: ``register_entry(k, t)``  ``ceil(t_max / dt) + 1`` rows   one gather of a row
fractional, ``interpolation="linear"`` the same (one more row at most) two gathers, one weighted sum
per element / connection: an array    the same rows (for the longest)  one gather of the array's shape
``t`` and its indices
``retrieve_at_time(t_abs)``            the same rows                   two gathers (linear) or one
=====================================  ==============================  ==================================

A time ``t`` becomes ``t / dt`` steps (``dt`` from :mod:`brainx.environ`),
rounded up to a whole step unless the delay interpolates; a ratio whole up to
float round-off (within ``1e-6 * max(1, n)`` of a whole number ``n``) counts as
whole: ``1.5 ms / 0.1 ms`` is 15 steps, as is a float32 time's ``15.000001``
(:func:`~brainx.nn.dynamics.delay_steps.delay_steps`, brainstate 0.6's rule).

``Delay(..., update_every=T)`` records one value per period ``T`` instead of
one per step, so a long delay needs ``T / dt`` times fewer rows. ``T`` is
rounded to ``k = round(T / dt)`` steps (a warning says so when it is not a
whole number of steps); :meth:`~Delay.update` still runs every step, counts
the steps in ``write_ptr`` (modulo ``max_length * k``) and writes the value of
the first step of each period (brainstate's "hold" rule). Rows are then ``T``
apart: delay times are divided by ``T``, not ``dt``, and step ``d`` of
:meth:`~Delay.retrieve_at_step` is ``d`` periods before the latest written one.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx import environ
from brainx.nn.dynamics.delay_steps import _period_steps, _steps, snap_traced
from brainx.nn.dynamics.interpolation import InterpolationRegistry
from brainx.nn.modules.collective import call_order
from brainx.nn.modules.module import Module
from brainx.state.state import DelayState, ShortTermState, State
from brainx.transform import jit_error_if

__all__ = ["Delay", "DelayAccess", "StateWithDelay"]

_INTERPOLATIONS = {None: None, "nearest": "nearest", "round": "nearest", "linear": "linear",
                   "linear_interp": "linear"}   # the reads built into Delay; others: the registry
class _Entry(NamedTuple):
    """A registered read: rows ``lo`` and ``lo + 1`` mixed by ``weight`` (``None``: row ``lo``)."""
    lo: Any
    weight: Any
    indices: Tuple


class Delay(Module):
    """The history of a value (a pytree of arrays or Quantities), read back by delay.

    Parameters
    ----------
    target_info : pytree
        The value's structure, shapes and dtypes (arrays, Quantities or
        ``jax.ShapeDtypeStruct``, without batch). Quantities fix the unit the
        buffer keeps; written values are converted to it.
    time : time, optional
        A delay to make room for (the buffer grows with each registered entry).
    init : number, array, Quantity or initialiser, optional
        The value before anything was written (default: zeros). An initialiser
        is called with the buffer's shape (and ``dtype=`` when it takes one, as
        brainstate's ``init(shape, dtype)``); anything else is a ``TypeError``.
    entries : dict, optional
        ``{name: time}`` or ``{name: (time, *indices)}`` to register now.
    interpolation : None, str or callable
        How a delay that is not a whole number of steps is read: ``None``
        rounds it up (brainstate's rule), ``"nearest"`` to the nearest step,
        ``"linear"`` interpolates between the two steps around it.
        :meth:`retrieve_at_time` interpolates linearly unless ``"nearest"``,
        or with another method: a name in
        :class:`~brainx.nn.InterpolationRegistry` (``"cubic"``, ``"hermite"``,
        ``"polynomial2"``, ``"polynomial3"``, or one registered there) or a
        function ``fn(history, indices, float_idx, max_length)`` (see
        :mod:`brainx.nn.dynamics.interpolation`); registered entries then round
        up, as with ``None``.
    take_aware_unit : bool
        Learn the unit from the first written value when ``target_info`` has none.
    update_every : time, optional
        Record one value per period ``update_every`` (at least ``dt``; rounded
        to a whole number of steps, ``update_every_step``) instead of one per
        step: rows are then ``update_every`` apart, and delay times are counted
        in periods (see the module's notes). ``None``: every step.
    delay_method : {"rotation", "concat", None}
        brainstate's older argument, accepted for its tutorials: both kinds
        are the same ring buffer (brainstate 0.5.4 also always rotates).
    interp_method : str
        brainstate's older argument (``"linear_interp"``, ``"round"``, or any
        name ``interpolation`` takes): how :meth:`retrieve_at_time` reads
        between steps when ``interpolation`` is ``None`` (registered entries
        still round up, as in brainstate).

    Examples
    --------
    >>> import jax.numpy as jnp, brainunit as u, brainx
    >>> with brainx.environ.context(dt=1.0 * u.ms):
    ...     d = brainx.nn.Delay(jnp.zeros(2), entries={"now": 0 * u.ms, "two": 2 * u.ms})
    ...     d = brainx.nn.init_all_states(d)
    ...     for i in range(4):
    ...         d.update(jnp.full(2, float(i)))
    ...     d.at("now").tolist(), d.at("two").tolist(), d.max_length
    ([3.0, 3.0], [1.0, 1.0], 3)
    """

    def __init__(self, target_info: Any, time: Any = None, init: Any = None,
                 entries: Optional[Dict[str, Any]] = None, interpolation: Optional[str] = None,
                 take_aware_unit: bool = False, update_every: Any = None,
                 delay_method: Optional[str] = "rotation", interp_method: str = "linear_interp",
                 name: Optional[str] = None):
        super().__init__(name=name)
        #: the period between recorded values (``None``: every step), and it in steps
        self.update_every = update_every
        self.update_every_step = 1 if update_every is None else _period_steps(update_every)
        if delay_method not in (None, "rotation", "concat"):
            raise ValueError(f"Delay: delay_method must be 'rotation' or 'concat' (both are the same "
                             f"ring buffer), got {delay_method!r}.")
        if delay_method == "concat":
            warnings.warn("Delay: delay_method='concat' is deprecated and does nothing: every delay "
                          "is one ring buffer (as in brainstate 0.6). Leave the argument out.",
                          DeprecationWarning, stacklevel=2)
        self.delay_method = "rotation"
        self.interpolation = _method(interpolation, "interpolation")
        # how retrieve_at_time reads between steps: the interpolation, else brainstate's interp_method
        self.interp_method = self.interpolation or _method(interp_method, "interp_method") or "linear"
        self._registered_entries: Dict[str, Optional[Tuple]] = {}   # brainstate's view: name -> steps
        self.take_aware_unit = take_aware_unit
        self._init = _checked_init(init)
        self._entries: Dict[str, _Entry] = {}
        self._buffer_length: Optional[int] = None      # rows of the built buffer
        self.max_length = 1
        self.max_time = None
        self._batched = False
        self._set_target(target_info)
        if time is not None:
            self.register_delay(time)
        for entry, spec in (entries or {}).items():
            spec = spec if isinstance(spec, (tuple, list)) else (spec,)
            self.register_entry(entry, *spec)

    def _set_target(self, target_info: Any) -> None:
        if target_info is None:
            self._treedef, self._specs, self._units = None, [], []
            return
        leaves, self._treedef = jax.tree.flatten(target_info, is_leaf=u.math.is_quantity)
        self._specs = [jax.ShapeDtypeStruct(np.shape(u.get_mantissa(x)) if not hasattr(x, "shape")
                                            else tuple(x.shape), _float_or(x)) for x in leaves]
        self._units = [u.get_unit(x) if u.math.is_quantity(x) else None for x in leaves]

    # -- registering reads -------------------------------------------------------------
    def register_delay(self, *time_and_idx) -> Optional[Tuple]:
        """Make room for a delay; returns ``(delay_step, *indices)`` for :meth:`retrieve_at_step`.

        ``time_and_idx[0]`` is a time (scalar or array: one per element or
        connection), the rest are integer index arrays that select, for each
        delay, the element it applies to (see :meth:`retrieve_at_step`).
        """
        if not time_and_idx:
            raise TypeError(f"{self!r}.register_delay: give a delay time (and optional indices).")
        time, indices = time_and_idx[0], tuple(time_and_idx[1:])
        for index in indices:
            if not jnp.issubdtype(u.math.get_dtype(index), jnp.integer):
                raise TypeError(f"{self!r}: delay indices must be integer arrays, got {index!r}.")
        if time is None:
            return None
        steps = _steps(self, time)
        whole = np.ceil(steps).astype(np.int32)
        longest = int(whole.max(initial=0))
        if self._buffer_length is not None and longest + 1 > self._buffer_length:
            raise RuntimeError(
                f"{self!r}: a delay of {time!r} needs {longest + 1} rows, but the buffer was built "
                f"with {self._buffer_length}. Register every delay before init_state(), or call "
                "init_state() (brainx.nn.init_all_states) again after registering it.")
        if self.max_time is None or longest + 1 > self.max_length:
            self.max_time = time if np.ndim(u.get_mantissa(time)) == 0 else u.math.max(time)
        self.max_length = max(self.max_length, longest + 1)
        return (jnp.asarray(whole) if np.ndim(whole) else int(whole), *indices)

    def register_entry(self, entry: str, *time_and_idx) -> Optional[Tuple]:
        """Register a named read ``entry`` of delay ``time_and_idx[0]`` (with indices); see :meth:`at`."""
        if not isinstance(entry, str):
            raise TypeError(f"{self!r}: an entry name must be a string, got {entry!r}.")
        if entry in self._entries:
            raise KeyError(f"{self!r} already has an entry {entry!r}; use another name.")
        info = self.register_delay(*time_and_idx)
        self._registered_entries[entry] = info
        if info is None:
            self._entries[entry] = _Entry(0, None, tuple(time_and_idx[1:]))
            return info
        steps = _steps(self, time_and_idx[0])
        if self.interpolation == "linear" and np.any(steps != np.floor(steps)):
            lo = np.floor(steps).astype(np.int32)
            self._entries[entry] = _Entry(_as_index(lo), jnp.asarray(steps - lo, jnp.float32),
                                          info[1:])
        else:
            rows = np.round(steps) if self.interpolation == "nearest" else np.ceil(steps)
            self._entries[entry] = _Entry(_as_index(rows.astype(np.int32)), None, info[1:])
        return info

    def access(self, entry: str, *time_and_idx) -> "DelayAccess":
        """Register ``entry`` and return a :class:`DelayAccess` that reads it when called."""
        return DelayAccess(self, *time_and_idx, entry=entry)

    # -- states -------------------------------------------------------------------------
    def _initial(self, spec, unit, batch_size) -> jax.Array:
        shape = (self.max_length,) + (() if batch_size is None else (int(batch_size),)) + spec.shape
        init = self._init
        if init is None:
            return jnp.zeros(shape, spec.dtype)
        if callable(init) and not isinstance(init, (u.Quantity, jax.Array, np.ndarray)):
            init = init(shape, dtype=spec.dtype) if _takes_dtype(init) else init(shape)
        # a plain init is read in the delay's unit, as brainstate (which keeps mantissas) does:
        # client libraries fill a history in mV with plain zeros
        value = _to_unit(self, init, unit, "its init") if u.math.is_quantity(init) else init
        try:
            return jnp.broadcast_to(jnp.asarray(value, spec.dtype), shape)
        except ValueError as e:
            raise ValueError(f"{self!r}: init of shape {np.shape(value)} does not broadcast to the "
                             f"buffer shape {shape} (rows, [batch,] value).") from e

    @call_order(3)
    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        """Build the buffer (``max_length`` rows of ``init``) and the write pointer."""
        if self._treedef is None:
            raise RuntimeError(f"{self!r} does not know the shape of its values: give target_info.")
        self._batched = batch_size is not None
        self._buffer_length = self.max_length
        self.write_ptr = ShortTermState(jnp.asarray(0, jnp.int32), name="write_ptr")
        self.history = DelayState(self._initial_tree(batch_size), name="history")

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        """Put ``init`` back into every row and the write pointer at 0."""
        self._require()
        self._batched = batch_size is not None
        self.write_ptr.value = jnp.asarray(0, jnp.int32)
        self.history.value = self._initial_tree(batch_size)

    def _initial_tree(self, batch_size):
        rows = [self._initial(s, unit, batch_size) for s, unit in zip(self._specs, self._units)]
        return self._treedef.unflatten(rows)

    def _require(self) -> None:
        if not isinstance(getattr(self, "history", None), State):
            raise RuntimeError(f"{self!r} has no buffer yet: call init_state() on it (or "
                               "brainx.nn.init_all_states(model)) before update() or reads.")

    # -- writing ------------------------------------------------------------------------
    def update(self, current: Any) -> None:
        """Write ``current`` as the newest value (step 0) and advance the pointer.

        With ``update_every``, only the first step of each period writes; the
        others advance the pointer (brainstate's "hold" rule).
        """
        self._require()
        leaves, treedef = jax.tree.flatten(current, is_leaf=u.math.is_quantity)
        if treedef != self._treedef:
            raise ValueError(f"{self!r}: the written value has structure {treedef}, the delay "
                             f"was built for {self._treedef}.")
        if self.take_aware_unit:
            self._units = [unit if unit is not None or not u.math.is_quantity(x) else u.get_unit(x)
                           for unit, x in zip(self._units, leaves)]
        ptr, period = self.write_ptr.value, self.update_every_step
        slot = ptr if period == 1 else jax.lax.stop_gradient(ptr // period)
        rows = jax.tree.leaves(self.history.value)
        new = []
        for row, x, unit in zip(rows, leaves, self._units):
            value = jnp.asarray(_to_unit(self, x, unit, "the written value"), row.dtype)
            if value.shape != row.shape[1:]:
                raise ValueError(f"{self!r}: the written value has shape {value.shape}, the buffer "
                                 f"holds rows of shape {row.shape[1:]}.")
            if period > 1:   # hold: keep the row between the period's first step and the next
                value = jnp.where(ptr % period == 0, value, row[slot])
            new.append(row.at[slot].set(value))
        self.history.value = self._treedef.unflatten(new)
        self.write_ptr.value = (ptr + 1) % (self._buffer_length * period)

    # -- reading -------------------------------------------------------------------------
    def at(self, entry: str) -> Any:
        """The value of the registered ``entry``."""
        if entry not in self._entries:
            raise KeyError(f"{self!r} has no entry {entry!r}; registered: {list(self._entries)}. "
                           "Add it with register_entry(entry, time).")
        lo, weight, indices = self._entries[entry]
        if weight is None:
            return self.retrieve_at_step(lo, *indices)
        before = self.retrieve_at_step(lo, *indices)
        after = self.retrieve_at_step(lo + 1, *indices)
        return jax.tree.map(lambda a, b: a * (1 - weight) + b * weight, before, after)

    def retrieve_at_step(self, delay_step: Any, *indices) -> Any:
        """The value written ``delay_step`` updates before the latest (0: the latest).

        With ``update_every``, ``delay_step`` counts periods, not steps.

        ``delay_step`` may be an integer array (one delay per element): with
        ``indices`` (integer arrays that broadcast with it) the result is
        ``history[row(delay_step), *indices]``, e.g. ``(steps_ij, arange(n_pre)[:, None])``
        gives each connection ``i -> j`` the presynaptic value ``steps_ij`` ago.
        """
        self._require()
        self._check_steps(delay_step)
        latest = (self.write_ptr.value - 1) // self.update_every_step
        row = jax.lax.stop_gradient((latest - jnp.asarray(delay_step))
                                    % self._buffer_length).astype(jnp.int32)
        index = (row,) + tuple(indices)

        def take(h):
            if self._batched and (indices or jnp.ndim(row)):
                return jax.vmap(lambda hb: hb[index], in_axes=1)(h)
            return h[index]

        values = [take(h) for h in jax.tree.leaves(self.history.value)]
        return self._treedef.unflatten([v if unit is None else u.maybe_decimal(u.Quantity(v, unit=unit))
                                        for v, unit in zip(values, self._units)])

    def retrieve_at_time(self, delay_time: Any, *indices) -> Any:
        """The value at (absolute) time ``delay_time``; the latest value is at ``environ.get("t")``.

        Between two steps it interpolates linearly, or takes the nearest step
        when ``interpolation`` (or, without it, ``interp_method``) is ``"nearest"``
        / ``"round"``, or reads with the method named or given there (``"cubic"``, a
        function; see :mod:`brainx.nn.dynamics.interpolation`).
        """
        now = environ.get(environ.T, desc="the current time, which retrieve_at_time reads back from")
        spacing = environ.get_dt() if self.update_every is None else self.update_every
        steps = (now - delay_time) / spacing
        steps = steps.to_decimal(u.UNITLESS) if isinstance(steps, u.Quantity) else jnp.asarray(steps)
        steps = snap_traced(steps)      # a time a step's round-off after now is now
        try:
            future = bool(np.any(np.asarray(steps) < 0))
        except jax.errors.TracerArrayConversionError:
            future = False              # traced: the steps' check below, under jit_error_check
        if future:
            raise ValueError(f"{self!r}: retrieve_at_time({delay_time!r}) asks for a time after the "
                             f"current time t = {now!r}; a delay reads the past only.")
        if self.interp_method == "nearest":
            self._check_steps(jnp.floor(steps).astype(jnp.int32))
            return self.retrieve_at_step(jnp.round(steps).astype(jnp.int32), *indices)
        if self.interp_method != "linear":
            return self._interpolate(self.interp_method, steps, indices)
        lo, hi = jnp.floor(steps), jnp.ceil(steps)
        weight = steps - lo
        before = self.retrieve_at_step(lo.astype(jnp.int32), *indices)
        after = self.retrieve_at_step(hi.astype(jnp.int32), *indices)
        return jax.tree.map(lambda a, b: a * (1 - weight) + b * weight, before, after)

    def _interpolate(self, method: Any, steps: Any, indices: Tuple) -> Any:
        """Read ``steps`` (fractional) back with a registry method or a function of its protocol."""
        self._require()
        fn = InterpolationRegistry.get(method) if isinstance(method, str) else method
        self._check_steps(jnp.floor(steps).astype(jnp.int32))
        self._check_steps(jnp.ceil(steps).astype(jnp.int32))
        latest = (self.write_ptr.value - 1) // self.update_every_step
        float_row = latest - steps
        history, length = self.history.value, self._buffer_length
        if self._batched and (indices or jnp.ndim(float_row)):
            values = jax.vmap(lambda h: fn(h, tuple(indices), float_row, length),
                              in_axes=1)(history)
        else:
            values = fn(history, tuple(indices), float_row, length)
        leaves = self._treedef.flatten_up_to(values)
        return self._treedef.unflatten([v if unit is None else u.maybe_decimal(u.Quantity(v, unit=unit))
                                        for v, unit in zip(leaves, self._units)])

    def _check_steps(self, delay_step) -> None:
        try:
            steps = np.asarray(delay_step)
        except jax.errors.TracerArrayConversionError:
            if environ.get(environ.JIT_ERROR_CHECK, False):
                jit_error_if(jnp.any((delay_step < 0) | (delay_step >= self._buffer_length)),
                             f"{self!r}: a delay step is outside [0, {self._buffer_length - 1}].")
            return
        if np.any(steps < 0) or np.any(steps >= self._buffer_length):
            raise ValueError(f"{self!r}: delay step(s) {steps} outside [0, {self._buffer_length - 1}]"
                             "; register the longest delay before init_state().")

    def __repr__(self) -> str:
        label = f"name={self.name!r}, " if self.name else ""
        return f"{type(self).__name__}({label}max_length={self.max_length})"


def _method(value: Any, arg: str) -> Any:
    """``None``, ``"nearest"`` or ``"linear"`` (the reads built in), or a registered method's
    name or a function; ``ValueError`` for an unknown name, ``TypeError`` for anything else."""
    if isinstance(value, str) or value is None:
        if value in _INTERPOLATIONS:
            return _INTERPOLATIONS[value]
        try:
            InterpolationRegistry.get(value)
        except ValueError as e:
            raise ValueError(f"Delay: {arg}={value!r} is not a known interpolation method. "
                             f"{e}") from None
        return value
    if callable(value):
        return value
    raise TypeError(f"Delay: {arg} must be None, a method name or a function "
                    f"fn(history, indices, float_idx, max_length), got {value!r}.")


def _checked_init(init: Any) -> Any:
    """``init`` if it can fill a buffer (None, a number, an array or Quantity, an initialiser)."""
    if init is None or callable(init) or isinstance(init, (u.Quantity, jax.Array, np.ndarray)):
        return init
    try:
        numeric = np.asarray(init).dtype.kind in "biuf"
    except (TypeError, ValueError):
        numeric = False
    if not numeric:
        raise TypeError(f"Delay: init must be None, a number, an array, a Quantity or an "
                        f"initialiser (a function of the shape), got {init!r}.")
    return init


def _takes_dtype(init: Callable) -> bool:
    """Whether the initialiser ``init`` takes a ``dtype`` keyword (brainstate's ``init(shape, dtype)``)."""
    try:
        params = inspect.signature(init).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "dtype" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _as_index(rows: np.ndarray):
    return int(rows) if np.ndim(rows) == 0 else jnp.asarray(rows)


def _float_or(x) -> Any:
    dtype = getattr(x, "dtype", None)
    return jnp.asarray(u.get_mantissa(x)).dtype if dtype is None else dtype


def _to_unit(delay: Delay, value: Any, unit, what: str):
    """``value``'s mantissa in ``unit`` (a plain value when ``unit`` is ``None``)."""
    if unit is None:
        if u.math.is_quantity(value) and not u.get_dim(value).is_dimensionless:
            raise u.UnitMismatchError(
                f"{delay!r} holds plain numbers, but {what} is {value!r}; give target_info as a "
                "Quantity, or pass take_aware_unit=True to learn the unit from the first write.")
        return u.get_mantissa(value) if u.math.is_quantity(value) else value
    if not u.have_same_dim(value, unit):
        raise u.UnitMismatchError(f"{delay!r} holds values in {unit}, but {what} is {value!r}.")
    return u.Quantity(value).to_decimal(unit) if u.math.is_quantity(value) else value


class DelayAccess:
    """A registered read of a :class:`Delay`: calling it returns ``delay.at(entry)``.

    Parameters
    ----------
    delay : Delay
    *time
        The delay time (and indices), registered under ``entry``.
    entry : str
        The entry's name.
    """

    def __init__(self, delay: Delay, *time, entry: str):
        if not isinstance(delay, Delay):
            raise TypeError(f"DelayAccess needs a Delay, got {delay!r}.")
        self.delay = delay
        self._delay_entry = entry
        self.delay_info = delay.register_entry(entry, *time)

    def __call__(self, *args, **kwargs):
        return self.delay.at(self._delay_entry)


class StateWithDelay(Delay):
    """The history of the state ``target.<item>``, written after each step of ``target``.

    Usually made for you by ``module.prefetch_delay("V", time)`` (which adds it
    to ``module``'s after-update hooks); its buffer takes the shape, dtype and
    unit of the state when :meth:`init_state` runs (after the state's own).

    Parameters
    ----------
    target : Module
        The module holding the state.
    item : str
        The attribute name of the state.
    init, interpolation, **kwargs
        As :class:`Delay`.
    """

    def __init__(self, target: Module, item: str, init: Any = None,
                 interpolation: Optional[str] = None, **kwargs):
        super().__init__(None, init=init, interpolation=interpolation, **kwargs)
        # target is usually this delay's parent (the delay is one of its hooks): the module tree
        # has already visited it, and graph.clone maps it to the clone's own target.
        self._target = target
        self._target_term = item

    @property
    def state(self) -> State:
        """The tracked state."""
        found = getattr(self._target, self._target_term, None)
        if not isinstance(found, State):
            raise TypeError(f"{self!r}: {self._target!r}.{self._target_term} is {found!r}, not a "
                            "State; create it in the module's init_state() first.")
        return found

    @call_order(3)
    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        """Take the state's structure (its batch axis included) and build the buffer.

        A state without the batch axis (made in ``__init__``, not batched by
        ``init_all_states(model, batch_size)``) keeps its shape: the buffer is not batched.
        """
        value = self.state.value
        batch_size = self._state_batch(value, batch_size)
        if batch_size is not None:
            value = jax.tree.map(lambda x: x[0], value, is_leaf=u.math.is_quantity)
        self._set_target(value)
        super().init_state(batch_size, **kwargs)

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        """Put ``init`` back into every row (batched as the state is) and the pointer at 0."""
        self._require()
        super().reset_state(self._state_batch(self.state.value, batch_size), **kwargs)

    @staticmethod
    def _state_batch(value, batch_size: Optional[int]) -> Optional[int]:
        """``batch_size`` if every leaf of the state's value leads with it, else None."""
        if batch_size is None:
            return None
        leaves = jax.tree.leaves(value, is_leaf=u.math.is_quantity)
        batched = all(np.ndim(u.get_mantissa(x)) and np.shape(u.get_mantissa(x))[0] == batch_size
                      for x in leaves)
        return batch_size if batched else None

    def update(self, *args) -> None:
        """Write the state's current value."""
        super().update(self.state.value)

    def __repr__(self) -> str:
        return f"StateWithDelay({type(self._target).__name__}.{self._target_term}, " \
               f"max_length={self.max_length})"
