"""`Module`: the base class of models, and how states are found in a module tree.

A module keeps its states and submodules as ordinary attributes, directly or
inside lists, tuples and dicts. :meth:`Module.states` walks that tree and
returns the states keyed by dotted paths (``"layer1.lif.V"``, ``"blocks.0.w"``,
``"heads.left.bias"``), in attribute-definition order, each state once (under
the first path that reaches it).
"""

from __future__ import annotations

import fnmatch
from types import EllipsisType
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple, Union

from brainx.nn.describe import ParamDescriber
from brainx.nn.init import to_size
from brainx.state.state import State, structure_changed

__all__ = ["Module", "iter_tree", "to_predicate"]

Path = Tuple[str, ...]
Filter = Union[type, str, Callable[[Path, Any], bool], tuple, list, EllipsisType, bool]


_ABSENT = object()


def _holds_states(value: Any) -> bool:
    """A State, a Module, or a list/tuple/dict with one among its items (not deeper)."""
    if isinstance(value, (State, Module)):
        return True
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple)):
        return False
    return any(isinstance(v, (State, Module)) for v in value)


class Module:
    """Base class for models: owns states and submodules, and steps with :meth:`update`.

    Subclasses create parameters (``ParamState``) in ``__init__`` and dynamical
    variables (``HiddenState``) in :meth:`init_state`; :meth:`reset_state`
    puts new initial values into those *existing* states, so a jitted step
    that reads them keeps its compiled function.

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

    # -- structure changes ------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        # Rebinding an attribute that holds states (or a submodule) changes which
        # states a compiled function reaches: tell `transform.jit` to look again.
        old = self.__dict__.get(name, _ABSENT)
        if old is not _ABSENT and old is not value and (_holds_states(old)
                                                        or _holds_states(value)):
            structure_changed()
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if _holds_states(self.__dict__.get(name)):
            structure_changed()
        object.__delattr__(self, name)

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

    @classmethod
    def desc(cls, *args, **kwargs) -> ParamDescriber:
        """Describe a layer without building it: ``Linear.desc(out_size=10)`` (see :class:`ParamDescriber`)."""
        return ParamDescriber(cls, *args, **kwargs)

    # -- state hooks ---------------------------------------------------------------
    def init_state(self, *args, **kwargs) -> None:
        """Create this module's own states (not its children's). Default: nothing."""

    def reset_state(self, *args, **kwargs) -> None:
        """Assign initial values to this module's existing states. Default: nothing."""

    # -- collection -------------------------------------------------------------------
    def states(self, *filters: Filter) -> Dict[str, State] | Tuple[Dict[str, State], ...]:
        """The states of this module tree, keyed by dotted path.

        Parameters
        ----------
        *filters
            Each filter is a ``State`` subclass (``ParamState``), a glob on
            the dotted path (``"*.V"``, ``"layer1.*"``), a predicate
            ``f(path_tuple, state) -> bool``, ``...`` (everything), or a tuple
            of these (any of them). No filter: one dict with every state. One
            filter: the matching states. Several: a tuple of dicts that
            partitions the states, each going to the first filter it matches
            (``params, rest = net.states(ParamState, ...)``).
        """
        return _collect([(p, x) for p, x in iter_tree(self) if isinstance(x, State)], filters)

    def nodes(self, *filters: Filter) -> Dict[str, "Module"] | Tuple[Dict[str, "Module"], ...]:
        """The submodules (not this one), keyed by dotted path; filters as in :meth:`states`."""
        return _collect([(p, x) for p, x in iter_tree(self) if isinstance(x, Module) and p],
                        filters)

    def __repr__(self) -> str:
        fields = []
        if self.name is not None:
            fields.append(f"name={self.name!r}")
        if self.in_size is not None:
            fields.append(f"in_size={self.in_size}")
        if self.out_size is not None and self.out_size != self.in_size:
            fields.append(f"out_size={self.out_size}")
        return f"{type(self).__name__}({', '.join(fields)})"


def _collect(found: Sequence[Tuple[Path, Any]], filters: Sequence[Filter]):
    """``{dotted path: obj}``, or one such dict per filter (each object to its first match)."""
    if not filters:
        return {".".join(path): obj for path, obj in found}
    predicates = [to_predicate(f) for f in filters]
    groups: list = [{} for _ in predicates]
    for path, obj in found:
        for group, pred in zip(groups, predicates):
            if pred(path, obj):
                group[".".join(path)] = obj
                break
    return groups[0] if len(groups) == 1 else tuple(groups)


def _children(obj: Any) -> Iterator[Tuple[str, Any]]:
    if isinstance(obj, Module):
        yield from vars(obj).items()
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield str(k), v
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield str(i), v


def iter_tree(root: Any, order: str = "pre") -> Iterator[Tuple[Path, Any]]:
    """Every module and state reachable from ``root``, each once, with its path.

    ``order="pre"`` yields a module before its contents, ``"post"`` after
    (children initialise before their parent). Containers (list, tuple, dict)
    are walked but not yielded.
    """
    seen: set = set()

    def walk(obj: Any, path: Path):
        if isinstance(obj, State):
            if id(obj) not in seen:
                seen.add(id(obj))
                yield path, obj
            return
        is_module = isinstance(obj, Module)
        if is_module or isinstance(obj, (dict, list, tuple)):
            if id(obj) in seen:
                return
            seen.add(id(obj))
            if is_module and order == "pre":
                yield path, obj
            for name, child in _children(obj):
                yield from walk(child, path + (name,))
            if is_module and order == "post":
                yield path, obj

    if order not in ("pre", "post"):
        raise ValueError(f"order must be 'pre' or 'post', got {order!r}.")
    yield from walk(root, ())


def to_predicate(f: Filter) -> Callable[[Path, Any], bool]:
    """A filter (see :meth:`Module.states`) as a predicate ``(path_tuple, obj) -> bool``."""
    if f is ... or f is True:
        return lambda path, x: True
    if f is False or f is None:
        return lambda path, x: False
    if isinstance(f, type):
        return lambda path, x: isinstance(x, f)
    if isinstance(f, str):
        return lambda path, x: fnmatch.fnmatchcase(".".join(path), f)
    if isinstance(f, (tuple, list)):
        preds = [to_predicate(g) for g in f]
        return lambda path, x: any(p(path, x) for p in preds)
    if callable(f):
        return f
    raise TypeError(f"Unsupported filter {f!r}: use a State type, a path glob string, a "
                    "predicate f(path, state), ..., or a tuple of these.")
