"""The default generator's key, one per thread.

:data:`brainx.random.DEFAULT` is one :class:`~brainx.random.RandomState`
object (compiled functions hold it like any state), but its key is kept per
thread: the thread that created it (the importing thread) uses the seeded
key, and every other thread, on its first draw, gets a key of its own folded
from that one. So models running in separate threads never share a key: no
draw is repeated and no thread sees another's tracer. Seeding inside a thread
(``brainx.random.seed(k)``) sets that thread's key only, which is how to get a
reproducible stream per thread.

The key is made on first use, not at import, so importing brainx touches no
JAX backend.
"""

from __future__ import annotations

import threading
from typing import Any

import jax
import jax.random as jr

from brainx.random.state import RandomState
from brainx.state.state import State

__all__ = ["PerThreadRandomState"]

_HOME = "_home_key"  # in the state's __dict__: the home thread's key


class _Unseeded:
    """The key of a thread that has not drawn yet: made from ``seed`` on first use."""

    __slots__ = ("seed",)

    def __init__(self, seed: int):
        self.seed = seed

    def __repr__(self) -> str:
        return f"<key of seed {self.seed}, made on first use>"


class PerThreadRandomState(RandomState):
    """A :class:`RandomState` whose key is kept per thread (see the module docstring).

    Examples
    --------
    >>> import threading, brainx
    >>> rng = brainx.random.per_thread.PerThreadRandomState(0)
    >>> main = rng.normal()
    >>> other = []
    >>> t = threading.Thread(target=lambda: other.append(rng.normal()))
    >>> t.start(); t.join()
    >>> bool(main != other[0])
    True
    """

    _bookkeeping_attrs = RandomState._bookkeeping_attrs + (
        _HOME, "_home", "_local", "_lock", "_forks")  # not copied into snapshots

    def __init__(self, seed: int, name: str = "DEFAULT"):
        self._home = threading.get_ident()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._forks = 0
        State.__init__(self, _Unseeded(seed), name)

    @property
    def _value(self) -> Any:
        if threading.get_ident() == self._home:
            value = self.__dict__[_HOME]
            if type(value) is _Unseeded:
                value = self.__dict__[_HOME] = _make_key(value.seed)
            return value
        value = getattr(self._local, "key", None)
        if value is None:
            value = self._local.key = self._fork()
        return value

    @_value.setter
    def _value(self, value: Any) -> None:
        if threading.get_ident() == self._home:
            self.__dict__[_HOME] = value
        else:
            self._local.key = value

    def clone(self) -> RandomState:
        """A new, ordinary :class:`RandomState` with a key split from this thread's."""
        return RandomState(self.split_key())

    def _fork(self) -> Any:
        """A key for a thread drawing for the first time: folded from the home thread's."""
        with self._lock:
            self._forks += 1
            n = self._forks
            home = self.__dict__[_HOME]
            if type(home) is _Unseeded:
                home = self.__dict__[_HOME] = _make_key(home.seed)
        with jax.ensure_compile_time_eval():  # a concrete key, even when first read in a trace
            return jr.fold_in(home, n)


def _make_key(seed: int) -> Any:
    with jax.ensure_compile_time_eval():
        return jr.key(seed)
