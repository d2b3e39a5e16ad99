"""Hooks on every state: one registry, run before each state's own hooks.

The :class:`GlobalHookRegistry` is a :class:`~brainx.HookManager` of which
there is one (``GlobalHookRegistry.instance()``). Its hooks run for every
state, before the state's own hooks of the same type; a global
``write_before`` hook's ``transformed_value`` is what the state's own
``write_before`` hooks then see. The functions below are brainstate's
shortcuts to it. Global ``init`` hooks are the only ``init`` hooks a state's
creation can run (its own can only be registered after).
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from brainx.state.hook_manager import HookConfig, HookManager
from brainx.state.hooks import Hook, HookContext, HookHandle, HookType

__all__ = ["GlobalHookRegistry", "register_state_hook", "unregister_state_hook",
           "clear_state_hooks", "has_state_hooks", "list_state_hooks"]


class GlobalHookRegistry(HookManager):
    """The hooks that run for every state (one instance: :meth:`instance`).

    Examples
    --------
    >>> import brainx
    >>> seen = []
    >>> handle = brainx.register_state_hook("read", lambda ctx: seen.append(ctx.state_name))
    >>> a, b = brainx.State(1, name="a"), brainx.State(2, name="b")
    >>> _ = a.value + b.value
    >>> handle.remove(), seen
    (True, ['a', 'b'])
    """

    _instance: Optional["GlobalHookRegistry"] = None

    def __new__(cls, config: Optional[HookConfig] = None):
        if cls._instance is None:
            instance = super().__new__(cls)
            HookManager.__init__(instance, config)
            cls._instance = instance
        return cls._instance

    def __init__(self, config: Optional[HookConfig] = None):
        if config is not None:  # the one instance is made in __new__; a config replaces its own
            self.config = config

    @classmethod
    def instance(cls) -> "GlobalHookRegistry":
        """The registry."""
        return cls._instance if cls._instance is not None else cls()

    @classmethod
    def reset(cls) -> None:
        """Remove every global hook and start a new registry (for tests)."""
        if cls._instance is not None:
            cls._instance.clear_hooks()
        cls._instance = None

    def __deepcopy__(self, memo: Any) -> "GlobalHookRegistry":
        return self

    def __reduce__(self):
        return (GlobalHookRegistry.instance, ())


def register_state_hook(hook_type: HookType, callback: Callable[[HookContext], Any],
                        priority: int = 0, name: Optional[str] = None,
                        enabled: bool = True) -> HookHandle:
    """Register a hook that runs for every state (before each state's own hooks).

    The arguments are those of :meth:`State.register_hook <brainx.State.register_hook>`;
    only ``init`` hooks see a state as it is created (its own hooks come later).

    Parameters
    ----------
    hook_type : {'read', 'write_before', 'write_after', 'restore', 'init'}
        When it runs, for any state.
    callback : callable
        ``callback(context)``; ``context.state`` tells which state.
    priority : int
        Orders the global hooks of one type (higher first); all of them run
        before the state's own.
    name : str, optional
        Names the hook in errors and warnings.
    enabled : bool
        ``False``: registered, but off until ``handle.enable()``.

    Returns
    -------
    HookHandle
        Disables, enables or removes the hook.

    Examples
    --------
    >>> import brainx
    >>> made = []
    >>> with brainx.register_state_hook("init", lambda ctx: made.append(ctx.init_metadata["name"])):
    ...     w = brainx.ParamState(0.5, name="w")
    >>> made
    ['w']
    """
    return GlobalHookRegistry.instance().register_hook(hook_type, callback, priority, name,
                                                       enabled)


def unregister_state_hook(handle: HookHandle) -> bool:
    """Remove a global hook; ``False`` if it was not registered."""
    return GlobalHookRegistry.instance().unregister_hook(handle)


def clear_state_hooks(hook_type: Optional[HookType] = None) -> None:
    """Remove every global hook (of one type, or all)."""
    GlobalHookRegistry.instance().clear_hooks(hook_type)


def has_state_hooks(hook_type: Optional[HookType] = None) -> bool:
    """Whether a global hook is registered (with a type: an enabled one of that type)."""
    return GlobalHookRegistry.instance().has_hooks(hook_type)


def list_state_hooks(hook_type: Optional[HookType] = None) -> List[Hook]:
    """The registered global hooks (of one type, or all)."""
    return GlobalHookRegistry.instance().get_hooks(hook_type)
