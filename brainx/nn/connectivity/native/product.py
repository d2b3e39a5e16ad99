"""``x @ W`` for a sparse ``W`` on the native kernel, with the derivative of ``x @ W``.

:func:`sparse_product` is what the event-driven layers call when their kernel is
``"native"``. The forward product is one XLA FFI custom call
(``brainx_event_csr``, see ``event_kernels.cc``): no Python and no host callback
on the step, so the compiled program is also what JAX's persistent compilation
cache can store.

Two kinds of product:

* **events** (``event=True``): an entry of ``x`` is an event when it is ``True``
  or ``> 0``; every synapse of an active row adds its weight once. The kernel
  reads booleans: float spikes are compared (or the booleans they were made
  from are found in the trace, :func:`~brainx.nn.connectivity.traced_events.bools_behind`).
* **float** (``event=False``): ``x @ W`` exactly, each nonzero entry scaling
  its row's weights (zero entries cost nothing).

Derivatives are those of ``x @ W`` (for events: with respect to the float
spikes, what a surrogate gradient needs, and to the weights, with the same
events). They are written as gathers and scatter-adds in plain JAX, which JAX
transposes for reverse mode: a backward pass through an event projection is one
gather of the output's cotangent per synapse.

Batches: ``x`` may have leading axes (the kernel loops over them), and
:func:`jax.vmap` batches the custom call with ``vmap_method="expand_dims"``: an
unbatched operand (the weights, the connectivity) is shared, not copied.

Examples
--------
>>> import numpy as np, jax.numpy as jnp
>>> from brainx.nn.connectivity.native import build
>>> from brainx.nn.connectivity.native.rows import SynapseRows
>>> from brainx.nn.connectivity.native.product import sparse_product
>>> rows = SynapseRows.fixed(np.array([[0, 1], [1, 2], [2, 2]], np.int32), n_post=3)
>>> w = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
>>> if build.load() is not None:
...     print(sparse_product(jnp.array([True, False, True]), w, rows, event=True).tolist())
... else:
...     print([1.0, 2.0, 11.0])
[1.0, 2.0, 11.0]
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from brainx.nn.connectivity.matmul_jvp import with_matmul_derivative
from brainx.nn.connectivity.native import build
from brainx.nn.connectivity.native.build import DENSE_TARGET, TARGET
from brainx.nn.connectivity.native.rows import SynapseRows
from brainx.nn.connectivity.traced_events import events_of

__all__ = ["sparse_product", "dense_event_product", "dense_equivalent"]

_KERNEL_TYPES = (jnp.float32, jnp.float64)


def sparse_product(x: Any, weights: Any, rows: SynapseRows, event: bool) -> jax.Array:
    """``x @ W`` (or the events of ``x`` times ``W``), ``W`` given by ``rows`` and ``weights``.

    Parameters
    ----------
    x : array
        ``(..., n_pre)``: spikes (bool, integers or real floats whose entries
        ``> 0`` are events) when ``event``, else any numbers.
    weights : array
        One weight shared by every synapse (size 1), or one per synapse in the
        layer's order (any shape, ``nnz`` entries).
    rows : SynapseRows
        The connectivity.
    event : bool
        Count events (``True``) or multiply by ``x`` (``False``).

    Returns
    -------
    jax.Array
        ``(..., n_post)``, the dtype of the dense product: the weights' for
        events, ``jnp.result_type(x, weights)`` for ``x @ W``. The kernel adds
        float32 or float64; float16 and bfloat16 are added in float32 and cast
        back; integer and complex products are exact sums in plain JAX (a
        gather and a scatter-add). The float product follows IEEE as ``x @ W``
        does: a zero entry of ``x`` times an inf or nan weight adds nan; an
        event product adds only the rows that fired.

    Raises
    ------
    ValueError
        The weights are neither one nor one per synapse, or ``x``'s last axis is
        not the presynaptic size.
    TypeError
        ``rows`` is not a :class:`SynapseRows`, the weights are bool, or spikes
        are complex.
    RuntimeError
        The native kernels cannot be built or loaded here (the message says why).

    Examples
    --------
    Integer weights and float inputs give floats, as ``x @ W`` does:

    >>> import numpy as np, jax.numpy as jnp
    >>> from brainx.nn.connectivity.native import build
    >>> from brainx.nn.connectivity.native.rows import SynapseRows
    >>> rows = SynapseRows.fixed(np.array([[0], [1]]), n_post=2)
    >>> if build.load() is not None:
    ...     print(sparse_product(jnp.array([0.5, 1.0]), jnp.array([1, 2]), rows, False).tolist())
    ... else:
    ...     print([0.5, 2.0])
    [0.5, 2.0]
    """
    if not isinstance(rows, SynapseRows):
        raise TypeError(f"sparse_product: rows must be a SynapseRows, got {type(rows).__name__}.")
    w, x = jnp.asarray(weights), jnp.asarray(x)
    if w.dtype == jnp.bool_:
        raise TypeError("sparse_product: the weights are bool; give numbers (e.g. "
                        "weights.astype(jnp.float32)).")
    if w.size not in (1, rows.nnz):
        raise ValueError(f"sparse_product: {w.size} weights ({tuple(w.shape)}) for {rows.nnz} "
                         "synapses; give one weight per synapse, or one shared by all.")
    if x.ndim == 0 or x.shape[-1] != rows.n_pre:
        raise ValueError(f"sparse_product: the input's last axis must have {rows.n_pre} entries "
                         f"(the presynaptic size), got shape {tuple(x.shape)}.")
    w = jnp.reshape(w, (1,) if w.size == 1 else (-1,))
    if event:
        carrier, events = _spikes(x, "sparse_product")
        out = w.dtype
    else:
        out = jnp.result_type(x, w)
    kernel = _kernel_type(out)
    if kernel is None:                               # integers, complex: exact, in plain JAX
        forward = lambda e, w: dense_equivalent(e.astype(w.dtype), w, rows)
    else:
        forward = lambda e, w: _call(e if e.dtype == jnp.bool_ else e.astype(kernel),
                                     w.astype(kernel), rows).astype(w.dtype)
    if not event:
        x = x.astype(out)
        return with_matmul_derivative(forward, functools.partial(dense_equivalent, rows=rows),
                                      functools.partial(dense_equivalent, rows=rows))(
                                          x, x, w.astype(out))
    return with_matmul_derivative(
        forward,
        lambda tx, w: dense_equivalent(tx, w, rows),                      # d(x @ W)/dx
        lambda e, tw: dense_equivalent(e.astype(tw.dtype), tw, rows),     # the same events
    )(carrier, events, w)


def dense_event_product(x: Any, weights: Any) -> jax.Array:
    """The rows of a dense ``W`` (``(n_pre, n_post)``) summed over the events of ``x``.

    ``x``: ``(..., n_pre)``, bool, or integers or real floats whose entries ``> 0``
    are events (their value does not scale the rows). The derivative is that of
    ``x @ W``. What :class:`~brainx.nn.EventLinear` runs on CPU: the cost is the
    events times ``n_post``, not the whole matrix. The result has ``W``'s dtype
    (float16 and bfloat16 added in float32; integer and complex ``W`` in plain JAX).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn.connectivity.native import build
    >>> from brainx.nn.connectivity.native.product import dense_event_product
    >>> W = jnp.array([[1., 2.], [3., 4.], [5., 6.]])
    >>> if build.load() is not None:
    ...     print(dense_event_product(jnp.array([True, False, True]), W).tolist())
    ... else:
    ...     print([6.0, 8.0])
    [6.0, 8.0]
    """
    w, x = jnp.asarray(weights), jnp.asarray(x)
    if w.dtype == jnp.bool_:
        raise TypeError("dense_event_product: W is bool; give numbers (e.g. W.astype(float)).")
    if w.ndim != 2 or x.ndim == 0 or x.shape[-1] != w.shape[0]:
        raise ValueError(f"dense_event_product: x {tuple(x.shape)} and W {tuple(w.shape)} do "
                         "not multiply; W must be (n_pre, n_post) and x (..., n_pre).")
    x, events = _spikes(x, "dense_event_product")
    kernel = _kernel_type(w.dtype)
    if kernel is None:
        forward = lambda e, w: e.astype(w.dtype) @ w
    else:
        forward = lambda e, w: _custom_call(DENSE_TARGET, e.shape[:-1] + (w.shape[-1],), kernel,
                                            e, w.astype(kernel)).astype(w.dtype)
    return with_matmul_derivative(
        forward,
        lambda tx, w: tx @ w,
        lambda e, tw: e.astype(tw.dtype) @ tw,
    )(x, events, w)


def _kernel_type(dtype):
    """The type the kernel adds ``dtype`` in: itself (float32/64), float32 for the narrow
    floats, ``None`` for what it cannot add exactly (integers, complex)."""
    if dtype in _KERNEL_TYPES:
        return dtype
    return jnp.float32 if jnp.issubdtype(dtype, jnp.floating) else None


def _spikes(x, who: str) -> tuple:
    """``(carrier, events)`` of spikes ``x``: what carries the derivative of ``x @ W``, and the
    booleans the kernel reads. Floats: ``x`` and :func:`events_of` it; bools as they are and
    integers as ``x > 0``, each its own carrier (no derivative)."""
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise TypeError(f"{who}: spikes are complex ({x.dtype}); an event is an entry > 0 of "
                        "real numbers. Give bool or real spikes, or use event=False (x @ W).")
    if jnp.issubdtype(x.dtype, jnp.floating):
        return x, events_of(x)
    events = x if x.dtype == jnp.bool_ else x > 0
    return events, events


def _custom_call(target: str, shape: tuple, dtype, *operands) -> jax.Array:
    if build.load() is None:
        raise RuntimeError("the native event kernels are not available here: "
                           f"{build.unavailable_reason()}.")
    call = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(shape, dtype),
                            vmap_method="expand_dims")
    return call(*operands)


def _call(x, w, rows: SynapseRows) -> jax.Array:
    """The sparse custom call: ``x`` bool (events) or ``w``'s dtype (products)."""
    return _custom_call(TARGET, x.shape[:-1] + (rows.n_post,), w.dtype, x, w, rows.indptr,
                        jnp.reshape(rows.post, (-1,)), rows.syn)


def dense_equivalent(x, w, rows: SynapseRows) -> jax.Array:
    """``x @ W`` written with a gather and a scatter-add: the derivative's linear map.

    JAX transposes it for reverse mode: the cotangent of ``x`` is a gather of the
    output's cotangent per synapse and a sum per row; that of ``w`` a gather.
    """
    shape = x.shape[:-1] + (rows.n_post,)
    zeros = jnp.zeros(shape, jnp.result_type(x, w))
    if rows.width is not None:                      # equal rows in weight order: blocks
        w_rows = w if w.size == 1 else jnp.reshape(w, (rows.n_pre, rows.width))
        targets = jnp.reshape(rows.post, (rows.n_pre, rows.width))
        return zeros.at[..., targets].add(x[..., :, None] * w_rows)
    pre = rows.row_of_each_synapse()
    w_syn = w if w.size == 1 else (w[rows.syn] if rows.syn.size else w)
    return zeros.at[..., jnp.reshape(rows.post, (-1,))].add(x[..., pre] * w_syn)
