"""The outputs of the branches of one ``cond`` / ``switch``, made to agree.

``jax.lax.cond`` requires every branch to return outputs of exactly the
same type, and reports a mismatch by a path into its own output tree (``true_fun
output at path [0][1]``), which names neither the user's output nor the
state. :class:`BranchOutputs` traces each pure branch of a stateful ``cond``
to a jaxpr (a replay of the branch's trace, not the user's Python) and then:

* checks that the user's outputs agree, with an error in the user's terms;
* promotes a written state that starts weakly typed (``State(0)``, a Python
  scalar) and that some branch makes a float to the type every branch can
  return, as ``jax.lax.scan`` promotes such a carry;
* finds the outputs every branch computes alike (the same constant, the same
  input, or the same computation on the same inputs) and computes them once,
  outside the branches. Under ``vmap`` with a per-lane predicate,
  ``jax.lax.cond`` becomes a select whose output JAX marks batched even when
  both sides are one shared value; such a value computed outside the select
  stays unbatched, so it may be written to a state shared by every lane.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import jax
import jax.extend.core as jcore
import numpy as np
from jax.core import Tracer

from brainx.transform.core.value_types import cast_leaf, describe_type, joined_type

__all__ = ["BranchOutputs"]

_SMALL = 4096  # constants up to this many elements are compared by value


class BranchOutputs:
    """The branches ``pures`` of one ``cond``/``switch``, traced on ``args``, with agreeing outputs.

    Parameters
    ----------
    pures : sequence of callables
        ``pure(*args) -> (out, written_values)`` per branch.
    names : sequence of str
        The branches in error messages (``"true branch"``).
    kind : str
        ``"cond"`` or ``"switch"``.
    args : tuple
        The arguments every branch is called with.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.transform.control.branch_outputs import BranchOutputs
    >>> pures = [lambda x: (x + 1, [0.5]), lambda x: (x - 1, [jnp.asarray(0)])]
    >>> outs = BranchOutputs(pures, ["false branch", "true branch"], "cond", (1.0,))
    >>> out, new = outs.run(jnp.array(True))
    >>> float(out), new[0].dtype
    (0.0, dtype('float32'))
    """

    def __init__(self, pures: Sequence[Callable], names: Sequence[str], kind: str, args: tuple):
        self.kind, self.names = kind, list(names)
        self.flat_args = jax.tree.leaves(args)
        traced = [jax.make_jaxpr(p, return_shape=True)(*args) for p in pures]
        self.jaxprs = [closed for closed, _ in traced]
        shapes = [shape for _, shape in traced]
        self._check_outputs([out for out, _ in shapes])
        self.tree = jax.tree.structure(shapes[0])
        self.n_out = len(jax.tree.leaves(shapes[0][0]))
        self.targets = self._targets([jax.tree.leaves(s) for s in shapes])
        self.hoisted = _shared_outputs(self.jaxprs)

    # -- checks -------------------------------------------------------------------------------
    def _check_outputs(self, outs: List[Any]) -> None:
        first = outs[0]
        for name, out in zip(self.names[1:], outs[1:]):
            if jax.tree.structure(out) != jax.tree.structure(first) or not all(
                    a.shape == b.shape and a.dtype == b.dtype
                    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(first))):
                raise TypeError(
                    f"{self.kind}: the {name} returns {describe_type(out)} but the "
                    f"{self.names[0]} returns {describe_type(first)}. Every branch must return "
                    "outputs of the same tree structure, shapes and dtypes; cast or reshape "
                    "the output of one of them. No state was changed.")

    def _targets(self, flat: List[List[Any]]) -> List[Optional[Tuple[np.dtype, bool]]]:
        """Per output leaf: the ``(dtype, weak)`` every branch casts it to, ``None`` to keep it."""
        targets: List[Optional[Tuple[np.dtype, bool]]] = []
        for j, avals in enumerate(zip(*flat)):
            if j < self.n_out or all(a.dtype == avals[0].dtype for a in avals):
                targets.append(None)  # equal dtypes; JAX joins weak types itself
            else:  # a weakly typed state promoted by a branch (check_state_types allowed it)
                targets.append(joined_type(avals))
        return targets

    # -- running ------------------------------------------------------------------------------
    def branch(self, which: int) -> Callable:
        """Branch ``which`` as a function of the flat arguments, its outputs cast to the targets."""
        closed, targets = self.jaxprs[which], self.targets

        def run(*flat):
            outs = jcore.jaxpr_as_fun(closed)(*flat)
            return [x if t is None else cast_leaf(x, *t) for x, t in zip(outs, targets)]
        return run

    def run(self, index: Any) -> Any:
        """``(out, written_values)`` of the branch ``index`` selects (a bool for ``cond``)."""
        fns = [self.branch(i) for i in range(len(self.jaxprs))]
        if self.kind == "cond":  # branches are (false, true)
            outs = jax.lax.cond(index, fns[1], fns[0], *self.flat_args)
        else:
            outs = jax.lax.switch(index, fns, *self.flat_args)
        if self.hoisted:
            shared = _evaluate(self.jaxprs[0], sorted(self.hoisted), self.flat_args)
            avals = self.jaxprs[0].out_avals
            for j, value in zip(sorted(self.hoisted), shared):
                t = self.targets[j] or (avals[j].dtype, avals[j].weak_type)
                if not isinstance(value, (jax.Array, Tracer)):  # a literal: make it an array
                    value = jax.numpy.asarray(value)
                outs[j] = cast_leaf(value, *t)
        return jax.tree.unflatten(self.tree, outs)


# -- outputs every branch computes alike -----------------------------------------------------

class _Keys:
    """Numbers for computations, equal for equal computations (shared by all branches)."""

    def __init__(self):
        self.table: Dict[Any, int] = {}

    def of(self, key: Any) -> Optional[int]:
        if key is None:
            return None
        try:
            return self.table.setdefault(key, len(self.table))
        except TypeError:  # an unhashable parameter
            return None


def _const_key(value: Any) -> Any:
    if isinstance(value, Tracer):
        return ("tracer", id(value))
    try:
        arr = np.asarray(value)
    except Exception:
        return ("object", id(value))
    if arr.dtype == object or arr.size > _SMALL:
        return ("object", id(value))
    weak = bool(getattr(jax.typeof(value), "weak_type", False)) if hasattr(value, "dtype") else True
    return ("const", arr.dtype.str, arr.shape, weak, arr.tobytes())


def _output_keys(closed: Any, keys: _Keys) -> List[Optional[int]]:
    """A number per output of ``closed``: equal across branches iff computed alike."""
    jaxpr = closed.jaxpr
    env: Dict[Any, Optional[int]] = {}
    for i, v in enumerate(jaxpr.invars):
        env[v] = keys.of(("in", i))
    for v, c in zip(jaxpr.constvars, closed.consts):
        env[v] = keys.of(_const_key(c))

    def atom(a):
        if isinstance(a, jcore.Literal):
            return keys.of(("lit", str(a.aval)) + _const_key(a.val)[1:])
        return env.get(a)

    for eqn in jaxpr.eqns:
        ins = tuple(atom(a) for a in eqn.invars)
        key = None
        if not eqn.effects and None not in ins and not any(True for _ in jcore.jaxprs_in_params(eqn.params)):
            params = tuple(sorted((k, repr(v)) for k, v in eqn.params.items()))
            key = (eqn.primitive.name, params, ins)
        for k, out in enumerate(eqn.outvars):
            env[out] = None if key is None else keys.of((key, k, str(out.aval)))
    return [atom(v) for v in jaxpr.outvars]


def _shared_outputs(jaxprs: Sequence[Any]) -> set:
    """The output positions every branch computes alike (same type, same computation)."""
    keys = _Keys()
    per_branch = [_output_keys(j, keys) for j in jaxprs]
    avals = [j.out_avals for j in jaxprs]
    shared = set()
    for pos, ks in enumerate(zip(*per_branch)):
        same_type = all(str(a[pos]) == str(avals[0][pos]) for a in avals)
        if ks[0] is not None and same_type and all(k == ks[0] for k in ks):
            shared.add(pos)
    return shared


def _evaluate(closed: Any, positions: Sequence[int], flat_args: Sequence[Any]) -> list:
    """The outputs ``positions`` of ``closed``, computing only the equations they need."""
    jaxpr = closed.jaxpr
    outvars = [jaxpr.outvars[j] for j in positions]
    needed = {v for v in outvars if not isinstance(v, jcore.Literal)}
    eqns = []
    for eqn in reversed(jaxpr.eqns):
        if any(v in needed for v in eqn.outvars):
            eqns.append(eqn)
            needed.update(v for v in eqn.invars if not isinstance(v, jcore.Literal))
    debug = jaxpr.debug_info._replace(result_paths=None)  # fewer outputs than the branch
    pruned = jcore.Jaxpr(jaxpr.constvars, jaxpr.invars, outvars, eqns[::-1], debug_info=debug)
    return jcore.jaxpr_as_fun(jcore.ClosedJaxpr(pruned, closed.consts))(*flat_args)
