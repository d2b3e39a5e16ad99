"""`Dynamics`: the base class of neurons, synapses and anything that steps in time.

A :class:`Dynamics` is a :class:`~brainx.nn.Module` over a population of shape
``varshape`` (its ``in_size``) with three additions, as in brainstate:

* **keyed inputs.** Other modules push into it with :meth:`~Dynamics.add_current_input`
  (a current, summed into the membrane equation by :meth:`~Dynamics.sum_current_inputs`)
  and :meth:`~Dynamics.add_delta_input` (a jump, added to a state after the
  step by :meth:`~Dynamics.sum_delta_inputs`). A callable input is called at each
  sum (with the arguments the sum is given, e.g. the membrane potential); an
  array is used once and then dropped. A ``label`` groups inputs, so that a
  sum can take only one group.
* **hooks around the step.** Calling the module (``module(x)``) runs its
  before-update hooks, :meth:`~Dynamics.update`, then its after-update hooks. A
  delay buffer that records a state or the output is such an after-update hook.
* **reading another module's state, now or delayed.** :meth:`~Dynamics.prefetch`,
  :meth:`~Dynamics.prefetch_delay` and :meth:`~Dynamics.output_delay` return
  small readers (see :mod:`brainx.nn.dynamics.prefetch`); the delayed ones add a
  :class:`~brainx.nn.Delay` to this module's after-update hooks. The hooks live
  in this module's ``before_updates`` / ``after_updates`` dicts, so their states
  are found by ``module.states()`` and threaded through every transform.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, Optional, Tuple

import numpy as np

from brainx.nn.hooks import (
    not_receive_update_input, not_receive_update_output, receive_update_input,
    receive_update_output, wants_input, wants_output,
)
from brainx.nn.modules.module import Module
from brainx.nn.dynamics.prefetch import OutputDelayAt, Prefetch, PrefetchDelayAt
from brainx.state.state import structure_changed

__all__ = [
    "Dynamics", "receive_update_input", "not_receive_update_input", "receive_update_output",
    "not_receive_update_output",
]

def _population_shape(in_size: Any, owner: str) -> Tuple[int, ...]:
    """``in_size`` (an int, or a non-empty tuple or list of ints) as a shape; else ``ValueError``."""
    def is_int(n):
        return isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))

    if is_int(in_size):
        return (int(in_size),)
    if isinstance(in_size, (tuple, list)) and in_size and all(is_int(n) for n in in_size):
        return tuple(int(n) for n in in_size)
    raise ValueError(f"{owner}: in_size must be an int or a non-empty tuple or list of ints (the "
                     f"population shape), got {in_size!r}.")


def _input_key(key: str, label: Optional[str]) -> str:
    return key if label is None else f"{_label_prefix(label)}{key}"


def _label_prefix(label: str) -> str:
    return f"[{label}] "


class Dynamics(Module):
    """Base class of dynamical modules: a population with keyed inputs and update hooks.

    Parameters
    ----------
    in_size : int or tuple of int
        The population shape (``varshape``); ``out_size`` is the same.
    name : str, optional
        A label for ``repr``.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> class Leak(brainx.nn.Dynamics):
    ...     def init_state(self, batch_size=None):
    ...         self.x = brainx.HiddenState(brainx.nn.init.param(0.0, self.varshape, batch_size, broadcast=True))
    ...     def update(self):
    ...         I = self.sum_current_inputs(0.0)
    ...         x = brainx.nn.exp_euler_step(lambda x: (I - x) / (10 * u.ms), self.x.value)
    ...         self.x.value = self.sum_delta_inputs(x)
    ...         return self.x.value
    >>> leak = brainx.nn.init_all_states(Leak(2))
    >>> leak.add_current_input("drive", lambda: 1.0)      # called every step
    >>> leak.add_delta_input("kick", 0.5)                 # used once
    >>> with brainx.environ.context(dt=1.0 * u.ms):
    ...     [round(float(leak()[0]), 4) for _ in range(2)]
    [0.5952, 0.6337]
    """

    def __init__(self, in_size, name: Optional[str] = None):
        super().__init__(name=name)
        self.in_size = _population_shape(in_size, type(self).__name__)
        self.out_size = self.in_size
        self._current_inputs: Optional[Dict[str, Any]] = None
        self._delta_inputs: Optional[Dict[str, Any]] = None
        self._before_updates: Optional[Dict[Hashable, Callable]] = None
        self._after_updates: Optional[Dict[Hashable, Callable]] = None

    @property
    def varshape(self):
        """The shape of the population's variables (without batch): ``in_size``."""
        return self.in_size

    # -- inputs -------------------------------------------------------------------------
    @property
    def current_inputs(self) -> Optional[Dict[str, Any]]:
        """The registered current inputs by key (``None`` before the first)."""
        return self._current_inputs

    @property
    def delta_inputs(self) -> Optional[Dict[str, Any]]:
        """The registered delta inputs by key (``None`` before the first)."""
        return self._delta_inputs

    def add_current_input(self, key: str, inp: Any, label: Optional[str] = None) -> None:
        """Register a current input under ``key`` (in group ``label``).

        A callable is called at every :meth:`sum_current_inputs`, with the
        arguments given to the sum; an array is added once and then dropped.
        Registering another object under a used key raises ``ValueError``.
        """
        self._current_inputs = _add_input(self, self._current_inputs, "current", key, inp, label)

    def add_delta_input(self, key: str, inp: Any, label: Optional[str] = None) -> None:
        """Register a delta (jump) input under ``key``; as :meth:`add_current_input`."""
        self._delta_inputs = _add_input(self, self._delta_inputs, "delta", key, inp, label)

    def get_input(self, key: str) -> Any:
        """The current or delta input registered under ``key``."""
        for inputs in (self._current_inputs, self._delta_inputs):
            if inputs is not None and key in inputs:
                return inputs[key]
        raise KeyError(f"{self!r} has no current or delta input {key!r}; registered: "
                       f"{_keys(self._current_inputs) + _keys(self._delta_inputs)}.")

    def sum_current_inputs(self, init: Any, *args, label: Optional[str] = None, **kwargs) -> Any:
        """``init`` plus every current input (of group ``label``; all when ``None``)."""
        return _sum_inputs(self, self._current_inputs, "current", init, args, kwargs, label)

    def sum_delta_inputs(self, init: Any, *args, label: Optional[str] = None, **kwargs) -> Any:
        """``init`` plus every delta input (of group ``label``; all when ``None``)."""
        return _sum_inputs(self, self._delta_inputs, "delta", init, args, kwargs, label)

    # -- hooks ----------------------------------------------------------------------------
    @property
    def before_updates(self) -> Optional[Dict[Hashable, Callable]]:
        """The hooks called before :meth:`update`, in registration order."""
        return self._before_updates

    @property
    def after_updates(self) -> Optional[Dict[Hashable, Callable]]:
        """The hooks called after :meth:`update` (with its output, unless marked otherwise)."""
        return self._after_updates

    def add_before_update(self, key: Any, fun: Callable) -> None:
        """Call ``fun()`` (``fun(*args)`` if marked :func:`receive_update_input`) before each update."""
        self._before_updates = _add_hook(self, self._before_updates, "before_updates", key, fun)

    def add_after_update(self, key: Any, fun: Callable) -> None:
        """Call ``fun(output)`` (``fun()`` if marked :func:`not_receive_update_output`) after each update."""
        self._after_updates = _add_hook(self, self._after_updates, "after_updates", key, fun)

    def get_before_update(self, key: Any) -> Callable:
        """The before-update hook registered under ``key``."""
        return _get_hook(self, self._before_updates, "before_updates", key)

    def get_after_update(self, key: Any) -> Callable:
        """The after-update hook registered under ``key``."""
        return _get_hook(self, self._after_updates, "after_updates", key)

    def has_before_update(self, key: Any) -> bool:
        return self._before_updates is not None and key in self._before_updates

    def has_after_update(self, key: Any) -> bool:
        return self._after_updates is not None and key in self._after_updates

    def __call__(self, *args, **kwargs):
        for hook in (self._before_updates or {}).values():
            if wants_input(hook):
                hook(*args, **kwargs)
            else:
                hook()
        out = self.update(*args, **kwargs)
        for hook in (self._after_updates or {}).values():
            if wants_output(hook):
                hook(out)
            else:
                hook()
        return out

    # -- reading states of this module, now or delayed -----------------------------------
    def prefetch(self, item: str) -> Prefetch:
        """A reader of attribute ``item`` (a State's value): ``self.prefetch("V")()``."""
        return Prefetch(self, item)

    def prefetch_delay(self, state: str, *time_and_index, init: Any = None,
                       interpolation: Optional[str] = None, **kwargs) -> PrefetchDelayAt:
        """A reader of state ``state`` as it was ``time`` ago (see :class:`~brainx.nn.StateWithDelay`)."""
        return PrefetchDelayAt(self, state, *time_and_index, delay_init=init,
                               interpolation=interpolation, **kwargs)

    def output_delay(self, *time_and_index, init: Any = None,
                     interpolation: Optional[str] = None, **kwargs) -> OutputDelayAt:
        """A reader of this module's output (``update``'s return) as it was ``time`` ago."""
        return OutputDelayAt(self, *time_and_index, delay_init=init,
                             interpolation=interpolation, **kwargs)


def _keys(inputs: Optional[Dict]) -> list:
    return [] if inputs is None else list(inputs)


def _add_input(module: Dynamics, inputs: Optional[Dict], kind: str, key: str, inp: Any,
               label: Optional[str]) -> Dict:
    if not isinstance(key, str):
        raise TypeError(f"{module!r}.add_{kind}_input: key must be a string, got {key!r}.")
    key = _input_key(key, label)
    inputs = {} if inputs is None else inputs
    if key in inputs and inputs[key] is not inp:
        raise ValueError(f"{module!r} already has a {kind} input {key!r}; use another key, or "
                         f"remove it first with `del module.{kind}_inputs[{key!r}]`.")
    inputs[key] = inp
    return inputs


def _sum_inputs(module: Dynamics, inputs: Optional[Dict], kind: str, init: Any, args, kwargs,
                label: Optional[str]) -> Any:
    if not inputs:
        return init
    prefix = None if label is None else _label_prefix(label)
    for key in tuple(inputs):
        if prefix is not None and not key.startswith(prefix):
            continue
        inp = inputs[key]
        try:
            init = init + (inp(*args, **kwargs) if callable(inp) else inp)
        except Exception as e:
            if hasattr(e, "add_note"):   # Python >= 3.11
                e.add_note(f"(while adding the {kind} input {key!r} of {module!r}: {inp!r})")
            raise
        if not callable(inp):
            del inputs[key]       # a value is used once
    return init


def _add_hook(module: Dynamics, hooks: Optional[Dict], which: str, key: Any,
              fun: Callable) -> Dict:
    if not callable(fun):
        raise TypeError(f"{module!r}: a hook in {which} must be callable, got {fun!r}.")
    hooks = {} if hooks is None else hooks
    if key in hooks:
        raise KeyError(f"{key!r} is already registered in {which} of {module!r}; use another key.")
    hooks[key] = fun
    structure_changed()       # a hook may bring states (a delay buffer) a compiled step must see
    return hooks


def _get_hook(module: Dynamics, hooks: Optional[Dict], which: str, key: Any) -> Callable:
    if hooks is None or key not in hooks:
        raise KeyError(f"{key!r} is not registered in {which} of {module!r}; registered: "
                       f"{_keys(hooks)}.")
    return hooks[key]
