"""Simulation loops over states: `scan`, `for_loop`, `while_loop`, `bounded_while_loop`.

Each loop finds the states its functions touch (one abstract trace), then
runs the JAX loop on a pure step:

* states the step **writes** travel in the loop carry, next to the user's
  carry, and are written back once the loop ends;
* states it only **reads** are loop constants: closed over, never carried,
  so that reverse-mode differentiation (and ``checkpoint``) can see they do
  not change and stores no copy of them per step.

A written state must keep its type across a step; a step that changes a
state's shape, dtype or tree structure raises :class:`~brainx.StateTypeError`
naming the state, before JAX compares the carry, and leaves every state as
it was.

Called outside every brainx transform, a loop is compiled once per
``(function, static options)`` (see :mod:`brainx.transform.control.loop_cache`):
calling it again with the same shapes does not retrace or recompile.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Optional, Sequence, Tuple, TypeVar

import jax
import jax.numpy as jnp

from brainx._jax.traces import jit_disabled
from brainx.errors import StepOutputError
from brainx.state.trace import StateTraceStack
from brainx.transform.core.value_types import (
    cast_like, describe_type, has_weak_leaf, keep_weak_types, promote_weak, same_type,
)
from brainx.transform.compiled.static_hint import with_loop_hint
from brainx.transform.control.segment_plan import SegmentPlan
from brainx.transform.control.loop_cache import run_compiled_once
from brainx.transform.control.progress_bar import ProgressBar, as_progress_bar
from brainx.transform.core.state_union import StateUnion, UnionSignature
from brainx.transform.core.arguments import function_name as _name
from brainx.transform.core.stateful import StaticLeaves, read_state_values, write_state_values

__all__ = ["scan", "for_loop", "while_loop", "bounded_while_loop"]

#: What runs a scan's steps: ``lax.scan``, or (set by :mod:`brainx.transform.remat.ring_loops`,
#: a group up) a scan whose reverse pass restores a checkpointed step's ring buffers.
STEP_SCAN = [jax.lax.scan]

Carry = TypeVar("Carry")
X = TypeVar("X")
Y = TypeVar("Y")
T = TypeVar("T")


def _check_callable(what: str, **funs) -> None:
    for arg, fun in funs.items():
        if not callable(fun):
            raise TypeError(f"{what}: {arg} must be callable, got {fun!r}.")


def infer_length(xs: Any, length: Optional[int], what: str) -> int:
    """The number of steps of a loop over ``xs`` (checked against ``length`` if given)."""
    leaves = jax.tree.leaves(xs)
    sizes = []
    for leaf in leaves:
        shape = jnp.shape(leaf)
        if not shape:
            raise ValueError(f"{what}: every leaf of xs needs a leading axis to loop over; got "
                             f"a scalar (a 0-d value) {leaf!r}.")
        sizes.append(shape[0])
    if length is not None:
        length = _non_negative_int(length, "length", what)
        if any(s != length for s in sizes):
            raise ValueError(f"{what}: length={length} disagrees with the leading axis sizes "
                             f"{sizes} of xs.")
        return length
    if not sizes:
        raise ValueError(f"{what}: no xs to loop over and no length given.")
    if len(set(sizes)) > 1:
        raise ValueError(f"{what}: the leaves of xs have different leading axis sizes {sizes}.")
    return sizes[0]


def _non_negative_int(value: Any, name: str, what: str) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{what}: {name} must be a non-negative int, got {value!r}.") from None
    if value < 0:
        raise ValueError(f"{what}: {name} must be a non-negative int, got {value!r}.")
    return value


def step_slice_type(xs: Any) -> Any:
    """The abstract type of one step's slice of ``xs``."""
    def one(x):
        aval = jax.typeof(x)
        return jax.ShapeDtypeStruct(aval.shape[1:], aval.dtype, weak_type=aval.weak_type)
    return jax.tree.map(one, xs)


def _check_carry(old: Any, new: Any, what: str) -> None:
    """Refuse a step that changes the type of the user's carry, in the user's terms."""
    if not same_type(old, new, weak_promotion=True):
        raise TypeError(
            f"{what} returns a carry of type {describe_type(new)}, but the carry it was given "
            f"has type {describe_type(old)}. A loop carry must keep its tree structure, shapes "
            "and dtypes from one step to the next; cast or reshape the new carry, or give "
            "init its final type. No state was changed.")


# -- weakly typed carries ----------------------------------------------------------------------

class _PromotedSignature(UnionSignature):
    """A union signature traced with its weakly typed written states promoted.

    ``split`` gives the written values cast to the promoted types, so the
    loop runs with the types the signature was traced with.
    """

    def __init__(self, union: StateUnion, sigs, promoted: Sequence[Any]):
        super().__init__(union, sigs)
        self.promoted = list(promoted)

    def split(self, values):
        written, consts = super().split(values)
        return [cast_like(v, t) for v, t in zip(written, self.promoted)], consts


def promote_weak_carry(sig: UnionSignature, init: Any, step_types: Callable, args_of: Callable):
    """``(sig, init)`` with weakly typed written states and carry promoted to the step's types.

    ``jax.lax.scan`` and ``while_loop`` accept a weakly typed carry (a Python
    scalar, ``State(0)``) that the step makes a float: they promote it and
    trace the step again. Here the step's trace is fixed, so the promotion is
    found first: ``step_types(sig, written, init) -> (written types, carry
    type)`` after one step, and each function of the union is traced again
    (with ``args_of(init)``) for the promoted types. Nothing changes when no
    leaf is weakly typed.
    """
    written, _ = sig.split(read_state_values(sig.states))
    for _ in range(3):  # each promotion moves up the type lattice, so this ends
        if not has_weak_leaf((written, init)):
            break
        new_written, new_init = step_types(sig, written, init)
        written, w_changed = promote_weak(written, new_written)
        init, c_changed = promote_weak(init, new_init)
        if not (w_changed or c_changed):
            break
        outer = {s: v.tree if type(v) is StaticLeaves else v
                 for s, v in zip(sig.write_states, written)}
        union = sig.union
        sigs = [sf.discover((), args, {}, outer_values=outer)
                for sf, args in zip(union.functions, args_of(init))]
        sig = _PromotedSignature(union, sigs, written)
    return sig, init


def _pair(out: Any, what: str) -> Tuple[Any, Any]:
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise StepOutputError(f"{what} must return a pair (new_carry, y), got "
                              f"{type(out).__name__}: {out!r}. Return (carry, None) when "
                              "there is nothing to stack.")
    return out[0], out[1]


# -- scan / for_loop ---------------------------------------------------------------------------

class _Scan:
    """A scan over a stateful step, as a function of ``(init, xs)``."""

    def __init__(self, kind: str, fun: Callable, length: int, reverse: bool, unroll,
                 bar: Optional[ProgressBar]):
        self.kind, self.length, self.reverse, self.unroll = kind, length, reverse, unroll
        self.label = f"the step of {kind} ({_name(fun)})"
        if kind.endswith("for_loop"):  # for_loop, checkpointed_for_loop: f(*x) -> y
            def step(carry, x):
                return carry, fun(*x)
        else:
            step = fun
        self.union = StateUnion([step], [f"{kind}({_name(fun)})"])
        self.runner = bar.init(length) if bar is not None else None

    def __call__(self, init, xs):
        x_type = step_slice_type(xs)

        def run(sig):
            sig, init_ = promote_weak_carry(sig, init, lambda *a: self._step_types(*a, x_type),
                                            lambda c: [(c, x_type)])
            return self._run(sig, init_, xs)
        return self.union.call(run, (init, x_type))

    def _step_types(self, sig: UnionSignature, written, init, x_type):
        """The types of the written states and of the carry after one step."""
        _, consts = sig.split(read_state_values(sig.states))
        pure, label = sig.pure(0, check=self.label, weak_promotion=True), self.label

        def step(written, carry, x):
            out, states = pure(sig.merge(written, consts), carry, x)
            return states, _pair(out, label)[0]
        return jax.eval_shape(step, written, init, x_type)

    def _run(self, sig: UnionSignature, init, xs):
        values = read_state_values(sig.states)
        written, consts = sig.split(values)
        pure = sig.pure(0, check=self.label, weak_promotion=True)
        runner, label = self.runner, self.label

        def body(carry, x):
            states, c = carry[0], carry[1]
            out, states = pure(sig.merge(states, consts), c, x)
            c_in, (c, y) = c, _pair(out, label)
            _check_carry(c_in, c, label)
            if runner is None:
                return (states, c), y
            done = carry[2] + 1
            runner(done, c, y)
            return (states, c, done), y

        init_carry = (written, init) if runner is None else (written, init, jnp.int32(0))
        loop = jax.lax.scan if runner is not None else STEP_SCAN[0]
        final, ys = loop(body, init_carry, xs, length=self.length,
                         reverse=self.reverse, unroll=self.unroll)
        write_state_values(sig.write_states, keep_weak_types(written, final[0]))
        return final[1], ys


def _python_scan(kind: str, f: Callable, init, xs, length: int, reverse: bool,
                 bar: Optional[ProgressBar]):
    """The loop run step by step in Python, for ``jax.disable_jit()``."""
    if length == 0:
        raise ValueError(f"{kind}: a zero-length loop cannot run under jax.disable_jit(), "
                         "because the type of its output is unknown.")
    runner = bar.init(length) if bar is not None else None
    carry, ys = init, []
    order = range(length - 1, -1, -1) if reverse else range(length)
    for done, i in enumerate(order, 1):
        x = jax.tree.map(lambda a: a[i], xs)
        if kind.endswith("for_loop"):  # for_loop, checkpointed_for_loop
            y = f(*x)
        else:
            carry, y = _pair(f(carry, x), f"the step of {kind} ({_name(f)})")
        ys.append(y)
        if runner is not None and (done % runner.freq == 0 or done in (1, length)):
            runner.update(done)
    if reverse:
        ys.reverse()
    return carry, jax.tree.map(lambda *y: jnp.stack(y), *ys)


def _run_scan(kind: str, f: Callable, init, xs, length: Optional[int], reverse: bool, unroll,
              pbar, make: Callable[..., _Scan] = _Scan, options: tuple = ()) -> Tuple[Any, Any]:
    """Run the ``kind`` loop: ``make(kind, f, length, reverse, unroll, bar, *options)``.

    Normalises ``length``, ``unroll`` and ``pbar``, runs in Python under
    ``jax.disable_jit()``, else compiles once per ``f`` and static options.
    """
    length = infer_length(xs, length, kind)
    if isinstance(unroll, bool):  # as jax.lax.scan reads it; also keeps True and 1 apart in keys
        unroll = max(length, 1) if unroll else 1
    bar, bar_key = as_progress_bar(pbar)
    if jit_disabled():
        return _python_scan(kind, f, init, xs, length, reverse, bar)
    return run_compiled_once(
        [f], (kind, length, bool(reverse), unroll, bar_key) + options, lambda funs: with_loop_hint(
            kind, f, make(kind, funs[0], length, reverse, unroll, bar, *options)), init, xs)


def scan(f: Callable[[Carry, X], Tuple[Carry, Y]], init: Carry, xs: X,
         length: Optional[int] = None, reverse: bool = False, unroll: int | bool = 1,
         pbar: ProgressBar | bool | int | None = None) -> Tuple[Carry, Y]:
    """Scan a stateful step over the leading axis of ``xs``, like ``jax.lax.scan``.

    ``f(carry, x) -> (new_carry, y)`` may read and write any state. States it
    writes are threaded through the loop (each step sees the previous step's
    values, and they hold the last step's values afterwards); states it only
    reads are loop constants.

    Parameters
    ----------
    f : callable
        The step, ``(carry, x) -> (new_carry, y)``.
    init : pytree
        The initial carry.
    xs : pytree or None
        Arrays scanned along their leading axis (``None`` with ``length``).
    length : int, optional
        The number of steps; required when ``xs`` is ``None``.
    reverse : bool
        Run from the last slice to the first (``ys`` stays in ``xs`` order).
    unroll : int or bool
        Steps unrolled per loop iteration, as in ``jax.lax.scan``.
    pbar : bool, int or ProgressBar, optional
        Show a tqdm progress bar (an int is the update frequency).

    Returns
    -------
    (final_carry, ys)
        ``ys`` stacks the per-step outputs along a new leading axis.

    Notes
    -----
    Called outside every brainx transform, the loop is compiled once per
    ``(f, length, reverse, unroll, pbar)`` and reused while the shapes and
    dtypes of ``init``, ``xs`` and the states stay the same. As with
    ``jax.lax.scan`` and ``jax.jit``, Python values ``f`` closes over are
    read when it is first traced; state values are read on every call.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> v = brainx.HiddenState(jnp.zeros(2))
    >>> tau = brainx.ParamState(jnp.array([2.0, 4.0]))
    >>> def step(total, x):
    ...     v.value = v.value + (x - v.value) / tau.value
    ...     return total + v.value.sum(), v.value
    >>> total, vs = brainx.transform.scan(step, 0.0, jnp.ones(5))
    >>> vs.shape, bool(jnp.allclose(v.value, vs[-1]))
    ((5, 2), True)
    """
    _check_callable("scan", f=f)
    return _run_scan("scan", f, init, xs, length, reverse, unroll, pbar)


def for_loop(f: Callable[..., Y], *xs, length: Optional[int] = None, reverse: bool = False,
             unroll: int | bool = 1, pbar: ProgressBar | bool | int | None = None) -> Y:
    """Call ``f(*x_t)`` for each step ``t`` of ``xs`` and stack the outputs.

    The stateful ``for`` loop of a simulation: ``f`` updates states (a
    network's ``HiddenState`` s, say) and returns what to record. Equivalent
    to :func:`scan` with no carry.

    Parameters
    ----------
    f : callable
        Called with one slice of each of ``xs``.
    *xs : pytrees
        Arrays looped over along their leading axis.
    length, reverse, unroll, pbar
        As in :func:`scan`.

    Returns
    -------
    pytree
        The outputs of ``f``, stacked along a new leading axis.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> v = brainx.HiddenState(jnp.zeros(()))
    >>> def step(t, x):
    ...     v.value = 0.9 * v.value + x
    ...     return v.value
    >>> ts = jnp.arange(4.0)
    >>> vs = brainx.transform.for_loop(step, ts, jnp.ones(4))
    >>> vs.shape, float(v.value) == float(vs[-1])
    ((4,), True)
    """
    _check_callable("for_loop", f=f)
    return _run_scan("for_loop", f, None, xs, length, reverse, unroll, pbar)[1]


# -- while loops -----------------------------------------------------------------------------

def _refuse_cond_writes(kind: str, written: Sequence[Any], *, unchanged: bool) -> None:
    """Raise the ``ValueError`` for a ``cond_fun`` that writes the states ``written`` (if any).

    ``unchanged`` says that no state was changed yet (the traced loops check
    before running; the Python loop of ``disable_jit`` finds out mid-loop).
    """
    if written:
        raise ValueError(
            f"{kind}: cond_fun writes {', '.join(map(repr, written))}. The condition of a while "
            "loop may read states but not write them; move the write into body_fun."
            + (" No state was changed." if unchanged else ""))


class _While:
    """A while loop (or a bounded one) over a stateful condition and body."""

    def __init__(self, kind: str, cond_fun: Callable, body_fun: Callable,
                 max_steps: Optional[int] = None, base: Optional[int] = None):
        self.kind, self.max_steps, self.base = kind, max_steps, base
        self.union = StateUnion([cond_fun, body_fun],
                                [f"{kind} cond_fun ({_name(cond_fun)})",
                                 f"{kind} body_fun ({_name(body_fun)})"])

    def __call__(self, init_val):
        def run(sig):
            sig, init = promote_weak_carry(sig, init_val, self._step_types,
                                           lambda c: [(c,), (c,)])
            return self._run(sig, init)
        return self.union.call(run, (init_val,))

    def _step_types(self, sig: UnionSignature, written, init):
        """The types of the written states and of the loop value after one body step."""
        _, consts = sig.split(read_state_values(sig.states))
        pure = sig.pure(1, check=f"body_fun of {self.kind}", weak_promotion=True)
        return jax.eval_shape(lambda w, c: pure(sig.merge(w, consts), c)[::-1], written, init)

    def _run(self, sig: UnionSignature, init_val):
        _refuse_cond_writes(self.kind, sig.sigs[0].write_states, unchanged=True)
        values = read_state_values(sig.states)
        written, consts = sig.split(values)
        pure_cond = sig.pure(0)
        pure_body = sig.pure(1, check=f"body_fun of {self.kind}", weak_promotion=True)
        kind = self.kind

        def cond(consts, carry):
            return pure_cond(sig.merge(carry[0], consts), carry[1])[0]

        def body(consts, carry):
            out, states = pure_body(sig.merge(carry[0], consts), carry[1])
            _check_carry(carry[1], out, f"body_fun of {kind}")
            return states, out

        final = self._loop(cond, body, consts, (written, init_val))
        write_state_values(sig.write_states, keep_weak_types(written, final[0]))
        return final[1]

    def _loop(self, cond: Callable, body: Callable, consts, carry):
        """Run the pure loop ``cond(consts, carry)`` / ``body(consts, carry)`` from ``carry``."""
        def cond_c(c):
            return cond(consts, c)

        def body_c(c):
            return body(consts, c)

        if self.max_steps is None:
            return jax.lax.while_loop(cond_c, body_c, carry)

        def guarded(c):
            return jax.lax.cond(cond_c(c), body_c, lambda c: c, c)
        return _guarded_steps(guarded, cond_c, carry, _step_plan(self.max_steps, self.base))


def _step_plan(n: int, base: Optional[int]) -> SegmentPlan:
    """``n`` steps cut into segments of ``base ** k`` steps, or one flat loop without ``base``.

    Each level's segments are the largest power of ``base`` below its length;
    a level of at most ``base`` steps is a leaf.
    """
    sizes = []
    while base is not None and base ** (len(sizes) + 1) < n:
        sizes.append(base ** (len(sizes) + 1))
    return SegmentPlan.build(n, sizes[::-1])


def _guarded_steps(guarded: Callable, cond: Callable, carry, plan: SegmentPlan):
    """Run ``guarded`` exactly ``plan.length`` times, as nested scans following ``plan``.

    Each segment of a level is a checkpointed block, skipped (by
    ``lax.cond``) once ``cond`` is false; a leaf is a plain scan.
    """
    if plan.is_leaf:
        return jax.lax.scan(lambda c, _: (guarded(c), None), carry, None, length=plan.length)[0]

    def block(c, _):
        inner = lambda c: _guarded_steps(guarded, cond, c, plan.child)
        return jax.lax.cond(cond(c), inner, lambda c: c, c), None

    carry = jax.lax.scan(jax.checkpoint(block, prevent_cse=False), carry, None,
                         length=plan.count)[0]
    if plan.tail is not None:
        carry = _guarded_steps(guarded, cond, carry, plan.tail)
    return carry


def _python_while(kind: str, cond_fun: Callable, body_fun: Callable, val,
                  max_steps: Optional[int] = None):
    """The loop run in Python, for ``jax.disable_jit()``; a write in cond_fun is still refused.

    Returns ``(val, steps, done)``: ``done`` is false when the predicate is
    a tracer (a ``jax.vmap`` around the loop, say) that Python cannot branch
    on; the caller then runs the rest of the loop as a primitive, as
    ``jax.lax.while_loop`` does under ``disable_jit``.
    """
    steps = 0
    while max_steps is None or steps < max_steps:
        with StateTraceStack(restore=True) as trace:
            go = cond_fun(val)
        _refuse_cond_writes(kind, trace.get_write_states(), unchanged=False)
        try:
            go = bool(go)
        except jax.errors.ConcretizationTypeError:
            return val, steps, False
        if not go:
            break
        val = body_fun(val)
        steps += 1
    return val, steps, True


def _run_while(kind: str, cond_fun: Callable, body_fun: Callable, init_val,
               max_steps: Optional[int] = None, base: Optional[int] = None):
    _check_callable(kind, cond_fun=cond_fun, body_fun=body_fun)
    if jit_disabled():
        init_val, steps, done = _python_while(kind, cond_fun, body_fun, init_val, max_steps)
        if done:
            return init_val
        if max_steps is not None:
            max_steps -= steps
    return run_compiled_once([cond_fun, body_fun], (kind, max_steps, base),
                             lambda funs: with_loop_hint(kind, body_fun, _While(
                                 kind, funs[0], funs[1], max_steps, base)), init_val)


def while_loop(cond_fun: Callable[[T], Any], body_fun: Callable[[T], T], init_val: T) -> T:
    """Run ``body_fun`` while ``cond_fun`` is true, like ``jax.lax.while_loop``.

    ``body_fun`` may read and write states; the states it writes travel in
    the loop carry. ``cond_fun`` may read states (it sees the values the body
    wrote) but not write them: a write there is a ``ValueError`` naming the
    state, raised before any state changes. Not reverse-differentiable (use
    :func:`bounded_while_loop`).

    Parameters
    ----------
    cond_fun : callable
        ``val -> bool scalar``.
    body_fun : callable
        ``val -> val``.
    init_val : pytree
        The initial loop value.

    Returns
    -------
    pytree
        The final loop value.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> x = brainx.State(jnp.ones(()))
    >>> def body(n):
    ...     x.value = x.value * 2
    ...     return n + 1
    >>> n = brainx.transform.while_loop(lambda n: x.value < 100, body, 0)
    >>> int(n), float(x.value)
    (7, 128.0)
    """
    return _run_while("while_loop", cond_fun, body_fun, init_val)


def bounded_while_loop(cond_fun: Callable[[T], Any], body_fun: Callable[[T], T], init_val: T,
                       *, max_steps: int, base: Optional[int] = None) -> T:
    """A while loop of at most ``max_steps`` steps that reverse-mode differentiation can go through.

    It is a ``scan`` of ``max_steps`` steps; each step evaluates ``cond_fun``
    and, through ``jax.lax.cond``, runs ``body_fun`` only while the condition
    holds, so the loop value and every state freeze once it is false. The
    result equals :func:`while_loop`'s when the loop ends within
    ``max_steps`` steps; otherwise it stops after ``max_steps``.

    Cost: the loop always makes ``max_steps`` iterations. Once finished, an
    iteration only evaluates ``cond_fun`` (under ``vmap``, ``lax.cond``
    becomes a select and the body runs every iteration). Differentiated, it
    stores the body's residuals for all ``max_steps`` iterations, however few
    run: memory grows with ``max_steps``. With ``base=b`` the iterations are
    split into nested scans of at most ``b`` steps whose outer levels are
    checkpointed and skipped as a block once finished: memory about
    ``b * log_b(max_steps)`` loop values, at the price of recomputing the
    inner levels on the backward pass.

    Parameters
    ----------
    cond_fun, body_fun, init_val
        As in :func:`while_loop` (``cond_fun`` may not write states).
    max_steps : int
        The most steps to run (keyword only).
    base : int, optional
        Nest the loop in scans of at most ``base`` steps (see above).

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array(1.5))
    >>> def grow(x):
    ...     return brainx.transform.bounded_while_loop(
    ...         lambda v: v < 10.0, lambda v: v * w.value, x, max_steps=20)
    >>> float(grow(1.0))
    11.390625
    >>> g = brainx.transform.grad(grow, grad_states=w)(1.0)   # d(1.5**6)/dw = 6 * 1.5**5
    >>> bool(jnp.allclose(g, 6 * 1.5 ** 5))
    True
    """
    max_steps = _non_negative_int(max_steps, "max_steps", "bounded_while_loop")
    if base is not None and (isinstance(base, bool) or not isinstance(base, int) or base < 2):
        raise ValueError(f"bounded_while_loop: base must be an int >= 2, got {base!r}.")
    if max_steps == 0:
        _check_callable("bounded_while_loop", cond_fun=cond_fun, body_fun=body_fun)
        return init_val
    return _run_while("bounded_while_loop", cond_fun, body_fun, init_val, max_steps, base)
