"""State filters: which states a rule applies to, in brainstate's filter language.

A filter becomes a predicate ``(path, state) -> bool``:

===============================  ==============================================
filter                           selects
===============================  ==============================================
a ``State`` subclass             the states of that class (``ParamState``)
a string                         the states carrying that tag (``State(tag=...)``)
a ``State``                      that state
a list/tuple/set of ``State``    those states
a tuple/list of filters          the states any of them selects
``...`` or ``True``              every state
``None`` or ``False``            no state
a callable                       used as the predicate ``(path, state) -> bool``
===============================  ==============================================

``path`` is the state's path where one is known (``()`` for the states a
transform finds by tracing).
"""

from __future__ import annotations

from typing import Any, Callable, Tuple

from brainx.state.state import State

__all__ = ["state_predicate"]

Predicate = Callable[[Tuple[Any, ...], Any], bool]


def state_predicate(filter: Any) -> Predicate:  # noqa: A002 - brainstate's name
    """The predicate ``(path, state) -> bool`` of a filter (see the module docstring).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.transform.core.state_filter import state_predicate
    >>> w = brainx.ParamState(jnp.ones(2))
    >>> h = brainx.HiddenState(jnp.ones(2), tag="recurrent")
    >>> [state_predicate(f)((), h) for f in (brainx.ParamState, "recurrent", (w, h), None)]
    [False, True, True, False]
    """
    if filter is ... or filter is True:
        return lambda path, x: True
    if filter is None or filter is False:
        return lambda path, x: False
    if isinstance(filter, State):
        return lambda path, x: x is filter
    if isinstance(filter, type):
        return lambda path, x: isinstance(x, filter)
    if isinstance(filter, str):
        return lambda path, x: filter in (getattr(x, "tag", None) or ())
    if isinstance(filter, (list, tuple, set, frozenset)):
        items = list(filter)
        if items and all(isinstance(s, State) for s in items):
            ids = {id(s) for s in items}
            return lambda path, x: id(x) in ids
        predicates = [state_predicate(f) for f in items]
        return lambda path, x: any(p(path, x) for p in predicates)
    if callable(filter):
        return filter
    raise TypeError(
        f"Unsupported state filter {filter!r}: use a State class, a tag string, a State or "
        "a collection of States, a predicate (path, state) -> bool, ..., None, or a "
        "tuple of these.")
