"""State hooks: callbacks run when a state's value is read, written, restored or created.

A *hook* is a callback with a priority, a name and an on/off switch. It is
registered for one *hook type* on one state (``state.register_hook``) or on
every state (:func:`~brainx.register_state_hook`) and receives a *context*:
the operation, a weak reference to the state and the values involved. The
five types and their contexts:

==============  ===========================  ==============================================
hook type       context                      runs
==============  ===========================  ==============================================
``read``        :class:`ReadHookContext`     after ``state.value`` is read (``value``)
``write_before``:class:`MutableWriteHookContext`  before a ``state.value = x`` write: may
                                             replace ``x`` (``transformed_value``) or
                                             cancel the write (``cancel``)
``write_after`` :class:`WriteHookContext`    after the write (``value``, ``old_value``)
``restore``     :class:`RestoreHookContext`  after ``state.restore_value(x)``
``init``        :class:`InitHookContext`     when a state is created (global hooks only
                                             can see it: a state's own hooks come later)
==============  ===========================  ==============================================

Registering returns a :class:`HookHandle`, which enables, disables or removes
the hook, and removes it at the end of a ``with`` block. This module holds the
hook, its handle, the contexts and the errors, and :class:`HookOwner`, what a
handle needs of the manager that holds its hook; :mod:`brainx.state.hook_manager`
(which imports this module, never the reverse) keeps and runs the hooks of one
state, :mod:`brainx.state.global_hooks` those of every state. When hooks run inside a transform, and what that costs a program
with none, is told in ``docs/state-hooks.md``.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Literal, Optional, Protocol, runtime_checkable

from brainx.errors import BrainxError

__all__ = [
    "HookContext", "ReadHookContext", "WriteHookContext", "MutableWriteHookContext",
    "RestoreHookContext", "InitHookContext", "Hook", "HookHandle", "HookError",
    "HookExecutionError", "HookRegistrationError", "HookCancellationError", "HookWarning",
    "HOOK_TYPES", "HookType", "HookOwner",
]

HookType = Literal["read", "write_before", "write_after", "restore", "init"]
HOOK_TYPES = ("read", "write_before", "write_after", "restore", "init")


# -- errors -----------------------------------------------------------------------------
class HookError(BrainxError):
    """Base class of the hook errors."""


class HookExecutionError(HookError):
    """A hook raised (under ``HookConfig(on_error='raise')``); the original is its ``__cause__``."""


class HookRegistrationError(HookError):
    """A hook could not be registered (its callback is not callable, its type is unknown)."""


class HookCancellationError(HookError):
    """A ``write_before`` hook cancelled the write; the state keeps its value."""


class HookWarning(UserWarning):
    """Warns of a hook that raised, under ``HookConfig(on_error='log')`` (the default)."""


def check_hook_type(hook_type: Any, error: type = HookRegistrationError) -> None:
    """Refuse an unknown hook type, naming the five known ones."""
    if hook_type not in HOOK_TYPES:
        raise error(f"Unknown hook type {hook_type!r}: use one of {', '.join(HOOK_TYPES)}.")


# -- contexts ---------------------------------------------------------------------------
@dataclass(slots=True)
class HookContext:
    """What a hook is told: the operation, the state (weakly) and when.

    Parameters
    ----------
    operation : str
        The hook type that runs: ``'read'``, ``'write_before'``, ...
    state_ref : weakref.ref
        A weak reference to the state (a hook does not keep it alive).
    timestamp : float
        ``time.time()`` when the context was made.
    metadata : dict
        Free for hooks to use.

    Examples
    --------
    >>> import weakref, brainx
    >>> s = brainx.State(1.0, name="gain")
    >>> ctx = brainx.HookContext(operation="read", state_ref=weakref.ref(s))
    >>> ctx.state is s, ctx.state_name
    (True, 'gain')
    """

    operation: str
    state_ref: Any
    timestamp: float = field(default_factory=time.time)
    metadata: Dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> Any:
        """The state, or ``None`` once it was garbage collected."""
        return self.state_ref()

    @property
    def state_name(self) -> Optional[str]:
        """The state's name (``None``: unnamed, or collected)."""
        state = self.state_ref()
        return None if state is None else state.name


@dataclass(slots=True)
class ReadHookContext(HookContext):
    """The context of a ``read`` hook: ``value`` is the value read (a tracer inside a transform)."""

    value: Any = None


@dataclass(slots=True)
class WriteHookContext(HookContext):
    """The context of a ``write_after`` hook: the new ``value`` and the ``old_value``."""

    value: Any = None
    old_value: Any = None


@dataclass(slots=True)
class MutableWriteHookContext(WriteHookContext):
    """The context of a ``write_before`` hook, which may change or cancel the write.

    ``value`` is the value the program wrote; ``transformed_value`` the value
    the hooks before this one made of it (the one to write so far). Set
    ``transformed_value`` to write something else, or ``cancel = True`` (with a
    ``cancel_reason``) to refuse the write: the writer gets a
    :class:`HookCancellationError` and the state keeps its value.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> s = brainx.State(jnp.zeros(2))
    >>> def clip(ctx):
    ...     ctx.transformed_value = jnp.clip(ctx.transformed_value, -1.0, 1.0)
    >>> with s.register_hook("write_before", clip):
    ...     s.value = jnp.array([5.0, -0.5])
    >>> s.value.tolist()
    [1.0, -0.5]
    """

    transformed_value: Any = None
    cancel: bool = False
    cancel_reason: Optional[str] = None


@dataclass(slots=True)
class RestoreHookContext(WriteHookContext):
    """The context of a ``restore`` hook: the restored ``value`` and the ``old_value``."""


@dataclass(slots=True)
class InitHookContext(HookContext):
    """The context of an ``init`` hook: the initial ``value`` and the ``init_metadata``.

    ``init_metadata`` holds ``name`` (also as ``_name``, brainstate's key), ``tag``
    and the other keyword arguments the state was created with.
    """

    value: Any = None
    init_metadata: Dict[str, Any] = field(default_factory=dict)


# -- hooks ------------------------------------------------------------------------------
_IDS = itertools.count()
_IDS_LOCK = threading.Lock()


class Hook:
    """A callback with a priority, a name and an on/off switch.

    Hooks of one type run in decreasing ``priority``, and in the order they
    were registered among equal priorities (``sorted`` orders them so).

    Parameters
    ----------
    callback : callable
        ``callback(context)``; its return value is ignored by the states.
    priority : int
        Higher runs earlier. Default 0.
    name : str, optional
        Shown in errors and warnings (default ``hook_<id>``).
    enabled : bool
        Whether it runs.

    Examples
    --------
    >>> import brainx
    >>> low, high = brainx.Hook(print, priority=0), brainx.Hook(print, priority=5)
    >>> sorted([low, high])[0] is high
    True
    """

    def __init__(self, callback: Callable[[HookContext], Any], priority: int = 0,
                 name: Optional[str] = None, enabled: bool = True):
        if not callable(callback):
            raise HookRegistrationError(
                f"A hook's callback must be callable (it is called with a HookContext); got "
                f"{callback!r} of type {type(callback).__name__}.")
        with _IDS_LOCK:
            self.hook_id = next(_IDS)
        self.callback = callback
        self.priority = priority
        self.name = name or f"hook_{self.hook_id}"
        self.enabled = enabled
        self._error_count = 0

    def execute(self, context: HookContext) -> Any:
        """Run the callback (``None`` when disabled); an exception becomes a ``HookExecutionError``."""
        if not self.enabled:
            return None
        try:
            return self.callback(context)
        except HookCancellationError:
            raise
        except Exception as e:
            raise HookExecutionError(
                f"{context.operation} hook {self.name!r} raised {type(e).__name__}: {e}") from e

    def __lt__(self, other: "Hook") -> bool:
        if self.priority != other.priority:
            return self.priority > other.priority
        return self.hook_id < other.hook_id

    def __repr__(self) -> str:
        status = "enabled" if self.enabled else "disabled"
        return f"Hook(name={self.name!r}, priority={self.priority}, {status})"


@runtime_checkable
class HookOwner(Protocol):
    """What a :class:`HookHandle` needs of the manager that holds its hook.

    :class:`~brainx.HookManager` (and so the global registry) is one. The
    handle keeps only a weak reference to it, so a handle does not keep a
    state's hooks alive.
    """

    def unregister_hook(self, handle: "HookHandle") -> bool:
        """Remove the handle's hook; ``False`` if it is not (or no longer) held."""

    def _invalidate_cache(self) -> None:
        """Forget the sorted hooks, after a hook was enabled or disabled."""


class HookHandle:
    """Enables, disables or removes one registered hook; a ``with`` block removes it on exit.

    Examples
    --------
    >>> import brainx
    >>> s, seen = brainx.State(1.0), []
    >>> handle = s.register_hook("read", lambda ctx: seen.append(ctx.value))
    >>> _ = s.value; handle.disable(); _ = s.value; handle.enable(); _ = s.value
    >>> seen, handle.remove(), handle.is_removed()
    ([1.0, 1.0], True, True)
    """

    def __init__(self, manager_ref: "weakref.ref[HookOwner]", hook: Hook, hook_type: str):
        self._manager_ref = manager_ref
        self._hook = hook
        self._hook_type = hook_type
        self._removed = False

    def _manager(self, action: str) -> HookOwner:
        if self._removed:
            raise HookError(f"Cannot {action} hook {self.name!r}: it was removed. Register it "
                            "again to use it.")
        manager = self._manager_ref()
        if manager is None:
            raise HookError(f"Cannot {action} hook {self.name!r}: its state (and the state's "
                            "hook manager) was garbage collected.")
        return manager

    def enable(self) -> None:
        """Let the hook run again."""
        manager = self._manager("enable")
        self._hook.enabled = True
        manager._invalidate_cache()

    def disable(self) -> None:
        """Stop the hook from running (it stays registered)."""
        manager = self._manager("disable")
        self._hook.enabled = False
        manager._invalidate_cache()

    def remove(self) -> bool:
        """Unregister the hook; ``False`` if it was already gone."""
        if self._removed:
            return False
        manager = self._manager_ref()
        if manager is None or not manager.unregister_hook(self):
            return False
        self._removed = True
        return True

    def is_enabled(self) -> bool:
        """Whether the hook runs (a removed hook does not)."""
        return not self._removed and self._hook.enabled

    def is_removed(self) -> bool:
        """Whether :meth:`remove` removed the hook."""
        return self._removed

    @property
    def name(self) -> str:
        """The hook's name."""
        return self._hook.name

    @property
    def priority(self) -> int:
        """The hook's priority."""
        return self._hook.priority

    def __enter__(self) -> "HookHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __repr__(self) -> str:
        if self._removed:
            return f"HookHandle(name={self.name!r}, removed)"
        status = "enabled" if self._hook.enabled else "disabled"
        return f"HookHandle(name={self.name!r}, priority={self.priority}, {status})"
