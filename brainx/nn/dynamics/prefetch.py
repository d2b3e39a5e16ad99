"""Readers of another module's state or output, now or some time ago.

A projection from population A to B needs A's spikes (or voltage) as they
were when they left A, perhaps a few milliseconds ago. Rather than keeping a
reference to A's state (which may not exist yet when the projection is
built), it keeps a small reader:

* :class:`Prefetch` (``A.prefetch("V")``) returns ``A.V.value`` when called;
* :class:`PrefetchDelayAt` (``A.prefetch_delay("V", 2 * u.ms)`` or
  ``A.prefetch("V").delay.at(2 * u.ms)``) returns ``A.V`` as it was 2 ms ago,
  through a :class:`~brainx.nn.StateWithDelay` that A writes after each step;
* :class:`OutputDelayAt` (``A.output_delay(1.5 * u.ms)``) returns A's output
  (what ``A.update`` returned, e.g. its spikes) 1.5 ms ago, through a
  :class:`~brainx.nn.Delay` that A writes after each step.

The delay buffers are after-update hooks of A, one per kind (several readers
of ``V`` share one buffer sized for the longest), so they live in A's module
tree: ``A.states()`` lists them and every transform threads them. Readers are
plain objects, not modules: the module tree does not walk through them.
"""

from __future__ import annotations

from typing import Any, Optional

import jax

from brainx import environ
from brainx.nn.dynamics.delay import Delay, StateWithDelay
from brainx.nn.hooks import not_receive_update_output, receive_update_output
from brainx.state.state import State

__all__ = ["Prefetch", "PrefetchDelay", "PrefetchDelayAt", "OutputDelayAt", "init_maybe_prefetch"]


def _item(module: Any, item: str) -> Any:
    found = getattr(module, item, None)
    if found is None:
        raise AttributeError(f"{module!r} has no attribute {item!r} to read; create it (a State) in "
                             "its init_state(), and initialise the model before stepping it.")
    return found


def _check_dynamics(module: Any, what: str) -> None:
    if not hasattr(module, "add_after_update"):
        raise TypeError(f"{what} needs a brainx.nn.Dynamics (it adds a delay buffer to its "
                        f"after-update hooks), got {module!r}.")


def prefetch_delay_key(item: str, update_every: Any = None) -> str:
    """The after-update key of the delay buffer of state ``item`` (``"V-prefetch-delay-None"``)."""
    return f"{item}-prefetch-delay-{update_every}"


def output_delay_key(update_every: Any = None) -> str:
    """The after-update key of the delay buffer of a module's output (``"output-delay-None"``)."""
    return f"output-delay-{update_every}"


def _new_entry(delay: Delay, *time) -> str:
    entry = f"read-{len(delay._entries)}"
    delay.register_entry(entry, *time)
    return entry


def _times(time_and_index) -> tuple:
    if len(time_and_index) == 1 and isinstance(time_and_index[0], (tuple, list)):
        return tuple(time_and_index[0])
    return tuple(time_and_index)


class Prefetch:
    """Reads ``module.<item>`` (a State's value) when called; ``.delay.at(t)`` reads it delayed.

    Examples
    --------
    >>> import brainx
    >>> lif = brainx.nn.LIF(3)
    >>> V = lif.prefetch("V")              # before the state exists
    >>> _ = brainx.nn.init_all_states(lif)
    >>> V().shape
    (3,)
    """

    def __init__(self, module: Any, item: str):
        self.module = module
        self.item = item

    @property
    def delay(self) -> "PrefetchDelay":
        """Choose a delay: ``prefetch.delay.at(time)``."""
        return PrefetchDelay(self.module, self.item)

    def get_item(self) -> Any:
        """The attribute itself (the State)."""
        return _item(self.module, self.item)

    def get_item_value(self) -> Any:
        """The attribute's value (a State's ``.value``)."""
        found = self.get_item()
        return found.value if isinstance(found, State) else found

    def __call__(self, *args, **kwargs) -> Any:
        return self.get_item_value()


class PrefetchDelay:
    """``module.<item>`` awaiting a delay: :meth:`at` returns a :class:`PrefetchDelayAt`."""

    def __init__(self, module: Any, item: str):
        self.module = module
        self.item = item

    def at(self, *time_and_index) -> "PrefetchDelayAt":
        return PrefetchDelayAt(self.module, self.item, *time_and_index)


class PrefetchDelayAt:
    """Reads state ``module.<item>`` as it was ``time`` ago (no time: as it is now).

    The first reader of ``item`` adds a :class:`~brainx.nn.StateWithDelay` to
    ``module``'s after-update hooks (key ``"<item>-prefetch-delay-None"``);
    later readers register their delay on the same buffer.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> with brainx.environ.context(dt=1.0 * u.ms):
    ...     lif = brainx.nn.LIF(1, tau=10 * u.ms, V_th=10 * u.mV)
    ...     V_2ms = lif.prefetch_delay("V", 2.0 * u.ms)
    ...     _ = brainx.nn.init_all_states(lif)
    ...     for _ in range(4):
    ...         _ = lif(1.0 * u.mA)
    ...     late = V_2ms()                 # V after the 2nd of 4 steps: 1 - exp(-0.2) mV
    >>> round(float(late[0].to_decimal(u.mV)), 5)
    0.18127
    """

    def __init__(self, module: Any, item: str, *time_and_index, delay_init: Any = None,
                 interpolation: Optional[str] = None, update_every: Any = None, **kwargs):
        _check_dynamics(module, "prefetch_delay")
        self.module, self.item = module, item
        self.delay_time = _times(time_and_index)
        self.state_delay = None
        if self.delay_time and self.delay_time[0] is not None:
            key = prefetch_delay_key(item, update_every)
            if not module.has_after_update(key):
                delay = StateWithDelay(module, item, init=delay_init, interpolation=interpolation,
                                       update_every=update_every, **kwargs)
                module.add_after_update(key, not_receive_update_output(delay))
            self.state_delay = module.get_after_update(key)
            self._entry = _new_entry(self.state_delay, *self.delay_time)

    def __call__(self, *args, **kwargs) -> Any:
        if self.state_delay is None:
            found = _item(self.module, self.item)
            return found.value if isinstance(found, State) else found
        return self.state_delay.at(self._entry)


class OutputDelayAt:
    """Reads ``module``'s output (``update``'s return value) as it was ``time`` ago.

    The first reader adds a :class:`~brainx.nn.Delay` of shape ``out_size``
    to ``module``'s after-update hooks (key ``"output-delay-None"``), which
    records each output; later readers share it.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> with brainx.environ.context(dt=1.0 * u.ms):
    ...     lif = brainx.nn.LIF(1, tau=1.0 * u.ms)
    ...     late = lif.output_delay(2.0 * u.ms)
    ...     _ = brainx.nn.init_all_states(lif)
    ...     out = [(int(lif(x * u.mA)[0]), int(late()[0])) for x in (5.0, 0.0, 0.0, 5.0, 0.0)]
    >>> out          # (output, late()): late() shows the output two steps before the latest
    [(1, 0), (0, 0), (0, 1), (1, 0), (0, 0)]
    """

    def __init__(self, module: Any, *delay_time, delay_init: Any = None,
                 interpolation: Optional[str] = None, update_every: Any = None, **kwargs):
        _check_dynamics(module, "output_delay")
        self.module = module
        key = output_delay_key(update_every)
        if not module.has_after_update(key):
            delay = Delay(jax.ShapeDtypeStruct(module.out_size, environ.dftype()),
                          take_aware_unit=True, init=delay_init, interpolation=interpolation,
                          update_every=update_every, **kwargs)
            module.add_after_update(key, receive_update_output(delay))
        self.out_delay = module.get_after_update(key)
        self._entry = _new_entry(self.out_delay, *_times(delay_time))

    def __call__(self, *args, **kwargs) -> Any:
        return self.out_delay.at(self._entry)


def _registered_delay(target: PrefetchDelay) -> StateWithDelay:
    """The delay buffer of ``target.module.<item>``, whatever ``update_every`` it was made with."""
    module = target.module
    _check_dynamics(module, "a delayed prefetch")
    prefix = prefetch_delay_key(target.item, "")
    keys = [k for k in (module.after_updates or {}) if isinstance(k, str) and k.startswith(prefix)]
    if f"{prefix}None" in keys:
        keys = [f"{prefix}None"]
    if not keys:
        raise KeyError(f"{type(module).__name__} has no delay buffer for {target.item!r}: register one first "
                       f"with prefetch_delay({target.item!r}, time) (or prefetch(...).delay.at(time)).")
    if len(keys) > 1:
        raise ValueError(f"{type(module).__name__} has delay buffers for {target.item!r} with several "
                         f"update_every values ({sorted(keys)}); a PrefetchDelay cannot tell which.")
    return module.get_after_update(keys[0])


def init_maybe_prefetch(target: Any, *args, **kwargs) -> None:
    """Check that a reader's target exists.

    A :class:`Prefetch`'s attribute must exist; a :class:`PrefetchDelay`'s
    item must have a delay buffer, registered with any ``update_every``
    (``KeyError`` when none, ``ValueError`` when several); a
    :class:`PrefetchDelayAt` registered its own.
    """
    if isinstance(target, Prefetch):
        target.get_item()
    elif isinstance(target, PrefetchDelay):
        _registered_delay(target)
