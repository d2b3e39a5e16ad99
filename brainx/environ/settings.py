"""Reading and changing settings: :func:`set`, :func:`get`, :func:`context` and friends.

Every function works on the global :class:`~brainx.environ.EnvironmentState`
unless given another one as ``env=``. Only the global one drives JAX's
process-wide flags (``precision=64`` switches ``jax_enable_x64``); a custom
one just stores values.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Mapping
from typing import Any, Callable, Dict, Hashable, Iterator, List, Optional, Tuple

import jax
import numpy as np

from brainx.state.trace import _THREAD

from . import dtypes, reads, step_values
from .env_state import DEFAULTS, GLOBAL_ENV, UNSET, EnvironmentState, lookup, resolve
from .keys import DT, GLOBAL_ONLY, HOST_DEVICE_COUNT, PLATFORM, PRECISION
from .platform import get_host_device_count, get_platform, set_host_device_count, set_platform

__all__ = ["set", "get", "all", "pop", "context", "reset", "get_dt",
           "register_default_behavior", "unregister_default_behavior",
           "list_registered_behaviors"]

# JAX's x64 flag is process-wide, context stacks are per thread: the global context(precision=)
# blocks open in any thread, oldest first. When one exits, the newest still open decides the flag.
_PRECISION_LOCK = threading.RLock()
_PRECISION_OVERRIDES: List[Tuple[object, Any]] = []

_MISSING = object()  # "no default given"
_UNSET = UNSET      # a default meaning "not set"
_DEFAULTS = DEFAULTS  # what get() and all() fall back to


def _validate(key: Hashable, value: Any) -> Any:
    """The value to store for ``key`` (normalised), or an error saying what is wrong."""
    if key == PRECISION:
        return dtypes.normalize_precision(value)
    if key == DT:
        mantissa = value.mantissa if hasattr(value, "mantissa") else value
        if np.ndim(mantissa) != 0:
            raise TypeError(f"dt must be a scalar (a number or a brainunit time), got {value!r}.")
        try:
            positive = bool(np.all(np.asarray(mantissa) > 0))
        except Exception:  # a tracer: cannot check, accept
            positive = True
        if not positive:
            raise ValueError(f"dt must be positive, got {value!r}.")
    return value


def _refuse_traced(key: Hashable, value: Any) -> None:
    """Refuse to store a value of a trace in progress: the setting would outlive the trace."""
    try:
        leaves = jax.tree.leaves(value)
    except Exception:  # pragma: no cover - a value JAX cannot flatten holds no tracer
        return
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        raise TypeError(
            f"brainx.environ.set({key}=...) was given a traced value (a JAX tracer of the "
            f"function being transformed): the setting would keep it after the trace ends. "
            f"Inside a transformed function set it for a block, "
            f"`with brainx.environ.context({key}=...):`, or set a concrete value outside. "
            f"Nothing was set.")


def _changed(env: EnvironmentState, key: Hashable, value: Any) -> None:
    """Tell JAX (global precision) and the registered behaviour that ``key`` is now ``value``."""
    if env is GLOBAL_ENV:
        reads.changed()  # compiled functions that read settings compare them on their next call
    if key == PRECISION and env is GLOBAL_ENV:
        dtypes.apply_to_jax(value)
    behavior = env.functions.get(key)
    if behavior is not None:
        behavior(value)


def set(platform: Optional[str] = None, host_device_count: Optional[int] = None,
        precision: Any = None, dt: Any = None, *, env: Optional[EnvironmentState] = None,
        **kwargs: Any) -> None:
    """Set defaults, e.g. ``set(dt=0.1 * u.ms, precision=32)``.

    ``precision`` (8, 16, 32, 64 or ``"bf16"``) also switches ``jax_enable_x64``
    (global environment only); ``platform`` and ``host_device_count`` go to
    :func:`set_platform` and :func:`set_host_device_count`. Values set here are
    seen by every thread and shadowed by any active :func:`context`.

    Nothing is changed when a value is refused. A registered behaviour that
    raises puts the old values back and the error propagates (brainstate 0.5.4
    keeps the new value and turns the error into a warning).

    Examples
    --------
    >>> from brainx import environ
    >>> environ.set(trial=1)
    >>> environ.get("trial")
    1
    >>> environ.pop("trial")
    1
    """
    env = resolve(env)
    if precision is not None:
        kwargs[PRECISION] = precision
    if dt is not None:
        kwargs[DT] = dt
    kwargs = {key: _validate(key, value) for key, value in kwargs.items()}
    for key, value in kwargs.items():
        _refuse_traced(key, value)
    if platform is not None:
        set_platform(platform)
    if host_device_count is not None:
        set_host_device_count(host_device_count)
    for key, value in kwargs.items():
        with env.locks[key]:
            before = env.settings.get(key, _UNSET)
            env.settings[key] = value
            try:
                _changed(env, key, _lookup(env, key))  # (not get: no read of a trace)
            except BaseException:
                if before is _UNSET:
                    del env.settings[key]
                else:
                    env.settings[key] = before
                if key == PRECISION and env is GLOBAL_ENV:
                    dtypes.apply_to_jax(get(PRECISION))
                raise


def pop(key: Hashable, default: Any = _MISSING, *,
        env: Optional[EnvironmentState] = None) -> Any:
    """Remove a default and return it (``default`` when it is not set).

    A key that was not set but has a built-in default (``precision``: the
    precision JAX's x64 flag gave at import) returns that default, as brainstate
    0.6 (whose fresh environments hold it as a setting); it stays in force. Any
    other unset key raises ``KeyError`` unless ``default`` is given.

    A key overridden by an open :func:`context` in this thread cannot be
    popped: that raises ``ValueError``. Registered behaviours are not called;
    popping ``precision`` puts ``jax_enable_x64`` back in line with the
    precision then in force (brainstate leaves the flag as it was).
    """
    env = resolve(env)
    depth = len(env.contexts.get(key, ()))
    if depth:
        raise ValueError(f"Cannot pop {key!r}: it is active in a context ({depth} context(s) "
                         "open in this thread override it). Pop it after the `with` block.")
    if env is GLOBAL_ENV:
        reads.changed()
    with env.locks[key]:
        if default is _MISSING and key not in env.settings:
            if key in DEFAULTS:   # unset, the default is in force: that is what is popped
                return DEFAULTS[key]
            raise KeyError(f"{key!r} not found in the environment, so it cannot be popped. "
                           f"Pass a default (environ.pop({key!r}, None)) to allow that.")
        value = env.settings.pop(key, default)
        if key == PRECISION and env is GLOBAL_ENV:
            dtypes.apply_to_jax(get(PRECISION))   # JAX's flag follows the precision now in force
        return value


def get(key: Hashable, default: Any = _MISSING, desc: Optional[str] = None, *,
        env: Optional[EnvironmentState] = None) -> Any:
    """The current value of ``key``: innermost :func:`context` first, then :func:`set`.

    ``"platform"`` and ``"host_device_count"`` are answered by
    :func:`get_platform` and :func:`get_host_device_count`. Raises ``KeyError``
    (with a hint on how to set it) when the key is unset and no ``default`` is
    given.

    Inside a brainx trace (``transform.jit``, a loop, ``vmap``, ``grad``), a
    per-step setting (``t``, ``i``, an array value: see
    :func:`~brainx.environ.set_per_step`) read from the global environment
    gives a tracer, an input of the compiled program that takes the
    setting's value at each call; any other setting gives its value, and the
    trace is made again when that value changes.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx import environ, transform
    >>> scale = transform.jit(lambda x: x * environ.get("t"))
    >>> for t in (1.0, 2.0):                 # one compilation, each call's t
    ...     with environ.context(t=t):
    ...         print(scale(jnp.ones(2)))
    [1. 1.]
    [2. 2.]
    """
    if key == PLATFORM:
        return get_platform()
    if key == HOST_DEVICE_COUNT:
        return get_host_device_count()
    env = resolve(env)
    value = _lookup(env, key)
    if env is GLOBAL_ENV and reads._RECORDERS.stack:  # a trace in progress depends on it
        if _step_input(key, value):
            reads.record(key, reads.PER_STEP)  # valid where the value comes from outside
            return step_values.traced_value(key)  # an input of the trace, not in its key
        reads.record(key, reads._NOT_SET if value is _UNSET else value)
    if value is not _UNSET:
        return value
    if default is not _MISSING:
        return default
    hint = f" ({desc})" if desc else ""
    example = "0.1 * u.ms" if key == DT else "value"
    raise KeyError(
        f"{key!r}{hint} not found in the environment: it is not set. Set it globally with "
        f"brainx.environ.set({key}={example}) or locally with "
        f"`with brainx.environ.context({key}={example}):`.") from None


_lookup = lookup


def current_value(key: Hashable, default: Any = None) -> Any:
    """The global value of ``key`` in this thread, read by no trace (``default`` if unset).

    Examples
    --------
    >>> from brainx import environ
    >>> from brainx.environ.settings import current_value
    >>> with environ.context(t=1.5):
    ...     current_value("t")
    1.5
    """
    value = _lookup(GLOBAL_ENV, key)
    return default if value is _UNSET else value


def _step_input(key: Hashable, value: Any) -> bool:
    """Whether a read of ``key`` (global, ``value``) in the trace in progress is an input of it.

    A per-step setting (:mod:`brainx.environ.step_values`) is, unless a
    ``context`` opened inside a trace in progress set it (that value is the
    trace's own) or no brainx transform is tracing (a plain recording).
    """
    return (value is not _UNSET and _THREAD.depth > 0 and not reads.shadowed(key)
            and step_values.is_per_step(key, value))


def settings_unchanged(read: Any) -> bool:
    """Whether the global settings a trace read (a dict, or snapshot pairs) still hold those values.

    A per-step setting the trace took as an input (:data:`~brainx.environ.reads.PER_STEP`)
    holds wherever its value comes from outside every trace in progress; where a
    ``context`` opened inside an enclosing trace sets it (a loop body's
    ``with environ.context(t=t):``), the value is that trace's own and the
    trace must be made again there.
    """
    pairs = read.items() if isinstance(read, dict) else read
    for key, value in pairs:
        if value is reads.PER_STEP:
            if reads.shadowed(key):
                return False
            continue
        now = _lookup(GLOBAL_ENV, key)
        if not reads.same_setting(value, reads._NOT_SET if now is _UNSET else now):
            return False
    return True


def all(*, env: Optional[EnvironmentState] = None) -> Dict[Hashable, Any]:
    """Every current setting, contexts applied (a copy: changing it changes nothing).

    Inside a brainx trace the per-step settings in it are tracers, as :func:`get` gives them.

    Examples
    --------
    >>> from brainx import environ
    >>> with environ.context(trial=2):
    ...     environ.all()["trial"]
    2
    """
    env = resolve(env)
    out = dict(_DEFAULTS)
    out.update(env.settings)
    for key, stack in env.contexts.items():
        if stack:
            out[key] = stack[-1]
    if env is GLOBAL_ENV and reads._RECORDERS.stack:
        for key, value in out.items():
            if _step_input(key, value):
                reads.record(key, reads.PER_STEP)
                out[key] = step_values.traced_value(key)
            else:
                reads.record(key, value)
    return out


class _SettingsRead(Mapping):
    """What :func:`context` yields inside a trace: the settings, each read when looked up.

    Yielding :func:`all` there would report every setting as read by the trace
    in progress, so a change of any of them, even one the function never
    looks at, would make ``jit`` trace again; here a trace depends on the keys
    it looks up (the whole set once it iterates).
    """

    __slots__ = ("_env",)

    def __init__(self, env: EnvironmentState):
        self._env = env

    def __getitem__(self, key: Hashable) -> Any:
        value = get(key, _UNSET, env=self._env)
        if value is _UNSET:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[Hashable]:
        return iter(all(env=self._env))

    def __len__(self) -> int:
        return len(all(env=self._env))


def reset(*, env: Optional[EnvironmentState] = None) -> None:
    """Forget every setting made with :func:`set` and every registered behaviour.

    Precision goes back to the one brainx was imported with (32 bits, or 64
    when JAX's x64 mode was on then), and ``jax_enable_x64`` follows. The
    platform and host device count are JAX's and stay as they are; ``with``
    blocks still open keep their values until they exit.

    Examples
    --------
    >>> from brainx import environ
    >>> saved = environ.all()
    >>> environ.set(gain=2.0)
    >>> environ.reset()
    >>> environ.get("gain", None) is None, environ.get_precision() == environ.INITIAL_PRECISION
    (True, True)
    >>> environ.set(**saved)   # put back what was set before
    """
    env = resolve(env)
    if env is GLOBAL_ENV:
        reads.changed()
    env.settings.clear()
    env.functions.clear()
    env.locks.clear()
    if env is GLOBAL_ENV:
        dtypes.apply_to_jax(get(PRECISION))


@contextlib.contextmanager
def context(*, env: Optional[EnvironmentState] = None,
            **kwargs: Any) -> Iterator[Dict[Hashable, Any]]:
    """Override settings inside a ``with`` block (this thread only); yields :func:`all`.

    The previous values come back when the block exits, also after an exception.
    ``platform`` and ``host_device_count`` are process-wide and refused here.
    ``precision`` switches JAX's process-wide ``jax_enable_x64`` flag, so it
    reaches other threads while the block is open; on exit the newest
    ``precision`` block still open in any thread decides the flag, else the
    global setting. A
    behaviour that raises on entry undoes the block's settings and the error
    propagates; one that raises while a value is put back on exit is reported
    as a ``RuntimeWarning`` (the block's own exception, if any, goes on).

    Examples
    --------
    >>> import brainunit as u
    >>> from brainx import environ
    >>> with environ.context(dt=1.0 * u.ms, trial=3) as settings:
    ...     settings["trial"], environ.get("trial")
    (3, 3)
    >>> environ.get("trial", None) is None
    True
    """
    env = resolve(env)
    for key in GLOBAL_ONLY:
        if key in kwargs:
            raise ValueError(f"Cannot set {key!r} in a context: it is process-wide and fixed "
                             f"once JAX starts. Use brainx.environ.set_{key}() at the start of "
                             "the program.")
    kwargs = {key: _validate(key, value) for key, value in kwargs.items()}
    stacks = env.contexts
    pushed = []
    inside_trace = env is GLOBAL_ENV and bool(reads._RECORDERS.stack)
    local = reads.shadow(kwargs) if inside_trace else ()  # opened inside a trace: its own values
    token = None
    try:
        for key, value in kwargs.items():
            with env.locks[key]:
                stacks[key].append(value)
                pushed.append(key)
                if key == PRECISION and env is GLOBAL_ENV:
                    token = object()
                    with _PRECISION_LOCK:
                        _PRECISION_OVERRIDES.append((token, value))
                _changed(env, key, value)
        yield _SettingsRead(env) if inside_trace else all(env=env)
    finally:
        if local:
            reads.unshadow(local)
        if pushed and env is GLOBAL_ENV:
            reads.changed()  # the block's values are gone, set or not before it
        for key in reversed(pushed):
            with env.locks[key]:
                stacks[key].pop()
                if not stacks[key]:
                    del stacks[key]
                current = _lookup(env, key)  # (not get: no read of a trace)
                try:
                    if current is not _UNSET:
                        _changed(env, key, current)
                except Exception as error:  # raising here would hide the block's own error
                    warnings.warn(f"The behavior registered for {key!r} raised while the "
                                  f"context restored {current!r}: {error!r}", RuntimeWarning,
                                  stacklevel=3)
                if key == PRECISION and token is not None:
                    _end_precision_override(token)


def _end_precision_override(token: object) -> None:
    """Forget a closed ``context(precision=)``; the newest one still open (any thread) sets x64."""
    with _PRECISION_LOCK:
        _PRECISION_OVERRIDES[:] = [o for o in _PRECISION_OVERRIDES if o[0] is not token]
        if _PRECISION_OVERRIDES:
            dtypes.apply_to_jax(_PRECISION_OVERRIDES[-1][1])


def get_dt(*, env: Optional[EnvironmentState] = None) -> Any:
    """The integration time step ``dt`` (a brainunit time, or a number).

    Raises ``KeyError`` if it was never set: ``brainx.environ.set(dt=0.1 * u.ms)``.
    """
    return get(DT, env=env)


# -- behaviours ---------------------------------------------------------------------------
def register_default_behavior(key: str, behavior: Callable[[Any], Any],
                              replace_if_exist: bool = False, *,
                              env: Optional[EnvironmentState] = None) -> None:
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
    if not isinstance(key, str):
        raise TypeError(f"A behavior's key must be a string (a setting's name), got {key!r}.")
    if not callable(behavior):
        raise TypeError(f"behavior must be callable, got {behavior!r}.")
    env = resolve(env)
    with env.locks[key]:
        if key in env.functions and not replace_if_exist:
            raise ValueError(f"A behavior for {key!r} is already registered; pass "
                             "replace_if_exist=True to replace it.")
        env.functions[key] = behavior


def unregister_default_behavior(key: str, *, env: Optional[EnvironmentState] = None) -> bool:
    """Remove the behaviour registered for ``key``; ``True`` if there was one."""
    env = resolve(env)
    with env.locks[key]:
        return env.functions.pop(key, None) is not None


def list_registered_behaviors(*, env: Optional[EnvironmentState] = None) -> List[str]:
    """The keys that have a registered behaviour."""
    return list(resolve(env).functions)
