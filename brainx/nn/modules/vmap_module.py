"""``nn.Vmap``: a module run over a batch axis as one module (brainstate's wrapper).

``Vmap(module, in_axes=0, vmap_states=...)`` is a module whose call is
``brainx.transform.vmap`` of ``module``'s call: the arguments are mapped over
``in_axes``, and the module's states selected by ``vmap_states`` (a filter,
or ``{filter: axis}``) are taken as batched along their axis, the others
shared. ``vmap_out_states`` selects states whose new values come out batched.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from brainx.nn.modules.module import Module
from brainx.transform import vmap

__all__ = ["Vmap"]


def _states_by_axis(module: Module, filters: Any) -> Any:
    """``None``, the states a filter selects, or ``{axis: states}`` from ``{filter: axis}``."""
    if filters is None:
        return None
    if not isinstance(filters, dict):
        return module.states(filters)
    by_axis: Dict[int, list] = {}
    for filter_, axis in filters.items():
        if not isinstance(axis, int):
            raise TypeError(f"Vmap: {filter_!r} maps to {axis!r}; give each filter the integer "
                            "axis its states are batched along, as {filter: axis}.")
        by_axis.setdefault(axis, []).append(filter_)
    return {axis: module.states(fs[0] if len(fs) == 1 else tuple(fs))
            for axis, fs in by_axis.items()}


class Vmap(Module):
    """Run ``module`` over a batch axis (see the module docstring).

    Parameters
    ----------
    module : Module
        The module to map.
    in_axes, out_axes
        As in ``jax.vmap`` / ``brainx.transform.vmap``.
    vmap_states : filter or dict, optional
        The module's states batched on the way in (``{filter: axis}`` for
        axes other than 0).
    vmap_out_states : filter or dict, optional
        The module's states whose new values come out batched.
    axis_name : hashable, optional
    axis_size : int, optional

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> class Acc(brainx.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.h = brainx.HiddenState(jnp.zeros((4, 2)))   # one row per lane
    ...     def update(self, x):
    ...         self.h.value = self.h.value + x
    ...         return self.h.value.sum()
    >>> acc = Acc()
    >>> batched = brainx.nn.Vmap(acc, vmap_states=brainx.HiddenState)
    >>> batched(jnp.arange(4.0)).tolist()
    [0.0, 2.0, 4.0, 6.0]
    """

    def __init__(self, module: Module, in_axes: Any = 0, out_axes: Any = 0,
                 vmap_states: Any = None, vmap_out_states: Any = None,
                 axis_name: Optional[Any] = None, axis_size: Optional[int] = None):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"Vmap maps a brainx.nn.Module, got {module!r}.")
        self.module = module
        self.in_axes, self.out_axes = in_axes, out_axes
        self.axis_name, self.axis_size = axis_name, axis_size
        self.vmapped_fn = vmap(lambda *args, **kwargs: module(*args, **kwargs),
                               in_axes=in_axes, out_axes=out_axes,
                               in_states=_states_by_axis(module, vmap_states),
                               out_states=_states_by_axis(module, vmap_out_states),
                               axis_name=axis_name, axis_size=axis_size)

    def update(self, *args, **kwargs):
        return self.vmapped_fn(*args, **kwargs)
