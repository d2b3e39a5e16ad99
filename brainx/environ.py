"""Global simulation settings: the time step ``dt``, the float precision, and any key you like.

Settings come in two layers, as in brainstate:

* :func:`set` changes the process-wide defaults (every thread sees them);
* :func:`context` overrides settings inside a ``with`` block, for the
  current thread only, and restores them on exit even when the block raises.

:func:`get` looks in the innermost :func:`context` first, then in the
defaults. One exception: ``precision`` also switches JAX's ``jax_enable_x64``
flag, which is process-wide, so a ``context(precision=64)`` affects every
thread while it is open (and puts the flag back as it found it). Times are
brainunit quantities (``0.1 * u.ms``) or plain numbers, whatever the model's
time constants are.

The platform (``"cpu"``, ``"gpu"``, ``"tpu"``) and the number of host (CPU)
devices are JAX settings that only take effect before JAX starts its
backends (before the first array is made). :func:`set_platform` and
:func:`set_host_device_count` change them, and refuse with an error once the
backends are running; importing brainx starts no backend. They are
process-wide and cannot be set in a :func:`context`.

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
import os
import re
import threading
from typing import Any, Callable, Dict, Hashable, Iterator, List, Union

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    # settings
    "set", "get", "all", "pop", "context", "reset", "get_dt",
    # platform and devices
    "set_platform", "get_platform", "set_host_device_count", "get_host_device_count",
    # precision and default dtypes
    "set_precision", "get_precision", "dftype", "ditype", "dutype", "dctype", "tolerance",
    # behaviours
    "register_default_behavior", "unregister_default_behavior", "list_registered_behaviors",
    # keys and constants
    "I", "T", "DT", "PRECISION", "PLATFORM", "HOST_DEVICE_COUNT", "JIT_ERROR_CHECK", "FIT",
    "DEFAULT_PRECISION", "SUPPORTED_PLATFORMS", "SUPPORTED_PRECISIONS",
]

I = "i"                                  # conventional key: the index of the current step
T = "t"                                  # conventional key: the current time
DT = "dt"                                # the integration time step
PRECISION = "precision"                  # float precision: 8, 16, 32, 64 or "bf16"
PLATFORM = "platform"                    # "cpu", "gpu" or "tpu" (process-wide, see set_platform)
HOST_DEVICE_COUNT = "host_device_count"  # number of CPU devices (see set_host_device_count)
JIT_ERROR_CHECK = "jit_error_check"      # conventional key: check errors inside jitted code
FIT = "fit"                              # conventional key: True while fitting (training)

DEFAULT_PRECISION = 32
SUPPORTED_PLATFORMS = ("cpu", "gpu", "tpu")
SUPPORTED_PRECISIONS = (8, 16, 32, 64, "bf16")

PrecisionType = Union[int, str]

_MISSING = object()  # "no default given"
_UNSET = object()    # a default meaning "not set"
_DEFAULTS: Dict[Hashable, Any] = {PRECISION: DEFAULT_PRECISION}  # what get() and all() fall back to
_GLOBAL_ONLY = (PLATFORM, HOST_DEVICE_COUNT)

_LOCK = threading.RLock()
_SETTINGS: Dict[Hashable, Any] = {}        # process-wide defaults
_BEHAVIORS: Dict[Hashable, Callable] = {}  # called with the new value when a key changes


class _Contexts(threading.local):
    def __init__(self):
        self.stack: Dict[Hashable, List[Any]] = {}


_CONTEXTS = _Contexts()


def _normalize_precision(value: Any) -> PrecisionType:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or value not in SUPPORTED_PRECISIONS:
        raise ValueError(f"precision must be one of {SUPPORTED_PRECISIONS}, got {value!r}.")
    return value


def _validate(key: Hashable, value: Any) -> Any:
    """The value to store for ``key`` (normalised), or an error saying what is wrong."""
    if key == PRECISION:
        return _normalize_precision(value)
    if key == DT:
        mantissa = value.mantissa if hasattr(value, "mantissa") else value
        try:
            positive = bool(np.all(np.asarray(mantissa) > 0))
        except Exception:  # a tracer: cannot check, accept
            positive = True
        if not positive:
            raise ValueError(f"dt must be positive, got {value!r}.")
    return value


def _apply_precision(precision) -> None:
    jax.config.update("jax_enable_x64", precision == 64)


def _changed(key: Hashable, value: Any) -> None:
    if key == PRECISION:
        _apply_precision(value)
    behavior = _BEHAVIORS.get(key)
    if behavior is not None:
        behavior(value)


def set(**kwargs: Any) -> None:
    """Set process-wide defaults, e.g. ``set(dt=0.1 * u.ms, precision=32)``.

    ``precision`` (8, 16, 32, 64 or ``"bf16"``) also switches ``jax_enable_x64``;
    ``platform`` and ``host_device_count`` go to :func:`set_platform` and
    :func:`set_host_device_count`. Values set here are shadowed by any active
    :func:`context`. Nothing is changed when a value is refused.

    Examples
    --------
    >>> from brainx import environ
    >>> environ.set(trial=1)
    >>> environ.get("trial")
    1
    >>> environ.pop("trial")
    1
    """
    kwargs = {key: _validate(key, value) for key, value in kwargs.items()}
    if PLATFORM in kwargs:
        set_platform(kwargs.pop(PLATFORM))
    if HOST_DEVICE_COUNT in kwargs:
        set_host_device_count(kwargs.pop(HOST_DEVICE_COUNT))
    with _LOCK:
        _SETTINGS.update(kwargs)
        for key in kwargs:
            _changed(key, get(key))


def pop(key: Hashable, default: Any = _MISSING) -> Any:
    """Remove a process-wide default and return it (``default`` when it is not set).

    A key overridden by an open :func:`context` cannot be popped: that raises
    ``ValueError``. Registered behaviours are not called.
    """
    if _CONTEXTS.stack.get(key):
        raise ValueError(f"Cannot pop {key!r}: it is set by an open environ.context() in this "
                         "thread. Pop it after the `with` block.")
    with _LOCK:
        if default is _MISSING and key not in _SETTINGS:
            raise KeyError(f"{key!r} is not set, so it cannot be popped. Pass a default "
                           f"(environ.pop({key!r}, None)) to allow that.")
        return _SETTINGS.pop(key, default)


def get(key: Hashable, default: Any = _MISSING, desc: str | None = None) -> Any:
    """The current value of ``key``: innermost :func:`context` first, then :func:`set`.

    ``"platform"`` and ``"host_device_count"`` are answered by
    :func:`get_platform` and :func:`get_host_device_count`. Raises ``KeyError``
    (with a hint on how to set it) when the key is unset and no ``default`` is
    given.
    """
    if key == PLATFORM:
        return get_platform()
    if key == HOST_DEVICE_COUNT:
        return get_host_device_count()
    stack = _CONTEXTS.stack.get(key)
    if stack:
        return stack[-1]
    try:
        return _SETTINGS[key]
    except KeyError:
        if default is not _MISSING:
            return default
        if key in _DEFAULTS:
            return _DEFAULTS[key]
    hint = f" ({desc})" if desc else ""
    example = "0.1 * u.ms" if key == DT else "value"
    raise KeyError(
        f"{key!r}{hint} is not set. Set it globally with brainx.environ.set({key}={example}) "
        f"or locally with `with brainx.environ.context({key}={example}):`.") from None


def all() -> Dict[Hashable, Any]:
    """Every current setting, contexts applied (a copy: changing it changes nothing)."""
    out = dict(_DEFAULTS)
    out.update(_SETTINGS)
    for key, stack in _CONTEXTS.stack.items():
        if stack:
            out[key] = stack[-1]
    return out


def reset() -> None:
    """Forget every setting made with :func:`set` and every registered behaviour.

    Precision goes back to 32 bits (``jax_enable_x64`` off). The platform and
    host device count are JAX's and stay as they are; ``with`` blocks still
    open keep their values until they exit.

    Examples
    --------
    >>> from brainx import environ
    >>> saved = environ.all()
    >>> environ.set(gain=2.0)
    >>> environ.reset()
    >>> environ.get("gain", None) is None, environ.get_precision()
    (True, 32)
    >>> environ.set(**saved)   # put back what was set before
    """
    with _LOCK:
        _SETTINGS.clear()
        _BEHAVIORS.clear()
        _apply_precision(get(PRECISION))


@contextlib.contextmanager
def context(**kwargs: Any) -> Iterator[Dict[Hashable, Any]]:
    """Override settings inside a ``with`` block (this thread only); yields :func:`all`.

    The previous values come back when the block exits, also after an exception.
    ``platform`` and ``host_device_count`` are process-wide and refused here.

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
    for key in _GLOBAL_ONLY:
        if key in kwargs:
            raise ValueError(f"{key!r} cannot be set in a context: it is process-wide and fixed "
                             f"once JAX starts. Use brainx.environ.set_{key}() at the start of "
                             "the program.")
    kwargs = {key: _validate(key, value) for key, value in kwargs.items()}
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
            elif key == PRECISION:
                jax.config.update("jax_enable_x64", x64_before)


def get_dt() -> Any:
    """The integration time step ``dt`` (a brainunit time, or a number).

    Raises ``KeyError`` if it was never set: ``brainx.environ.set(dt=0.1 * u.ms)``.
    """
    return get(DT)


# -- platform and host devices ----------------------------------------------------
def _backends_started() -> bool:
    from jax._src import xla_bridge  # JAX internal; public API has no such query
    return xla_bridge.backends_are_initialized()


def _call_behavior(key: str, value: Any) -> None:
    behavior = _BEHAVIORS.get(key)
    if behavior is not None:
        behavior(value)


def set_platform(platform: str) -> None:
    """Run JAX on ``platform`` (``"cpu"``, ``"gpu"`` or ``"tpu"``); call it before any JAX work.

    Sets JAX's ``jax_platforms``. Once JAX has started its backends the
    platform is fixed: asking for another one raises ``RuntimeError`` (asking
    for the current one does nothing).

    Examples
    --------
    >>> from brainx import environ
    >>> environ.set_platform(environ.get_platform())   # the current one: a no-op
    """
    if platform not in SUPPORTED_PLATFORMS:
        raise ValueError(f"platform must be one of {SUPPORTED_PLATFORMS}, got {platform!r}.")
    if _backends_started():
        current = jax.default_backend()
        if current != platform:
            raise RuntimeError(
                f"Cannot switch the platform to {platform!r}: JAX has already started its "
                f"backends on {current!r} (an array was created or a function ran). Call "
                "brainx.environ.set_platform() at the start of the program, before any JAX "
                "work, or set the JAX_PLATFORMS environment variable.")
    else:
        jax.config.update("jax_platforms", platform)
    _call_behavior(PLATFORM, platform)


def get_platform() -> str:
    """The platform JAX runs on: ``"cpu"``, ``"gpu"`` or ``"tpu"``.

    Before JAX has started its backends, a platform chosen with
    :func:`set_platform` is reported without starting them; otherwise this
    asks JAX, which starts its default backend.
    """
    if not _backends_started():
        chosen = (jax.config.jax_platforms or "").split(",")[0].strip()
        if chosen in SUPPORTED_PLATFORMS:
            return chosen
        if chosen in ("cuda", "rocm"):
            return "gpu"
    return jax.default_backend()


def set_host_device_count(n: int) -> None:
    """Make JAX show ``n`` CPU devices (to try ``pmap``/sharding on one machine).

    Must run before JAX starts its backends (before the first array is made):
    afterwards it raises ``RuntimeError``, unless ``n`` is already the count.
    Sets JAX's ``jax_num_cpu_devices`` and, as brainstate does, the
    ``--xla_force_host_platform_device_count`` flag in ``XLA_FLAGS`` (seen by
    child processes too).

    Examples
    --------
    >>> from brainx import environ
    >>> environ.set_host_device_count(environ.get_host_device_count())   # unchanged: a no-op
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"host device count must be a positive integer, got {n!r}.")
    n = int(n)
    if _backends_started():
        current = get_host_device_count()
        if current != n:
            raise RuntimeError(
                f"Cannot set the host device count to {n}: JAX has already started its "
                f"backends with {current} CPU device(s) (an array was created or a function "
                "ran). Call brainx.environ.set_host_device_count() right after importing, "
                "before any JAX work.")
    else:
        flags = re.sub(r"--xla_force_host_platform_device_count=\S+", "",
                       os.environ.get("XLA_FLAGS", "")).split()
        os.environ["XLA_FLAGS"] = " ".join(
            [f"--xla_force_host_platform_device_count={n}"] + flags)
        jax.config.update("jax_num_cpu_devices", n)
    _call_behavior(HOST_DEVICE_COUNT, n)


def get_host_device_count() -> int:
    """The number of CPU devices JAX shows (or will show); does not start a backend."""
    configured = jax.config.jax_num_cpu_devices
    if configured and configured > 0:
        return int(configured)
    match = re.search(r"--xla_force_host_platform_device_count=(\d+)",
                      os.environ.get("XLA_FLAGS", ""))
    return int(match.group(1)) if match else 1


# -- precision and default dtypes ----------------------------------------------------
def set_precision(precision: PrecisionType) -> None:
    """Set the process-wide precision, as ``set(precision=...)``."""
    set(**{PRECISION: precision})


def get_precision() -> int:
    """The float precision in bits (32 unless set; ``"bf16"`` reports 16)."""
    precision = get(PRECISION)
    return 16 if precision == "bf16" else precision


def dftype():
    """The default float dtype for the current precision (``float32`` by default).

    Examples
    --------
    >>> import numpy as np
    >>> from brainx import environ
    >>> with environ.context(precision=16):
    ...     environ.dftype() is np.float16, environ.ditype() is np.int16
    (True, True)
    """
    precision = get(PRECISION)
    return {64: np.float64, 32: np.float32, 16: np.float16, "bf16": jnp.bfloat16,
            8: jnp.float8_e5m2}[precision]


def ditype():
    """The default integer dtype for the current precision."""
    return {64: np.int64, 32: np.int32, 16: np.int16, 8: np.int8}[get_precision()]


def dutype():
    """The default unsigned integer dtype for the current precision."""
    return {64: np.uint64, 32: np.uint32, 16: np.uint16, 8: np.uint8}[get_precision()]


def dctype():
    """The default complex dtype for the current precision (complex128 only at 64 bits)."""
    return np.complex128 if get_precision() == 64 else np.complex64


def tolerance() -> np.ndarray:
    """A comparison tolerance for the current precision, as a NumPy scalar of its float type.

    ``1e-12`` (float64) at 64 bits, ``1e-5`` (float32) at 32 bits, ``1e-2``
    (float16) below.
    """
    precision = get_precision()
    if precision == 64:
        return np.asarray(1e-12, dtype=np.float64)
    if precision == 32:
        return np.asarray(1e-5, dtype=np.float32)
    return np.asarray(1e-2, dtype=np.float16)


# -- behaviours ---------------------------------------------------------------------------
def register_default_behavior(key: Hashable, behavior: Callable[[Any], Any],
                              replace_if_exist: bool = False) -> None:
    """Call ``behavior(new_value)`` whenever ``key`` changes through :func:`set` or :func:`context`.

    Examples
    --------
    >>> from brainx import environ
    >>> seen = []
    >>> environ.register_default_behavior("gain", seen.append)
    >>> with environ.context(gain=3):
    ...     pass
    >>> seen, environ.unregister_default_behavior("gain")
    ([3], True)
    """
    if not callable(behavior):
        raise TypeError(f"behavior must be callable, got {behavior!r}.")
    with _LOCK:
        if key in _BEHAVIORS and not replace_if_exist:
            raise ValueError(f"A behavior for {key!r} is already registered; pass "
                             "replace_if_exist=True to replace it.")
        _BEHAVIORS[key] = behavior


def unregister_default_behavior(key: Hashable) -> bool:
    """Remove the behaviour registered for ``key``; ``True`` if there was one."""
    with _LOCK:
        return _BEHAVIORS.pop(key, None) is not None


def list_registered_behaviors() -> List[Hashable]:
    """The keys that have a registered behaviour."""
    return list(_BEHAVIORS)
