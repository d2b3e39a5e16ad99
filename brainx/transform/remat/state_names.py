"""Names for state values inside a trace, so remat policies and residual reports see states.

JAX knows a value only by the operation that made it; ``checkpoint_name``
attaches a name that ``jax.checkpoint`` policies and
``jax.ad_checkpoint.print_saved_residuals`` can read. This module gives each
:class:`~brainx.State` one such name, ``brainx.state:<uid>:<label>``, and puts
it on the state's value where a trace reads it and where it writes it:

* :func:`state_tag` is the name of a state (its ``label`` is the path given
  by the caller, else the state's ``name``, else its type), and
  :func:`state_of_tag` turns a name back into the state (held weakly);
* :func:`name_written_at_source` rewrites a jaxpr so that the value a state
  is given carries the name from the equation that computes it on, and every
  later read in the same trace sees the named value;
* :class:`NamingScope` is a recording scope that names every value read from
  or written to a state inside a ``with`` block (the residual report uses it
  to follow states through loops).

A name is an identity at run time: nothing here changes a result.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Dict, Mapping, Optional, Sequence

import jax
from jax.ad_checkpoint import checkpoint_name
import jax.extend.core as jex_core
from jax.extend.core import get_opaque_trace_state

from brainx.state.state import State
from brainx.state.weak_refs import StateRef, StateTable
from brainx.state.trace import StateTraceStack

__all__ = ["PREFIX", "state_tag", "state_of_tag", "label_of_tag", "state_paths", "name_value",
           "name_written_at_source", "insert_names", "named_pure", "tags_for", "NamingScope",
           "NAME_PRIMITIVE"]

#: Every state name starts with this.
PREFIX = "brainx.state:"

_UIDS: "StateTable[int]" = StateTable()
_STATES: Dict[int, StateRef] = {}  # uid -> the state, weakly
_COUNTER = itertools.count(1)

#: The primitive ``checkpoint_name`` binds (``jax.ad_checkpoint``'s ``name_p``).
NAME_PRIMITIVE = jax.make_jaxpr(lambda x: checkpoint_name(x, "probe"))(1.0).eqns[0].primitive


def _uid(state: State) -> int:
    uid = _UIDS.get(state)
    if uid is None:
        uid = _UIDS[state] = next(_COUNTER)
        _STATES[uid] = StateRef(state, lambda _ref, uid=uid: _STATES.pop(uid, None))
    return uid


def default_label(state: State) -> str:
    """``name (Type)`` if the state has a name, else ``Type#uid``."""
    kind = type(state).__name__
    return f"{state.name} ({kind})" if state.name else f"{kind}#{_uid(state)}"


def state_tag(state: State, path: Optional[str] = None) -> str:
    """The ``checkpoint_name`` of ``state``'s values: ``brainx.state:<uid>:<label>``.

    >>> import jax.numpy as jnp, brainx
    >>> v = brainx.HiddenState(jnp.zeros(2))
    >>> tag = state_tag(v, "lif.V")
    >>> tag.startswith(PREFIX) and tag.endswith(":lif.V (HiddenState)"), state_of_tag(tag) is v
    (True, True)
    """
    label = f"{path} ({type(state).__name__})" if path else default_label(state)
    return f"{PREFIX}{_uid(state)}:{label}"


def state_of_tag(name: str) -> Optional[State]:
    """The state a :func:`state_tag` names (``None``: not a state's name, or the state died)."""
    if not isinstance(name, str) or not name.startswith(PREFIX):
        return None
    uid = name[len(PREFIX):].split(":", 1)[0]
    ref = _STATES.get(int(uid)) if uid.isdigit() else None
    return None if ref is None else ref()


def label_of_tag(name: str) -> str:
    """The label part of a :func:`state_tag` (``lif.V (HiddenState)``)."""
    return name[len(PREFIX):].split(":", 1)[1]


def state_paths(*nodes: Any, max_depth: int = 8) -> Dict[State, str]:
    """``{state: path}`` for the states reachable from ``nodes`` (objects, dicts, lists).

    Paths join attribute names, keys and indices with dots (``lif.V``), the
    paths ``brainx.graph.states`` gives a module's states. A mapping whose
    values are all States is taken as ``{path: state}``.

    >>> import jax.numpy as jnp, brainx
    >>> class Cell:
    ...     def __init__(self):
    ...         self.V = brainx.HiddenState(jnp.zeros(2))
    >>> net = {"lif": Cell()}
    >>> list(state_paths(net).values())
    ['lif.V']
    """
    paths: Dict[State, str] = {}
    seen = set()

    def walk(node, path, depth):
        if isinstance(node, State):
            paths.setdefault(node, ".".join(path))
            return
        if depth > max_depth or id(node) in seen or isinstance(node, (str, bytes, int, float)):
            return
        seen.add(id(node))
        if isinstance(node, Mapping):
            items = node.items()
        elif isinstance(node, (list, tuple)):
            items = enumerate(node)
        elif hasattr(node, "__dict__") and not isinstance(node, type):
            items = vars(node).items()
        else:
            return
        for key, child in items:
            if not (isinstance(key, str) and key.startswith("_")):
                walk(child, path + [str(key)], depth + 1)

    for node in nodes:
        walk(node, [], 0)
    return paths


def name_value(value: Any, tag: str) -> Any:
    """``checkpoint_name`` on every array leaf of ``value`` (other leaves pass through)."""
    return jax.tree.map(lambda x: checkpoint_name(x, tag) if _is_array(x) else x, value)


def _is_array(x: Any) -> bool:
    return isinstance(x, (jax.Array, jax.core.Tracer)) or hasattr(x, "dtype")


def name_written_at_source(jaxpr: Any, names: Mapping[int, str]) -> Any:
    """A copy of ``jaxpr`` whose outputs ``names`` keys are named where they are computed.

    A ``checkpoint_name`` equation goes right after the equation that makes
    each such output, and every later use of that value (a read of the state
    after it was written) uses the named value, so a policy can keep or drop
    it. Outputs that are inputs or literals are left alone.
    """
    by_var = {}
    for i, tag in names.items():
        v = jaxpr.outvars[i]
        if not isinstance(v, jex_core.Literal):
            by_var.setdefault(v, tag)
    return insert_names(jaxpr, by_var)


def insert_names(jaxpr: Any, names: Mapping[Any, str]) -> Any:
    """A copy of ``jaxpr`` where each var of ``names`` is named right where it is computed.

    A ``checkpoint_name`` equation follows the equation that makes the var,
    and every later use of the var (equations and outputs) reads the named
    value. Vars no equation makes (inputs, constants) are left alone.
    """
    produced = {}
    for k, eqn in enumerate(jaxpr.eqns):
        for v in eqn.outvars:
            produced[v] = k
    after: Dict[int, list] = {}
    renamed: Dict[Any, Any] = {}
    for v, tag in names.items():
        if v not in produced or v in renamed:
            continue
        new = jex_core.Var(v.aval)
        renamed[v] = new
        src = jaxpr.eqns[produced[v]]
        after.setdefault(produced[v], []).append(jex_core.new_jaxpr_eqn(
            [v], [new], NAME_PRIMITIVE, {"name": tag}, set(), src.source_info))
    if not renamed:
        return jaxpr
    sub = lambda xs: [renamed.get(x, x) if not isinstance(x, jex_core.Literal) else x
                      for x in xs]
    eqns = []
    for k, eqn in enumerate(jaxpr.eqns):
        eqns.append(eqn.replace(invars=sub(eqn.invars)))
        eqns += after.get(k, [])
    return jaxpr.replace(eqns=eqns, outvars=sub(jaxpr.outvars))


class NamingScope(StateTraceStack):
    """A recording scope that names every state value read or written inside it.

    Used inside a brainx trace: a read returns the visible value under the
    state's :func:`state_tag`, a write passes the named value on, so a loop or
    checkpoint called inside starts from named values. Each value is named
    once: reading a state again, before it is written, gives the same named
    value (a policy that keeps it then keeps one copy). ``paths`` gives the
    labels (``{state: path}``).
    """

    def __init__(self, paths: Optional[Mapping[State, str]] = None):
        super().__init__("name state values")
        self.paths = dict(paths or {})
        # state -> (JAX trace, value seen, its named value): a named value is a tracer
        # of the trace it was made in, reused only there
        self._named: Dict[State, tuple] = {}

    def tag(self, state: State) -> str:
        return state_tag(state, self.paths.get(state))

    def read_value(self, state) -> Any:
        value = super().read_value(state)
        if state in self._created:
            return value
        seen, now = self._named.get(state), get_opaque_trace_state(convention="brainx")
        if seen is not None and seen[0] == now and _same_leaves(seen[1], value):
            return seen[2]
        named = name_value(value, self.tag(state))
        self._named[state] = (now, value, named)
        return named

    def write_value(self, state, value) -> None:
        if state not in self._created:
            value = name_value(value, self.tag(state))
            # read back as written: named already
            self._named[state] = (get_opaque_trace_state(convention="brainx"), value, value)
        super().write_value(state, value)


def _same_leaves(a: Any, b: Any) -> bool:
    """Whether two pytrees hold the very same leaf objects."""
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    return ta == tb and all(x is y for x, y in zip(la, lb))


def named_pure(stateful: Any, sig: Any, paths: Optional[Mapping[State, str]] = None):
    """``stateful.pure(sig)`` with every state value named where it is read and computed.

    Reads are named as the values enter; a written state's new value is named
    at the equation that computes it (:func:`name_written_at_source`).
    """
    trace = sig.trace
    tags = tags_for(sig.states, paths)
    k = trace.out_tree.num_leaves
    names = {}
    for spec, i in zip(trace.written_specs, sig.write_indices):
        for j in range(sum(spec.mask)):
            names[k + j] = tags[i]
        k += sum(spec.mask)
    pure = stateful.pure_of(dataclasses.replace(
        trace, jaxpr=name_written_at_source(trace.jaxpr, names)))

    def named(values, *args, **kwargs):
        return pure([name_value(v, t) for v, t in zip(values, tags)], *args, **kwargs)

    return named


def tags_for(states: Sequence[State], paths: Optional[Mapping[State, str]] = None) -> list:
    """:func:`state_tag` of each state, labelled by ``paths`` where it has one."""
    paths = paths or {}
    return [state_tag(s, paths.get(s)) for s in states]
