"""The hook methods of :class:`~brainx.State`, and how a state runs its hooks.

:class:`HookableState` gives ``State`` brainstate's hook API
(``register_hook``, ``temporary_hook``, ``list_hooks``, ``hooks``, ...). A
state's :class:`~brainx.HookManager` is made on first use and kept in the
state's ``__dict__`` under a ``__brainx`` key, so ``copy``/``replace`` and
graph snapshots leave it behind: hooks belong to one state object.

The ``fire_*`` functions run the global hooks, then the state's own. ``State``
calls them only while some hook exists anywhere (see
:func:`~brainx.state.hook_manager.watch_hook_activity`). A hook's own reads and
writes of the state it runs for do not run that state's hooks again (in the
same thread), so a read hook may read ``ctx.state.value`` without recursing.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional

from brainx.state.global_hooks import GlobalHookRegistry
from brainx.state.hook_manager import HookManager
from brainx.state.hooks import Hook, HookContext, HookHandle, HookType
from brainx.state.weak_refs import StateRef

__all__ = ["HookableState", "fire_read", "fire_write_before", "fire_write_after",
           "fire_restore", "fire_init", "has_hooks_for"]

_KEY = "__brainx_hooks"  # in a state's __dict__: left out of copies and snapshots


class _Firing(threading.local):
    def __init__(self):
        self.states: set = set()  # ids of the states whose hooks run in this thread


_FIRING = _Firing()


class HookableState:
    """Brainstate's per-state hook API (mixed into :class:`~brainx.State`)."""

    __slots__ = ()

    @property
    def hooks(self) -> HookManager:
        """The state's own :class:`~brainx.HookManager` (made on first use)."""
        manager = self.__dict__.get(_KEY)
        if manager is None:
            manager = self.__dict__.setdefault(_KEY, HookManager())
        return manager

    @property
    def _hooks_manager(self) -> HookManager:
        return self.hooks

    @_hooks_manager.setter
    def _hooks_manager(self, manager: HookManager) -> None:
        """Give the state another manager (brainstate's way to set a :class:`HookConfig`)."""
        if not isinstance(manager, HookManager):
            raise TypeError(f"{self!r}._hooks_manager must be a HookManager, got {manager!r}.")
        self.__dict__[_KEY] = manager

    def register_hook(self, hook_type: HookType, callback: Callable[[HookContext], Any],
                      priority: int = 0, name: Optional[str] = None,
                      enabled: bool = True) -> HookHandle:
        """Run ``callback(context)`` on each ``hook_type`` operation on this state.

        Parameters
        ----------
        hook_type : {'read', 'write_before', 'write_after', 'restore', 'init'}
            When it runs (the :doc:`state hooks guide </state-hooks>` has the table, and what runs
            inside a transform).
        callback : callable
            Receives a :class:`~brainx.HookContext` of the type's kind.
        priority : int
            Higher runs earlier (after the global hooks of the type).
        name : str, optional
            Shown in errors and warnings.
        enabled : bool
            Whether it runs from the start.

        Returns
        -------
        HookHandle
            Disables, enables or removes the hook (and removes it at the end of
            a ``with`` block).

        Examples
        --------
        >>> import jax.numpy as jnp, brainx
        >>> v = brainx.State(jnp.zeros(2), name="v")
        >>> log = []
        >>> h = v.register_hook("write_after",
        ...                     lambda ctx: log.append((ctx.old_value.tolist(), ctx.value.tolist())))
        >>> v.value = jnp.ones(2)
        >>> log
        [([0.0, 0.0], [1.0, 1.0])]
        """
        return self.hooks.register_hook(hook_type, callback, priority, name, enabled)

    def unregister_hook(self, handle: HookHandle) -> bool:
        """Remove a hook of this state; ``False`` if it was not registered here."""
        manager = self.__dict__.get(_KEY)
        return manager is not None and manager.unregister_hook(handle)

    def list_hooks(self, hook_type: Optional[HookType] = None) -> List[Hook]:
        """This state's hooks (of one type, or all), not the global ones."""
        manager = self.__dict__.get(_KEY)
        return [] if manager is None else manager.get_hooks(hook_type)

    def clear_hooks(self, hook_type: Optional[HookType] = None) -> None:
        """Remove this state's hooks (of one type, or all)."""
        manager = self.__dict__.get(_KEY)
        if manager is not None:
            manager.clear_hooks(hook_type)

    def has_hooks(self, hook_type: Optional[HookType] = None) -> bool:
        """Whether this state has a hook of its own (with a type: an enabled one)."""
        return self.hooks.has_hooks(hook_type)

    @contextlib.contextmanager
    def temporary_hook(self, hook_type: HookType, callback: Callable[[HookContext], Any],
                       priority: int = 0) -> Iterator[HookHandle]:
        """A hook registered for the ``with`` block only.

        Examples
        --------
        >>> import brainx
        >>> s, seen = brainx.State(3), []
        >>> with s.temporary_hook("read", lambda ctx: seen.append(ctx.value)):
        ...     _ = s.value
        >>> _ = s.value
        >>> seen
        [3]
        """
        handle = self.register_hook(hook_type, callback, priority)
        try:
            yield handle
        finally:
            handle.remove()


# -- running a state's hooks (State calls these while hooks exist) -------------------------
def _managers(state: Any, hook_type: str) -> List[HookManager]:
    """The managers with an enabled ``hook_type`` hook for ``state``: the global one first."""
    found = []
    registry = GlobalHookRegistry._instance
    if registry is not None and registry._counted and registry._sorted(hook_type):
        found.append(registry)
    own = state.__dict__.get(_KEY)
    if own is not None and own._counted and own._sorted(hook_type):
        found.append(own)
    if found and id(state) in _FIRING.states:
        return []  # a hook of this state is running in this thread: no recursion
    return found


def has_hooks_for(state: Any, *hook_types: str) -> bool:
    """Whether an operation of one of ``hook_types`` on ``state`` would run a hook."""
    return any(_managers(state, t) for t in hook_types)


def _fire(state: Any, hook_type: str, run: Callable[[HookManager, "weakref.ref"], None]) -> None:
    """Call ``run(manager, state_ref)`` for each manager with a ``hook_type`` hook for ``state``.

    Global first. Meanwhile ``state`` is marked as running its hooks in this
    thread, so a hook's own reads and writes of it do not run them again; the
    mark goes whatever a hook raises.
    """
    managers = _managers(state, hook_type)
    if not managers:
        return
    _FIRING.states.add(id(state))
    try:
        ref = StateRef(state)
        for manager in managers:
            run(manager, ref)
    finally:
        _FIRING.states.discard(id(state))


def fire_read(state: Any, value: Any) -> None:
    """Run the ``read`` hooks of ``state`` (global first)."""
    _fire(state, "read", lambda manager, ref: manager.execute_read_hooks(value, ref))


def fire_write_before(state: Any, value: Any, old_value: Any) -> Any:
    """Run the ``write_before`` hooks, chained (global first); the value to write."""
    chained = [value]

    def run(manager: HookManager, ref: "weakref.ref") -> None:
        chained[0] = manager.execute_write_before_hooks(chained[0], old_value, ref)

    _fire(state, "write_before", run)
    return chained[0]


def fire_write_after(state: Any, value: Any, old_value: Any) -> None:
    """Run the ``write_after`` hooks (global first)."""
    _fire(state, "write_after",
          lambda manager, ref: manager.execute_write_after_hooks(value, old_value, ref))


def fire_restore(state: Any, value: Any, old_value: Any) -> None:
    """Run the ``restore`` hooks (global first)."""
    _fire(state, "restore",
          lambda manager, ref: manager.execute_restore_hooks(value, old_value, ref))


def fire_init(state: Any, value: Any, metadata: Dict[str, Any]) -> None:
    """Run the global ``init`` hooks (a new state has none of its own yet)."""
    _fire(state, "init", lambda manager, ref: manager.execute_init_hooks(value, ref, metadata))
