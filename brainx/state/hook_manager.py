"""The hooks of one state (or of every state), in priority order, and how they run.

A :class:`HookManager` keeps a list of :class:`~brainx.state.hooks.Hook` s per
hook type, and a sorted tuple of the enabled ones per type, rebuilt after a
change (registration, removal, enable, disable). Running the hooks reads that
tuple without a lock, so a hook may register or remove hooks, and other
threads may, while hooks run; the lock only guards the changes.

What a hook's exception does is the manager's :class:`HookConfig`:

=============  ==========================================================
``on_error``   a hook raises ...
=============  ==========================================================
``'log'``      a :class:`~brainx.HookWarning` (or ``error_logger``); the
               other hooks run and the operation goes on (the default)
``'raise'``    a :class:`~brainx.HookExecutionError` from the original;
               the state keeps the value it had before the operation
``'ignore'``   nothing; the other hooks run
=============  ==========================================================

A ``write_before`` hook that cancels raises
:class:`~brainx.HookCancellationError` whatever ``on_error`` says.

The states ask this module, before anything else, whether any manager holds
a hook at all (:func:`watch_hook_activity`): while none does, reading and
writing a state costs one test of a flag more than it did without hooks.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple

from brainx.state.hooks import (
    HOOK_TYPES, Hook, HookCancellationError, HookContext, HookExecutionError, HookHandle,
    HookType, HookWarning, InitHookContext, MutableWriteHookContext, ReadHookContext,
    RestoreHookContext, WriteHookContext, check_hook_type,
)

__all__ = ["HookConfig", "HookManager", "watch_hook_activity", "watch_hook_changes", "hooks_active"]

# -- how many managers hold a hook: the states' fast path reads a flag made from it --
_ACTIVE = [0]
_ACTIVE_LOCK = threading.RLock()  # re-entrant: a manager's __del__ may run inside it (gc)
_WATCHERS: List[Callable[[bool], None]] = []
_CHANGE_WATCHERS: List[Callable[[], None]] = []


def watch_hook_activity(callback: Callable[[bool], None]) -> None:
    """Call ``callback(active)`` now and whenever hooks appear (``True``) or all go (``False``)."""
    with _ACTIVE_LOCK:
        _WATCHERS.append(callback)
        callback(_ACTIVE[0] > 0)


def watch_hook_changes(callback: Callable[[], None]) -> None:
    """Call ``callback()`` whenever a hook is registered, removed, enabled or disabled.

    Hooks run while a transform traces, so what they do is part of a compiled
    function: ``brainx.state`` makes every compiled function trace again on
    its next call.
    """
    _CHANGE_WATCHERS.append(callback)


def _hooks_edited() -> None:
    for callback in _CHANGE_WATCHERS:
        callback()


def hooks_active() -> bool:
    """Whether any manager (a state's, or the global registry) holds a hook."""
    return _ACTIVE[0] > 0


def _count_manager(delta: int) -> None:
    with _ACTIVE_LOCK:
        before = _ACTIVE[0] > 0
        _ACTIVE[0] += delta
        after = _ACTIVE[0] > 0
        if before != after:
            for callback in _WATCHERS:
                callback(after)


@dataclass
class HookConfig:
    """What a manager does when one of its hooks raises (see the module's table).

    Parameters
    ----------
    on_error : {'log', 'raise', 'ignore'}
        ``'warn'`` is accepted for ``'log'``.
    error_logger : callable, optional
        ``error_logger(message, error, hook, context)``, called in place of the
        warning under ``'log'``.
    max_errors_per_hook : int
        With ``disable_on_error``: how many errors disable a hook.
    disable_on_error : bool
        Disable a hook after ``max_errors_per_hook`` errors.

    Examples
    --------
    >>> import brainx
    >>> s = brainx.State(1.0)
    >>> s.hooks.config = brainx.HookConfig(on_error="raise")
    >>> _ = s.register_hook("read", lambda ctx: 1 / 0, name="broken")
    >>> try:
    ...     s.value
    ... except brainx.HookExecutionError as e:
    ...     print(type(e.__cause__).__name__)
    ZeroDivisionError
    """

    on_error: Literal["raise", "log", "ignore", "warn"] = "log"
    error_logger: Optional[Callable[[str, Exception, Hook, HookContext], None]] = None
    max_errors_per_hook: int = 10
    disable_on_error: bool = False

    def __post_init__(self):
        if self.on_error not in ("raise", "log", "ignore", "warn"):
            raise ValueError(f"HookConfig(on_error={self.on_error!r}): use 'log' (warn and go "
                             "on), 'raise' or 'ignore'.")


class HookManager:
    """Registers, orders and runs the hooks of one state.

    Each state has its own (``state.hooks``, made on first use); the global
    registry is one more. Hooks of a type run by decreasing priority, then in
    registration order. ``write_before`` hooks chain: each sees in
    ``transformed_value`` what the ones before made of the written value.

    Parameters
    ----------
    config : HookConfig, optional
        What a hook's exception does (default: warn and go on).

    Examples
    --------
    >>> import brainx
    >>> manager, order = brainx.HookManager(), []
    >>> _ = manager.register_hook("read", lambda ctx: order.append("late"), priority=0)
    >>> _ = manager.register_hook("read", lambda ctx: order.append("early"), priority=9)
    >>> manager.execute_read_hooks(1.0, lambda: None)
    >>> order
    ['early', 'late']
    """

    def __init__(self, config: Optional[HookConfig] = None):
        self.config = config or HookConfig()
        self._lock = threading.RLock()
        self._hooks: Dict[str, List[Hook]] = {t: [] for t in HOOK_TYPES}
        self._cache: Optional[Dict[str, Tuple[Hook, ...]]] = None
        self._counted = False  # counted in _ACTIVE (holds a hook)

    # -- registration -------------------------------------------------------------------
    def register_hook(self, hook_type: HookType, callback: Callable[[HookContext], Any],
                      priority: int = 0, name: Optional[str] = None,
                      enabled: bool = True) -> HookHandle:
        """Add a hook of ``hook_type``; returns its :class:`~brainx.HookHandle`."""
        check_hook_type(hook_type)
        hook = Hook(callback, priority, name, enabled)
        with self._lock:
            self._hooks[hook_type].append(hook)
            self._changed()
        return HookHandle(weakref.ref(self), hook, hook_type)

    def unregister_hook(self, handle: HookHandle) -> bool:
        """Remove the hook of ``handle``; ``False`` if it is not (or no longer) here."""
        with self._lock:
            hooks = self._hooks.get(handle._hook_type, [])
            if not any(h is handle._hook for h in hooks):
                return False
            hooks.remove(handle._hook)
            self._changed()
        handle._removed = True
        return True

    def get_hooks(self, hook_type: Optional[HookType] = None) -> List[Hook]:
        """The registered hooks (of one type, or all), enabled or not, in registration order."""
        with self._lock:
            if hook_type is None:
                return [h for t in HOOK_TYPES for h in self._hooks[t]]
            return list(self._get_hook_list(hook_type))

    def clear_hooks(self, hook_type: Optional[HookType] = None) -> None:
        """Remove every hook (of one type, or all)."""
        with self._lock:
            if hook_type is None:
                for hooks in self._hooks.values():
                    hooks.clear()
            else:
                self._get_hook_list(hook_type).clear()
            self._changed()

    def has_hooks(self, hook_type: Optional[HookType] = None) -> bool:
        """Whether a hook is registered (with a type: an enabled hook of that type)."""
        if hook_type is not None:
            check_hook_type(hook_type, ValueError)
            return bool(self._sorted(hook_type))
        return self._counted

    def _get_hook_list(self, hook_type: str) -> List[Hook]:
        if hook_type not in self._hooks:
            check_hook_type(hook_type, ValueError)
        return self._hooks[hook_type]

    def _changed(self) -> None:
        """After a registration or removal (lock held): drop the cache, update the count."""
        self._cache = None
        _hooks_edited()
        holds = any(self._hooks.values())
        if holds != self._counted:
            self._counted = holds
            _count_manager(1 if holds else -1)

    def _invalidate_cache(self) -> None:
        self._cache = None
        _hooks_edited()

    def _sorted(self, hook_type: str) -> Tuple[Hook, ...]:
        cache = self._cache
        if cache is None:
            with self._lock:
                cache = self._cache = {t: tuple(sorted(h for h in hooks if h.enabled))
                                       for t, hooks in self._hooks.items()}
        return cache[hook_type]

    # -- running ------------------------------------------------------------------------
    def execute_read_hooks(self, value: Any, state_ref: Callable[[], Any]) -> None:
        """Run the ``read`` hooks with a :class:`~brainx.ReadHookContext`."""
        self._run_type("read", ReadHookContext, state_ref, value=value)

    def execute_write_before_hooks(self, new_value: Any, old_value: Any,
                                   state_ref: Callable[[], Any]) -> Any:
        """Run the ``write_before`` hooks, chained; returns the value to write.

        Raises :class:`~brainx.HookCancellationError` when one cancels.
        """
        value = new_value
        for hook in self._sorted("write_before"):
            ctx = MutableWriteHookContext("write_before", state_ref, value=new_value,
                                          old_value=old_value, transformed_value=value)
            self._run((hook,), ctx)
            if ctx.cancel:
                raise HookCancellationError(
                    f"write_before hook {hook.name!r} cancelled the write to "
                    f"{_describe(state_ref)}: {ctx.cancel_reason or 'no reason given'}. The "
                    "state keeps its value; write a value the hook accepts, or remove the hook.")
            if ctx.transformed_value is not None:
                value = ctx.transformed_value
        return value

    def execute_write_after_hooks(self, new_value: Any, old_value: Any,
                                  state_ref: Callable[[], Any]) -> None:
        """Run the ``write_after`` hooks with a :class:`~brainx.WriteHookContext`."""
        self._run_type("write_after", WriteHookContext, state_ref, value=new_value,
                       old_value=old_value)

    def execute_restore_hooks(self, new_value: Any, old_value: Any,
                              state_ref: Callable[[], Any]) -> None:
        """Run the ``restore`` hooks with a :class:`~brainx.RestoreHookContext`."""
        self._run_type("restore", RestoreHookContext, state_ref, value=new_value,
                       old_value=old_value)

    def execute_init_hooks(self, value: Any, state_ref: Callable[[], Any],
                           init_metadata: Optional[Dict[str, Any]] = None) -> None:
        """Run the ``init`` hooks with an :class:`~brainx.InitHookContext`."""
        self._run_type("init", InitHookContext, state_ref, value=value,
                       init_metadata=dict(init_metadata or {}))

    def _run_type(self, hook_type: str, context: type, state_ref: Callable[[], Any],
                  **fields: Any) -> None:
        """Run the enabled ``hook_type`` hooks, if any, with one ``context(...)`` for all."""
        hooks = self._sorted(hook_type)
        if hooks:
            self._run(hooks, context(hook_type, state_ref, **fields))

    def _run(self, hooks: Sequence[Hook], ctx: HookContext) -> None:
        for hook in hooks:
            try:
                hook.execute(ctx)
            except HookCancellationError:
                raise
            except HookExecutionError as e:
                self._handle_hook_error(hook, e.__cause__ or e, ctx)

    def _handle_hook_error(self, hook: Hook, error: BaseException, ctx: HookContext) -> None:
        hook._error_count += 1
        config = self.config
        disabled = config.disable_on_error and hook._error_count >= config.max_errors_per_hook
        if disabled:
            hook.enabled = False
            self._invalidate_cache()
        message = (f"{ctx.operation} hook {hook.name!r} of {_describe(ctx.state_ref)} raised "
                   f"{type(error).__name__}: {error} (error #{hook._error_count}"
                   f"{'; the hook is now disabled' if disabled else ''}).")
        if config.on_error == "raise":
            raise HookExecutionError(
                message + " The state keeps the value it had before the operation. Fix the "
                "hook, remove it (handle.remove()), or set HookConfig(on_error='log') to only "
                "warn.") from error
        if config.on_error in ("log", "warn"):
            if config.error_logger is not None:
                config.error_logger(message, error, hook, ctx)
            else:
                warnings.warn(message + " The operation went on (HookConfig(on_error='log')).",
                              HookWarning, stacklevel=4)

    # -- a manager is not copied with its state -----------------------------------------
    def __deepcopy__(self, memo: Any) -> "HookManager":
        return type(self)(self.config)

    def __reduce__(self):
        return (type(self), (self.config,))

    def __del__(self):
        if getattr(self, "_counted", False):
            self._counted = False
            try:
                _count_manager(-1)
            except Exception:  # pragma: no cover - at interpreter exit
                pass

    def __repr__(self) -> str:
        counts = ", ".join(f"{t}={len(h)}" for t, h in self._hooks.items() if h)
        return f"HookManager({counts or 'no hooks'})"


def _describe(state_ref: Callable[[], Any]) -> str:
    state = state_ref()
    return "a state that was garbage collected" if state is None else repr(state)
