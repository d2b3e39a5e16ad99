"""brainstate's private helpers of ``brainstate.transform`` (see :mod:`brainx.compat.private`).

Serves ``brainstate.transform._make_jaxpr`` and ``brainstate.transform._mapping_core``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple

import jax

from brainx._jax.internals import batching
from brainx.compat.private import public_fallback
from brainx.errors import BatchAxisError
from brainx.state.state import State
from brainx.transform.core.stateful_api import CacheKey
from brainx.transform.mapping.stateful_mapping import StatefulMapping
from brainx.transform.mapping.vmap import _leaves_with_axes, state_axes
from brainx.util.filter import to_predicate

BatchTracer = batching.BatchTracer   # brainstate's _mapping_core imports it

__all__ = ["CacheKey", "_make_hashable", "_flatten_in_out_states", "_remove_axis",
           "_get_batch_size", "_format_state_axes", "make_identity_predicate",
           "coerce_axis_value_to_predicate", "normalize_state_axes", "split_rng_keys",
           "unwind_new_state_levels", "leaf_batch_dim", "state_map_transform",
           "_new_state_probe", "_new_state_probe_depth", "in_new_state_probe"]

__getattr__ = public_fallback(__name__, "brainx.transform")


def _make_hashable(obj: Any) -> Hashable:
    """A hashable stand-in for a static argument: lists and tuples become tuples, dicts a
    tuple of ``(key, value)`` pairs sorted by key, sets a frozenset (recursively); a hashable
    object is itself; another pytree is ``(treedef, leaves)``.

    Raises ``TypeError`` naming the type when none of these applies.

    Examples
    --------
    >>> _make_hashable({"b": [1, 2], "a": {3}})
    (('a', frozenset({3})), ('b', (1, 2)))
    """
    if isinstance(obj, (list, tuple)):
        return tuple(_make_hashable(x) for x in obj)
    if isinstance(obj, dict):
        return tuple(sorted((k, _make_hashable(v)) for k, v in obj.items()))
    if isinstance(obj, (set, frozenset)):
        return frozenset(_make_hashable(x) for x in obj)
    try:
        hash(obj)
        return obj
    except TypeError:
        pass
    try:
        leaves, treedef = jax.tree.flatten(obj)
    except (TypeError, ValueError) as error:
        raise TypeError(f"cannot make a {type(obj).__name__} hashable for a cache key: it is "
                        f"neither hashable nor a pytree ({error})") from None
    if len(leaves) == 1 and leaves[0] is obj:
        raise TypeError(f"cannot make a {type(obj).__name__} hashable for a cache key: it is "
                        "neither hashable nor a pytree with hashable leaves")
    return treedef, tuple(_make_hashable(x) for x in leaves)


# -- brainstate.transform._mapping_core: how vmap reads its state and axis arguments -----------

def _flatten_in_out_states(spec: Any = None) -> Tuple[Dict[int, List[State]], Dict[State, int]]:
    """``({axis: [states]}, {state: axis})`` from an ``in_states``/``out_states`` argument:
    ``None``, a State, a container of States (axis 0), or ``{axis: states}``
    (:func:`brainx.transform.mapping.vmap.state_axes` reads it)."""
    state_to_axis = state_axes(spec, "in_states/out_states")
    axis_to_states: Dict[int, List[State]] = {}
    for state, axis in state_to_axis.items():
        axis_to_states.setdefault(axis, []).append(state)
    return axis_to_states, state_to_axis


def _remove_axis(x: Any, axis: int) -> Any:
    """One lane of ``x``: its index 0 along ``axis`` (what a function under vmap sees).

    ``TypeError`` for an axis that is not an int; ``ValueError`` for a leaf with no array
    dimensions or an axis out of its bounds (as ``jax.vmap``).
    """
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"the mapped axis must be an int, got {type(axis).__name__} {axis!r}")
    ndim = getattr(x, "ndim", None)
    if ndim is None:
        raise ValueError(f"cannot map axis {axis} of a {type(x).__name__}: it is not an array "
                         "(give it the axis None to pass it to every lane)")
    if not -ndim <= axis < ndim:
        raise ValueError(f"the mapped axis {axis} is out of bounds for an array of shape "
                         f"{tuple(x.shape)}")
    return jax.numpy.take(x, 0, axis=axis)


def _get_batch_size(args: tuple, in_axes: Any, in_states: Optional[Dict[int, List[State]]],
                    axis_size: Optional[int] = None, kwargs: Optional[dict] = None) -> int:
    """The number of lanes: the one size of every mapped argument leaf (``in_axes``, a prefix
    tree), keyword argument leaf (axis 0) and ``{axis: [states]}`` value, or ``axis_size``.

    ``ValueError`` when they disagree (with each other or with ``axis_size``), or when
    nothing is mapped and ``axis_size`` is not given.
    """
    sizes = []
    if in_axes is not None and args:
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        for axis, arg in zip(axes, args):
            for leaf, leaf_axis in _leaves_with_axes(axis, arg):
                if leaf_axis is not None:
                    sizes.append(jax.numpy.shape(leaf)[leaf_axis])
    for value in (kwargs or {}).values():
        sizes.extend(jax.numpy.shape(leaf)[0] for leaf in jax.tree.leaves(value))
    for axis, states in (in_states or {}).items():
        if axis is not None:
            for state in states:
                leaves = jax.tree.leaves(state.value)
                if leaves:
                    sizes.append(jax.numpy.shape(leaves[0])[axis])
    if not sizes:
        if axis_size is None:
            raise ValueError("cannot tell the mapped axis size: no argument, keyword argument "
                             "or state is mapped; pass axis_size.")
        return axis_size
    if axis_size is not None and axis_size not in sizes:
        raise ValueError(f"axis_size={axis_size} disagrees with the mapped size(s) "
                         f"{sorted(set(sizes))} of the arguments and states.")
    if len(set(sizes)) > 1:
        raise ValueError(f"the mapped arguments and states have different sizes along their "
                         f"mapped axes: {sorted(set(sizes))}")
    return sizes[0]


def _format_state_axes(in_states: Any, out_states: Any):
    """``(axis_to_in, in_to_axis, axis_to_out, out_to_axis)``: the two arguments read, with
    each state of ``in_states`` missing from ``out_states`` put out on its in-axis.

    :class:`~brainx.errors.BatchAxisError` names a state given one axis in and another out.
    """
    axis_to_in, in_to_axis = _flatten_in_out_states(in_states)
    axis_to_out, out_to_axis = _flatten_in_out_states(out_states)
    for state, axis in in_to_axis.items():
        if state not in out_to_axis:
            out_to_axis[state] = axis
            axis_to_out.setdefault(axis, []).append(state)
        elif out_to_axis[state] != axis:
            raise BatchAxisError(f"{state!r} is mapped along axis {axis} in in_states but "
                                 f"along axis {out_to_axis[state]} in out_states; give it one.")
    return axis_to_in, in_to_axis, axis_to_out, out_to_axis


def make_identity_predicate(states: Any) -> Callable[[tuple, Any], bool]:
    """A ``(path, x)`` predicate true for exactly these State objects (by identity)."""
    ids = {id(s) for s in ([states] if isinstance(states, State) else states)}
    return lambda path, x: id(x) in ids


def coerce_axis_value_to_predicate(value: Any) -> Callable[[tuple, Any], bool]:
    """The predicate of one ``state_*_axes`` value: a State or a non-empty list, tuple or set
    of States (by identity), else any filter (:func:`brainx.util.filter.to_predicate`)."""
    if isinstance(value, State) or (isinstance(value, (list, tuple, set)) and value
                                    and all(isinstance(v, State) for v in value)):
        return make_identity_predicate(value)
    return to_predicate(value)


def normalize_state_axes(spec: Any) -> Dict[Any, Callable[[tuple, Any], bool]]:
    """``{axis: predicate}`` from a ``state_in_axes``/``state_out_axes`` argument: ``None``
    (no state), ``{axis: value}``, or one value (axis 0)."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return {axis: coerce_axis_value_to_predicate(v) for axis, v in spec.items()}
    return {0: coerce_axis_value_to_predicate(spec)}


def split_rng_keys(rng_states: Sequence[Any], batch_size: int) -> Tuple[tuple, tuple]:
    """For each random state, ``batch_size`` keys (one per lane), then one more key each to
    leave it at after the call (so a mapped call draws from it once)."""
    keys = tuple(rng.split_key(batch_size) for rng in rng_states)
    return keys, tuple(rng.split_key() for rng in rng_states)


def unwind_new_state_levels(states: Sequence[State], base_level: int) -> None:
    """Bring the stack level of states created inside a transform down to ``base_level``
    (never up): they live in the caller after the transform returns."""
    for state in states:
        state.stack_level = min(state.stack_level, max(base_level, 0))


def leaf_batch_dim(value: Any) -> Optional[int]:
    """The batch dimension shared by the batched leaves of ``value`` (``None``: no leaf is
    batched; an unbatched leaf is broadcast, as ``jax.vmap`` does).

    :class:`~brainx.errors.BatchAxisError` when batched leaves disagree.
    """
    dims = {leaf.batch_dim for leaf in jax.tree.leaves(value) if isinstance(leaf, BatchTracer)}
    if len(dims) > 1:
        raise BatchAxisError(f"a state's leaves are batched along different dimensions "
                             f"{sorted(dims)}; batch them all along one.")
    return dims.pop() if dims else None


def state_map_transform(f: Callable, *, out_decl_name: str = "state_out_axes",
                        out_decl_extra: str = "", **options: Any) -> StatefulMapping:
    """brainstate's engine of its ``vmap2`` family: here :class:`brainx.transform.StatefulMapping`
    with the same arguments (``in_axes``, ``out_axes``, ``state_in_axes``, ``state_out_axes``,
    ``axis_size``, ``axis_name``, ``mapping_fn``, ``mapping_kwargs``,
    ``unexpected_out_state_mapping``, ``static_argnums``, ``static_argnames``, ``name``)."""
    return StatefulMapping(f, **options)


# brainstate runs the function of a ``*_new_states`` transform once more, eagerly, to find
# its states, and marks that pass; brainx has no such pass (brainx.compat.new_state_probe).
# The marker is kept for code that sets it itself.
_PROBE = threading.local()


def _new_state_probe_depth() -> int:
    """How many :class:`_new_state_probe` blocks this thread is in."""
    return getattr(_PROBE, "depth", 0)


class _new_state_probe:  # noqa: N801 - brainstate's name
    """A block that :func:`in_new_state_probe` reports as a discovery pass."""

    def __enter__(self) -> "_new_state_probe":
        _PROBE.depth = _new_state_probe_depth() + 1
        return self

    def __exit__(self, *exc: Any) -> bool:
        _PROBE.depth = _new_state_probe_depth() - 1
        return False


def in_new_state_probe() -> bool:
    """Whether this thread is in a :class:`_new_state_probe` block (brainx's own transforms
    never are: see :func:`brainx.transform.in_new_state_probe`)."""
    return _new_state_probe_depth() > 0
