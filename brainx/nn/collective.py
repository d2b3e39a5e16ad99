"""Operations on a whole module tree: initialise or reset every module's states."""

from __future__ import annotations

from typing import Any, TypeVar

from brainx.nn.module import Module, iter_tree, to_predicate

__all__ = ["init_all_states", "reset_all_states"]

M = TypeVar("M")


def _modules(target: Any, exclude=None):
    skip = to_predicate(exclude) if exclude is not None else (lambda path, m: False)
    # Children before parents: a parent's init_state may read its children's states.
    return [m for path, m in iter_tree(target, order="post")
            if isinstance(m, Module) and not skip(path, m)]


def init_all_states(target: M, *args, exclude=None, **kwargs) -> M:
    """Call ``init_state(*args, **kwargs)`` on every module of ``target`` (children first).

    ``target`` may be a module or a list/tuple/dict of modules. ``exclude`` is a
    filter (as in :meth:`Module.states`) of modules to skip. Returns ``target``,
    so ``net = init_all_states(Net(), batch_size=16)`` reads naturally.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> lif = brainx.nn.init_all_states(brainx.nn.LIF(3), batch_size=2)
    >>> lif.V.value.shape
    (2, 3)
    """
    for m in _modules(target, exclude):
        m.init_state(*args, **kwargs)
    return target


def reset_all_states(target: M, *args, exclude=None, **kwargs) -> M:
    """Call ``reset_state(*args, **kwargs)`` on every module of ``target`` (children first).

    Modules built into ``reset_state`` assign new values to their existing
    states, so a step compiled with ``brainx.transform.jit`` keeps working (and
    keeps its compiled function when the shapes are unchanged). Call this
    between trials, outside or inside a transform.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> lif = brainx.nn.init_all_states(brainx.nn.LIF(2))
    >>> lif.V.value = lif.V.value + 3.0 * u.mV
    >>> V = lif.V
    >>> _ = brainx.nn.reset_all_states(lif)
    >>> lif.V is V, (lif.V.value / u.mV).tolist()
    (True, [0.0, 0.0])
    """
    for m in _modules(target, exclude):
        m.reset_state(*args, **kwargs)
    return target
