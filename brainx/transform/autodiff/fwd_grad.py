"""`fwd_grad`: a gradient estimated in forward mode, from random directions.

For a scalar ``f`` and a random direction ``v`` with ``E[v vᵀ] = I`` (standard
normal entries), ``v (∇f · v)`` is an unbiased estimate of ``∇f``; the
directional derivative ``∇f · v`` costs one forward-mode pass (``jax.jvp``)
and no stored activations. Averaging over ``tangent_size`` directions lowers
the variance. This is the "forward gradient" of Baydin et al. (2022).

It is one :class:`~brainx.transform.GradientTransform` whose JAX transform is
:func:`forward_gradient`: the function is linearised once (``jax.linearize``)
and the linear map is applied to every direction.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import jax.random as jr

from brainx.transform.core.arguments import no_function
from brainx.random.default import split_key
from brainx.random.state import as_key
from brainx.transform.autodiff.gradients import GradientTransform

__all__ = ["fwd_grad", "forward_gradient"]


def forward_gradient(f: Callable, argnums: Sequence[int] = (0,), has_aux: bool = False,
                     tangent_size: Optional[int] = None, drct_der_clip: Optional[float] = None,
                     key: Any = None) -> Callable:
    """``jax.grad``'s calling convention, with the forward-mode estimate of the gradient.

    The direction for the ``i``-th array leaf of the differentiated values
    is ``jax.random.normal(jax.random.split(key, n_leaves)[i], (*size, *leaf.shape))``
    with ``size`` ``()`` or ``(tangent_size,)``; ``key`` defaults to one
    split from brainx's default generator (which advances).
    """
    if tangent_size is not None and (not isinstance(tangent_size, int)
                                     or isinstance(tangent_size, bool) or tangent_size < 1):
        raise ValueError(f"fwd_grad: tangent_size must be a positive int or None, got "
                         f"{tangent_size!r}.")
    sample_shape = () if tangent_size is None else (tangent_size,)

    def run(*args):
        primals = [args[i] for i in argnums]

        def of_primals(*p):
            return _with(f, args, argnums, p)

        if has_aux:
            y, derivative, aux = jax.linearize(of_primals, *primals, has_aux=True)
        else:
            (y, derivative), aux = jax.linearize(of_primals, *primals), None
        if jnp.ndim(y) != 0:
            raise ValueError(f"fwd_grad: the function must return a scalar, it returned shape "
                             f"{jnp.shape(y)}; use vector_grad, jacfwd or jacrev instead.")
        directions = _directions(primals, sample_shape, _key(key))
        if tangent_size is None:
            slope = derivative(*directions)
        else:
            slope = jax.vmap(derivative)(*directions)
        if drct_der_clip is not None:
            slope = jnp.clip(slope, -drct_der_clip, drct_der_clip)
        if tangent_size is None:
            grads = jax.tree.map(lambda v: v * slope.astype(v.dtype), directions)
        else:
            grads = jax.tree.map(
                lambda v: jnp.mean(v * slope.astype(v.dtype).reshape((-1,) + (1,) * (v.ndim - 1)),
                                   axis=0), directions)
        return tuple(grads), aux

    return run


def _key(key: Any) -> Any:
    """The directions' key: split from the default generator, or from ``key``.

    A one-element integer array (``np.array([42])``) is taken as the seed it
    holds, as brainstate does.
    """
    if key is None:
        return split_key()
    dtype = getattr(key, "dtype", None)
    if (dtype is not None and jnp.issubdtype(dtype, jnp.integer) and jnp.shape(key) == (1,)):
        key = jnp.reshape(key, ())
    return as_key(key, "fwd_grad's key")


def _with(f: Callable, args: tuple, argnums: Sequence[int], primals: Sequence[Any]):
    full = list(args)
    for i, p in zip(argnums, primals):
        full[i] = p
    return f(*full)


def _directions(primals: Sequence[Any], sample_shape: tuple, key: Any) -> list:
    leaves, tree = jax.tree.flatten(list(primals))
    for leaf in leaves:
        if not jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
            raise TypeError(
                f"fwd_grad: a differentiated value has dtype {jnp.result_type(leaf)}; forward "
                "gradients need inexact (float or complex) values. Cast it to a float dtype, or "
                "leave it out of grad_states / argnums.")
    keys = jr.split(key, max(len(leaves), 1))
    return jax.tree.unflatten(tree, [
        jr.normal(k, sample_shape + jnp.shape(leaf), jnp.result_type(leaf))
        for k, leaf in zip(keys, leaves)])


def fwd_grad(func: Optional[Callable] = None, grad_states=None,
             argnums: Optional[int | Sequence[int]] = None, return_value: bool = False,
             has_aux: Optional[bool] = None, tangent_size: Optional[int] = None,
             drct_der_clip: Optional[float] = None, key: Any = None, *,
             check_states: bool = True, debug_nan: bool = False) -> Any:
    """A forward-mode, random-direction estimate of the gradient of a scalar function.

    Same arguments and result layout as :func:`~brainx.transform.grad`
    (``grads``, ``(grads, value)``, ``(grads, aux)``, ``(grads, value, aux)``;
    grads of states, of arguments, or ``(state_grads, arg_grads)``), plus:

    Parameters
    ----------
    tangent_size : int, optional
        Average over this many random directions (one by default).
    drct_der_clip : float, optional
        Clip each directional derivative to ``[-drct_der_clip, drct_der_clip]``.
    key : int or PRNG key, optional
        The directions' key (an integer seed, also as a one-element integer
        array, or a JAX key): the same key gives the same directions on every
        call. By default a key is split from ``brainx.random``'s default
        generator, so each call draws new directions.

    The estimate is unbiased: its mean over directions is the gradient
    (``tangent_size`` directions divide its variance by ``tangent_size``).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array([1.0, 2.0]))
    >>> estimate = brainx.transform.fwd_grad(lambda: jnp.sum(w.value ** 2), grad_states=w,
    ...                                      tangent_size=20000, key=0)
    >>> jnp.allclose(estimate(), 2 * w.value, atol=0.1).item()     # the gradient is [2, 4]
    True
    """
    def build(f: Callable) -> GradientTransform:
        return GradientTransform(
            f, forward_gradient, grad_states=grad_states, argnums=argnums,
            return_value=return_value, has_aux=has_aux, check_states=check_states,
            debug_nan=debug_nan, name="fwd_grad",
            transform_params=dict(tangent_size=tangent_size, drct_der_clip=drct_der_clip,
                                  key=key))

    return build if no_function(func) else build(func)

