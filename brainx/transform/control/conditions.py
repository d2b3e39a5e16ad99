"""Stateful control flow: `cond`, `switch`, `ifelse`.

Every branch may read and write any state. The branches are traced to find
their states; all of them then get one pure signature: the values of every
state any branch touches go in, and the values of every state any branch
writes come out (a branch that does not write a state returns it as it
was). ``jax.lax.cond`` / ``jax.lax.switch`` picks the branch, and the
written states get the chosen branch's values.

A branch that changes a state's shape, dtype or tree structure raises
:class:`~brainx.StateTypeError` naming the state, before JAX compares the
branch outputs, and leaves every state as it was. A state that starts weakly
typed (``State(0)``) may become a float in one branch, as in a loop: every
branch then returns it promoted. Branch outputs are made to agree (and
outputs all branches compute alike are computed once) by
:class:`~brainx.transform.control.branch_outputs.BranchOutputs`.

Called outside every brainx transform, ``cond`` and ``switch`` compile once
per set of branch functions (as ``jax.lax.cond`` caches its trace per
function); see :mod:`brainx.transform.control.loop_cache`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from brainx._jax.traces import jit_disabled
from brainx.transform.control.branch_outputs import BranchOutputs
from brainx.transform.core.value_types import keep_weak_types
from brainx.transform.control.loop_cache import run_compiled_once
from brainx.transform.core.state_union import StateUnion, UnionSignature
from brainx.transform.core.stateful import read_state_values, write_state_values

__all__ = ["cond", "switch", "ifelse"]


def _as_predicate(pred: Any, what: str = "cond"):
    """A boolean scalar (numbers compare with zero), checked like ``jax.lax.cond``."""
    if pred is None:
        raise TypeError(f"{what}: the predicate is None.")
    if isinstance(pred, (list, tuple)) or np.ndim(pred) != 0:
        raise TypeError(f"{what}: the predicate must be a scalar, got {pred!r} of shape "
                        f"{np.shape(pred)}.")
    try:
        dtype = jax.dtypes.result_type(pred)
    except TypeError as err:
        raise TypeError(f"{what}: the predicate must be a boolean or a number, got "
                        f"{pred!r}.") from err
    if dtype.kind == "b":
        return pred
    if dtype.kind in "iuf":
        return pred != 0
    raise TypeError(f"{what}: the predicate must be a boolean or a number, got dtype {dtype}.")


class _Branches:
    """Branches run by ``jax.lax.cond`` / ``switch``, as a function of ``(index, *operands)``."""

    def __init__(self, kind: str, names: Sequence[str], branches: Sequence[Callable]):
        self.kind, self.names = kind, list(names)
        self.union = StateUnion(branches, [f"{n} of {kind}" for n in names])

    def __call__(self, index, *operands):
        return self.union.call(lambda sig: self._run(sig, index, operands), operands)

    def _run(self, sig: UnionSignature, index, operands: tuple):
        values = read_state_values(sig.states)
        pures = [sig.pure(i, check=f"the {n} of {self.kind}", weak_promotion=True)
                 for i, n in enumerate(self.names)]
        outputs = BranchOutputs(pures, self.names, self.kind, (values, *operands))
        out, new_values = outputs.run(index)
        write_state_values(sig.write_states, keep_weak_types(sig.split(values)[0], new_values))
        return out


def _run_branches(kind: str, names: Sequence[str], index, branches: Sequence[Callable],
                  operands: tuple):
    # outside every transform: compile once per set of branches
    return run_compiled_once(branches, (kind, len(branches)),
                             lambda funs: _Branches(kind, names, funs), index, *operands)


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands) -> Any:
    """Call ``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, like ``jax.lax.cond``.

    Both branches may read and write states, including a state only one of
    them writes (the other leaves it unchanged). Both are traced; one runs.

    Parameters
    ----------
    pred : bool or number scalar
        Which branch to run (a number is true when non-zero).
    true_fun, false_fun : callable
        The branches; they must return outputs of the same type.
    *operands
        Passed to the branch.

    Returns
    -------
    The chosen branch's output.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> count = brainx.State(jnp.zeros((), jnp.int32))
    >>> def bump(x):
    ...     count.value += 1
    ...     return x + 1
    >>> out = brainx.transform.cond(jnp.array(True), bump, lambda x: x - 1, 1.0)
    >>> float(out), int(count.value)
    (2.0, 1)
    >>> out = brainx.transform.cond(False, bump, lambda x: x - 1, 1.0)
    >>> float(out), int(count.value)
    (0.0, 1)
    """
    if not (callable(true_fun) and callable(false_fun)):
        raise TypeError("cond: true_fun and false_fun must be callable.")
    pred = _as_predicate(pred, "cond")
    if jit_disabled() and not isinstance(pred, jax.core.Tracer):
        return true_fun(*operands) if pred else false_fun(*operands)
    return _run_branches("cond", ["false branch", "true branch"], pred, (false_fun, true_fun),
                         operands)


def switch(index: Any, branches: Sequence[Callable], *operands) -> Any:
    """Call ``branches[index](*operands)``, like ``jax.lax.switch``.

    ``index`` is clamped to ``[0, len(branches) - 1]``. Every branch may read
    and write states; a state that a branch does not write keeps its value
    when that branch runs.

    Parameters
    ----------
    index : int scalar
        Which branch to run.
    branches : sequence of callables
        The branches; they must return outputs of the same type.
    *operands
        Passed to the branch.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> mode = brainx.State(jnp.zeros(()))
    >>> def set_to(v):
    ...     def branch(x):
    ...         mode.value = jnp.asarray(v, jnp.float32)
    ...         return x * v
    ...     return branch
    >>> out = brainx.transform.switch(2, [set_to(0.0), set_to(1.0), set_to(2.0)], 3.0)
    >>> float(out), float(mode.value)
    (6.0, 2.0)
    """
    branches = tuple(branches)
    if not all(callable(b) for b in branches):
        raise TypeError("switch: branches must be a sequence of callables.")
    if not branches:
        raise ValueError("switch: the sequence of branches is empty.")
    if np.ndim(index) != 0:
        raise TypeError(f"switch: the index must be a scalar, got shape {np.shape(index)}.")
    try:
        kind = jax.dtypes.result_type(index).kind
    except TypeError as err:
        raise TypeError(f"switch: the index must be an integer, got {index!r}.") from err
    if kind not in "iu":
        raise TypeError(f"switch: the index must be an integer, got {index!r}.")
    if len(branches) == 1:
        return branches[0](*operands)
    index = jax.lax.clamp(np.int32(0), jax.lax.convert_element_type(index, np.int32),
                          np.int32(len(branches) - 1))
    if jit_disabled() and not isinstance(index, jax.core.Tracer):
        return branches[int(index)](*operands)
    return _run_branches("switch", [f"branch {i}" for i in range(len(branches))], index,
                         branches, operands)


def ifelse(conditions: Sequence[Any], branches: Sequence[Callable], *operands,
           check_cond: bool = False) -> Any:
    """``if / elif / else`` over states: the branch of the first true condition runs.

    ``conditions[i]`` guards ``branches[i]``; the first true one wins, and
    when none is true the last branch runs (it is the ``else``; a common
    pattern is to make the last condition ``True``).

    Parameters
    ----------
    conditions : sequence of bool scalars
        One per branch.
    branches : sequence of callables
        The branches, called with ``*operands``.
    check_cond : bool
        Require exactly one condition to be true: a ``ValueError`` for
        concrete conditions, a runtime error from the compiled code otherwise.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> label = brainx.State(jnp.zeros((), jnp.int32))
    >>> def mark(k):
    ...     def branch():
    ...         label.value = jnp.int32(k)
    ...     return branch
    >>> def classify(a):
    ...     brainx.transform.ifelse([a > 5, a > 0, True], [mark(2), mark(1), mark(0)])
    ...     return label.value
    >>> [int(brainx.transform.jit(classify)(a)) for a in (7.0, 3.0, -1.0)]
    [2, 1, 0]
    """
    branches = tuple(branches)
    conditions = list(conditions)
    if not all(callable(b) for b in branches):
        raise TypeError("ifelse: branches must be a sequence of callables.")
    if not branches:
        raise ValueError("ifelse: the sequence of branches is empty.")
    if len(conditions) != len(branches):
        raise ValueError(f"ifelse: got {len(conditions)} conditions for {len(branches)} "
                         "branches; give one condition per branch.")
    preds = [_as_predicate(c, "ifelse") for c in conditions]
    if not any(isinstance(p, jax.core.Tracer) for p in preds):
        flags = [bool(p) for p in preds]
        if check_cond and sum(flags) != 1:
            raise ValueError(f"ifelse: check_cond=True needs exactly one true condition, got "
                             f"{flags}.")
        index = flags.index(True) if any(flags) else len(flags) - 1
        return switch(index, branches, *operands)
    stacked = jnp.stack([jnp.asarray(p, bool) for p in preds])
    if check_cond:
        jax.debug.callback(_check_exactly_one, stacked)
    index = jnp.where(stacked.any(), jnp.argmax(stacked), len(preds) - 1)
    return switch(index, branches, *operands)


def _check_exactly_one(flags) -> None:
    if int(np.sum(flags)) != 1:
        raise ValueError(f"ifelse: check_cond=True needs exactly one true condition, got "
                         f"{np.asarray(flags).tolist()}.")
