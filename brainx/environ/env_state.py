"""One set of environment settings: :class:`EnvironmentState`.

brainx keeps the settings a program makes in one global
:class:`EnvironmentState`; every function of :mod:`brainx.environ` takes an
``env=`` keyword to work on another one instead (an isolated set of settings
for a test or a sub-simulation, as in brainstate).

Its ``settings`` are process-wide (every thread sees what :func:`set`
stored), while ``contexts`` are per thread: a ``with environ.context(...)``
block in one thread is invisible to the others, as in brainstate 0.6
(brainstate 0.5.4 made the whole object thread-local, so a value set in the
main thread was missing in worker threads).

The precision a fresh environment starts from, :data:`INITIAL_PRECISION`,
is read once, when brainx is imported, from JAX's ``jax_enable_x64`` flag:
64 when float64 was already enabled (``jax.config.update`` or the
``JAX_ENABLE_X64`` environment variable), else ``DEFAULT_PRECISION`` (32).
Importing brainx never changes that flag.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any, Callable, DefaultDict, Dict, Hashable, List, Optional

import jax

from .keys import DEFAULT_PRECISION, PRECISION

UNSET = object()  # what lookup() gives for a key that is not set
#: the precision an unset environment reports: JAX's x64 setting when brainx was imported
INITIAL_PRECISION = 64 if jax.config.jax_enable_x64 else DEFAULT_PRECISION
DEFAULTS: Dict[Hashable, Any] = {PRECISION: INITIAL_PRECISION}  # what get() and all() fall back to


class EnvironmentState:
    """A set of environment settings, behaviours and per-thread context stacks.

    Attributes
    ----------
    settings : dict
        The values :func:`brainx.environ.set` stored (seen by every thread).
    functions : dict
        The behaviours :func:`brainx.environ.register_default_behavior`
        registered, by key.
    locks : defaultdict of threading.RLock
        One reentrant lock per key, held while a key is changed.

    The property :attr:`contexts` gives this thread's stacks of values pushed
    by open :func:`brainx.environ.context` blocks, by key.

    Examples
    --------
    >>> from brainx import environ
    >>> env = environ.EnvironmentState()
    >>> environ.set(gain=2.0, env=env)
    >>> environ.get("gain", env=env), environ.get("gain", None)
    (2.0, None)
    """

    def __init__(self) -> None:
        self.settings: Dict[Hashable, Any] = {}
        self.functions: Dict[Hashable, Callable[[Any], Any]] = {}
        self.locks: DefaultDict[Hashable, threading.RLock] = defaultdict(threading.RLock)
        self._local = threading.local()

    @property
    def contexts(self) -> DefaultDict[Hashable, List[Any]]:
        """This thread's context stacks (a value per open ``with`` block), by key."""
        try:
            return self._local.stacks
        except AttributeError:
            self._local.stacks = stacks = defaultdict(list)
            return stacks

    def __repr__(self) -> str:
        return (f"EnvironmentState(settings={self.settings!r}, "
                f"behaviors={sorted(map(str, self.functions))})")


GLOBAL_ENV = EnvironmentState()


def resolve(env: Optional[EnvironmentState]) -> EnvironmentState:
    """``env``, or the global environment when it is ``None``."""
    if env is None:
        return GLOBAL_ENV
    if not isinstance(env, EnvironmentState):
        raise TypeError(f"env must be a brainx.environ.EnvironmentState, got {env!r}.")
    return env


def lookup(env: EnvironmentState, key: Hashable) -> Any:
    """The value of ``key`` (innermost context, then ``set``, then the defaults), or ``UNSET``.

    A plain lookup: no trace in progress records it (see :func:`brainx.environ.get`).
    """
    stack = env.contexts.get(key)
    if stack:
        return stack[-1]
    value = env.settings.get(key, UNSET)
    if value is UNSET:
        value = DEFAULTS.get(key, UNSET)
    return value
