"""`unvmap`: one value for all lanes of a ``vmap``.

Inside ``vmap`` every value is one lane's, and a reduction like ``jnp.any``
reduces within a lane. Some decisions belong to the whole batch: raise an
error if *any* lane went wrong, stop a loop when *all* lanes converged.
``unvmap`` reduces across the lanes too, and gives back a value that is the
same in every lane (not batched). Outside ``vmap`` it is the plain reduction.

The reductions are built on ``jax.custom_batching.custom_vmap``: when JAX
batches the call, the rule sees the whole batch and returns an unbatched
scalar, the same type as one lane's result, so a jaxpr traced for one lane
(as :func:`~brainx.transform.vmap` traces) stays valid when it is batched.
Nested ``vmap`` s collapse level by level: the result covers every lane of
every level. ``unvmap`` has no derivative rule: use it on predicates and
diagnostics, not in a differentiated path.

``op='none'`` differs from brainstate's: see :func:`unvmap`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

import jax.numpy as jnp
from jax import custom_batching
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

__all__ = ["unvmap"]


def _across_lanes(reduce: Callable[[Any], Any], name: str) -> Callable[[Any], Any]:
    """``reduce`` (to a scalar) whose batching rule reduces over the lanes as well."""
    @custom_batching.custom_vmap
    def op(x):
        return reduce(x)

    @op.def_vmap
    def rule(axis_size, in_batched, x):  # x: the whole batch, lane axis first
        return op(x), False

    op.__name__ = f"unvmap_{name}"
    return op


# 'none': the identity, whose batching rule hands the whole batch on, unbatched. Its
# shape then differs from one lane's, which a jaxpr traced for one lane cannot express.
_whole_batch_p = Primitive("unvmap_none")
_whole_batch_p.def_impl(lambda x: x)
_whole_batch_p.def_abstract_eval(lambda x: x)
mlir.register_lowering(_whole_batch_p, mlir.lower_fun(lambda x: x, multiple_results=False))


def _whole_batch_rule(args, dims):
    (x,), (dim,) = args, dims
    return _whole_batch_p.bind(jnp.moveaxis(x, dim, 0)), None  # None: no longer batched


batching.primitive_batchers[_whole_batch_p] = _whole_batch_rule

_OPS: Dict[str, Callable[[Any], Any]] = {
    "any": _across_lanes(jnp.any, "any"),
    "all": _across_lanes(jnp.all, "all"),
    "max": _across_lanes(jnp.max, "max"),
    "none": _whole_batch_p.bind,
}


def unvmap(x: Any, op: str = "any") -> Any:
    """Reduce ``x`` over its elements and over every ``vmap`` lane.

    Parameters
    ----------
    x : array_like
        One array (not a pytree).
    op : {'any', 'all', 'max', 'none'}
        ``'any'``, ``'all'``: a scalar bool; ``'max'``: a scalar of ``x``'s
        dtype. ``'none'``: no reduction: under ``jax.vmap``, the whole batch
        as one unbatched value (lane axis first, so its shape is
        ``(lanes, *x.shape)``).

    Returns
    -------
    The reduced value, the same in every lane.

    Notes
    -----
    ``'none'`` changes a value's shape when it is batched, which a jaxpr
    traced for one lane cannot express: it is correct directly under
    ``jax.vmap``, but not under :func:`~brainx.transform.vmap` (which traces
    one lane and batches that trace), nor in a jitted function, a loop body
    or a branch that is then batched. brainx's own checks
    (:func:`~brainx.transform.jit_error_if`, ``debug_nan``) do not use it:
    they report the values of the first lane that failed. (brainstate uses
    ``'none'`` there, and has this problem inside its loops.)

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> x = jnp.array([[0.0, 1.0], [0.0, 0.0]])
    >>> jax.vmap(lambda row: jnp.any(row > 0))(x).tolist()            # per lane
    [True, False]
    >>> jax.vmap(lambda row: brainx.transform.unvmap(row > 0))(x).tolist()  # all lanes
    [True, True]
    >>> bool(brainx.transform.unvmap(x > 0, op="all"))
    False
    """
    reduce = _OPS.get(op)
    if reduce is None:
        raise ValueError(f"unvmap: op must be one of {sorted(_OPS)}, got {op!r}.")
    return reduce(jnp.asarray(x))
