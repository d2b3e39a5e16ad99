"""`Module`: the base class of models, and how states are found in a module tree.

A module keeps its states and submodules as ordinary attributes, directly or
inside lists, tuples and dicts. :meth:`Module.states` walks that tree and
returns the states in a :class:`~brainx.util.FlattedDict`, in
attribute-definition order, each state once (under the first path that
reaches it). Its keys are path tuples, as in brainstate
(``("blocks", 0, "w")``: attribute names, list indices, dict keys), that
print and compare as dotted strings (``"blocks.0.w"``); index it by either.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Sequence, Tuple


from brainx.mixin import ParamDesc
from brainx.nn.init import to_size
from brainx.pretty_repr.layout import PrettyAttr
from brainx.graph.node import Node
from brainx.graph.walk import MAX_INT, iter_node, walk_tree
from brainx.state.state import State
from brainx.util.filter import Filter, to_predicate
from brainx.util.mappings import FlattedDict, select
from brainx.util.path import DottedPath

__all__ = ["Module", "iter_tree", "walk_tree", "to_predicate"]

Path = Tuple[Any, ...]
MAX_DEPTH = MAX_INT


class Module(Node, ParamDesc):
    """Base class for models: owns states and submodules, and steps with :meth:`update`.

    Subclasses create parameters (``ParamState``) in ``__init__`` and dynamical
    variables (``HiddenState``) in :meth:`init_state`; :meth:`reset_state`
    puts new initial values into those *existing* states, so a jitted step
    that reads them keeps its compiled function.

    A module is a :class:`~brainx.mixin.ParamDesc`: ``Layer.desc(...)``
    describes a layer without building it (a
    :class:`~brainx.mixin.ParamDescriber`).

    Parameters
    ----------
    name : str, optional
        A label for ``repr``.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> class Cell(brainx.nn.Module):
    ...     def __init__(self, n):
    ...         super().__init__()
    ...         self.w = brainx.ParamState(jnp.ones(n))
    ...     def init_state(self, batch_size=None):
    ...         self.h = brainx.HiddenState(jnp.zeros(n_shape(batch_size, 3)))
    ...     def update(self, x):
    ...         self.h.value = self.h.value * 0.5 + self.w.value * x
    ...         return self.h.value
    >>> def n_shape(batch, n):
    ...     return (n,) if batch is None else (batch, n)
    >>> class Net(brainx.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.cells = [Cell(3), Cell(3)]
    >>> net = brainx.nn.init_all_states(Net())
    >>> list(net.states())
    ['cells.0.w', 'cells.0.h', 'cells.1.w', 'cells.1.h']
    >>> list(net.states(brainx.HiddenState))
    ['cells.0.h', 'cells.1.h']
    """

    def __init__(self, name: Optional[str] = None):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a string, got {name!r}.")
        self._name = name

    @property
    def name(self) -> Optional[str]:
        return getattr(self, "_name", None)

    # -- sizes (as brainstate) -------------------------------------------------
    @property
    def in_size(self) -> Optional[Tuple[int, ...]]:
        return getattr(self, "_in_size", None)

    @in_size.setter
    def in_size(self, size) -> None:
        self._in_size = to_size(size)

    @property
    def out_size(self) -> Optional[Tuple[int, ...]]:
        return getattr(self, "_out_size", None)

    @out_size.setter
    def out_size(self, size) -> None:
        self._out_size = to_size(size)

    # -- the step ----------------------------------------------------------------
    def update(self, *args, **kwargs):
        """One step of the model. Subclasses implement it; ``module(...)`` calls it."""
        raise NotImplementedError(f"{type(self).__name__} must implement update().")

    def __call__(self, *args, **kwargs):
        return self.update(*args, **kwargs)

    #: NumPy arrays defer ``x >> module`` to :meth:`__rrshift__` instead of broadcasting over it.
    __array_ufunc__ = None

    def __rrshift__(self, other: Any) -> Any:
        """``x >> module`` is ``module(x)``, so ``x >> rnn >> readout`` chains calls (brainstate's)."""
        return self(other)

    # -- state hooks ---------------------------------------------------------------
    def init_state(self, *args, **kwargs) -> None:
        """Create this module's own states (not its children's). Default: nothing."""

    def reset_state(self, *args, **kwargs) -> None:
        """Assign initial values to this module's existing states. Default: nothing."""

    # -- collection -------------------------------------------------------------------
    def states(self, *filters: Filter,
               allowed_hierarchy: Tuple[int, int] = (0, MAX_DEPTH)
               ) -> FlattedDict | Tuple[FlattedDict, ...]:
        """The states of this module tree, keyed by path.

        Parameters
        ----------
        *filters
            Each filter is a ``State`` subclass (``ParamState``), a string (a
            tag, or a glob on the dotted path: ``"*.V"``, ``"layer1.*"``), a
            predicate ``f(path_tuple, state) -> bool``, ``...`` (everything),
            a filter of :mod:`brainx.util.filter`, or a tuple of these (any of
            them). No filter: every state. One filter: the matching states.
            Several: a tuple of mappings that partitions the states, each going
            to the first filter it matches (``params, rest = net.states(ParamState, ...)``).
        allowed_hierarchy : (int, int)
            Only states held by modules at these depths (this module: 0, its
            submodules: 1, ...), both ends included.

        Returns
        -------
        FlattedDict or tuple of FlattedDict
            Keyed by :class:`~brainx.util.DottedPath`: a path tuple
            (``("blocks", 0, "w")``) that prints and compares as ``"blocks.0.w"``.
        """
        return _collect(walk_tree(self, allowed_hierarchy=allowed_hierarchy), State, filters)

    def nodes(self, *filters: Filter,
              allowed_hierarchy: Tuple[int, int] = (0, MAX_DEPTH)
              ) -> FlattedDict | Tuple[FlattedDict, ...]:
        """The graph nodes of the tree, keyed by path, as :func:`brainx.graph.nodes`.

        This module is included (path ``()``, depth 0: ``allowed_hierarchy=(1, ...)``
        leaves it out), and so is every :class:`~brainx.graph.Node` below it, a
        module or not (brainstate 0.5.4's ``Module.nodes``). Filters as in
        :meth:`states`.
        """
        found = iter_node(self, allowed_hierarchy=allowed_hierarchy)
        return select([(DottedPath(p), x) for p, x in found], tuple(filters))

    # -- parameters (brainx.nn.Param) ---------------------------------------------
    _is_param = False       # brainx.nn.Param sets it; module.py cannot import param.py

    def named_param_modules(self, allowed_hierarchy: Tuple[int, int] = (0, MAX_DEPTH)
                            ) -> Iterator[Tuple[str, Any]]:
        """``(dotted path, Param)`` for every :class:`~brainx.nn.Param` (and ``Const``) in the tree.

        ``allowed_hierarchy`` as in :meth:`states` (this module: depth 0,
        its attributes: 1, ...); this module itself is included when it is a Param.
        """
        for path, obj in walk_tree(self, allowed_hierarchy=allowed_hierarchy):
            if isinstance(obj, Module) and obj._is_param:
                yield str(DottedPath(path)), obj

    def param_modules(self, allowed_hierarchy: Tuple[int, int] = (0, MAX_DEPTH)) -> Iterator[Any]:
        """Every :class:`~brainx.nn.Param` in the tree (see :meth:`named_param_modules`).

        Examples
        --------
        >>> import jax.numpy as jnp, brainx
        >>> from brainx import nn
        >>> class Net(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = nn.Param(jnp.array([3.0, -4.0]), reg=nn.L2Reg(0.1))
        ...         self.b = nn.Const(jnp.zeros(2))
        >>> net = Net()
        >>> [type(p).__name__ for p in net.param_modules()]
        ['Param', 'Const']
        >>> float(net.reg_loss())               # 0.1 * (9 + 16); a Const adds nothing
        2.5
        """
        for _, param in self.named_param_modules(allowed_hierarchy):
            yield param

    def reg_loss(self) -> Any:
        """The sum of ``reg_loss()`` over every Param in the tree (``0.0`` without any)."""
        losses = [p.reg_loss() for p in self.param_modules()]
        return sum(losses) if losses else 0.0

    @contextlib.contextmanager
    def param_precompute(self, allowed_hierarchy: Tuple[int, int] = (0, MAX_DEPTH)):
        """Within the block, each Param computes ``t.forward`` once (``Param.cache``); the
        caches are cleared on exit, also after an exception. Enter it inside the compiled
        or differentiated function to save the repeated forward maps of a loop."""
        params = list(self.param_modules(allowed_hierarchy))
        try:
            for p in params:
                p.cache()
            yield
        finally:
            for p in params:
                p.clear_cache()

    def __pretty_repr_item__(self, name: str, value: Any) -> Optional[Tuple[str, Any]]:
        """As :meth:`Node.__pretty_repr_item__ <brainx.graph.Node.__pretty_repr_item__>`
        (``None`` values and invisible attributes left out), a private attribute shown by
        its public name (``_in_size`` as ``in_size``).

        Examples
        --------
        >>> import brainx
        >>> m = brainx.nn.Module(name="enc")
        >>> m.__pretty_repr_item__("_name", "enc"), m
        (('name', 'enc'), Module(name='enc'))
        """
        item = super().__pretty_repr_item__(name, value)
        if item is None:
            return None
        name, value = item
        return (name[1:] if name.startswith("_") else name), value

    def __pretty_repr__(self) -> Iterator[Any]:
        """The node's items, with ``in_size`` and ``out_size`` (when both are shown) as
        one leading ``in_size -> out_size`` item: ``Linear((3,) -> (4,), weight=...)``."""
        items = list(super().__pretty_repr__())
        sizes = {it.key: it for it in items[1:]
                 if isinstance(it, PrettyAttr) and it.key in ("in_size", "out_size")}
        if len(sizes) == 2:
            shape = PrettyAttr("", f"{sizes['in_size'].value!r} -> {sizes['out_size'].value!r}")
            items = [items[0], shape] + [it for it in items[1:] if it.key not in sizes]
        return iter(items)


def _collect(found, kind: type, filters: Sequence[Filter]):
    """The ``kind`` objects of ``found``, keyed by DottedPath, selected by ``filters``."""
    return select([(DottedPath(p), x) for p, x in found if isinstance(x, kind)], tuple(filters))


def iter_tree(root: Any, order: str = "pre") -> Iterator[Tuple[Tuple[str, ...], Any]]:
    """As :func:`walk_tree`, with every part of a path as a string (``("blocks", "0", "w")``)."""
    for path, obj in walk_tree(root, order):
        yield tuple(map(str, path)), obj
