"""The derivative of ``x @ W`` for a sparse product computed another way (a kernel).

Every event product of this package computes ``y = events(x) @ W`` in a kernel JAX
cannot differentiate, and defines its derivative as that of ``x @ W`` (with
respect to float spikes, what a surrogate gradient needs; and to the weights,
with the same events). :func:`with_matmul_derivative` builds that function once
for every kernel: the forward call, and the two linear maps of its tangent.

Examples
--------
>>> import jax, jax.numpy as jnp
>>> from brainx.nn.connectivity.matmul_jvp import with_matmul_derivative
>>> W = jnp.array([[1.0, 2.0], [3.0, 4.0]])
>>> product = with_matmul_derivative(lambda e, w: e.astype(w.dtype) @ w,   # "the kernel"
...                                  lambda tx, w: tx @ w,
...                                  lambda e, tw: e.astype(tw.dtype) @ tw)
>>> x = jnp.array([0.5, 0.0])
>>> product(x, x > 0, W).tolist()                     # the events' rows
[1.0, 2.0]
>>> jax.grad(lambda x: product(x, x > 0, W).sum())(x).tolist()   # d(x @ W)/dx
[3.0, 7.0]
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

__all__ = ["with_matmul_derivative"]


def with_matmul_derivative(forward: Callable, by_input: Callable,
                           by_weights: Callable) -> Callable:
    """``(x, events, w) -> forward(events, w)`` with the tangent of ``x @ W``.

    Parameters
    ----------
    forward : callable
        ``(events, w) -> y``: the kernel.
    by_input : callable
        ``(tx, w) -> dy``: the tangent's part in ``x`` (``tx @ W``).
    by_weights : callable
        ``(events, tw) -> dy``: the part in the weights (the events times ``tW``).

    Returns
    -------
    callable
        ``(x, events, w) -> y``; ``x`` only carries the derivative (its value is not
        read), so pass the events twice when there is no float ``x``.
    """
    @jax.custom_jvp
    def product(x, events, w):
        return forward(events, w)

    def product_jvp(primals, tangents):
        x, events, w = primals
        tx, _, tw = tangents
        out = product(x, events, w)
        terms = []
        if type(tx) is not SymbolicZero:
            terms.append(by_input(tx, w))
        if type(tw) is not SymbolicZero:
            terms.append(by_weights(events, tw))
        if not terms:
            return out, jax.tree.map(jnp.zeros_like, out)
        total = functools.reduce(lambda a, b: a + b, terms)
        # in the output's dtype: float64 spikes under x64 would widen float32 weights' tangent
        return out, jax.tree.map(lambda t, o: t.astype(o.dtype), total, out)

    product.defjvp(product_jvp, symbolic_zeros=True)
    return product
