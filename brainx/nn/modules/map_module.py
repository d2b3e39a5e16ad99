"""``nn.Map``: an ensemble of one module, its states made once per lane (brainstate's wrapper).

``Map(module, init_map_size=n)`` holds ``n`` copies of ``module``'s states
side by side: :meth:`Map.init_all_states` runs the module's initialisation
under :func:`~brainx.transform.vmap2_new_states` (or, with
``behavior='pmap'``, :func:`~brainx.transform.pmap2_new_states`, one copy
per device), so each state gets a lane axis. :meth:`Map.update` then runs
the module over that axis with :func:`~brainx.transform.vmap2` (or
``pmap2``), the new states mapped along the axis they were made with, and
:meth:`Map.map` does the same for any other method.

Unlike :class:`~brainx.nn.Vmap`, which maps a module whose states already
have a batch axis, ``Map`` makes the lanes itself: ``n`` independently
initialised networks (an ensemble, a parameter sweep) trained or run as one.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from brainx.nn.modules.module import Module
from brainx.state.state import State
from brainx.transform.mapping.module_states import vmap2_new_states
from brainx.transform.mapping.pmap import pmap2, pmap2_new_states
from brainx.transform.mapping.stateful_mapping import vmap2

__all__ = ["Map", "MapCaller"]

_BEHAVIORS = ("vmap", "pmap")
#: a Map's bookkeeping, left out of its repr (brainstate's names and brainx's)
_REPR_HIDDEN = ("_init", "dict_vmap_states", "_call_state_axes", "_update")


class MapCaller:
    """A function run once per lane: what :meth:`Map.map` returns (and :meth:`Map.update` runs).

    ``fn`` under :func:`~brainx.transform.vmap2` (``behavior='vmap'``) or
    :func:`~brainx.transform.pmap2` (``'pmap'``), the states ``state_axes``
    (``{axis: filter}``) selects mapped along their axis, in and out.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn.modules.map_module import MapCaller
    >>> double = MapCaller(lambda x: x * 2.0, behavior="vmap")
    >>> double(jnp.arange(3.0)).tolist(), double.behavior
    ([0.0, 2.0, 4.0], 'vmap')
    """

    def __init__(self, fn: Callable, behavior: str, in_axes: Any = 0, out_axes: Any = 0,
                 axis_name: Optional[Any] = None, state_axes: Optional[Dict[int, Any]] = None,
                 spmd_axis_name: Optional[Any] = None):
        if behavior not in _BEHAVIORS:
            raise ValueError(f"Map: behavior must be 'vmap' or 'pmap', got {behavior!r}.")
        self.fn, self.behavior = fn, behavior
        self.in_axes, self.out_axes, self.axis_name = in_axes, out_axes, axis_name
        self.state_axes = state_axes
        if behavior == "vmap":
            self.map_fn = vmap2(fn, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name,
                                spmd_axis_name=spmd_axis_name,
                                state_in_axes=state_axes, state_out_axes=state_axes)
        else:
            self.map_fn = pmap2(fn, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                                state_in_axes=state_axes, state_out_axes=state_axes)

    def __call__(self, *args, **kwargs) -> Any:
        return self.map_fn(*args, **kwargs)


class Map(Module):
    """Run ``init_map_size`` copies of ``module`` as one (see the module docstring).

    Parameters
    ----------
    module : Module
        The module to copy. Its states are made by :meth:`init_all_states`.
    init_map_size : int
        The number of copies (lanes); with ``behavior='pmap'``, devices.
    init_state_axes : dict, optional
        ``{axis: filter}``: where the lane axis of each new state goes
        (default: axis 0 for every state; ``None`` as a key keeps the states
        it selects shared), as in :func:`~brainx.transform.vmap2_new_states`.
    state_tag : str, optional
        A tag added to every state :meth:`init_all_states` makes.
    in_axes, out_axes
        How :meth:`update`'s arguments and outputs are mapped, as in ``jax.vmap``.
    axis_name : hashable, optional
        The name of the lane axis, for collectives (``jax.lax.psum``, ...).
    spmd_axis_name : optional
        As in ``jax.vmap`` (``behavior='vmap'`` only).
    call_state_axes : dict, optional
        ``{axis: filter}``: more states mapped by :meth:`update` (states
        batched outside ``Map``); the states made by :meth:`init_all_states`
        are always mapped along their own axis.
    behavior : {'vmap', 'pmap'}
        ``'vmap'``: the lanes are one array axis on one device;
        ``'pmap'``: one lane per device.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> class Readout(brainx.nn.Module):
    ...     def init_state(self, n_in):
    ...         self.w = brainx.ParamState(brainx.random.randn(n_in))
    ...     def update(self, x):
    ...         return x @ self.w.value
    >>> ensemble = brainx.nn.Map(Readout(), init_map_size=4)
    >>> ensemble.init_all_states(n_in=3)       # four weight vectors, drawn apart
    >>> ensemble.module.w.value.shape
    (4, 3)
    >>> ensemble.update(jnp.ones((4, 3))).shape  # one input per copy
    (4,)
    """

    def __init__(self, module: Module, init_map_size: int,
                 init_state_axes: Optional[Dict[Any, Any]] = None,
                 state_tag: Optional[str] = None, in_axes: Any = 0, out_axes: Any = 0,
                 axis_name: Optional[Any] = None, spmd_axis_name: Optional[Any] = None,
                 call_state_axes: Optional[Dict[int, Any]] = None, behavior: str = "vmap"):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"Map copies a brainx.nn.Module, got {module!r}.")
        if (not isinstance(init_map_size, int) or isinstance(init_map_size, bool)
                or init_map_size < 1):
            raise ValueError(f"Map: init_map_size must be a positive int (the number of "
                             f"copies), got {init_map_size!r}.")
        if behavior not in _BEHAVIORS:
            raise ValueError(f"Map: behavior must be 'vmap' or 'pmap', got {behavior!r}.")
        if call_state_axes is not None and not isinstance(call_state_axes, dict):
            raise TypeError(f"Map: call_state_axes must be a dict {{axis: filter}}, got "
                            f"{call_state_axes!r}.")
        self.module = module
        self.init_map_size = init_map_size
        self.init_state_axes = init_state_axes
        self.state_tag = state_tag
        self.in_axes, self.out_axes = in_axes, out_axes
        self.axis_name, self.spmd_axis_name = axis_name, spmd_axis_name
        self.call_state_axes = call_state_axes
        self.behavior = behavior
        #: ``{axis: [states]}`` made by :meth:`init_all_states` (``None`` before).
        self.dict_vmap_states: Optional[Dict[Any, List[State]]] = None
        #: whether :meth:`init_all_states` made the copies
        self._init = False
        #: ``{axis: filter}`` :meth:`update` maps: the copies, and ``call_state_axes``
        self._call_state_axes: Optional[Dict[int, Any]] = None
        self._update: Optional[MapCaller] = None  # the mapped call, kept (its traces are cached)

    def __pretty_repr_item__(self, name: str, value: Any) -> Optional[Tuple[str, Any]]:
        """As :meth:`Module.__pretty_repr_item__ <brainx.nn.Module.__pretty_repr_item__>`,
        the bookkeeping (the copies made, the mapped call) left out."""
        if name in _REPR_HIDDEN:
            return None
        return super().__pretty_repr_item__(name, value)

    def init_all_states(self, **kwargs) -> None:
        """Make ``init_map_size`` copies of the module's states (its ``init_all_states(**kwargs)``).

        Random draws differ between copies. Calling it again makes new
        copies (the old ones are replaced).
        """
        if self.behavior not in _BEHAVIORS:
            raise ValueError(f"Map: behavior must be 'vmap' or 'pmap', got {self.behavior!r}.")
        make = vmap2_new_states if self.behavior == "vmap" else pmap2_new_states
        self.dict_vmap_states = make(self.module, kwargs, state_tag=self.state_tag,
                                     axis_size=self.init_map_size,
                                     state_out_axes=self.init_state_axes)
        self._call_state_axes = self._mapped_state_axes(self.call_state_axes)
        self._init = True
        self._update = None

    def _mapped_state_axes(self, extra: Optional[Dict[int, Any]]) -> Dict[int, Any]:
        """``{axis: filter}``: the states made here along their axis (a list of states is a
        filter), with ``extra``'s filters added (a tuple of filters selects what any does)."""
        axes: Dict[int, Any] = {axis: states for axis, states in self.dict_vmap_states.items()
                                if axis is not None}
        for axis, selects in (extra or {}).items():
            axes[axis] = (axes[axis], selects) if axis in axes else selects
        return axes

    def _require_copies(self, caller: str) -> None:
        if self.dict_vmap_states is None:
            raise ValueError(f"Map.{caller} called before Map.init_all_states: make the "
                             "copies of the module's states first "
                             "(map.init_all_states(**the module's init arguments)).")

    def _mapped(self, fn: Callable, in_axes: Any, out_axes: Any, axis_name: Any,
                state_axes: Dict[int, Any]) -> MapCaller:
        return MapCaller(fn, self.behavior, in_axes=in_axes, out_axes=out_axes,
                         axis_name=axis_name, state_axes=state_axes,
                         spmd_axis_name=self.spmd_axis_name if self.behavior == "vmap" else None)

    def update(self, *args, **kwargs) -> Any:
        """The module's call, once per copy: ``args`` mapped over ``in_axes``."""
        if self._update is None:
            self._require_copies("update")
            self._update = self._mapped(self.module, self.in_axes, self.out_axes,
                                        self.axis_name, self._call_state_axes)
        return self._update(*args, **kwargs)

    def map(self, fn: Any, in_axes: Any = 0, out_axes: Any = 0,
            axis_name: Optional[Any] = None,
            state_axes: Optional[Dict[int, Any]] = None) -> MapCaller:
        """Another method (its name, or any function) run once per copy.

        ``state_axes`` (``{axis: filter}``) maps more states; the copies made
        by :meth:`init_all_states` are always mapped along their axis.
        """
        if isinstance(fn, str):
            method = getattr(self.module, fn, None)
            if not callable(method):
                raise AttributeError(f"Map.map: {type(self.module).__name__} has no method "
                                     f"{fn!r}.")
            fn = method
        elif not callable(fn):
            raise TypeError(f"Map.map takes a method name or a callable, got {fn!r}.")
        self._require_copies("map")
        return self._mapped(fn, in_axes, out_axes, axis_name,
                            self._mapped_state_axes(state_axes))
