"""The structure of an object and its states: what lets instances share one compiled method.

A ``@transform.jit`` method traces and compiles per instance: the trace bakes
in the instance's Python values (a float ``tau``, a connectivity array kept
as a plain attribute) and reads the instance's own states. Two instances whose
*graph definition* is equal would give the same jaxpr with their states in
the same places, so the second can run the first one's compiled function on
its own states, with no trace and no compilation (flax.nnx shares by its
graph definition the same way).

:func:`graph_definition` walks an object's attributes (Modules, plain objects,
lists, tuples, dicts) and returns

* a hashable key: every node's type and attribute names, every State's type,
  tree structure and leaf types, and every other value: Python scalars and
  strings by value, arrays by shape, dtype and content, functions and other
  objects by identity (so per-instance lambdas never match: safe, not shared);
* the states found, by path.

Anything the walk cannot describe safely (an object it does not know how to
compare, a graph too large) gives ``None``: the instance is not shared.
"""

from __future__ import annotations

import hashlib
import types
from typing import Any, Dict, Hashable, List, Optional, Tuple

import jax
import numpy as np

from brainx.state.state import State
from brainx.state.values import dtype_name

__all__ = ["graph_definition", "GraphDefinition"]

_MAX_NODES = 20_000
_SCALARS = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis))


class _Unshareable(Exception):
    pass


class GraphDefinition:
    """``key`` (hashable) and ``states`` (path -> State) of an object graph."""

    __slots__ = ("key", "states")

    def __init__(self, key: Hashable, states: Dict[Tuple, State]):
        self.key = key
        self.states = states


def graph_definition(obj: Any) -> Optional[GraphDefinition]:
    """The graph definition of ``obj`` and its states by path (``None``: not shareable).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.transform.graphdef import graph_definition
    >>> class Cell(brainx.nn.Module):
    ...     def __init__(self, tau):
    ...         super().__init__()
    ...         self.tau = tau
    ...         self.v = brainx.HiddenState(jnp.zeros(3))
    >>> a, b, c = graph_definition(Cell(10.0)), graph_definition(Cell(10.0)), graph_definition(Cell(5.0))
    >>> a.key == b.key, a.key == c.key, list(a.states)
    (True, False, [('v',)])
    """
    walker = _Walker()
    try:
        key = walker.node(obj, ())
    except (_Unshareable, RecursionError):
        return None
    return GraphDefinition(key, walker.states)


class _Walker:
    def __init__(self):
        self.seen: Dict[int, Tuple] = {}  # id -> path where first met (shared references)
        self.keep: List[Any] = []  # objects referenced by identity: keep them alive with the key
        self.states: Dict[Tuple, State] = {}
        self.count = 0

    def node(self, x: Any, path: Tuple) -> Hashable:
        self.count += 1
        if self.count > _MAX_NODES:
            raise _Unshareable
        if isinstance(x, _SCALARS):
            return (type(x), x)
        if id(x) in self.seen:
            return ("ref", self.seen[id(x)])
        if isinstance(x, State):
            self.seen[id(x)] = path
            self.states[path] = x
            return ("state", type(x), _value_type(x._value))
        if isinstance(x, (jax.Array, np.ndarray, np.generic)):
            return _array_key(x)
        if isinstance(x, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type,
                          types.ModuleType)) or isinstance(x, (np.dtype, jax.ShapeDtypeStruct)):
            self.keep.append(x)
            return ("object", x)
        self.seen[id(x)] = path
        if isinstance(x, (list, tuple)):
            return (type(x), tuple(self.node(v, path + (i,)) for i, v in enumerate(x)))
        if isinstance(x, dict):
            items = []
            for k, v in x.items():
                if not isinstance(k, _SCALARS):
                    raise _Unshareable
                items.append((k, self.node(v, path + (k,))))
            return (dict, tuple(items))
        attrs = _attributes(x)
        if attrs is None:
            raise _Unshareable
        return (type(x), tuple((k, self.node(v, path + (k,))) for k, v in attrs
                               if not k.startswith("__brainx")))


def _attributes(x: Any) -> Optional[List[Tuple[str, Any]]]:
    """An object's attributes, from ``__dict__`` and ``__slots__`` (``None``: neither)."""
    found: List[Tuple[str, Any]] = []
    d = getattr(x, "__dict__", None)
    if isinstance(d, dict):
        found += sorted(d.items(), key=lambda kv: kv[0])
    slots = [s for cls in type(x).__mro__ for s in getattr(cls, "__slots__", ())]
    if isinstance(slots, str):  # pragma: no cover - __slots__ = "name"
        slots = [slots]
    for name in slots:
        if name in ("__dict__", "__weakref__"):
            continue
        if hasattr(x, name):
            found.append((name, getattr(x, name)))
    if d is None and not slots:
        return None
    return found


def _value_type(value: Any) -> Hashable:
    leaves, treedef = jax.tree.flatten(value)
    return (treedef, tuple(_leaf_type(v) for v in leaves))


def _leaf_type(x: Any) -> Hashable:
    if isinstance(x, _SCALARS):
        return (type(x),)
    shape, dtype = np.shape(x), getattr(x, "dtype", None)
    if dtype is None:
        raise _Unshareable
    return (tuple(shape), dtype_name(dtype), bool(getattr(x, "weak_type", False)))


def _array_key(x: Any) -> Hashable:
    if isinstance(x, jax.core.Tracer):
        raise _Unshareable
    data = np.asarray(x)
    digest = hashlib.blake2b(np.ascontiguousarray(data).tobytes(), digest_size=16).hexdigest()
    return ("array", data.shape, data.dtype.name, bool(getattr(x, "weak_type", False)), digest)
