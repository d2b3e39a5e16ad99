"""brainstate's private helpers of ``brainstate.transform._mapping2`` (see :mod:`brainx.compat.private`).

Each name is brainx's own function, then the public names of ``brainx.transform``:

=============================  ============================================================
brainstate name                brainx
=============================  ============================================================
``_ensure_tuple``              ``None`` to ``()``, an int to ``(n,)``, an iterable to a tuple
``_validate_leading_lengths``  the common leading size of a tree's leaves
                               (:func:`brainx.transform.control.loops.infer_length`, as
                               ``map`` checks its ``xs``)
``_batch_and_remainder``       ``map(..., batch_size=b)``'s split: ``(k, b, ...)`` chunks
                               and the leftover rows (``None`` when ``b`` divides the size)
``_build_new_state_resolver``  ``state_out_axes`` as ``([(axis, predicate), ...], axes)``:
                               ``None`` (shared) first, then the given axes, then axis 0
=============================  ============================================================

Examples
--------
>>> import jax.numpy as jnp
>>> from brainx.compat.private.mapping import _batch_and_remainder
>>> chunks, rest = _batch_and_remainder((jnp.arange(5.0),), 2)
>>> chunks[0].shape, rest[0].shape
((2, 2), (1,))
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional, Tuple

import jax

from brainx.compat.private import public_fallback
from brainx.state import NonBatchState
from brainx.transform.control.loops import infer_length
from brainx.util.filter import Everything, OfType, to_predicate

__all__ = ["_ensure_tuple", "_validate_leading_lengths", "_batch_and_remainder",
           "_build_new_state_resolver"]


def _ensure_tuple(x: Any) -> tuple:
    """``None`` as ``()``, an integer as ``(x,)``, any other iterable as a tuple."""
    if x is None:
        return ()
    if isinstance(x, int):
        return (x,)
    return tuple(x)


def _validate_leading_lengths(xs: Any) -> int:
    """The leading size all leaves of ``xs`` share (``ValueError`` if none, a 0-d leaf, or
    two sizes)."""
    return infer_length(xs, None, "map")


def _batch_and_remainder(x: Any, batch_size: int) -> Tuple[Any, Optional[Any]]:
    """``(chunks, remainder)``: each leaf's first ``k * batch_size`` rows as ``(k,
    batch_size, ...)``, and its last rows (``None`` when ``batch_size`` divides the size)."""
    n = _validate_leading_lengths(x)
    k, left = divmod(n, batch_size)
    chunks = jax.tree.map(lambda a: a[:k * batch_size].reshape((k, batch_size) + a.shape[1:]), x)
    remainder = jax.tree.map(lambda a: a[k * batch_size:], x) if left else None
    return chunks, remainder


def _build_new_state_resolver(state_out_axes: Any = None) -> Tuple[List[tuple], List[Any]]:
    """``state_out_axes`` (``{axis: filter}``, one filter for axis 0, or ``None``) as
    ``([(axis, predicate), ...], axes)`` in the order a new state is matched: ``None``
    (shared: ``NonBatchState`` unless given), the given axes, then axis 0 for the rest."""
    if state_out_axes is None:
        given = {}
    elif isinstance(state_out_axes, dict):
        given = dict(state_out_axes)
    else:
        given = {0: state_out_axes}
    given.setdefault(None, OfType(NonBatchState))
    order: Iterable[Any] = [None] + [a for a in given if a is not None]
    ordered = [(axis, to_predicate(given[axis])) for axis in order]
    if 0 not in given:
        ordered.append((0, Everything()))
    return ordered, [axis for axis, _ in ordered]


__getattr__ = public_fallback(__name__, "brainx.transform")
