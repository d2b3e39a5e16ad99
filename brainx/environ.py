"""Global simulation settings: the time step ``dt``, the float precision, and any key you like.

Settings come in two layers, as in brainstate:

* :func:`set` changes the process-wide defaults (every thread sees them);
* :func:`context` overrides settings inside a ``with`` block, for the
  current thread only, and restores them on exit even when the block raises.

:func:`get` looks in the innermost :func:`context` first, then in the
defaults. One exception: ``precision`` also switches JAX's ``jax_enable_x64``
flag, which is process-wide, so a ``context(precision=64)`` affects every
thread while it is open (and puts the flag back as it found it). Times are brainunit quantities (``0.1 * u.ms``) or plain numbers,
whatever the model's time constants are.

Settings are read when a function is *traced*: a jitted step keeps the ``dt``
it was compiled with, like any Python value it closes over. Call the step's
``clear_cache()`` (or make ``dt`` an argument) to change it afterwards.

Examples
--------
>>> import brainunit as u
>>> from brainx import environ
>>> environ.set(dt=0.1 * u.ms)
>>> environ.get_dt()
Quantity(0.1, "ms")
>>> with environ.context(dt=0.05 * u.ms):
...     environ.get_dt()
Quantity(0.05, "ms")
>>> environ.get_dt()
Quantity(0.1, "ms")
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Dict, Hashable, Iterator, List

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "set", "get", "all", "context", "pop", "get_dt", "get_precision", "dftype", "ditype",
    "dutype", "dctype", "tolerance", "register_default_behavior", "I", "T", "DT",
]

I = "i"    # conventional key: the index of the current step
T = "t"    # conventional key: the current time
DT = "dt"  # the integration time step

_MISSING = object()  # "no default given"
_UNSET = object()    # a default meaning "not set"
_PRECISIONS = (64, 32, 16, "bf16")

_LOCK = threading.RLock()
_SETTINGS: Dict[Hashable, Any] = {}        # process-wide defaults
_BEHAVIORS: Dict[Hashable, Callable] = {}  # called with the new value when a key changes


class _Contexts(threading.local):
    def __init__(self):
        self.stack: Dict[Hashable, List[Any]] = {}


_CONTEXTS = _Contexts()


def _validate(key: Hashable, value: Any) -> None:
    if key == "precision" and value not in _PRECISIONS:
        raise ValueError(f"precision must be one of {_PRECISIONS}, got {value!r}.")
    if key == DT:
        mantissa = value.mantissa if hasattr(value, "mantissa") else value
        try:
            positive = bool(np.all(np.asarray(mantissa) > 0))
        except Exception:  # a tracer: cannot check, accept
            positive = True
        if not positive:
            raise ValueError(f"dt must be positive, got {value!r}.")


def _apply_precision(precision) -> None:
    jax.config.update("jax_enable_x64", precision == 64)


def _changed(key: Hashable, value: Any) -> None:
    if key == "precision":
        _apply_precision(value)
    behavior = _BEHAVIORS.get(key)
    if behavior is not None:
        behavior(value)


def set(**kwargs: Any) -> None:
    """Set process-wide defaults, e.g. ``set(dt=0.1 * u.ms, precision=32)``.

    ``precision`` (64, 32, 16 or ``"bf16"``) also switches ``jax_enable_x64``.
    Values set here are shadowed by any active :func:`context`.
    """
    for key, value in kwargs.items():
        _validate(key, value)
    with _LOCK:
        _SETTINGS.update(kwargs)
        for key, value in kwargs.items():
            _changed(key, get(key))


def pop(key: Hashable, default: Any = _MISSING) -> Any:
    """Remove a process-wide default and return it."""
    with _LOCK:
        if default is _MISSING and key not in _SETTINGS:
            raise KeyError(f"{key!r} is not set.")
        return _SETTINGS.pop(key, default)


def get(key: Hashable, default: Any = _MISSING, desc: str | None = None) -> Any:
    """The current value of ``key``: innermost :func:`context` first, then :func:`set`.

    Raises ``KeyError`` (with a hint on how to set it) when the key is unset
    and no ``default`` is given.
    """
    stack = _CONTEXTS.stack.get(key)
    if stack:
        return stack[-1]
    try:
        return _SETTINGS[key]
    except KeyError:
        if default is not _MISSING:
            return default
    hint = f" ({desc})" if desc else ""
    example = "0.1 * u.ms" if key == DT else "value"
    raise KeyError(
        f"{key!r}{hint} is not set. Set it globally with brainx.environ.set({key}={example}) "
        f"or locally with `with brainx.environ.context({key}={example}):`.") from None


def all() -> Dict[Hashable, Any]:
    """Every current setting, contexts applied."""
    out = dict(_SETTINGS)
    for key, stack in _CONTEXTS.stack.items():
        if stack:
            out[key] = stack[-1]
    return out


@contextlib.contextmanager
def context(**kwargs: Any) -> Iterator[Dict[Hashable, Any]]:
    """Override settings inside a ``with`` block (this thread only); yields :func:`all`.

    The previous values come back when the block exits, also after an exception.

    Examples
    --------
    >>> import brainunit as u
    >>> from brainx import environ
    >>> with environ.context(dt=1.0 * u.ms, trial=3) as env:
    ...     env["trial"], environ.get("trial")
    (3, 3)
    >>> environ.get("trial", None) is None
    True
    """
    for key, value in kwargs.items():
        _validate(key, value)
    stack = _CONTEXTS.stack
    pushed = []
    x64_before = jax.config.jax_enable_x64  # JAX's flag is process-wide: put it back as found
    try:
        for key, value in kwargs.items():
            stack.setdefault(key, []).append(value)
            pushed.append(key)
            _changed(key, value)
        yield all()
    finally:
        for key in reversed(pushed):
            stack[key].pop()
            if not stack[key]:
                del stack[key]
            current = get(key, _UNSET)
            if current is not _UNSET:
                _changed(key, current)
            elif key == "precision":
                jax.config.update("jax_enable_x64", x64_before)


def get_dt() -> Any:
    """The integration time step ``dt`` (a brainunit time, or a number).

    Raises ``KeyError`` if it was never set: ``brainx.environ.set(dt=0.1 * u.ms)``.
    """
    return get(DT)


def get_precision() -> int:
    """The float precision in bits (32 unless set; ``"bf16"`` reports 16)."""
    precision = get("precision", 32)
    return 16 if precision == "bf16" else precision


def dftype():
    """The default float dtype for the current precision (``float32`` by default)."""
    precision = get("precision", 32)
    return {64: np.float64, 32: np.float32, 16: np.float16, "bf16": jnp.bfloat16}[precision]


def ditype():
    """The default integer dtype for the current precision."""
    return {64: np.int64, 32: np.int32, 16: np.int16}[get_precision()]


def dutype():
    """The default unsigned integer dtype for the current precision."""
    return {64: np.uint64, 32: np.uint32, 16: np.uint16}[get_precision()]


def dctype():
    """The default complex dtype for the current precision."""
    return np.complex128 if get_precision() == 64 else np.complex64


def tolerance() -> float:
    """A comparison tolerance suited to the current precision."""
    return {64: 1e-12, 32: 1e-5, 16: 1e-2}[get_precision()]


def register_default_behavior(key: Hashable, behavior: Callable[[Any], Any],
                              replace_if_exist: bool = False) -> None:
    """Call ``behavior(new_value)`` whenever ``key`` changes through :func:`set` or :func:`context`."""
    if not callable(behavior):
        raise TypeError(f"behavior must be callable, got {behavior!r}.")
    with _LOCK:
        if key in _BEHAVIORS and not replace_if_exist:
            raise ValueError(f"A behavior for {key!r} is already registered; pass "
                             "replace_if_exist=True to replace it.")
        _BEHAVIORS[key] = behavior

