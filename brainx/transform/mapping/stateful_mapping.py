"""`vmap2` and `StatefulMapping`: ``vmap`` with states chosen by filters, and writes found.

:func:`~brainx.transform.vmap` is told the batched states one by one
(``in_states`` / ``out_states``) and refuses a per-lane write to any other
state. ``vmap2`` (brainstate's newer mapping) differs in two ways, and is
built on the same :class:`~brainx.transform.VmappedFunction`:

* **States by filter.** ``state_in_axes`` / ``state_out_axes`` select states
  with a filter (a State class, a tag, states, a predicate; ``{axis:
  filter}`` for other axes than 0; see
  :mod:`brainx.util.filter`), resolved against the states
  each call's trace finds. The trace gives a selected state one lane's
  shape as it first reads it.
* **Undeclared per-lane writes** follow ``unexpected_out_state_mapping``:
  ``'raise'`` (the :class:`~brainx.errors.BatchAxisError` of ``vmap``), or
  ``'auto'`` / ``'warn'`` / ``'ignore'``: the state is written back batched
  along axis 0 (``'warn'`` warns). The mapping remembers such a state: on
  later calls, while its value still has that axis with one entry per
  lane, it is read one lane per lane (a per-lane buffer written by
  read-modify-write keeps its shape instead of gaining an axis per call).

Where brainx differs from brainstate: brainstate puts a scattered state's
axis where JAX happened to batch it, and on later calls treats *any*
undeclared state whose leading size equals the lane count as per-lane (a
shared state of that size is then mistaken for a batch). brainx always
scatters along axis 0 and treats as per-lane only the states this mapping
itself scattered; declare any other per-lane state in ``state_in_axes``.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

import jax

from brainx.environ.step_values import SettingState
from brainx.errors import BatchAxisError
from brainx._jax.traces import current_trace, owned_traces
from brainx.random.state import RandomState
from brainx.state.weak_refs import StateTable
from brainx.state.state import State
from brainx.transform.core.arguments import function_name, no_function
from brainx.util.filter import to_predicate
from brainx.transform.core.stateful import (
    StatefulFunction, StateSignature, is_array_leaf, peek_state_values,
)
from brainx.transform.mapping.piece_shapes import PieceShapes
from brainx.transform.mapping.vmap import VmappedFunction

__all__ = ["StatefulMapping", "vmap2"]

_POLICIES = ("auto", "raise", "warn", "ignore")
_UNSET = object()


def _axis_filters(spec: Any) -> List[Tuple[Optional[int], Callable]]:
    """``[(axis, predicate)]`` from ``None``, a filter, or ``{axis: filter}``.

    A filter never selects the state behind a per-step setting (``brainx.environ``'s ``t``):
    it is brainx's, not the program's, and follows the environment.
    """
    if spec is None:
        return []
    if isinstance(spec, dict):
        return [(axis, _program_states(to_predicate(f))) for axis, f in spec.items()]
    return [(0, _program_states(to_predicate(spec)))]


def _program_states(select: Callable) -> Callable:
    return lambda path, state: not isinstance(state, SettingState) and select(path, state)


class _ScatterNeeded(Exception):
    """Undeclared states got per-lane values; the mapping writes them back batched."""

    def __init__(self, states: Sequence[State]):
        super().__init__(states)
        self.states = list(states)


class _LaneShapes(PieceShapes):
    """For the trace: the one-lane shapes of the states the mapping batches."""

    def __init__(self, axis_of: Callable[[State], Optional[int]]):
        super().__init__()
        self.axis_of = axis_of

    def splits(self, state: State) -> bool:
        return self.axis_of(state) is not None

    def piece_shape(self, state: State, value: Any):
        axis = self.axis_of(state)

        def lane(shape):
            if not -len(shape) <= axis < len(shape):
                raise BatchAxisError(f"vmap2: {state!r} is selected to be batched along axis "
                                     f"{axis}, but its value has shape {shape}.")
            return shape[:axis % len(shape)] + shape[axis % len(shape) + 1:]

        return lane


class StatefulMapping(VmappedFunction):
    """A stateful function mapped with ``jax.vmap``, its batched states chosen by filters.

    Parameters
    ----------
    fun : callable
        Reads and writes states.
    in_axes, out_axes, axis_size, axis_name
        As in ``jax.vmap`` (keyword arguments are mapped over axis 0).
    state_in_axes : filter or ``{axis: filter}``, optional
        The states holding one value per lane along ``axis`` (0 for a bare
        filter). Written, they are written back along the same axis unless
        ``state_out_axes`` says otherwise.
    state_out_axes : filter or ``{axis: filter}``, optional
        Written states whose new value is per lane (batched along ``axis``).
    unexpected_out_state_mapping : {'auto', 'raise', 'warn', 'ignore'}
        What a per-lane write to a state not selected by either does (see the
        module docstring).
    static_argnums, static_argnames
        Arguments passed as Python values (hashable, not mapped; their
        ``in_axes`` entry is dropped). Kept as tuples; checked against the
        function's parameters when the mapping is built, as ``jax.jit`` does
        (brainstate checks at the call).
    name : str, optional
        Used in error messages.
    mapping_fn : callable
        ``jax.vmap`` or a ``functools.partial`` of it (``spmd_axis_name``, ...).
    mapping_kwargs : dict, optional
        More keyword arguments for ``mapping_fn``.
    axis_env, return_only_write
        Accepted for brainstate's signature; not used.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> h = brainx.HiddenState(jnp.zeros((3, 2)))        # one row per lane
    >>> w = brainx.ParamState(jnp.ones(2))               # shared
    >>> def step(x):
    ...     h.value = h.value * w.value + x
    ...     return h.value.sum()
    >>> mapped = brainx.transform.StatefulMapping(step, state_in_axes=brainx.HiddenState)
    >>> mapped(jnp.arange(3.0)).tolist(), h.value.shape
    ([0.0, 2.0, 4.0], (3, 2))
    """

    def __init__(self, fun: Callable, in_axes: Any = 0, out_axes: Any = 0,
                 state_in_axes: Any = None, state_out_axes: Any = None,
                 unexpected_out_state_mapping: str = "auto",
                 static_argnums: int | Iterable[int] = (),
                 static_argnames: str | Iterable[str] = (), axis_env: Any = None,
                 return_only_write: bool = True, axis_size: Optional[int] = None,
                 axis_name: Optional[Hashable] = None, name: Optional[str] = None,
                 mapping_fn: Callable = jax.vmap, mapping_kwargs: Optional[dict] = None):
        if unexpected_out_state_mapping not in _POLICIES:
            raise ValueError(f"vmap2: unexpected_out_state_mapping must be one of {_POLICIES}, "
                             f"got {unexpected_out_state_mapping!r}.")
        statics = _as_tuple(static_argnums)
        static_argnames = _as_tuple(static_argnames)
        if isinstance(in_axes, (list, tuple)) and statics:  # a static argument is not mapped
            in_axes = tuple(a for i, a in enumerate(in_axes) if i not in statics)
        super().__init__(fun, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name,
                         axis_size=axis_size)
        self.name = name or f"vmap2({function_name(fun)})"
        self.origin_fun = fun
        self.state_in_axes = _axis_filters(state_in_axes)
        self.state_out_axes = _axis_filters(state_out_axes)
        self.unexpected_out_state_mapping = unexpected_out_state_mapping
        self.mapping_fn = mapping_fn
        self.mapping_kwargs = dict(mapping_kwargs or {})
        self.axis_env = axis_env
        self.return_only_write = return_only_write
        self.stateful = StatefulFunction(fun, statics, static_argnames, name=self.name)
        self.static_argnums = statics
        self.static_argnames = static_argnames
        # states this mapping wrote back batched (per-lane on later calls), with their axis
        self._scattered: "StateTable[int]" = StateTable()

    def jax_vmap(self, f: Callable, in_axes: Any, out_axes: Any, size: Any = _UNSET) -> Callable:
        return self.mapping_fn(f, in_axes=in_axes, out_axes=out_axes, axis_name=self.axis_name,
                               axis_size=self.axis_size if size is _UNSET else size,
                               **self.mapping_kwargs)

    # -- which states are batched ----------------------------------------------------------
    def _in_axis(self, state: State, size: Optional[int],
                 value_of: Callable[[State], Any] = lambda s: peek_state_values([s])[0]
                 ) -> Optional[int]:
        for axis, selects in self.state_in_axes:
            if selects((), state):
                if isinstance(state, RandomState) and _one_key(value_of(state)):
                    # one key, not one per lane: every lane gets its own key split from
                    # it and the generator moves on, as for an undeclared generator
                    return None
                return axis
        axis = self._scattered.get(state)
        if axis is not None and size is not None and not _has_lanes(value_of(state), axis, size):
            return None  # rebuilt or reset since: shared again
        return axis

    def _out_axis(self, state: State, in_map: Dict[State, int]) -> Optional[int]:
        if isinstance(state, RandomState) and state not in in_map:
            return None  # split per lane for this call only (see _in_axis)
        for axis, selects in self.state_out_axes:
            if selects((), state):
                return axis
        return in_map.get(state)

    # -- a call ------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        key, dyn_args, dyn_kwargs = self.stateful.split_args(args, kwargs)
        size = self._axis_size(dyn_args, dyn_kwargs)
        sig = self._discover(key, dyn_args, dyn_kwargs, size)
        in_map = {s: a for s in sig.states if (a := self._in_axis(s, size)) is not None}
        size = self._check_sizes(in_map, size)
        out_map = {s: a for s in sig.write_states if (a := self._out_axis(s, in_map)) is not None}
        try:
            return self._run(size, sig, key, dyn_args, dyn_kwargs, in_map, out_map)
        except _ScatterNeeded as e:
            if self.unexpected_out_state_mapping == "warn":
                warnings.warn(f"{self.name} writes a different value in each lane to "
                              f"{', '.join(map(repr, e.states))}, which state_out_axes does not "
                              "select; it is written back batched along axis 0.",
                              UserWarning, stacklevel=2)
            for s in e.states:
                out_map[s] = self._scattered[s] = 0
            return self._run(size, sig, key, dyn_args, dyn_kwargs, in_map, out_map)

    def _discover(self, key, dyn_args: tuple, dyn_kwargs: dict,
                  size: Optional[int]) -> StateSignature:
        """Trace one lane inside the mapping (axis names bound), selected states lane-shaped."""
        outer = current_trace()
        found = []
        lane_shapes = _LaneShapes(lambda s: self._in_axis(s, size, lane_shapes.outer_value))

        def lane(args, kwargs):
            with owned_traces(outer):
                found.append(StatefulFunction.discover(self.stateful, key, args, kwargs,
                                                       outer_values=lane_shapes))

        # No mapped argument: the lane count comes from the states, found by this very trace.
        mapped = self.jax_vmap(lane, (self.in_axes, 0), None, size=1 if size is None else size)
        jax.eval_shape(mapped, dyn_args, dyn_kwargs)
        return found[0]

    def _check_sizes(self, in_map: Dict[State, int], size: Optional[int]) -> int:
        sizes = {} if size is None else {size: "the arguments"}
        for s, axis in in_map.items():
            for leaf in jax.tree.leaves(peek_state_values([s])[0]):
                sizes.setdefault(jax.typeof(leaf).shape[axis], repr(s))
        if len(sizes) > 1:
            detail = ", ".join(f"{where}: {n}" for n, where in sizes.items())
            raise ValueError(f"{self.name}: the mapped axes have different sizes ({detail}). "
                             "No state was changed.")
        if not sizes:
            raise ValueError(f"{self.name}: nothing is mapped (no argument has a mapped axis "
                             "and state_in_axes selects no state it touches); pass axis_size.")
        return next(iter(sizes))

    def _undeclared_per_lane_writes(self, states: List[State]) -> None:
        if self.unexpected_out_state_mapping != "raise":
            raise _ScatterNeeded(states)
        raise BatchAxisError(
            f"{self.name} writes a different value in each lane to "
            f"{', '.join(map(repr, states))}, which state_out_axes does not select "
            "(unexpected_out_state_mapping='raise'). Select it in state_out_axes (or "
            "state_in_axes), or write a value that is the same in every lane. No state was "
            "changed.")

    def __repr__(self) -> str:
        return f"<brainx.transform.{self.name}>"


def _as_tuple(x: Any) -> tuple:
    """``None`` -> ``()``, ``3`` / ``'a'`` -> ``(3,)`` / ``('a',)``, an iterable -> a tuple."""
    if x is None:
        return ()
    if isinstance(x, (int, str)):
        return (x,)
    return tuple(x)


def _one_key(key: Any) -> bool:
    """A generator's value is a single key (a typed key of shape (), or raw ``uint32[2]``)."""
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key.ndim == 0
    return key.shape == (2,)


def _has_lanes(value: Any, axis: int, size: int) -> bool:
    leaves = [x for x in jax.tree.leaves(value) if is_array_leaf(x)]
    shapes = [jax.typeof(x).shape for x in leaves]
    return bool(shapes) and all(-len(s) <= axis < len(s) and s[axis] == size for s in shapes)


def vmap2(fn: Optional[Callable] = None, *, in_axes: Any = 0, out_axes: Any = 0,
          axis_name: Optional[Hashable] = None, axis_size: Optional[int] = None,
          spmd_axis_name: Any = None, state_in_axes: Any = None, state_out_axes: Any = None,
          unexpected_out_state_mapping: str = "auto") -> Any:
    """Vectorise a stateful function like ``jax.vmap``, choosing batched states by filter.

    Arguments as :class:`StatefulMapping` (and ``spmd_axis_name`` as in
    ``jax.vmap``); without ``fn``, a decorator. See the module docstring for
    how it differs from :func:`~brainx.transform.vmap` and from brainstate.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> counter = brainx.ShortTermState(jnp.zeros(3))
    >>> @brainx.transform.vmap2(state_in_axes={0: brainx.ShortTermState})
    ... def accumulate(x):
    ...     counter.value = counter.value + x
    ...     return counter.value
    >>> accumulate(jnp.array([1.0, 2.0, 3.0])).tolist(), counter.value.tolist()
    ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    >>> total = brainx.State(jnp.zeros(()))          # undeclared, written per lane
    >>> def add(x):
    ...     total.value = total.value + x
    >>> brainx.transform.vmap2(add)(jnp.array([1.0, 2.0]))
    >>> total.value.tolist()                          # written back batched
    [1.0, 2.0]
    """
    options = dict(in_axes=in_axes, out_axes=out_axes, axis_name=axis_name,
                   axis_size=axis_size, state_in_axes=state_in_axes,
                   state_out_axes=state_out_axes,
                   unexpected_out_state_mapping=unexpected_out_state_mapping)
    if no_function(fn):  # a functools.partial, as brainstate returns
        return functools.partial(vmap2, spmd_axis_name=spmd_axis_name, **options)
    return StatefulMapping(fn, name=f"vmap2({function_name(fn)})",
                           mapping_fn=functools.partial(jax.vmap, spmd_axis_name=spmd_axis_name),
                           **options)
