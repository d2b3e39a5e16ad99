"""One run of a stateful function in a transform scope: what it read, wrote and returned.

The user's function runs in a :class:`~brainx.state.trace.TransformScope`
in two ways, and both go through :func:`run_in_scope`:

- *discovery* (:meth:`StatefulFunction.discover
  <brainx.transform.core.stateful.StatefulFunction.discover>`): a state's
  value becomes a new input of the jaxpr being built, the first time it is
  read;
- a *direct run* under the JAX transform itself (``transform.grad`` inside a
  brainx trace): the states differentiated read as the transform's primals,
  every other state as the value visible outside.

Either way the writes stay in the scope's overlay; the caller gets them back
as a :class:`ScopeRecord` and decides where they go.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

import jax
from jax.core import Tracer

from brainx.errors import StateTypeError, TracerLeakError
from brainx._jax.traces import alive_trace_ids
from brainx.state.known_paths import describe_state
from brainx.state.state import State
from brainx.state.trace import TransformScope
from brainx._jax.traces import current_trace
from brainx.transform.core.jaxpr_builder import cache_boundary, note_raw_capture
from brainx.transform.core.state_values import LEAF, WrittenSpec, is_array_leaf, is_single_array

__all__ = ["ScopeRecord", "run_in_scope", "refuse_state_arguments", "OutsideTrace"]


class OutsideTrace(BaseException):
    """A direct run read or wrote a state while another JAX trace than its own ran.

    JAX runs a ``custom_vjp`` forward rule or a ``custom_jvp`` rule at the
    level of the trace *around* a differentiation (and may trace it once and
    cache it), and a raw helper's trace is not the run's own either: what
    such an access means depends on when that trace runs and ends
    (:mod:`brainx.state.lending`), which only a discovery trace sees in order.
    The caller runs the function the discovery way instead. A ``BaseException``,
    so that user code catching ``Exception`` does not swallow it; the run also
    records it (``ScopeRecord.outside``), in case something did.
    """


class ScopeRecord:
    """What one run of a function in a transform scope did.

    ``states`` lists every state read or written, in first-touch order;
    ``written`` / ``read`` mark them; ``lifted`` maps each state read from
    outside to ``(treedef, leaves)`` as the scope first saw it. ``out_leaves``
    and ``out_tree`` are the function's output; ``specs`` and ``new_values``
    the written states' new values (in ``states`` order) and how to rebuild
    them from their array leaves (:meth:`new_arrays`).
    """

    __slots__ = ("states", "written", "read", "lifted", "out", "out_leaves", "out_tree",
                 "specs", "new_values")

    def __init__(self, states, written, read, lifted, out, out_leaves, out_tree, specs,
                 new_values):
        self.states, self.written, self.read, self.lifted = states, written, read, lifted
        self.out, self.out_leaves, self.out_tree = out, out_leaves, out_tree
        self.specs, self.new_values = specs, new_values

    @property
    def write_states(self) -> Tuple[State, ...]:
        return tuple(s for s, w in zip(self.states, self.written) if w)

    def new_arrays(self) -> List[Any]:
        """The array leaves of the written states' new values, in order."""
        return [x for spec, v in zip(self.specs, self.new_values) for x in spec.arrays(v)]


def run_in_scope(fun: Callable, args: Sequence[Any], kwargs: Dict[str, Any], name: str,
                 lift_value: Callable[[State, Any], Any],
                 own_writes_only: bool = False) -> ScopeRecord:
    """Run ``fun(*args, **kwargs)`` in a new transform scope of the current JAX trace.

    ``lift_value(state, outer)`` gives the value a state reads as, the first
    time it is read (``outer``: the value visible outside the scope). A
    container value is copied, so a change made in place stays in the scope.
    A read made while another JAX trace than the current one runs (a raw
    ``jax.jit`` helper) is a capture (:func:`note_raw_capture`). Raises if a
    written state holds a tracer of a trace that has ended, or the output
    holds a State or a non-array; no State outside the scope changes.
    ``own_writes_only``: a read or write made while another trace runs raises
    :class:`OutsideTrace` (and ``outside`` is set to it).
    """
    trace = current_trace()
    lifted: Dict[State, Tuple[Any, list]] = {}
    outside: List[str] = []

    def lift(state, outer):
        value = lift_value(state, outer)
        if is_single_array(value):  # most states: no tree to flatten
            lifted[state] = (LEAF, [value])
            return value
        leaves, treedef = jax.tree.flatten(value)
        lifted[state] = (treedef, leaves)
        return jax.tree.unflatten(treedef, leaves)

    def check_read():
        if current_trace() is not trace:  # a raw JAX trace inside this one reads a state
            if own_writes_only:
                outside.append("read")
                raise OutsideTrace("read")
            note_raw_capture()

    def check_write(state, value):
        if own_writes_only and current_trace() is not trace:
            outside.append("write")
            raise OutsideTrace("write")
        cache_boundary()

    scope = TransformScope(name, lift, check_write, check_read)
    with scope:
        out = fun(*args, **kwargs)
    if outside:  # raised where it was met, and caught there by something
        raise OutsideTrace(outside[0])
    states = scope.states
    alive = alive_trace_ids(trace)
    for s in scope.get_write_states():
        _refuse_foreign_tracers(s, scope.overlay[s], alive, name)
    written = tuple(scope.was_written(s) or _mutated_in_place(scope.overlay[s], lifted[s])
                    if s in lifted else scope.was_written(s) for s in states)
    new_values = [scope.overlay[s] for s, w in zip(states, written) if w]
    out_leaves, out_tree = jax.tree.flatten(out)
    _refuse_state_outputs(out_leaves, name)
    return ScopeRecord(states, written, tuple(scope.was_read(s) for s in states), lifted, out,
                       out_leaves, out_tree, tuple(WrittenSpec.of(v) for v in new_values),
                       new_values)


def refuse_state_arguments(dyn_args: tuple, dyn_kwargs: dict, where: str, hint: str) -> None:
    """Raise :class:`StateTypeError` naming the arguments that are States."""
    paths = [(jax.tree_util.keystr(path), x) for path, x in
             jax.tree_util.tree_flatten_with_path((dyn_args, dyn_kwargs))[0]
             if isinstance(x, State)]
    named = ", ".join(f"{p} is {x!r}" for p, x in paths)
    raise StateTypeError(
        f"{where}: an argument cannot be an instance of State ({named}; [0] are the positional "
        f"arguments, [1] the keyword ones). {hint}Pass state.value, or let the function reach "
        "the state itself (a closure, a module attribute): the transform finds it there and "
        "writes it back. No state was changed.")


def _refuse_state_outputs(out_leaves: Sequence[Any], where: str) -> None:
    returned = [x for x in out_leaves if isinstance(x, State)]
    if returned:
        raise StateTypeError(
            f"{where} returns {', '.join(repr(s) for s in returned)}: a transformed function "
            "cannot return a State (only arrays leave a trace). Return its .value instead; "
            "the state itself stays reachable where it lives. No state was changed.")
    other = [x for x in out_leaves if not is_array_leaf(x)]
    if other:
        raise TypeError(
            f"{where} returns {repr(other[0])[:80]} (a {type(other[0]).__name__}): only "
            "arrays, numbers and pytrees of them leave a trace. Return the arrays you need (a "
            "module's outputs or its states' values); a module or other object stays reachable "
            "where it lives. No state was changed.")


def _refuse_foreign_tracers(state: State, value: Any, alive: set, where: str) -> None:
    """Raise if ``value`` holds a tracer of a trace not in ``alive`` (:func:`~brainx._jax.traces.alive_trace_ids`).

    Such a tracer was written by a raw JAX transform (``jax.jit``,
    ``lax.scan``, ...) nested in the brainx one: it has died with that
    transform's trace.
    """
    for leaf in ([value] if is_single_array(value) else jax.tree.leaves(value)):
        if isinstance(leaf, Tracer) and id(getattr(leaf, "_trace", None)) not in alive:
            raise TracerLeakError(
                f"{describe_state(state)} was written inside a raw JAX transform (jax.jit, "
                f"jax.checkpoint, jax.lax.scan / fori_loop / cond / while_loop, ...) called by "
                f"{where}, and "
                "still holds that transform's value after it ended: the raw transform cannot "
                "hand the new value back to brainx. Use the brainx transform instead "
                "(brainx.transform.jit, checkpoint, scan, for_loop, cond, while_loop), or "
                "return the value from the helper and write the state outside it. No state "
                "was changed.")


def _mutated_in_place(value: Any, lifted: Tuple[Any, list]) -> bool:
    """Whether the value a trace read was changed in place (a container's item replaced)."""
    treedef, leaves = lifted
    if treedef is LEAF and is_single_array(value):
        return value is not leaves[0]
    now, now_def = jax.tree.flatten(value)
    return now_def != treedef or any(a is not b for a, b in zip(now, leaves))
