"""brainstate's private helpers of ``brainstate.nn`` (see :mod:`brainx.compat.private`).

Served as ``brainstate.nn._delay``, ``_dynamics``, ``_normalizations`` and
``_common``: one module for the four, since their helper names do not clash.
Each helper is brainx's own machinery under the name and calling convention
brainstate's tests import:

================================  ===================================================
brainstate name                   brainx
================================  ===================================================
``_get_delay(time, dt)``          :func:`brainx.nn.dynamics.delay_steps.delay_steps` (a
                                  time to whole steps; brainstate 0.6's rounding)
``_nearest_interpolation``,       :func:`brainx.nn.dynamics.interpolation.nearest` and
``_linear_interpolation``         :func:`~brainx.nn.dynamics.interpolation.linear`
``_get_prefetch_item``            the attribute a :class:`~brainx.nn.Prefetch` reads
``_get_prefetch_item_delay``      the delay buffer a :class:`~brainx.nn.PrefetchDelay`
                                  reads (registered with any ``update_every``)
``_get_prefetch_delay_key``,      :func:`brainx.nn.dynamics.prefetch.prefetch_delay_key`,
``_get_output_delay_key``         :func:`~brainx.nn.dynamics.prefetch.output_delay_key`
``_compute_stats``                the batch statistics of brainx's normalisation layers
``_canonicalize_axes``,           axis and dtype normalisation as brainstate's layers
``canonicalize_dtype``, ``_abs_sq``  do it
``_filter_states``                the ``{filter: axis}`` state selection of
                                  :class:`brainx.nn.Vmap`
``ToPredicate``                   a filter selecting given states (by identity)
``_MapCaller``                    :class:`brainx.nn.modules.map_module.MapCaller`, what
                                  :meth:`brainx.nn.Map.map` returns
================================  ===================================================

Examples
--------
>>> from brainx.compat.private.nn import _get_delay, _get_prefetch_delay_key
>>> int(_get_delay(0.07, 0.01)[1]), _get_prefetch_delay_key("V", None)
(7, 'V-prefetch-delay-None')
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp

from brainx import environ
from brainx.compat.private import public_fallback
from brainx.nn.dynamics.base import Dynamics
from brainx.nn.dynamics import interpolation
from brainx.nn.dynamics.delay import StateWithDelay
from brainx.nn.dynamics.delay_steps import delay_steps
from brainx.nn.dynamics.prefetch import (
    _item, _registered_delay, output_delay_key, prefetch_delay_key)
from brainx.nn.layers.normalization import _abs_sq, _stats
from brainx.nn.modules.map_module import MapCaller as _MapCaller
from brainx.nn.modules.vmap_module import _states_by_axis

__all__ = [
    "_get_delay", "_nearest_interpolation", "_linear_interpolation",
    "_get_prefetch_item", "_get_prefetch_item_delay", "_get_prefetch_delay_key",
    "_get_output_delay_key",
    "canonicalize_dtype", "_canonicalize_axes", "_abs_sq", "_compute_stats",
    "_filter_states", "ToPredicate", "_MapCaller",
]


# -- nn._delay -----------------------------------------------------------------------------
def _get_delay(delay_time: Any, dt: Any) -> Tuple[Any, Any]:
    """``(delay_time, steps)``: ``steps`` the whole steps of ``dt`` the delay reaches back.

    A ratio whole up to float round-off is that whole number, any other is rounded up;
    ``steps`` is an integer array of the default integer dtype (``None``: no delay, 0).
    """
    if delay_time is None:
        return 0. * dt, 0
    return delay_time, jnp.asarray(delay_steps(delay_time, dt), environ.ditype())


_nearest_interpolation = interpolation.nearest
_linear_interpolation = interpolation.linear


# -- nn._dynamics --------------------------------------------------------------------------
def _get_prefetch_delay_key(item: str, update_every: Any) -> str:
    return prefetch_delay_key(item, update_every)


def _get_output_delay_key(update_every: Any) -> str:
    return output_delay_key(update_every)


def _get_prefetch_item(target: Any) -> Any:
    """The attribute ``target.module.<target.item>`` (``AttributeError`` when missing)."""
    return _item(target.module, target.item)


def _get_prefetch_item_delay(target: Any) -> StateWithDelay:
    """The delay buffer of ``target.module.<target.item>``, whatever its ``update_every``.

    ``KeyError`` when none is registered, ``ValueError`` when several (with different
    ``update_every``) are and none without it.
    """
    assert isinstance(target.module, Dynamics), (
        f"The target module should be an instance of Dynamics. But got {target.module}.")
    delay = _registered_delay(target)
    if not isinstance(delay, StateWithDelay):
        raise TypeError(f"The prefetch target should be a StateWithDelay when accessing its "
                        f"delay. But got {delay}.")
    return delay


# -- nn._normalizations --------------------------------------------------------------------
def canonicalize_dtype(*args: Any, dtype: Any = None, inexact: bool = True) -> Any:
    """``dtype``, or the result dtype of ``args`` (``None`` skipped), at least float32 when
    ``inexact``; ``ValueError`` for an explicit non-inexact ``dtype`` with ``inexact``."""
    if dtype is None:
        dtype = jnp.result_type(*[jnp.asarray(x) for x in args if x is not None])
        if inexact and not jnp.issubdtype(dtype, jnp.inexact):
            dtype = jnp.promote_types(jnp.float32, dtype)
    if inexact and not jnp.issubdtype(dtype, jnp.inexact):
        raise ValueError(f"Dtype must be inexact: {dtype}")
    return dtype


def _canonicalize_axes(ndim: int, feature_axes: Sequence[int]) -> Tuple[int, ...]:
    """``feature_axes`` as non-negative axes of an ``ndim``-d array, in the order given."""
    axes = []
    for axis in feature_axes:
        if not -ndim <= axis < ndim:
            raise ValueError(f"Invalid axis {axis} for {ndim}D input")
        axes.append(axis % ndim)
    return tuple(axes)


def _compute_stats(x: Any, axes: Sequence[int], dtype: Any, axis_name: Optional[str] = None,
                   axis_index_groups: Any = None, use_mean: bool = True,
                   use_fast_variance: bool = True, mask: Optional[jax.Array] = None):
    """``(mean, var)`` of ``x`` over ``axes`` (removed), at least in float32, averaged over the
    named axis ``axis_name`` too when given (brainx's normalisation statistics)."""
    x = jnp.asarray(x, jnp.promote_types(jnp.result_type(x) if dtype is None else dtype,
                                         jnp.float32))
    axes = _canonicalize_axes(x.ndim, axes)
    mean, var = _stats(x, axes, axis_name, axis_index_groups, use_mean=use_mean, mask=mask,
                       use_fast_variance=use_fast_variance)
    return jnp.squeeze(mean, axes), jnp.squeeze(var, axes)


# -- nn._common ----------------------------------------------------------------------------
def _filter_states(module: Any, filters: Any) -> Any:
    """``None``, ``module.states(filters)``, or ``{axis: states}`` from ``{filter: axis}``."""
    return _states_by_axis(module, filters)


class ToPredicate:
    """A state filter that selects the given states (by identity)."""

    def __init__(self, states: Iterable[Any]):
        self.state_ids = {id(st) for st in states}

    def __call__(self, path: Any, st: Any) -> bool:
        return id(st) in self.state_ids


__getattr__ = public_fallback(__name__, "brainx.nn")
