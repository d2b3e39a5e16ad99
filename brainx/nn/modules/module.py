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
import warnings
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence, Tuple


from brainx.mixin import ParamDesc
from brainx.nn.init import to_size
from brainx.pretty_repr.layout import PrettyAttr
from brainx.graph.node import Node
from brainx.graph.walk import MAX_INT, iter_node, walk_tree
from brainx.nn.modules.brainstate_objects import warn_real_brainstate_objects
from brainx.state.known_paths import remember_paths
from brainx.state.state import State
from brainx.state.trace import StateCatcher, catch_new_states
from brainx.util.filter import Filter, to_predicate
from brainx.util.mappings import FlattedDict, select
from brainx.util.path import DottedPath

__all__ = ["Module", "iter_tree", "walk_tree", "to_predicate", "call_order", "call_all_fns",
           "MAX_ORDER"]

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

    def init_all_states(self, *args, state_tag: Optional[str] = None, **kwargs) -> StateCatcher:
        """``init_state(*args, **kwargs)`` on this module and every module in it (children
        first, as :func:`brainx.nn.init_all_states`); returns the catcher of the states made.

        ``state_tag`` tags each new state (see :func:`brainx.catch_new_states`).

        Examples
        --------
        >>> import brainx
        >>> lif = brainx.nn.LIF(3)
        >>> made = lif.init_all_states(batch_size=2)
        >>> lif.V.value.shape, lif.V in made.get_states()
        ((2, 3), True)
        """
        with catch_new_states(state_tag=state_tag) as catcher:
            call_all_fns(self, "init_state", args, kwargs)
        return catcher

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
        found = [(p, x) for p, x in walk_tree(self, allowed_hierarchy=allowed_hierarchy)
                 if isinstance(x, State)]
        remember_paths(self, found)   # so that an error about a state can name its path
        return _collect(found, State, filters)

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


# -- calling a method on every module (init_all_states, reset_all_states) ------------------
MAX_ORDER = 10


def call_order(level: int = 0, check_order_boundary: bool = True) -> Callable[[Callable], Callable]:
    """Mark a method to run late in :func:`call_all_fns` (and init/reset): lower ``level`` first.

    Unmarked methods run first (children before parents), then the marked
    ones sorted by ``level`` (``0 <= level < MAX_ORDER``).

    Examples
    --------
    >>> import brainx
    >>> log = []
    >>> class A(brainx.nn.Module):
    ...     @brainx.nn.call_order(1)
    ...     def init_state(self):
    ...         log.append("A")
    >>> class B(brainx.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.a = A()
    ...     def init_state(self):
    ...         log.append("B")
    >>> _ = brainx.nn.init_all_states(B())
    >>> log
    ['B', 'A']
    """
    if check_order_boundary and not 0 <= level < MAX_ORDER:
        raise ValueError(f"call_order: level must be an int in [0, {MAX_ORDER}), got {level}.")

    def mark(fun: Callable) -> Callable:
        fun.call_order = level
        return fun

    return mark


_CALLERS = {"init_state": "init_all_states", "reset_state": "reset_all_states"}


def _modules(target: Any, exclude=None) -> List[Tuple[str, Module]]:
    skip = to_predicate(exclude) if exclude is not None else (lambda path, m: False)
    # Children before parents: a parent's init_state may read its children's states.
    return [(".".join(path), m) for path, m in iter_tree(target, order="post")
            if isinstance(m, Module) and not skip(path, m)]


def call_all_fns(target: Any, fn_name: str, args: Sequence[Any] | Any = (),
                 kwargs: Optional[Mapping[str, Any]] = None, node_to_exclude: Any = None,
                 fn_if_not_exist: str = "raise") -> Any:
    """Call ``module.<fn_name>(*args, **kwargs)`` on every module of ``target``.

    Parameters
    ----------
    target : Module, or a list/tuple/dict of modules
    fn_name : str
        The method to call.
    args, kwargs
        Its arguments (a single non-tuple ``args`` is one argument).
    node_to_exclude : filter, optional
        Modules to skip (a type, a path glob, a predicate; see ``Module.states``).
    fn_if_not_exist : {"raise", "pass", "none", "warn"}
        What to do with a module that lacks the method.
    """
    if not isinstance(fn_name, str):
        raise TypeError(f"call_all_fns: fn_name must be a string, got {fn_name!r}.")
    if fn_if_not_exist not in ("raise", "pass", "none", "warn"):
        raise ValueError("call_all_fns: fn_if_not_exist must be 'raise', 'pass', 'none' or "
                         f"'warn', got {fn_if_not_exist!r}.")
    args = args if isinstance(args, tuple) else (args,)
    kwargs = dict(kwargs or {})
    warn_real_brainstate_objects(target, _CALLERS.get(fn_name, f"call_all_fns({fn_name!r})"))
    ordered = []
    for path, module in _modules(target, node_to_exclude):
        fun = getattr(module, fn_name, None)
        if fun is None:
            message = f"Module {type(module).__name__} at {path or '<root>'!r} has no {fn_name}()."
            if fn_if_not_exist == "raise":
                raise AttributeError(message + " Pass fn_if_not_exist='pass' to skip it.")
            if fn_if_not_exist == "warn":
                warnings.warn(message + " Skipped.", UserWarning, stacklevel=2)
            continue
        if hasattr(fun, "call_order"):
            ordered.append(fun)
        else:
            fun(*args, **kwargs)
    for fun in sorted(ordered, key=lambda f: f.call_order):
        fun(*args, **kwargs)
    remember_paths(target, ((p, x) for p, x in walk_tree(target) if isinstance(x, State)))
    return target
