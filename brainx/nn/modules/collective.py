"""Operations on a whole module tree: initialise, reset, batch, or load every module's states.

:func:`init_all_states` and :func:`reset_all_states` call each module's
``init_state`` / ``reset_state``, children before parents; a method marked
with :func:`call_order` runs after the unmarked ones, lower levels first.
The ``vmap_`` versions run the same calls once per lane of a
``brainx.transform.vmap`` (``axis_size`` lanes), so each lane gets its own
values (its own random draws) and every state they create or write holds
all lanes stacked along a new leading axis: a batch of models.
:func:`assign_state_values` loads values by dotted path (from
``{path: state.value}`` of ``model.states()``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar

import jax
import jax.numpy as jnp

from brainx.nn.modules.module import (  # (call_order, call_all_fns: kept in module.py, re-exported)
    MAX_ORDER, Module, call_all_fns, call_order, iter_tree)
from brainx.state.state import State
from brainx.transform import vmap_new_states
from brainx.transform.mapping.module_states import MODULE_INIT

__all__ = [
    "call_order", "call_all_fns", "vmap_call_all_fns", "init_all_states", "vmap_init_all_states",
    "reset_all_states", "vmap_reset_all_states", "assign_state_values", "MAX_ORDER",
]

M = TypeVar("M")


def init_all_states(target: M, *args, exclude=None, node_to_exclude=None, **kwargs) -> M:
    """Call ``init_state(*args, **kwargs)`` on every module of ``target`` (children first).

    ``target`` may be a module or a list/tuple/dict of modules.
    ``node_to_exclude`` (brainstate's name; ``exclude`` is the same) is a
    filter (as in :meth:`Module.states`) of modules to skip. Returns
    ``target``, so ``net = init_all_states(Net(), batch_size=16)`` reads naturally.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> lif = brainx.nn.init_all_states(brainx.nn.LIF(3), batch_size=2)
    >>> lif.V.value.shape
    (2, 3)
    """
    return call_all_fns(target, "init_state", args, kwargs, _exclusion(exclude, node_to_exclude))


def reset_all_states(target: M, *args, exclude=None, node_to_exclude=None, **kwargs) -> M:
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
    return call_all_fns(target, "reset_state", args, kwargs,
                        _exclusion(exclude, node_to_exclude))


def _exclusion(exclude, node_to_exclude):
    if exclude is not None and node_to_exclude is not None:
        raise TypeError("Give node_to_exclude or exclude (the same filter), not both.")
    return node_to_exclude if exclude is None else exclude


def _check_axis_size(axis_size: Optional[int], what: str) -> None:
    if not isinstance(axis_size, int) or axis_size < 1:
        raise ValueError(f"{what}: axis_size must be a positive int (the number of models), "
                         f"got {axis_size!r}.")


def vmap_call_all_fns(target: M, fn_name: str, args: Sequence[Any] | Any = (),
                      kwargs: Optional[Mapping[str, Any]] = None, axis_size: Optional[int] = None,
                      node_to_exclude: Any = None, state_tag: Optional[str] = None,
                      fn_if_not_exist: str = "raise") -> M:
    """:func:`call_all_fns` once per lane of ``axis_size`` lanes.

    States the calls create come out stacked along a new leading axis (as
    :func:`brainx.transform.vmap_new_states`); existing states of ``target``
    that the calls write come out stacked too (one value per lane).
    """
    _check_axis_size(axis_size, "vmap_call_all_fns")

    def call():
        call_all_fns(target, fn_name, args, kwargs, node_to_exclude, fn_if_not_exist)

    existing = list(_all_states(target).values())
    vmap_new_states(call, axis_size=axis_size, state_tag=state_tag, out_states=existing)()
    return target


def vmap_init_all_states(target: M, *init_args, axis_size: Optional[int] = None,
                         node_to_exclude: Any = None, state_to_exclude: Any = None,
                         state_tag: Optional[str] = None, in_states: Any = None,
                         out_states: Any = None, **init_kwargs) -> M:
    """:func:`init_all_states` once per lane: every state created holds ``axis_size`` models.

    States matching ``state_to_exclude`` (a State class, a tuple of classes or
    a predicate) are created once, shared by all lanes. Parameters created in
    ``__init__`` are not touched (they are shared unless you batch them).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> cell = brainx.nn.vmap_init_all_states(brainx.nn.GRUCell(2, 3), batch_size=4, axis_size=5)
    >>> cell.h.value.shape
    (5, 4, 3)
    """
    _check_axis_size(axis_size, "vmap_init_all_states")

    def init():
        init_all_states(target, *init_args, node_to_exclude=node_to_exclude, **init_kwargs)

    vmap_new_states(init, axis_size=axis_size, state_tag=state_tag,
                    state_to_exclude=state_to_exclude, in_states=in_states,
                    out_states=out_states)()
    return target


def vmap_reset_all_states(target: M, *reset_args, axis_size: Optional[int] = None,
                          node_to_exclude: Any = None, state_tag: Optional[str] = None,
                          **reset_kwargs) -> M:
    """:func:`reset_all_states` once per lane: each state written gets ``axis_size`` values.

    Each lane runs ``reset_state`` on its own (with its own random draws); a
    state it writes then holds the lanes' values stacked along axis 0, as
    after :func:`vmap_init_all_states`.
    """
    return vmap_call_all_fns(target, "reset_state", reset_args, reset_kwargs, axis_size,
                             node_to_exclude, state_tag)


def _all_states(target: Any) -> Dict[str, State]:
    return {".".join(p): s for p, s in iter_tree(target) if isinstance(s, State)}


def assign_state_values(target: Module, *state_by_abs_path: Mapping[str, Any]
                        ) -> Tuple[List[str], List[str]]:
    """Write values into ``target``'s states by dotted path; report what did not match.

    Parameters
    ----------
    target : Module
    *state_by_abs_path : mapping
        ``{"layer.weight": value}`` dicts; later ones win for a repeated path.
        Tuple paths (``("layer", "weight")``) are accepted too.

    Returns
    -------
    unexpected, missing : list of str
        Paths given but not in the model; paths of the model not given.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> net = brainx.nn.Sequential(brainx.nn.Linear(2, 2), brainx.nn.Linear(2, 1))
    >>> saved = {k: jax.tree.map(jnp.zeros_like, s.value) for k, s in net.states().items()}
    >>> brainx.nn.assign_state_values(net, {"layers.0.weight": saved["layers", 0, "weight"], "x": 1})
    (['x'], ['layers.1.weight'])
    >>> float(abs(net.layers[0].weight.value["weight"]).sum())
    0.0
    """
    given: Dict[str, Any] = {}
    for mapping in state_by_abs_path:
        for key, value in mapping.items():
            given[".".join(map(str, key)) if isinstance(key, tuple) else str(key)] = value
    states = {path.dotted: state for path, state in target.states().items()}
    for path in states.keys() & given.keys():
        states[path].value = jax.tree.map(jnp.asarray, given[path])
    return sorted(given.keys() - states.keys()), sorted(states.keys() - given.keys())


MODULE_INIT[0] = init_all_states  # transform.vmap2_new_states initialises brainx modules with it
