"""`vmap2_new_states`: initialise a module's states once per lane, as brainstate's vmap2 does.

It calls the module's state initialisation (``init_all_states``) under
:func:`~brainx.transform.vmap_new_states`: each lane builds its own states
(with its own random draws) and every new state ends up holding all lanes'
values. ``state_out_axes`` says where the lane axis goes, per state:

=================================  ============================================
``state_out_axes``                 lane axis of a new state
=================================  ============================================
``None`` (default)                 0, except ``NonBatchState`` s and states
                                   tagged ``INIT_NO_BATCHING`` (one value,
                                   shared: it must be the same in every lane)
a filter                           0 for the states it selects, the rest as
                                   by default
``{axis: filter, None: filter}``   ``axis`` for the states each filter selects;
                                   ``None``: shared; the rest on axis 0
=================================  ============================================

Filters are those of :mod:`brainx.util.filter`. A state
matching several entries goes to the first of: ``None``, the other axes in
the order given, 0.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp

from brainx.state.state import NonBatchState, State
from brainx.state.trace import catch_new_states
from brainx.util.filter import to_predicate
from brainx.transform.core.stateful import write_state_values
from brainx.transform.mapping.new_states import INIT_NO_BATCHING, vmap_new_states

__all__ = ["vmap2_new_states", "INIT_NO_BATCHING", "MODULE_INIT"]

#: How to initialise a module that has no ``init_all_states`` method:
#: ``MODULE_INIT[0](module, **init_kwargs)``. :mod:`brainx.nn` fills it with
#: :func:`brainx.nn.init_all_states` (nn is built on transform, so transform
#: does not import it).
MODULE_INIT: List[Optional[Callable[..., Any]]] = [None]


def _axis_rules(state_out_axes: Any) -> List[Tuple[Optional[int], Callable]]:
    if state_out_axes is None:
        state_out_axes = {}
    elif not isinstance(state_out_axes, dict):
        state_out_axes = {0: state_out_axes}
    user = {axis: to_predicate(f) for axis, f in state_out_axes.items()}
    shared_tag = to_predicate((NonBatchState, INIT_NO_BATCHING))
    rules = [(None, (lambda p, s, f=user[None]: f(p, s) or shared_tag(p, s))
              if None in user else shared_tag)]
    rules += [(axis, f) for axis, f in user.items() if axis not in (None, 0)]
    rules.append((0, user.get(0, lambda p, s: True)))
    return rules


def _initialiser(module: Any, init_kwargs: Dict[str, Any]) -> Callable[[], Any]:
    method = getattr(module, "init_all_states", None)
    if callable(method):
        return lambda: method(**init_kwargs)
    if MODULE_INIT[0] is None:  # pragma: no cover - brainx.nn fills it on import
        raise TypeError(f"vmap2_new_states: {module!r} has no init_all_states method.")
    return lambda: MODULE_INIT[0](module, **init_kwargs)


def vmap2_new_states(module: Any, init_kwargs: Optional[Dict[str, Any]] = None,
                     state_tag: Optional[str] = None, axis_size: Optional[int] = None,
                     state_out_axes: Any = None, spmd_axis_name: Any = None
                     ) -> Dict[Optional[int], List[State]]:
    """Initialise ``module``'s states ``axis_size`` times at once; return them by lane axis.

    Parameters
    ----------
    module : Module
        Its ``init_all_states(**init_kwargs)`` (for a ``brainx.nn.Module``,
        :func:`brainx.nn.init_all_states`) creates the states.
    init_kwargs : dict
        Keyword arguments of the initialisation.
    state_tag : str, optional
        Tag added to every new state.
    axis_size : int
        The number of lanes (required).
    state_out_axes : optional
        Where each new state's lane axis goes (see the module docstring).
    spmd_axis_name : optional
        As in ``jax.vmap``.

    Returns
    -------
    dict
        ``{axis: [states]}``; ``None`` holds the shared states.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> class Counter(brainx.nn.Module):
    ...     def init_state(self):
    ...         self.count = brainx.ShortTermState(jnp.zeros(2))
    >>> counter = Counter()
    >>> groups = brainx.transform.vmap2_new_states(counter, {}, axis_size=5)
    >>> counter.count.value.shape, groups[0] == [counter.count]
    ((5, 2), True)
    """
    if not isinstance(axis_size, int) or isinstance(axis_size, bool) or axis_size < 1:
        raise ValueError(f"vmap2_new_states: axis_size must be a positive int (the number of "
                         f"lanes), got {axis_size!r}.")
    rules = _axis_rules(state_out_axes)

    def axis_of(state: State) -> Optional[int]:
        return next(axis for axis, selects in rules if selects((), state))

    init = _initialiser(module, dict(init_kwargs or {}))
    with catch_new_states(state_tag) as catcher:
        vmap_new_states(lambda: init() and None, axis_size=axis_size,
                        spmd_axis_name=spmd_axis_name,
                        state_to_exclude=lambda s: axis_of(s) is None)()
    groups: Dict[Optional[int], List[State]] = {}
    for state in catcher.get_states():
        axis = axis_of(state)
        if axis not in (None, 0):
            write_state_values([state], [jax.tree.map(lambda x: jnp.moveaxis(x, 0, axis),
                                                      state.value)])
        groups.setdefault(axis, []).append(state)
    return groups
