"""Differentiation of stateful functions with respect to states and arguments.

Every transform here is one :class:`GradientTransform` around a JAX
differentiation function (``jax.grad``, ``jax.jacrev``, ...; with
``unit_aware=True`` the matching ``brainunit.autograd`` function). It builds

    f(grad_state_values, *differentiated_args) -> (y, (y, aux, written_values))

from the stateful function's pure form, differentiates it with ``has_aux``,
writes the primal values of the written states back, and arranges the result
the way brainstate does::

    grads                          # grad_states only, or argnums only
    (state_grads, arg_grads)       # both
    ..., value / aux appended:     (grads, value), (grads, aux), (grads, value, aux)
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx.transform.core.arguments import no_function
from brainx.errors import ArgnumsError
from brainx.graph.node import Node
from brainx._jax.traces import current_trace, owned_traces
from brainx.state.state import ParamState, State
from brainx.transform.core.value_types import describe_type
from brainx.transform.control.nan_debug import debug_nan_if, has_nan_or_inf
from brainx.state.lending import transform_call
from brainx.transform.core.jaxpr_builder import inside_brainx_trace
from brainx.transform.core.scope_run import (
    OutsideTrace, ScopeRecord, refuse_state_arguments, run_in_scope,
)
from brainx.transform.core.state_values import build_written
from brainx.transform.core.stateful import (
    StatefulFunction, StateSignature, StaticLeaves, read_state_values, write_state_values,
)

__all__ = ["grad", "vector_grad", "jacrev", "jacfwd", "jacobian", "hessian", "GradientTransform"]


def _is_state(x) -> bool:
    return isinstance(x, State)


def _is_quantity(x) -> bool:
    return isinstance(x, u.Quantity)


def _is_index(n) -> bool:
    return isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))


def _check_argnums(argnums, name: str) -> Tuple[int, ...]:
    """``argnums`` as a tuple of ints, or an :class:`~brainx.errors.ArgnumsError`."""
    if argnums is None:
        return ()
    if _is_index(argnums):
        return (int(argnums),)
    if not isinstance(argnums, (tuple, list)) or not all(_is_index(n) for n in argnums):
        raise ArgnumsError(f"{name}: argnums must be an int or a sequence of ints (positions "
                           f"of positional arguments), got {argnums!r}.")
    argnums = tuple(int(n) for n in argnums)
    if len(set(argnums)) != len(argnums):
        raise ArgnumsError(f"{name}: argnums={argnums} names an argument twice; list each "
                           "argument once.")
    return argnums


def _is_module(x) -> bool:
    """A module (a graph node that lists its states), which ``grad_states`` takes as its params."""
    return isinstance(x, Node) and callable(getattr(x, "states", None))


def _is_state_or_module(x) -> bool:
    return isinstance(x, State) or _is_module(x)


def _module_params(module, name: str):
    """``module.states(ParamState)``: the parameters ``grad_states=module`` differentiates."""
    params = module.states(ParamState)
    if not params:
        raise ValueError(f"{name}: grad_states={type(module).__name__} (a module) means its "
                         f"ParamStates, and it has none. Pass the states to differentiate, e.g. "
                         f"grad_states=module.states(brainx.ShortTermState).")
    return params


def _no_argument_error(name: str) -> ArgnumsError:
    return ArgnumsError(
        f"{name}: nothing to differentiate. Without grad_states the gradient is taken with "
        f"respect to positional argument 0 (argnums=0), and the function was called with no "
        f"positional argument. Pass grad_states=... (a State, a list or dict of States, or a "
        f"module for its ParamStates: grad_states=net means net.states(brainx.ParamState)), or "
        f"call it with the argument to differentiate.")


def _resolve_argnums(argnums: Tuple[int, ...], n_args: int, name: str) -> Tuple[int, ...]:
    """``argnums`` for a call with ``n_args`` positional arguments: negatives counted from the end."""
    resolved = tuple(n + n_args if n < 0 else n for n in argnums)
    for n, r in zip(argnums, resolved):
        if not 0 <= r < n_args:
            raise ArgnumsError(f"{name}: argnums {n} is out of range: the function was called "
                               f"with {n_args} positional argument(s).")
    if len(set(resolved)) != len(resolved):
        raise ArgnumsError(f"{name}: argnums={argnums} names the same argument twice for a call "
                           f"with {n_args} positional arguments; list each argument once.")
    return resolved


class StateDifferentiation:
    """What to differentiate: states (``grad_states``) and positional arguments (``argnums``).

    Builds, for one call, the function of the differentiated values that JAX
    differentiates. Shared by :class:`GradientTransform`, ``vjp`` and ``jvp``.
    """

    def __init__(self, fun: Callable, *, grad_states=None, argnums=None,
                 has_aux: Optional[bool] = None, unit_aware: bool = False,
                 check_states: bool = True, name: str = "grad"):
        self.fun = fun
        self.has_aux = bool(has_aux)
        self.unit_aware = unit_aware
        self.check_states = check_states
        # vector_grad takes a Quantity output as brainstate does: the gradient of its mantissa
        self._quantity_output = False
        self._name = f"{name}({getattr(fun, '__name__', 'fun')})"

        if _is_module(grad_states):  # a module: its parameters, as flax's grad(loss)(model)
            grad_states = _module_params(grad_states, self._name)
        if isinstance(grad_states, dict):  # as brainstate: a FlattedDict's grads are a plain dict
            grad_states = dict(grad_states)
        leaves, self._grad_tree = jax.tree.flatten(grad_states, is_leaf=_is_state_or_module)
        for leaf in leaves:
            if not isinstance(leaf, State):
                raise TypeError(f"{self._name}: grad_states must be a State, a sequence or a dict "
                                f"of States, or a module; found {leaf!r}"
                                + (" in a container: pass the module itself, or its "
                                   "module.states(brainx.ParamState)." if _is_module(leaf) else "."))
        if len(set(map(id, leaves))) != len(leaves):
            raise ValueError(f"{self._name}: grad_states lists a state twice.")
        self._grad_states: Tuple[State, ...] = tuple(leaves)
        self._has_states = grad_states is not None
        # neither grad_states nor argnums: differentiate argument 0 (a call without one says so)
        self._argnums_defaulted = argnums is None and not self._has_states
        if self._argnums_defaulted:
            argnums = 0
        self._single_arg = _is_index(argnums)
        self._argnums: Tuple[int, ...] = _check_argnums(argnums, self._name)
        # Only the differentiated arguments are traced while discovering the
        # states: the function may branch on the others in Python, as under jax.grad.
        self.stateful = StatefulFunction(fun, name=self._name, traced_argnums=self._argnums)
        self.stateful.state_argument_hint = "To differentiate a state, give it in grad_states. "

    def _call_argnums(self, args: tuple) -> Tuple[int, ...]:
        """The differentiated positions for a call with ``args``, checked."""
        if self._argnums_defaulted and not args:
            raise _no_argument_error(self._name)
        return _resolve_argnums(self._argnums, len(args), self._name)

    def _grad_positions(self, sig: StateSignature, key, args, kwargs):
        """Where each grad state sits in ``sig.states`` (``None``: never read)."""
        positions = [sig.index.get(s) for s in self._grad_states]
        missing = [s for s, p in zip(self._grad_states, positions)
                   if p is None or not sig.read[p]]
        self._refuse_unread(missing)
        return sig, positions

    def _refuse_unread(self, missing: Sequence[State]) -> None:
        if missing and self.check_states:
            raise ValueError(
                f"{self._name}: grad_states includes {', '.join(map(repr, missing))}, which "
                "the function never reads, so its gradient would always be zero. Remove it "
                "from grad_states, or pass check_states=False to get zeros.")

    def prepare(self, sig: StateSignature, key, args: tuple, kwargs: dict):
        """``(sig, f, primals)``: ``f(*primals) -> (y, (y, aux, written_values))``."""
        # (a State among the arguments was refused when the function was traced)
        argnums = self._call_argnums(args)
        sig, positions = self._grad_positions(sig, key, args, kwargs)
        values = read_state_values(sig.states)
        pure = self.stateful.pure(sig, key)
        outer = current_trace()

        def f(grad_values, *diff_args):
            vals = list(values)
            for p, v in zip(positions, grad_values):
                if p is not None:
                    vals[p] = v
            # JAX may batch this call (jacfwd, hessian): those lanes are ours.
            with owned_traces(outer):
                out, new_values = pure(vals, *_with_diff_args(args, argnums, diff_args),
                                       **kwargs)
            y, aux = self._split_output(out)
            return y, (y, aux, new_values)

        grad_values = [values[p] if p is not None else s.value
                       for s, p in zip(self._grad_states, positions)]
        return sig, f, (grad_values, *[args[n] for n in argnums])

    def prepare_direct(self, args: tuple, kwargs: dict):
        """``(f, primals, runs)`` for a direct run: JAX traces the user's function itself.

        Inside a brainx trace the function is traced either way, so it is run
        once, under the JAX transform, in a scope where the grad states read as
        the primals and every other state as the value visible outside (no
        discovery trace first, no replay of one). ``f(*primals) -> (y, (y, aux,
        new_arrays))``; ``runs`` receives the :class:`ScopeRecord` of each run
        (which states were written, and how to rebuild their values).
        """
        if any(isinstance(x, State) for x in jax.tree.leaves((args, kwargs))):
            refuse_state_arguments(args, kwargs, self._name, self.stateful.state_argument_hint)
        argnums = self._call_argnums(args)
        grad_states, fun, name, runs = self._grad_states, self.stateful.fun, self._name, []
        outer = current_trace()

        def f(grad_values, *diff_args):
            given = {id(s): v.tree if type(v) is StaticLeaves else v
                     for s, v in zip(grad_states, grad_values)}

            def lift_value(state, outer_value):
                return given.get(id(state), outer_value)

            with owned_traces(outer):  # JAX may batch this call (jacfwd, hessian)
                run = run_in_scope(fun, _with_diff_args(args, argnums, diff_args), kwargs,
                                   name, lift_value, own_writes_only=True)
            runs.append(run)
            y, aux = self._split_output(run.out)
            return y, (y, aux, run.new_arrays())

        grad_values = read_state_values(grad_states)
        return f, (grad_values, *[args[n] for n in argnums]), runs

    def finish_direct(self, run: ScopeRecord, new_arrays: list):
        """``(write_states, new_values)`` of a direct run, after checking its grad states were read."""
        read = {id(s) for s, r in zip(run.states, run.read) if r}
        self._refuse_unread([s for s in self._grad_states if id(s) not in read])
        return run.write_states, build_written(run.specs, new_arrays)

    def _split_output(self, out):
        """``(y, aux)`` of the function's output, checked."""
        if self.has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(f"{self._name}: has_aux=True, so the function must return a "
                                f"pair (value, aux); it returned {describe_type(out)}.")
            y, aux = out
        else:
            y, aux = out, None
        if not (self.unit_aware or self._quantity_output) and any(
                _is_quantity(leaf) and not leaf.unit.is_unitless
                for leaf in jax.tree.leaves(y, is_leaf=_is_quantity)):
            raise TypeError(f"{self._name}: the function returns a brainunit Quantity. Pass "
                            "unit_aware=True (gradients then carry unit(y)/unit(x)), or "
                            "return its .mantissa.")
        return y, aux

    def arrange(self, grads, primals=None, y=None) -> Any:
        """``grads`` (one per primal) as state grads, arg grads, or both.

        With ``primals`` (second order), ``grads[i]`` has the structure of
        ``primals[i]`` with, at each leaf, a tuple over the primals ``j``: the
        blocks of second derivatives. Both levels are arranged the same way.
        With ``y`` (a Jacobian, output-major as ``jax.jacrev`` returns it),
        ``grads`` has the structure of ``y`` with, at each leaf, the tuple over
        the primals; each is arranged, and the result keeps ``y``'s structure.
        """
        # a state holding leaves JAX cannot trace (strings): its gradient keeps them as they are
        grads = jax.tree.map(lambda g: g.tree if type(g) is StaticLeaves else g, grads,
                             is_leaf=lambda g: type(g) is StaticLeaves)
        if y is None:
            return self._arrange_one(grads, primals)
        # a Jacobian: one entry per leaf of the output y, each over the primals
        y_tree = jax.tree.structure(y, is_leaf=_is_quantity)
        return jax.tree.unflatten(y_tree, [self._arrange_one(block, primals)
                                           for block in y_tree.flatten_up_to(grads)])

    def _arrange_one(self, grads, primals):
        if primals is None:
            return self._regroup(grads)
        rows = []
        for primal, row in zip(primals, grads):
            treedef = jax.tree.structure(primal, is_leaf=_is_quantity)
            blocks = [self._regroup(t) for t in treedef.flatten_up_to(row)]
            rows.append(jax.tree.unflatten(treedef, blocks))
        return self._regroup(tuple(rows))

    def _regroup(self, per_primal):
        state_part = jax.tree.unflatten(self._grad_tree, list(per_primal[0]))
        arg_part = per_primal[1] if self._single_arg else tuple(per_primal[1:])
        if self._has_states and self._argnums:
            return state_part, arg_part
        return state_part if self._has_states else arg_part


class GradientTransform(StateDifferentiation):
    """The stateful form of one JAX differentiation function; see :func:`grad`.

    Parameters
    ----------
    target : callable
        The function to differentiate (it may read and write states).
    transform : callable
        A JAX differentiation function with ``jax.grad``'s calling convention:
        ``transform(f, argnums=..., has_aux=True, **params)(*primals)`` returns
        ``(grads, aux)`` (``jax.grad``, ``jax.jacrev``, ``jax.jacfwd``, ...).
    grad_states, argnums, return_value, has_aux, check_states
        As in :func:`grad`.
    transform_params : dict, optional
        Extra keyword arguments for ``transform`` (``holomorphic``, ...).
    debug_nan : bool
        Check the gradients for NaN/Inf; if one is found, run the gradient
        computation again under :func:`~brainx.transform.debug_nan` and raise
        a ``RuntimeError`` naming the primitive that made it.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array([1.0, -2.0]))
    >>> g = brainx.transform.GradientTransform(
    ...     lambda: jnp.sum(jnp.abs(w.value)), jax.grad, grad_states=w,
    ...     transform_params={"allow_int": False})
    >>> g().tolist()
    [1.0, -1.0]
    """

    def __init__(self, target: Callable, transform: Callable, grad_states=None,
                 argnums: Optional[int | Sequence[int]] = None, return_value: bool = False,
                 has_aux: Optional[bool] = None, transform_params: Optional[Dict[str, Any]] = None,
                 check_states: bool = True, debug_nan: bool = False, *,
                 unit_aware: bool = False, name: str = "grad", second_order: bool = False,
                 **transform_kwargs):
        super().__init__(target, grad_states=grad_states, argnums=argnums, has_aux=has_aux,
                         unit_aware=unit_aware, check_states=check_states, name=name)
        if transform_params is not None and not isinstance(transform_params, dict):
            raise TypeError(f"{self._name}: transform_params must be a dict of keyword "
                            f"arguments for the transform, got {transform_params!r}.")
        self.target = target
        self.transform = transform
        self.return_value = return_value
        self.debug_nan = bool(debug_nan)
        self._second_order = second_order
        self._transform = transform
        # a Jacobian transform returns the derivatives of each output leaf in turn
        self._output_major = any(transform is t for t in _OUTPUT_MAJOR)
        self._quantity_output = transform is _vector_grad
        self._transform_kwargs = {**transform_kwargs, **(transform_params or {})}
        functools.update_wrapper(self, target, updated=())

    def __call__(self, *args, **kwargs):
        if inside_brainx_trace():  # traced either way: once, under the JAX transform
            try:
                with transform_call():
                    return self._run_direct(args, kwargs)
            except OutsideTrace:  # a custom rule or raw helper reads or writes: discover first
                pass
        return self.stateful.call(self._run, args, kwargs)

    def _run(self, sig: StateSignature, key, args: tuple, kwargs: dict):
        sig, f, primals = self.prepare(sig, key, args, kwargs)
        differentiate = self._differentiate(f, primals)
        grads, (y, aux, new_values) = differentiate(*primals)
        self._check_nan(differentiate, grads, primals)
        write_state_values(sig.write_states, new_values)
        return self._result(grads, primals, y, aux)

    def _run_direct(self, args: tuple, kwargs: dict):
        f, primals, runs = self.prepare_direct(args, kwargs)
        differentiate = self._differentiate(f, primals)
        grads, (y, aux, new_arrays) = differentiate(*primals)
        write_states, new_values = self.finish_direct(runs[0], new_arrays)
        self._check_nan(differentiate, grads, primals)
        write_state_values(write_states, new_values)
        return self._result(grads, primals, y, aux)

    def _differentiate(self, f: Callable, primals: tuple) -> Callable:
        return self._transform(f, argnums=tuple(range(len(primals))), has_aux=True,
                               **self._transform_kwargs)

    def _check_nan(self, differentiate: Callable, grads, primals: tuple) -> None:
        if self.debug_nan:
            def gradients(*p):
                return differentiate(*p)[0]

            gradients.__qualname__ = f"the gradients of {self._name}"
            debug_nan_if(has_nan_or_inf(grads), gradients, *primals)

    def _result(self, grads, primals: tuple, y, aux):
        result = self.arrange(grads, primals if self._second_order else None,
                              y if self._output_major else None)
        if self.return_value:
            return (result, y, aux) if self.has_aux else (result, y)
        return (result, aux) if self.has_aux else result

    def __repr__(self) -> str:
        states = jax.tree.unflatten(self._grad_tree, [s.name or type(s).__name__
                                                      for s in self._grad_states])
        argnums = (self._argnums[0] if self._single_arg else self._argnums) or None
        return (f"GradientTransform({self._name}, transform="
                f"{getattr(self._transform, '__name__', self._transform)!r}, "
                f"grad_states={states!r}, argnums={argnums!r}, return_value={self.return_value}, "
                f"has_aux={self.has_aux}, debug_nan={self.debug_nan})")


#: transforms whose result is output-major: per leaf of the output, the tuple over the inputs
_OUTPUT_MAJOR = (jax.jacrev, jax.jacfwd, jax.jacobian, jax.hessian,
                 u.autograd.jacrev, u.autograd.jacfwd, u.autograd.hessian)


def _vector_grad(f, argnums, has_aux, unit_aware=False):
    """``jax.grad`` for a non-scalar output: the VJP with a cotangent of ones."""
    if unit_aware:
        return u.autograd.vector_grad(f, argnums, has_aux=has_aux, unit_aware=True)

    def run(*args):
        y, vjp_fn, aux = jax.vjp(f, *args, has_aux=True)
        return vjp_fn(jax.tree.map(jnp.ones_like, y)), aux

    return run


def _with_diff_args(args: tuple, argnums: Tuple[int, ...], diff_args: tuple) -> list:
    """``args`` with the differentiated ones (at ``argnums``) replaced by ``diff_args``."""
    full = list(args)
    for n, a in zip(argnums, diff_args):
        full[n] = a
    return full


def _make(fun, transform, unit_transform, name, grad_states, argnums, has_aux, return_value,
          unit_aware, check_states, debug_nan=False, **kwargs):
    def build(f):
        return GradientTransform(
            f, unit_transform if unit_aware else transform, grad_states=grad_states,
            argnums=argnums, has_aux=has_aux, return_value=return_value, unit_aware=unit_aware,
            check_states=check_states, debug_nan=debug_nan, name=name, **kwargs)

    return build if no_function(fun) else build(fun)


def grad(fun: Optional[Callable] = None, grad_states=None, argnums=None,
         holomorphic: bool = False, allow_int: bool = False, has_aux: Optional[bool] = None,
         return_value: bool = False, unit_aware: bool = False, check_states: bool = True,
         debug_nan: bool = False):
    """The gradient of a scalar stateful function w.r.t. states and/or arguments.

    Parameters
    ----------
    fun : callable, optional
        Returns a scalar (and an auxiliary value if ``has_aux``). Without it,
        ``grad(grad_states=..., ...)`` returns a decorator.
    grad_states : State, sequence or dict of States, or a module, optional
        The states to differentiate with respect to; their gradients come back
        in the same structure. Each must be read by the function (an error
        otherwise, unless ``check_states=False``). A module (``grad_states=net``)
        means its parameters, ``net.states(brainx.ParamState)``: the gradients
        are a dict keyed by each parameter's path, as optimisers take them.
    argnums : int or sequence of int, optional
        Positional arguments to differentiate. Default: ``0`` when no
        ``grad_states`` are given (calling with no argument is then an
        :class:`~brainx.errors.ArgnumsError` that says to pass ``grad_states``),
        none otherwise.
    has_aux : bool
        ``fun`` returns ``(value, aux)``.
    return_value : bool
        Also return the function's value.
    unit_aware : bool
        ``fun`` may return a brainunit Quantity and gradients carry
        ``unit(value) / unit(x)`` (``brainunit.autograd``). Without it,
        gradients are ``jax.grad``'s: a Quantity's is a Quantity in its own unit
        whose mantissa is the derivative with respect to the mantissa.
    holomorphic, allow_int
        As in ``jax.grad``.
    debug_nan : bool
        If a gradient holds NaN or Inf, raise a ``RuntimeError`` that names the
        primitive which made it (see :func:`~brainx.transform.debug_nan`). The
        check is compiled in: under ``jit`` it runs on the device and reports
        through a host callback.

    Returns
    -------
    A function returning ``grads`` (state grads, arg grads, or
    ``(state_grads, arg_grads)`` when both are asked for), followed by the
    value if ``return_value`` and the aux if ``has_aux``: ``(grads, value, aux)``.
    States written by ``fun`` are left holding their new (primal) values.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array([1.0, 2.0]))
    >>> calls = brainx.State(jnp.zeros(()))
    >>> def loss(x):
    ...     calls.value += 1
    ...     return jnp.sum(w.value * x) ** 2
    >>> g, value = brainx.transform.grad(loss, w, return_value=True)(jnp.ones(2))
    >>> g.tolist(), float(value), float(calls.value)
    ([6.0, 6.0], 9.0, 1.0)

    A module's parameters:

    >>> net = brainx.nn.Linear(2, 1)
    >>> grads = brainx.transform.grad(lambda x: net(x).sum(), grad_states=net)(jnp.ones(2))
    >>> g = grads[("weight",)]               # keyed by path, as net.states() keys them
    >>> g["weight"].tolist(), g["bias"].tolist()
    ([[1.0], [1.0]], [1.0])
    """
    return _make(fun, jax.grad, u.autograd.grad, "grad", grad_states, argnums, has_aux,
                 return_value, unit_aware, check_states, debug_nan, holomorphic=holomorphic,
                 allow_int=allow_int)


def vector_grad(func: Optional[Callable] = None, grad_states=None, argnums=None,
                return_value: bool = False, has_aux: Optional[bool] = None,
                unit_aware: bool = False, check_states: bool = True, debug_nan: bool = False):
    """The gradient of the sum of a non-scalar output: the VJP with a cotangent of ones.

    Same arguments (``debug_nan`` included) and result layout as :func:`grad`;
    ``func`` may return any array (a single array when ``unit_aware``). A
    brainunit Quantity output without ``unit_aware`` is taken as brainstate
    takes it: the gradient is that of the sum of its mantissa.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array([1.0, 2.0, 3.0]))
    >>> brainx.transform.vector_grad(lambda: w.value ** 2, w)().tolist()
    [2.0, 4.0, 6.0]
    """
    return _make(func, _vector_grad, functools.partial(_vector_grad, unit_aware=True),
                 "vector_grad", grad_states, argnums, has_aux, return_value, unit_aware,
                 check_states, debug_nan)


def jacrev(fun: Optional[Callable] = None, grad_states=None, argnums=None,
           has_aux: Optional[bool] = None, return_value: bool = False, holomorphic: bool = False,
           allow_int: bool = False, unit_aware: bool = False, check_states: bool = True,
           debug_nan: bool = False):
    """Reverse-mode Jacobian of a stateful function w.r.t. states and/or arguments.

    Same arguments and result layout as :func:`grad` (plus ``holomorphic``,
    ``allow_int``); the Jacobian of each input has shape
    ``y.shape + x.shape``.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array([1.0, 2.0]))
    >>> brainx.transform.jacrev(lambda x: w.value * x, w)(3.0).tolist()
    [[3.0, 0.0], [0.0, 3.0]]
    """
    return _make(fun, jax.jacrev, u.autograd.jacrev, "jacrev", grad_states, argnums, has_aux,
                 return_value, unit_aware, check_states, debug_nan, holomorphic=holomorphic,
                 allow_int=allow_int)


jacobian = jacrev


def jacfwd(func: Optional[Callable] = None, grad_states=None, argnums=None,
           has_aux: Optional[bool] = None, return_value: bool = False, holomorphic: bool = False,
           unit_aware: bool = False, check_states: bool = True, debug_nan: bool = False):
    """Forward-mode Jacobian of a stateful function; arguments and layout as :func:`jacrev`.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array([1.0, 2.0]))
    >>> brainx.transform.jacfwd(lambda x: w.value * x, w)(3.0).tolist()
    [[3.0, 0.0], [0.0, 3.0]]
    """
    return _make(func, jax.jacfwd, u.autograd.jacfwd, "jacfwd", grad_states, argnums, has_aux,
                 return_value, unit_aware, check_states, debug_nan, holomorphic=holomorphic)


def hessian(func: Optional[Callable] = None, grad_states=None, argnums=None,
            return_value: bool = False, holomorphic: bool = False,
            has_aux: Optional[bool] = None, unit_aware: bool = False, check_states: bool = True,
            debug_nan: bool = False):
    """The Hessian of a scalar stateful function; arguments and layout as :func:`grad`.

    With several inputs (states and/or arguments) the result is nested:
    ``H[i][j]`` is the block of second derivatives w.r.t. inputs ``i`` and ``j``.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array([1.0, 2.0]))
    >>> brainx.transform.hessian(lambda: jnp.sum(w.value ** 3), w)().tolist()
    [[6.0, 0.0], [0.0, 12.0]]
    """
    return _make(func, jax.hessian, u.autograd.hessian, "hessian", grad_states, argnums,
                 has_aux, return_value, unit_aware, check_states, debug_nan,
                 holomorphic=holomorphic, second_order=True)
