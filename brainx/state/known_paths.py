"""Where a state was last seen in a model: its path, so that an error can name it.

A state does not know where it lives: a model holds it, and only a walk of
the model (``init_all_states``, ``Module.states()``, ``graph.states``) finds
its path (``"cells.1.h"``). Those walks tell :func:`remember_paths`, which
keeps, per state, the root it was found from (weakly) and the path; an error
about a state (:class:`~brainx.TracerLeakError`, ...) names it with
:func:`describe_state`: ``HiddenState 'cells.1.h' of Net``.

Nothing here keeps a state or a model alive. A path is checked again when it
is used (followed from its root): a model rearranged since, or a root gone,
falls back to the state's ``repr``. When walks from several roots find one
state, the longest path wins (the walk from the whole model, not from one of
its parts).
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, Iterable, Optional, Tuple

__all__ = ["remember_paths", "path_of", "describe_state"]

Path = Tuple[Any, ...]
# id(state) -> (weak reference to the state, weak reference to the root, path)
_PATHS: Dict[int, Tuple[weakref.ref, weakref.ref, Path]] = {}


def remember_paths(root: Any, items: Iterable[Tuple[Path, Any]]) -> None:
    """Note the path of each ``(path, state)`` of ``items``, found by a walk from ``root``."""
    try:
        root_ref = weakref.ref(root)
    except TypeError:  # a list or dict of modules: a path from it could not be checked later
        return
    for path, state in items:
        path, key = tuple(path), id(state)
        known = _PATHS.get(key)
        if known is not None and known[0]() is state:
            if known[1] is root_ref and known[2] == path:
                continue   # as known (weakref.ref(root) is one object per root)
            if len(known[2]) > len(path) and known[1]() is not None:
                continue   # a longer path, from a root that still lives
            ref = known[0]
        else:
            try:
                ref = weakref.KeyedRef(state, _drop, key)   # one shared callback: no closure each
            except TypeError:
                continue
        _PATHS[key] = (ref, root_ref, path)


def _drop(ref: weakref.KeyedRef) -> None:
    known = _PATHS.get(ref.key)
    if known is not None and known[0] is ref:
        del _PATHS[ref.key]


def path_of(state: Any) -> Optional[Tuple[Any, str]]:
    """``(root, dotted path)`` where ``state`` was last found, if that still holds.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.state.known_paths import path_of
    >>> net = brainx.nn.Sequential(brainx.nn.Linear(2, 3))
    >>> _ = net.states()
    >>> root, path = path_of(net.layers[0].weight)
    >>> root is net, path
    (True, 'layers.0.weight')
    """
    known = _PATHS.get(id(state))
    if known is None or known[0]() is not state:
        return None
    root = known[1]()
    path = known[2]
    if root is None or _follow(root, path) is not state:
        return None
    return root, ".".join(map(str, path)) or "<root>"


def _follow(obj: Any, path: Path) -> Any:
    """The object at ``path`` from ``obj`` (attributes, indices, keys), or ``None``."""
    for key in path:
        try:
            if isinstance(obj, (list, tuple, dict)):
                obj = obj[key]
            elif isinstance(key, str) and hasattr(obj, "__dict__") and key in vars(obj):
                obj = vars(obj)[key]
            elif isinstance(key, str):
                obj = getattr(obj, key)
            else:
                obj = obj[key]
        except Exception:  # a rearranged model: the path no longer leads anywhere
            return None
    return obj


def describe_state(state: Any) -> str:
    """How an error names ``state``: by its path in a model where known, else by its repr.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.state.known_paths import describe_state
    >>> net = brainx.nn.Sequential(brainx.nn.Linear(2, 3))
    >>> _ = net.states()
    >>> describe_state(net.layers[0].weight)
    "ParamState 'layers.0.weight' of Sequential"
    >>> describe_state(brainx.State(jnp.zeros(2)))
    'State(f32[2])'
    """
    found = path_of(state)
    if found is None:
        return repr(state)
    root, path = found
    return f"{type(state).__name__} {path!r} of {type(root).__name__}"
