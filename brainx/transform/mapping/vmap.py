"""`vmap`: ``jax.vmap`` for functions that read and write states.

States are not arguments, so ``vmap`` needs to be told which of them hold one
value per lane: ``in_states`` (batched on entry, written back batched) and
``out_states`` (unbatched on entry, batched after the call). Every other state
is shared by all lanes: it may be read, and written with a value that is the
same in every lane; a per-lane write to it is an error that names the state
(brainx checks which written values JAX batched, before anything is written).

A :class:`~brainx.random.RandomState` the function draws from and that is not
declared is split into one key per lane, so every lane draws its own numbers,
and gets a fresh key afterwards.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Hashable, List, Optional

import jax
import jax.random as jr

from brainx.transform.core.arguments import no_function
from brainx.errors import BatchAxisError
from brainx._jax.traces import current_trace, is_batched_along, owned_traces
from brainx.random.state import RandomState
from brainx.state.state import State
from brainx.transform.control.loops import for_loop, infer_length
from brainx.transform.core.stateful import (
    StatefulFunction, StateSignature, StaticLeaves, peek_state_values, read_state_values, write_state_values,
)

__all__ = ["vmap", "map", "VmappedFunction", "state_axes"]


def state_axes(spec: Any, what: str) -> Dict[State, int]:
    """``{state: axis}`` from brainstate's formats.

    ``None``; a State; a sequence or dict of States (all on axis 0); or a
    dict ``{axis: states}`` whose keys are all ints.
    """
    if spec is None:
        return {}
    if isinstance(spec, dict) and spec and all(
            isinstance(k, int) and not isinstance(k, bool) for k in spec):
        groups = spec.items()
    else:
        groups = [(0, spec)]
    result: Dict[State, int] = {}
    for axis, states in groups:
        for leaf in jax.tree.leaves(states, is_leaf=lambda x: isinstance(x, State)):
            if not isinstance(leaf, State):
                raise TypeError(f"vmap: {what} must hold States (a State, a sequence or dict of "
                                f"States, or {{axis: states}}); found {leaf!r}.")
            if leaf in result and result[leaf] != axis:
                raise BatchAxisError(f"vmap: {leaf!r} is given two axes in {what}: "
                                     f"{result[leaf]} and {axis}.")
            result[leaf] = axis
    return result


class _LaneStatefulFunction(StatefulFunction):
    """Traces ``fun`` for one lane, inside ``jax.vmap`` (so axis names are bound).

    Declared batched states are traced with one lane's value, so the function
    sees the shapes it will see when it runs.
    """

    def __init__(self, fun: Callable, owner: "VmappedFunction"):
        super().__init__(fun, name=f"vmap({getattr(fun, '__name__', 'fun')})")
        self._owner = owner

    def discover(self, key, dyn_args: tuple, dyn_kwargs: dict,
                 outer_values=None) -> StateSignature:
        owner = self._owner
        declared = list(owner.in_state_axes)
        outer = current_trace()
        found = []

        def lane(declared_values, args, kwargs):
            with owned_traces(outer):
                lane_values = {s: v.tree if type(v) is StaticLeaves else v
                               for s, v in zip(declared, declared_values)}
                found.append(StatefulFunction.discover(
                    self, key, args, kwargs, outer_values=lane_values))

        mapped = owner.jax_vmap(lane, ([owner.in_state_axes[s] for s in declared],
                                       owner.in_axes, 0), None)
        jax.eval_shape(mapped, peek_state_values(declared), dyn_args, dyn_kwargs)
        return found[0]


class VmappedFunction:
    """A stateful function vectorised with ``jax.vmap``; see :func:`vmap`."""

    def __init__(self, fun: Callable, *, in_axes: Any = 0, out_axes: Any = 0,
                 axis_name: Optional[Hashable] = None, axis_size: Optional[int] = None,
                 spmd_axis_name: Any = None, in_states: Any = None, out_states: Any = None,
                 check_output: Optional[Callable[[Any, Any], None]] = None,
                 write_advice: Optional[str] = None):
        if not callable(fun):
            raise TypeError(f"vmap: expected a callable, got {fun!r}.")
        if axis_size is not None and (not isinstance(axis_size, int) or axis_size < 1):
            raise ValueError(f"vmap: axis_size must be a positive int, got {axis_size!r}.")
        self.fun = fun
        self.in_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes
        self.out_axes = out_axes
        self.axis_name = axis_name
        self.axis_size = axis_size
        self.spmd_axis_name = spmd_axis_name
        self.in_state_axes = state_axes(in_states, "in_states")
        self.out_state_axes = state_axes(out_states, "out_states")
        for s, axis in self.in_state_axes.items():
            if self.out_state_axes.setdefault(s, axis) != axis:
                raise BatchAxisError(
                    f"vmap: {s!r} is batched along axis {axis} in in_states but along axis "
                    f"{self.out_state_axes[s]} in out_states; a state keeps its batch axis.")
        self.stateful = _LaneStatefulFunction(fun, self)
        # check_output(out, batch_trace): called on one lane's output as JAX batches it
        self._check_output = check_output
        # what the error of an undeclared per-lane write tells to do (vmap_new_states: its own)
        self._write_advice = write_advice or (
            "Declare it in out_states (or in_states, if it holds one value per lane already), "
            "or write a value that is the same in every lane.")
        functools.update_wrapper(self, fun, updated=())

    def jax_vmap(self, f: Callable, in_axes: Any, out_axes: Any) -> Callable:
        return jax.vmap(f, in_axes=in_axes, out_axes=out_axes, axis_name=self.axis_name,
                        axis_size=self.axis_size, spmd_axis_name=self.spmd_axis_name)

    def __call__(self, *args, **kwargs):
        size = self._axis_size(args, kwargs)
        return self.stateful.call(lambda *a: self._run(size, *a), args, kwargs)

    def _run(self, size: Optional[int], sig: StateSignature, key, args: tuple, kwargs: dict,
             in_state_axes: Optional[Dict[State, int]] = None,
             out_state_axes: Optional[Dict[State, int]] = None):
        """One call; ``in_state_axes`` / ``out_state_axes`` default to the declared ones."""
        in_state_axes = self.in_state_axes if in_state_axes is None else in_state_axes
        out_state_axes = self.out_state_axes if out_state_axes is None else out_state_axes
        states = sig.states
        values = read_state_values(states)
        axes: List[Optional[int]] = [in_state_axes.get(s) for s in states]
        # A random state without per-lane keys gets one key per lane; undeclared, it
        # then gets a fresh key, declared in out_states it keeps the lanes' keys.
        fresh: Dict[State, Any] = {}
        for i, s in enumerate(states):
            if isinstance(s, RandomState) and sig.written[i] and s not in in_state_axes:
                if size is None:
                    raise ValueError(f"{self.stateful.name} draws from {s!r} but the number of "
                                     "lanes is unknown (nothing is batched): pass axis_size.")
                next_key, lane_keys = jr.split(values[i])
                values[i], axes[i] = jr.split(lane_keys, size), 0
                if s not in out_state_axes:
                    fresh[s] = next_key
        written = sig.write_states
        kept = [s not in fresh for s in written]
        out_axes = [out_state_axes.get(s) for s, k in zip(written, kept) if k]
        pure = self.stateful.pure(sig, key)
        outer = current_trace()
        name = self.stateful.name

        def lane(state_values, lane_args, lane_kwargs):
            with owned_traces(outer):
                out, new_values = pure(state_values, *lane_args, **lane_kwargs)
            trace = current_trace()
            if self._check_output is not None:
                self._check_output(out, trace)
            bad = [s for s, v in zip(written, new_values)
                   if s not in out_state_axes and s not in fresh
                   and is_batched_along(v, trace)]
            if bad:
                self._undeclared_per_lane_writes(bad)
                raise BatchAxisError(
                    f"{name} writes a different value in each lane to "
                    f"{', '.join(repr(s) for s in bad)}, which is not batched. "
                    f"{self._write_advice} No state was changed.")
            return out, [v for v, k in zip(new_values, kept) if k]

        mapped = self.jax_vmap(lane, (axes, self.in_axes, 0), (self.out_axes, out_axes))
        out, new_values = mapped(values, args, kwargs)
        targets = [s for s, k in zip(written, kept) if k] + list(fresh)
        write_state_values(targets, list(new_values) + list(fresh.values()))
        return out

    def _undeclared_per_lane_writes(self, states: List[State]) -> None:
        """Called (while JAX traces a lane) before the error for undeclared per-lane writes."""

    def _axis_size(self, args, kwargs) -> Optional[int]:
        """The number of lanes, checked across arguments and batched states (``None``: unknown)."""
        sizes: Dict[int, str] = {}

        def note(x, axis, where):
            shape = getattr(x, "shape", None)
            if axis is None or shape is None:
                return
            if not -len(shape) <= axis < len(shape):
                raise ValueError(f"{self.stateful.name}: {where} has shape {tuple(shape)} and "
                                 f"no axis {axis} to map over.")
            sizes.setdefault(shape[axis], where)

        for s, axis in self.in_state_axes.items():
            for leaf in jax.tree.leaves(peek_state_values([s])[0]):
                note(leaf, axis, repr(s))
        in_axes = self.in_axes
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"{self.stateful.name}: in_axes has {len(in_axes)} entries but the "
                             f"function was called with {len(args)} positional arguments.")
        for i, a in enumerate(args):
            spec = in_axes[i] if isinstance(in_axes, tuple) else in_axes
            try:
                pairs = _leaves_with_axes(spec, a)
            except (ValueError, TypeError):
                continue  # jax.vmap reports a bad in_axes tree itself
            for leaf, axis in pairs:
                note(leaf, axis, f"positional argument {i}")
        for k, v in kwargs.items():
            for leaf in jax.tree.leaves(v):
                note(leaf, 0, f"keyword argument {k!r}")
        if len(sizes) > 1:
            detail = ", ".join(f"{where}: {n}" for n, where in sizes.items())
            raise ValueError(f"{self.stateful.name}: the mapped axes have different sizes "
                             f"({detail}). No state was changed.")
        if self.axis_size is not None and sizes and self.axis_size not in sizes:
            (n, where), = sizes.items()
            raise ValueError(f"{self.stateful.name}: axis_size={self.axis_size} conflicts with "
                             f"the mapped axis size {n} of {where}; pass axis_size={n} or leave "
                             "it out. No state was changed.")
        return self.axis_size if self.axis_size is not None else next(iter(sizes), None)

    def __repr__(self) -> str:
        return f"<brainx.transform.{self.stateful.name}>"


def _leaves_with_axes(spec: Any, tree: Any) -> list:
    """``(leaf, axis)`` pairs of ``tree``, with ``spec`` an in_axes prefix of it."""
    pairs = []

    def visit(axis, subtree):
        pairs.extend((leaf, axis) for leaf in jax.tree.leaves(subtree))

    jax.tree.map(visit, spec, tree, is_leaf=lambda x: x is None)
    return pairs


def vmap(fn: Optional[Callable] = None, *, in_axes: Any = 0, out_axes: Any = 0,
         axis_name: Optional[Hashable] = None, axis_size: Optional[int] = None,
         spmd_axis_name: Any = None, in_states: Any = None, out_states: Any = None) -> Any:
    """Vectorise a function that reads and writes states, like ``jax.vmap``.

    Parameters
    ----------
    fn : callable, optional
        The function. Without it, ``vmap(**options)`` returns a decorator.
    in_axes, out_axes, axis_name, axis_size, spmd_axis_name
        As in ``jax.vmap`` (keyword arguments are mapped over axis 0).
    in_states : State, sequence or dict of States, or ``{axis: states}``
        States holding one value per lane along the given axis (0 unless a
        ``{axis: states}`` dict says otherwise); their new values are written
        back batched along the same axis.
    out_states : same format
        States shared on entry whose written values are per lane: they hold
        a batch (along the given axis) afterwards.

    Every other state is shared by all lanes. Writing it with a per-lane value
    raises :class:`~brainx.errors.BatchAxisError` naming it; nothing is
    written then. A :class:`~brainx.random.RandomState` the function draws
    from gives each lane its own key, split from its key: undeclared, it then
    advances once; in ``out_states``, it keeps the lanes' keys (a batch of
    generators); in ``in_states``, it already holds one key per lane.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array(2.0))          # shared
    >>> h = brainx.HiddenState(jnp.zeros((4, 3)))       # one row per lane
    >>> @brainx.transform.vmap(in_states=h)
    ... def step(x):
    ...     h.value = h.value + w.value * x
    ...     return h.value.sum()
    >>> step(jnp.arange(4.0)).tolist(), h.value.shape
    ([0.0, 6.0, 12.0, 18.0], (4, 3))
    """
    options = dict(in_axes=in_axes, out_axes=out_axes, axis_name=axis_name, axis_size=axis_size,
                   spmd_axis_name=spmd_axis_name, in_states=in_states, out_states=out_states)
    if no_function(fn):
        return functools.partial(vmap, **options)
    return VmappedFunction(fn, **options)


class _ChunkFunction(VmappedFunction):
    """The ``vmap`` of one ``map(..., batch_size=n)`` chunk, its errors in ``map``'s terms."""

    def __init__(self, fun: Callable, batch_size: int):
        super().__init__(fun)
        self.batch_size = batch_size

    def _undeclared_per_lane_writes(self, states: List[State]) -> None:
        raise BatchAxisError(
            f"map({getattr(self.fun, '__name__', 'f')}, batch_size={self.batch_size}): the "
            f"function writes {', '.join(repr(s) for s in states)}, a State shared by all slices, with "
            "a value that depends on the slice. With batch_size, the slices of a chunk run at "
            "once (vmap), so they cannot see each other's writes: use batch_size=None to run "
            "them one after another (a scan). No state was changed.")


def map(f: Callable, *xs: Any, batch_size: Optional[int] = None) -> Any:  # noqa: A001
    """Apply ``f`` to the slices of ``xs`` along their leading axis, one after the other.

    ``jax.lax.map`` for stateful functions: a :func:`~brainx.transform.for_loop`
    whose carry holds only the states ``f`` writes (read-only states are loop
    constants), so a state written by one call is seen by the next. With ``batch_size``,
    chunks of that many slices run at once through :func:`vmap` (a remainder
    runs as one last chunk); within a chunk, writes to shared states must be
    the same in every lane: a slice-dependent write is a
    :class:`~brainx.errors.BatchAxisError` naming the state and ``batch_size``.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> total = brainx.State(jnp.zeros(()))
    >>> def add(x):
    ...     total.value = total.value + x
    ...     return total.value
    >>> brainx.transform.map(add, jnp.arange(4.0)).tolist(), float(total.value)
    ([0.0, 1.0, 3.0, 6.0], 6.0)
    """
    if not xs:
        raise ValueError("map: pass at least one array to map over.")
    n = infer_length(xs, None, "map")
    if n == 0:
        raise ValueError("map: cannot map over an empty axis.")
    if batch_size is None:
        return for_loop(f, *xs)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"map: batch_size must be a positive int, got {batch_size!r}.")
    chunks, rest = divmod(n, batch_size)
    batched = _ChunkFunction(f, batch_size)
    ys = None
    if chunks:
        body = jax.tree.map(lambda a: a[:chunks * batch_size].reshape(
            (chunks, batch_size) + a.shape[1:]), xs)
        ys = jax.tree.map(lambda y: y.reshape((-1,) + y.shape[2:]), for_loop(batched, *body))
    if rest:
        tail = batched(*jax.tree.map(lambda a: a[chunks * batch_size:], xs))
        ys = tail if ys is None else jax.tree.map(lambda a, b: jax.numpy.concatenate([a, b]), ys, tail)
    return ys
