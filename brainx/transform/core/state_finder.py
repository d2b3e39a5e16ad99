"""`StateFinder`: which states a function reads and writes, found by tracing it once."""

from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, Optional, Sequence

from brainx.state.state import State
from brainx.transform.core.arguments import function_name
from brainx.util.filter import to_predicate
from brainx.transform.core.stateful import StatefulFunction

__all__ = ["StateFinder"]

_USAGES = ("all", "read", "write", "both")
_RETURN_TYPES = ("dict", "list", "tuple")


class StateFinder:
    """Find the states a function touches, optionally filtered, without running it.

    Parameters
    ----------
    fn : callable
        The function to inspect; calling the finder with arguments traces it
        for those arguments (no state is changed).
    filter : optional
        Keep only the states it selects (a State class, a tag, states, a
        predicate ``(path, state) -> bool``, ...; see
        :mod:`brainx.util.filter`).
    usage : {'all', 'read', 'write', 'both'}
        Every touched state; the states only read; the states written; or
        ``{'read': ..., 'write': ...}``.
    return_type : {'dict', 'list', 'tuple'}
        The container of the states (for ``'both'``, of each entry).
    key_fn : callable, optional
        ``key_fn(index, state)`` gives the dict keys (default: the index). A
        key that repeats, or is ``None``, is replaced by the state's name (or
        ``state_<index>``) with a numeric suffix if needed; an unhashable key
        by its ``str``.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.ones(()), name="w")
    >>> b = brainx.ParamState(jnp.zeros(()), name="b")
    >>> h = brainx.HiddenState(jnp.zeros(()), name="h")
    >>> def step(x):
    ...     h.value = w.value * x + b.value
    ...     return h.value
    >>> finder = brainx.transform.StateFinder(step, brainx.ParamState, usage="read",
    ...                                       key_fn=lambda i, s: s.name)
    >>> sorted(finder(2.0))
    ['b', 'w']
    >>> brainx.transform.StateFinder(step, usage="write", return_type="list")(2.0) == [h]
    True
    """

    def __init__(self, fn: Callable, filter: Any = None, *, usage: str = "all",  # noqa: A002
                 return_type: str = "dict",
                 key_fn: Optional[Callable[[int, State], Hashable]] = None) -> None:
        if usage not in _USAGES:
            raise ValueError(f"StateFinder: usage must be one of {_USAGES}, got {usage!r}.")
        if return_type not in _RETURN_TYPES:
            raise ValueError(f"StateFinder: return_type must be one of {_RETURN_TYPES}, got "
                             f"{return_type!r}.")
        self.fn = fn
        self.usage = usage
        self.return_type = return_type
        self.key_fn = key_fn if key_fn is not None else (lambda i, s: i)
        self._filter = None if filter is None else to_predicate(filter)
        self.stateful_fn = StatefulFunction(fn, name=f"StateFinder({function_name(fn)})")

    def __call__(self, *args, **kwargs) -> Any:
        return self.find(*args, **kwargs)

    def find(self, *args, **kwargs) -> Any:
        """The states ``fn(*args, **kwargs)`` touches, as configured."""
        sig = self.stateful_fn.signature(args, kwargs)
        groups = {"all": sig.states, "read": sig.read_only_states, "write": sig.write_states}
        if self.usage == "both":
            return {"read": self._format(groups["read"]), "write": self._format(groups["write"])}
        return self._format(groups[self.usage])

    def _format(self, states: Sequence[State]) -> Any:
        if self._filter is not None:
            states = [s for s in states if self._filter((), s)]
        if self.return_type == "list":
            return list(states)
        if self.return_type == "tuple":
            return tuple(states)
        result: Dict[Hashable, State] = {}
        for i, s in enumerate(states):
            result[self._unique_key(self.key_fn(i, s), i, s, result)] = s
        return result

    @staticmethod
    def _unique_key(key: Any, i: int, state: State, used: Dict[Hashable, State]) -> Hashable:
        try:
            hash(key)
        except TypeError:
            key = str(key)
        if key is not None and key not in used:
            return key
        base = getattr(state, "name", None) or f"state_{i}"
        candidate, n = base, 1
        while candidate in used:
            candidate, n = f"{base}_{n}", n + 1
        return candidate
