"""Per-step settings: values a compiled function takes as inputs, not as part of its key.

A setting read while a function is traced is, by default, baked into the
trace, and ``transform.jit`` keeps one compiled program per value it read
(:mod:`brainx.environ.reads`). That is right for a setting that changes the
program (``dt``, ``precision``, ``fit``: a Python branch or a constant of the
model) and wrong for one that changes every step: a step called inside
``with environ.context(t=t):`` would compile again for every ``t``.

So some settings are *per step*: read inside a brainx trace, :func:`get`
returns the value of a :class:`SettingState`, a read-only state whose raw
value is always the setting's current global value. The trace lifts it like
any state it reads: it becomes an input of the compiled program, and every
call passes the value the setting has then. Which settings are per step:

* ``t`` and ``i`` (:data:`~brainx.environ.T`, :data:`~brainx.environ.I`), by name;
* any setting whose value is an array (a JAX or NumPy array, a brainunit
  ``Quantity``), whatever its name;
* never ``dt`` (:data:`~brainx.environ.DT`): models fold it into constants and
  branch on it, so it stays in the key;
* whatever :func:`set_per_step` says, which overrides the two rules above.

The value must be made of numbers and arrays; any other value (a string,
``None``) stays in the key. A value set by a :func:`~brainx.environ.context`
opened inside the trace (a loop body's ``with environ.context(t=t):``) is the
trace's own and is used as it is; a jitted function traced elsewhere, with the
setting as an input, is traced again there (its trace records the read as
:data:`~brainx.environ.reads.PER_STEP`, which holds only where no such
context sets the key). Outside every brainx trace, ``get`` returns the plain
value.

A per-step value keeps the dtype JAX gives it: a Python float ``t`` is float64
with x64 on, float32 without (see :mod:`brainx.environ.time_precision` for what
that costs at large ``t``, the warning, and the step index that keeps every step).

A per-step value is a tracer inside the trace: arithmetic works, a Python
``if t > 0:`` does not (JAX raises ``TracerBoolConversionError``). Mark such a
key static with ``set_per_step(key, False)`` (then each new value traces and
compiles again), or use ``jnp.where``/``brainx.transform.cond``.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Hashable, Optional

import brainunit as u
import jax
import numpy as np

from brainx.state.state import State, _source_info
from brainx.state.trace import _THREAD

from . import reads
from .env_state import GLOBAL_ENV, UNSET, lookup
from .keys import DT, I, T
from .time_precision import check_float32_time

__all__ = ["set_per_step", "get_per_step", "is_per_step", "SettingState", "setting_state",
           "UnsetStepValueError"]

#: Per-step by name (``set_per_step`` overrides).
_BY_NAME = {T: True, I: True, DT: False}
#: What ``set_per_step`` chose, by key: True (an input), False (in the key).
_CHOSEN: Dict[Hashable, bool] = {}
#: The one SettingState of each key, held for the life of the process (the compiled
#: functions refer to their states weakly; one that died would mark them stale).
_STATES: Dict[Hashable, "SettingState"] = {}
_LOCK = threading.Lock()


class UnsetStepValueError(KeyError):
    """A compiled function reads a per-step setting that is not set when it is called."""

    def __str__(self) -> str:  # KeyError's str() is the repr of its argument
        return str(self.args[0]) if self.args else ""


def set_per_step(key: Hashable, per_step: Optional[bool] = True) -> None:
    """Choose whether ``key`` is a per-step setting (an input of compiled functions).

    Parameters
    ----------
    key : hashable
        The setting's name.
    per_step : bool or None
        ``True``: read inside a trace, the setting is an input of the compiled
        program (a new value costs no trace and no compilation, but the trace
        sees a tracer: no Python branch on it). ``False``: the value is baked
        into the trace and the compiled function is traced again for each new
        value (a Python ``if`` on it works). ``None``: back to the default
        (``t`` and ``i`` and array values per step, everything else static).

    The choice applies to traces made after it: a function already traced
    with the key as an input keeps taking it as one (its results stay right).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx import environ, transform
    >>> environ.set_per_step("t", False)       # a model branches on t in Python
    >>> f = transform.jit(lambda: 1.0 if environ.get("t") > 5 else 0.0)
    >>> with environ.context(t=10.0):
    ...     float(f())
    1.0
    >>> environ.set_per_step("t", None)        # back to the default: t is an input
    """
    if per_step is None:
        _CHOSEN.pop(key, None)
    elif isinstance(per_step, (bool, np.bool_)):
        _CHOSEN[key] = bool(per_step)
    else:
        raise TypeError(f"set_per_step({key!r}, ...): per_step must be True, False or None "
                        f"(the default), got {per_step!r}.")
    reads.changed()  # compiled functions that read the key compare their settings again


def get_per_step(key: Hashable) -> Optional[bool]:
    """What :func:`set_per_step` chose for ``key``: ``True``, ``False`` or ``None`` (the default rule).

    Examples
    --------
    >>> from brainx import environ
    >>> environ.get_per_step("t") is None
    True
    """
    return _CHOSEN.get(key)


def is_per_step(key: Hashable, value: Any) -> bool:
    """Whether ``key`` holding ``value`` is read inside a trace as an input (see the module notes).

    Examples
    --------
    >>> import jax.numpy as jnp, brainunit as u
    >>> from brainx.environ.step_values import is_per_step
    >>> is_per_step("t", 1.5), is_per_step("dt", 0.1 * u.ms), is_per_step("gain", 2.0)
    (True, False, False)
    >>> is_per_step("drive", jnp.ones(3)), is_per_step("t", "noon")
    (True, False)
    """
    chosen = _CHOSEN.get(key)
    if chosen is None:
        chosen = _BY_NAME.get(key)
        if chosen is None:
            return _is_array(value) and _numeric(value)
    return chosen and _numeric(value)


def _is_array(value: Any) -> bool:
    return isinstance(value, (jax.Array, np.ndarray, u.Quantity))


def _numeric(value: Any) -> bool:
    """A value a trace can take as an input: numbers and arrays only (a Quantity's too)."""
    if isinstance(value, jax.core.Tracer):
        return False  # a JAX trace's own value: used as it is
    if isinstance(value, u.Quantity):
        value = value.mantissa
        if isinstance(value, jax.core.Tracer):
            return False
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return True
    if isinstance(value, (jax.Array, np.ndarray)):
        return np.dtype(value.dtype).kind in "biufc"
    return False


class SettingState(State):
    """The global value of one per-step setting, seen as a read-only :class:`~brainx.State`.

    Its raw value is, at every moment, what ``environ.get(key)`` gives in the
    calling thread (the innermost ``context``, then ``set``). A trace that
    reads it makes it an input, and each call of the compiled function passes
    the setting's value at that call. There is one per key, kept for the life
    of the process; :func:`brainx.environ.get` reads it inside traces, so
    user code never needs it. It cannot be written.

    Examples
    --------
    >>> from brainx import environ
    >>> from brainx.environ.step_values import setting_state
    >>> with environ.context(t=2.5):
    ...     setting_state("t").value
    2.5
    """

    def __init__(self, key: Hashable):  # not State.__init__: no value of its own, no trace records it
        self.key = key
        self.name = f"environ[{key!r}]"
        self.tag = None
        self._level = 0
        self._source = _source_info()

    @property
    def _value(self) -> Any:
        value = lookup(GLOBAL_ENV, self.key)
        if value is UNSET:
            raise UnsetStepValueError(
                f"The compiled function reads the setting {self.key!r} (brainx.environ), which is "
                f"not set now. Call it inside `with brainx.environ.context({self.key}=...):` or "
                f"set it with brainx.environ.set({self.key}=...).")
        check_float32_time(self.key, value)  # a float t that float32 rounds by part of a step
        return value

    @_value.setter
    def _value(self, value: Any) -> None:
        raise _read_only(self.key)

    @property
    def value(self) -> Any:
        """The setting's current value (inside a transform, the trace's input for it)."""
        frames = _THREAD.frames
        if frames:
            return frames[-1].read_value(self)
        return self._value

    @value.setter
    def value(self, value: Any) -> None:
        raise _read_only(self.key)

    def restore_value(self, value: Any) -> None:
        """Nothing to restore: the value is the environment's (a no-op, for ``assign_state_vals``)."""

    def copy(self) -> "SettingState":
        raise TypeError(f"{self!r} stands for a setting of brainx.environ and cannot be copied; "
                        "read the setting with brainx.environ.get instead.")

    def __repr__(self) -> str:
        return f"SettingState(key={self.key!r})"


def _read_only(key: Hashable) -> Exception:
    return TypeError(f"The per-step setting {key!r} cannot be written through its state: it "
                     f"follows brainx.environ. Change it with brainx.environ.context({key}=...) "
                     f"or brainx.environ.set({key}=...).")


def setting_state(key: Hashable) -> SettingState:
    """The :class:`SettingState` of ``key`` (made on first use, kept for good)."""
    state = _STATES.get(key)
    if state is None:
        with _LOCK:
            state = _STATES.setdefault(key, SettingState(key))
    return state


def traced_value(key: Hashable) -> Any:
    """The value of the per-step setting ``key`` inside the brainx trace in progress (an input)."""
    return setting_state(key).value
