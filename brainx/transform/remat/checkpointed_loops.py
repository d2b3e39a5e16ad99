"""Checkpointed loops over states: `checkpointed_scan`, `_for_loop`, `_while_loop`.

They compute exactly what :func:`~brainx.transform.scan`, :func:`for_loop` and
``while_loop`` compute, with the same treatment of states (written states in
the carry, read-only states as loop constants, type checks naming the state,
compiled once outside ``jit``), but differentiate with much less memory: the
reverse pass keeps a few carries and recomputes the rest, following a
:mod:`strategy <brainx.transform.remat.checkpoint_strategies>`. Outputs are stacked
as ``lax.scan`` stacks them (never carried through the loop), so time stays
linear in the number of steps.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import jax

from brainx._jax.traces import jit_disabled
from brainx.transform.core.value_types import keep_weak_types
from brainx.transform.remat.checkpoint_strategies import (
    Binomial, CheckpointStrategy, as_strategy, with_policy,
)
from brainx.transform.control.loop_cache import WeakFunction, run_compiled_once
from brainx.transform.control.loops import (
    _check_callable, _check_carry, _non_negative_int, _pair, _python_while, _run_scan, _Scan,
    _While,
)
from brainx.transform.control.progress_bar import ProgressBar
from brainx.transform.remat.default_strategy import default_strategy
from brainx.transform.remat.memory_budget import Budgeted
from brainx.transform.remat.policies import uses_state_names
from brainx.transform.remat.reverse_loops import vjp_while_loop
from brainx.transform.remat.state_names import NamingScope, state_paths
from brainx.transform.core.state_union import UnionSignature
from brainx.transform.core.stateful import read_state_values, write_state_values

__all__ = ["checkpointed_scan", "checkpointed_for_loop", "checkpointed_while_loop"]


class _CheckpointedScan(_Scan):
    """A checkpointed scan over a stateful step: :class:`_Scan` run by a strategy."""

    def __init__(self, kind: str, fun: Callable, length: int, reverse: bool, unroll: int,
                 bar: Optional[ProgressBar], strategy: CheckpointStrategy):
        if uses_state_names(getattr(strategy, "policy", None)):
            fun = _naming_states(fun)  # the step's jaxpr carries the states' names
        super().__init__(kind, fun, length, reverse, unroll, bar)
        self.strategy = strategy

    def _run(self, sig: UnionSignature, init, xs):
        values = read_state_values(sig.states)
        written, consts = sig.split(values)
        pure = sig.pure(0, check=self.label, weak_promotion=True)
        label, runner = self.label, self.runner

        def body(consts, carry, x):
            out, states = pure(sig.merge(carry[0], consts), carry[1], x)
            c, y = _pair(out, label)
            _check_carry(carry[1], c, label)
            return (states, c), y

        monitor = None if runner is None else (lambda done, carry, y: runner(done, carry[1], y))
        unroll = self.strategy.default_unroll if self.unroll is None else self.unroll
        (states, c), ys = self.strategy.scan(body, consts, (written, init), xs, self.length,
                                             reverse=self.reverse, unroll=unroll,
                                             monitor=monitor)
        write_state_values(sig.write_states, keep_weak_types(written, states))
        return c, ys


def _naming_states(fun: Callable) -> Callable:
    """``fun`` run under a :class:`NamingScope`: every state value it reads or writes is
    named, where it is read and where it is computed, for a state-aware policy."""
    def named(*args, **kwargs):
        with NamingScope(state_paths(*_owner(fun))):
            return fun(*args, **kwargs)

    named.__name__ = getattr(fun, "__name__", "step")
    return named


def _owner(fun: Callable) -> tuple:
    """The object a (weakly held) bound method belongs to, where the state paths start."""
    owner = getattr(fun, "__self__", None)
    if owner is None and isinstance(fun, WeakFunction) and fun._func is not None:
        owner = fun._ref()
    return () if owner is None else (owner,)


def _run_checkpointed_scan(kind: str, f: Callable, init, xs, length: Optional[int],
                           base: Optional[int], pbar, checkpoint, reverse: bool,
                           unroll, memory_budget: Optional[int] = None,
                           policy: Optional[Callable] = None) -> Tuple[Any, Any]:
    if memory_budget is not None:
        if checkpoint is not None or base is not None:
            raise ValueError(f"{kind}: pass either memory_budget= (the strategy is then chosen "
                             "to fit it) or checkpoint= / base=, not both.")
        strategy = Budgeted(memory_budget) if not isinstance(memory_budget, Budgeted) \
            else memory_budget
    elif checkpoint is None and base is None:
        strategy = as_strategy(default_strategy())  # brainx.environ's, else Nested()
    else:
        strategy = as_strategy(checkpoint, base)
    strategy = with_policy(strategy, policy, kind)
    return _run_scan(kind, f, init, xs, length, reverse, unroll, pbar,
                     make=_CheckpointedScan, options=(strategy,))


def checkpointed_scan(f: Callable, init, xs=None, length: Optional[int] = None,
                      base: Optional[int] = None, pbar: ProgressBar | bool | int | None = None,
                      *, checkpoint: CheckpointStrategy | str | None = None,
                      reverse: bool = False, unroll: int | bool | None = None,
                      memory_budget: int | Budgeted | None = None,
                      policy: Optional[Callable] = None):
    """A :func:`~brainx.transform.scan` whose gradient needs little memory.

    Computes exactly what ``scan(f, init, xs)`` computes (outputs, final
    carry, final state values). Differentiated in reverse mode, it keeps only
    a few carries (the carry plus the written states) and recomputes the rest
    on the backward pass, following ``checkpoint``.

    Parameters
    ----------
    f : callable
        The step, ``(carry, x) -> (new_carry, y)``; it may read and write states.
    init : pytree
        The initial carry.
    xs : pytree, optional
        Arrays scanned along their leading axis (``None`` with ``length``).
    length : int, optional
        The number of steps; required when ``xs`` is ``None``.
    base : int, optional
        brainstate's keyword: segments of ``base ** k`` steps (``Nested(base=base)``).
        brainstate's default is 16; here the default is balanced levels, two up to
        10 000 steps and one more for each factor 100 (see
        :func:`~brainx.transform.remat.checkpoint_strategies.default_levels`).
    pbar : bool, int or ProgressBar, optional
        A progress bar, moved by the forward pass.
    checkpoint : strategy or str, optional
        ``"nested"`` (:class:`Nested`), ``"nested_remat"``, ``"remat"``,
        ``"binomial"``, ``"no_remat"``, or a strategy object such as
        ``Nested(levels=3)`` or ``Binomial(snapshots=16)``. Without it (and
        without ``base`` and ``memory_budget``) the loop runs the
        ``brainx.environ`` setting ``checkpoint_strategy``, else ``Nested()``
        (see :mod:`~brainx.transform.remat.default_strategy`).
    reverse : bool
        As in :func:`~brainx.transform.scan`.
    unroll : int or bool, optional
        Steps unrolled per loop iteration. For ``"remat"`` and
        ``"nested_remat"`` it is passed to ``lax.scan`` (default 1); for
        ``"nested"`` it unrolls only the loops that apply the step VJPs
        (default 5: XLA then merges consecutive steps' gradient updates; the
        forward loops stay rolled); ``"binomial"`` ignores it.
    memory_budget : int or Budgeted, optional
        Bytes the reverse pass may keep: the fastest strategy whose estimate
        fits is chosen when the loop is traced (see
        :class:`~brainx.transform.remat.memory_budget.Budgeted`; pass a
        ``Budgeted(bytes)`` to read its ``choice`` afterwards).
    policy : callable, optional
        What each step keeps, as for :func:`~brainx.transform.checkpoint`: a
        ``jax.checkpoint_policies`` policy or one of
        :mod:`brainx.transform.policies` (by state: ``save_states("V")``; or
        ``save_anything_except_these_names``). Set on the strategy, which must
        take one (``PerStepRemat``, ``Nested``, ``NestedRemat``).

    Returns
    -------
    (final_carry, ys)

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array(0.5))
    >>> v = brainx.HiddenState(jnp.zeros(()))
    >>> def step(total, x):
    ...     v.value = 0.9 * v.value + w.value * x
    ...     return total + v.value, v.value
    >>> def loss(xs):
    ...     v.value = jnp.zeros(())
    ...     total, vs = brainx.transform.checkpointed_scan(step, 0.0, xs)
    ...     return total
    >>> g = brainx.transform.grad(loss, grad_states=w)(jnp.ones(101))
    >>> g_plain = brainx.transform.grad(
    ...     lambda xs: brainx.transform.scan(step, 0.0, xs)[0], grad_states=w)(jnp.ones(101))
    >>> bool(jnp.allclose(g, g_plain))
    True
    """
    _check_callable("checkpointed_scan", f=f)
    return _run_checkpointed_scan("checkpointed_scan", f, init, xs, length, base, pbar,
                                  checkpoint, reverse, unroll, memory_budget, policy)


def checkpointed_for_loop(f: Callable, *xs, length: Optional[int] = None,
                          base: Optional[int] = None,
                          pbar: ProgressBar | bool | int | None = None,
                          checkpoint: CheckpointStrategy | str | None = None,
                          reverse: bool = False, unroll: int | bool | None = None,
                          memory_budget: int | Budgeted | None = None,
                          policy: Optional[Callable] = None):
    """A :func:`~brainx.transform.for_loop` whose gradient needs little memory.

    Calls ``f(*x_t)`` for each step ``t`` and stacks the outputs, as
    ``for_loop`` does; differentiated, it recomputes instead of storing (see
    :func:`checkpointed_scan` for ``base``, ``checkpoint``, ``memory_budget``,
    ``policy`` and the rest).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.ones(3))
    >>> v = brainx.HiddenState(jnp.zeros(3))
    >>> def step(x):
    ...     v.value = 0.9 * v.value + w.value * x
    ...     return v.value.sum()
    >>> def loss(xs):
    ...     return brainx.transform.checkpointed_for_loop(step, xs, checkpoint="binomial").sum()
    >>> brainx.transform.grad(loss, grad_states=w)(jnp.ones(50)).shape
    (3,)
    """
    _check_callable("checkpointed_for_loop", f=f)
    return _run_checkpointed_scan("checkpointed_for_loop", f, None, xs, length, base, pbar,
                                  checkpoint, reverse, unroll, memory_budget, policy)[1]


class _CheckpointedWhile(_While):
    """:class:`_While` run by :func:`vjp_while_loop`: reverse-differentiable in bounded memory."""

    def __init__(self, cond_fun: Callable, body_fun: Callable, max_steps: Optional[int],
                 snapshots: int):
        super().__init__("checkpointed_while_loop", cond_fun, body_fun, max_steps)
        self.snapshots = snapshots

    def _loop(self, cond: Callable, body: Callable, consts, carry):
        return vjp_while_loop(cond, body, consts, carry, max_steps=self.max_steps,
                              snapshots=self.snapshots)


def checkpointed_while_loop(cond_fun: Callable, body_fun: Callable, init_val, *,
                            max_steps: Optional[int] = None,
                            checkpoint: Binomial | str | None = None):
    """A while loop that reverse-mode differentiation goes through, in bounded memory.

    Runs like :func:`~brainx.transform.while_loop` (a real ``lax.while_loop``
    that stops as soon as ``cond_fun`` is false, or after ``max_steps``
    steps). Its reverse pass knows the number of steps taken and reverses
    them by binomial checkpointing from the initial value, keeping at most
    ``snapshots + 1`` loop values: each step is recomputed ``O(log n)`` times.

    Parameters
    ----------
    cond_fun, body_fun, init_val
        As in ``while_loop``; ``cond_fun`` may read states but not write them.
    max_steps : int, optional
        Stop after this many steps even if ``cond_fun`` is still true.
    checkpoint : Binomial or "binomial", optional
        The schedule; ``Binomial(snapshots=k)`` sets the memory (default 32).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> rate = brainx.ParamState(jnp.array(1.5))
    >>> def grow(x):
    ...     return brainx.transform.checkpointed_while_loop(
    ...         lambda v: v < 10.0, lambda v: v * rate.value, x)
    >>> float(grow(1.0))
    11.390625
    >>> g = brainx.transform.grad(grow, grad_states=rate)(1.0)   # d(r**6)/dr = 6 r**5
    >>> bool(jnp.allclose(g, 6 * 1.5 ** 5))
    True
    """
    _check_callable("checkpointed_while_loop", cond_fun=cond_fun, body_fun=body_fun)
    if max_steps is not None:
        max_steps = _non_negative_int(max_steps, "max_steps", "checkpointed_while_loop")
    strategy = Binomial() if checkpoint is None else as_strategy(checkpoint)
    if not isinstance(strategy, Binomial):
        raise ValueError(
            f"checkpointed_while_loop: checkpoint={checkpoint!r} needs the number of steps in "
            "advance; a while loop's is known only when it ends. Use Binomial(snapshots=...) "
            "(the default), or a checkpointed_scan when the length is fixed.")
    if jit_disabled():
        init_val, steps, done = _python_while("checkpointed_while_loop", cond_fun, body_fun,
                                              init_val, max_steps)
        if done:
            return init_val
        if max_steps is not None:
            max_steps -= steps

    return run_compiled_once(
        [cond_fun, body_fun], ("checkpointed_while_loop", max_steps, strategy.snapshots),
        lambda funs: _CheckpointedWhile(funs[0], funs[1], max_steps, strategy.snapshots),
        init_val)
