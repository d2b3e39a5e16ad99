"""Differentiation of stateful functions with respect to states and arguments.

Every transform here is one :class:`GradientTransform` around a JAX
differentiation function (``jax.grad``, ``jax.jacrev``, ...). It builds

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
from typing import Any, Callable, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp

from brainx.state.state import State
from brainx.transform.stateful import (
    StatefulFunction, StateSignature, read_state_values, write_state_values,
)

__all__ = ["grad", "vector_grad", "jacrev", "jacfwd", "jacobian", "hessian", "GradientTransform"]


def _is_state(x) -> bool:
    return isinstance(x, State)


class GradientTransform:
    """The stateful form of one JAX differentiation function; see :func:`grad`."""

    def __init__(self, fun: Callable, transform: Callable, *, grad_states=None,
                 argnums: Optional[int | Sequence[int]] = None, has_aux: Optional[bool] = None,
                 return_value: bool = False, unit_aware: bool = False, check_states: bool = True,
                 name: str = "grad", **transform_kwargs):
        self.fun = fun
        self.has_aux = bool(has_aux)
        self.return_value = return_value
        self.unit_aware = unit_aware
        self.check_states = check_states
        self._transform = transform
        self._transform_kwargs = transform_kwargs
        self._name = f"{name}({getattr(fun, '__name__', 'fun')})"
        self.stateful = StatefulFunction(fun, name=self._name)

        leaves, self._grad_tree = jax.tree.flatten(grad_states, is_leaf=_is_state)
        for leaf in leaves:
            if not isinstance(leaf, State):
                raise TypeError(f"{self._name}: grad_states must be a State, a sequence or a dict "
                                f"of States; found {leaf!r}.")
        self._grad_states: Tuple[State, ...] = tuple(leaves)
        self._has_states = grad_states is not None
        if argnums is None and not self._has_states:
            argnums = 0
        self._single_arg = isinstance(argnums, int)
        self._argnums: Tuple[int, ...] = (
            () if argnums is None else (argnums,) if isinstance(argnums, int) else tuple(argnums))
        # updated=(): copying fun.__dict__ would overwrite our attributes when fun is
        # itself a transform (jit(grad(f)) would call f instead of grad(f)).
        functools.update_wrapper(self, fun, updated=())

    def __call__(self, *args, **kwargs):
        return self.stateful.call(self._run, args, kwargs)

    def _grad_positions(self, sig: StateSignature, key, args, kwargs):
        """Where each grad state sits in ``sig.states`` (``None``: never read)."""
        positions = [sig.index.get(s) for s in self._grad_states]
        missing = [s for s, p in zip(self._grad_states, positions)
                   if p is None or not sig.read[p]]
        if missing and self.check_states:
            sig = self.stateful.discover(key, args, kwargs)  # the cache may predate a change
            positions = [sig.index.get(s) for s in self._grad_states]
            missing = [s for s, p in zip(self._grad_states, positions)
                       if p is None or not sig.read[p]]
            if missing:
                raise ValueError(
                    f"{self._name}: grad_states includes {', '.join(map(repr, missing))}, which "
                    "the function never reads, so its gradient would always be zero. Remove it "
                    "from grad_states, or pass check_states=False to get zeros.")
        return sig, positions

    def _run(self, sig: StateSignature, key, args: tuple, kwargs: dict):
        for n in self._argnums:
            if not -len(args) <= n < len(args):
                raise ValueError(f"{self._name}: argnums={self._argnums} but the function was "
                                 f"called with {len(args)} positional arguments.")
        sig, positions = self._grad_positions(sig, key, args, kwargs)
        values = read_state_values(sig.states)
        pure = self.stateful.pure(sig, key)
        argnums = self._argnums
        has_aux, unit_aware = self.has_aux, self.unit_aware
        y_unit = []

        def f(grad_values, *diff_args):
            vals = list(values)
            for p, v in zip(positions, grad_values):
                if p is not None:
                    vals[p] = v
            full = list(args)
            for n, a in zip(argnums, diff_args):
                full[n] = a
            out, new_values = pure(vals, *full, **kwargs)
            y, aux = out if has_aux else (out, None)
            y_diff = y
            if unit_aware:
                y_diff, unit = _split_unit(y)
                y_unit.append(unit)
            return y_diff, (y, aux, new_values)

        grad_values = [values[p] if p is not None else s.value
                       for s, p in zip(self._grad_states, positions)]
        diff_args = [args[n] for n in argnums]
        grads, (y, aux, new_values) = self._transform(
            f, argnums=tuple(range(1 + len(argnums))), has_aux=True, **self._transform_kwargs
        )(grad_values, *diff_args)
        write_state_values(sig.write_states, new_values)

        if unit_aware:
            grads = _attach_units(grads, y_unit[0])
        state_grads = jax.tree.unflatten(self._grad_tree, list(grads[0]))
        arg_grads = grads[1] if self._single_arg else tuple(grads[1:])
        if self._has_states and self._argnums:
            result = (state_grads, arg_grads)
        elif self._has_states:
            result = state_grads
        else:
            result = arg_grads
        if self.return_value:
            return (result, y, aux) if has_aux else (result, y)
        return (result, aux) if has_aux else result

    def __repr__(self) -> str:
        return f"<brainx.transform.{self._name}>"


def _split_unit(y):
    import brainunit as u
    if isinstance(y, u.Quantity):
        return y.mantissa, y.unit
    return y, None


def _attach_units(grads, y_unit):
    """Give each gradient the unit ``unit(y) / unit(x)``."""
    import brainunit as u

    def fix(g):
        if isinstance(g, u.Quantity):
            unit = g.unit if y_unit is None else y_unit / g.unit
            return u.Quantity(g.mantissa, unit=unit) if not unit.is_unitless else g.mantissa
        if y_unit is not None and not y_unit.is_unitless:
            return u.Quantity(g, unit=y_unit)
        return g

    return jax.tree.map(fix, grads, is_leaf=lambda x: isinstance(x, u.Quantity))


def _factory(transform: Callable, name: str, **fixed):
    """A brainstate-style front end: ``name(fun=None, grad_states=None, argnums=None, ...)``."""

    def front(fun: Optional[Callable] = None, grad_states=None, argnums=None,
              has_aux: Optional[bool] = None, return_value: bool = False,
              unit_aware: bool = False, check_states: bool = True, **transform_kwargs):
        options = dict(grad_states=grad_states, argnums=argnums, has_aux=has_aux,
                       return_value=return_value, unit_aware=unit_aware,
                       check_states=check_states, **fixed, **transform_kwargs)
        if fun is None:
            return lambda f: GradientTransform(f, transform, name=name, **options)
        return GradientTransform(fun, transform, name=name, **options)

    front.__name__ = name
    return front


def _vector_grad_transform(f, argnums, has_aux):
    """Like ``jax.grad`` for a non-scalar output: the VJP with a cotangent of ones."""
    def run(*args):
        y, vjp_fn, aux = jax.vjp(lambda *a: f(*a), *args, has_aux=True)
        cot = jax.tree.map(jnp.ones_like, y)
        grads = vjp_fn(cot)
        return tuple(grads[i] for i in argnums), aux
    return run


_grad = _factory(jax.grad, "grad")


def grad(fun: Optional[Callable] = None, grad_states=None, argnums=None,
         holomorphic: bool = False, allow_int: bool = False, has_aux: Optional[bool] = None,
         return_value: bool = False, unit_aware: bool = False, check_states: bool = True):
    """The gradient of a scalar stateful function w.r.t. states and/or arguments.

    Parameters
    ----------
    fun : callable, optional
        Returns a scalar (and an auxiliary value if ``has_aux``). Without it,
        ``grad(grad_states=..., ...)`` returns a decorator.
    grad_states : State, sequence or dict of States, optional
        The states to differentiate with respect to; their gradients come back
        in the same structure. Each must be read by the function (an error
        otherwise, unless ``check_states=False``).
    argnums : int or sequence of int, optional
        Positional arguments to differentiate. Default: ``0`` when no
        ``grad_states`` are given, none otherwise.
    has_aux : bool
        ``fun`` returns ``(value, aux)``.
    return_value : bool
        Also return the function's value.
    unit_aware : bool
        Gradients of brainunit Quantities carry ``unit(value) / unit(x)``.
    holomorphic, allow_int
        As in ``jax.grad``.

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
    """
    return _grad(fun, grad_states, argnums, has_aux, return_value, unit_aware, check_states,
                 holomorphic=holomorphic, allow_int=allow_int)


vector_grad = _factory(_vector_grad_transform, "vector_grad")
vector_grad.__doc__ = """The gradient of a non-scalar stateful function: the VJP with a cotangent of ones.

Same arguments and results as :func:`grad`; ``fun`` may return any array.
"""
jacrev = _factory(jax.jacrev, "jacrev")
jacrev.__doc__ = """Reverse-mode Jacobian of a stateful function w.r.t. states and/or arguments.

Same arguments and result layout as :func:`grad` (plus ``holomorphic``, ``allow_int``).
"""
jacobian = jacrev
jacfwd = _factory(jax.jacfwd, "jacfwd")
jacfwd.__doc__ = """Forward-mode Jacobian of a stateful function; arguments as :func:`jacrev`."""
hessian = _factory(jax.hessian, "hessian")
hessian.__doc__ = """The Hessian of a scalar stateful function; arguments as :func:`grad`."""
