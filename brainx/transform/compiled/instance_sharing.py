"""The structure of an object and its states: what lets instances share one compiled method.

A ``@transform.jit`` method traces and compiles per instance: the trace bakes
in the instance's Python values (a float ``tau``, a connectivity array kept
as a plain attribute) and reads the instance's own states. Two instances whose
*graph definition* is equal give the same jaxpr with their states in the same
places, so the second can run the first one's compiled function on its own
states, with no trace and no compilation (flax.nnx shares by its graph
definition the same way).

Sharing is an optimisation, so the key is built from an allow-list: only
values whose equality the key captures completely are compared by value.

======================================  =========================================
value                                   in the key
======================================  =========================================
``bool``, ``int``, ``str``, ``bytes``,  type and value
``None``, ``...``
``float``, ``complex``                  type and bits (``0.0`` and ``-0.0``
                                        differ, NaN payloads too)
``list``, ``tuple``, ``dict``           type and items, in order (dict keys must
(exactly), named tuples                 be scalars)
NumPy / JAX arrays                      shape, dtype, weak type, sharding and
                                        content
brainunit ``Quantity`` / ``Unit``       unit and content
``brainx.graph.Node`` (a Module)        type, attributes, and the attributes
                                        of its class (data by value, methods
                                        and other objects by identity)
``State``                               type, name, metadata and value type
                                        (non-array leaves by value)
objects whose class sets               type and attributes
``_share_by_attributes = True``
(brainx's surrogates, initialisers)
registered pytrees (a brainevent        tree structure and leaves
connectivity)
``functools.partial``,                  function, bound arguments
``jax.tree_util.Partial``
functions                               code, globals, defaults and closure
                                        values
bound methods                           function and ``self``
anything else                           identity (shared only if both instances
                                        hold the very same object)
======================================  =========================================

A subclass of ``float`` or ``dict`` with attributes of its own, a
``defaultdict``, an object of any other class: by identity, so per-instance
objects are never taken for equal. A value reached by identity (or through
the class) is frozen at the first trace, as a closure is under ``jax.jit``:
changed in place, it is not seen. The key holds such objects weakly where
they allow it (see :class:`_Identity`), so a cache keyed by it keeps no
instance alive. What the key cannot see at all (a value kept outside the
instance, in a ``WeakKeyDictionary`` keyed by it) is why sharing can be
turned off (``transform.jit(share_instances=False)``, or
``__brainx_share_jit__ = False`` on a class).

States with hooks, tracers, and graphs too large to walk give ``None``: the
instance is traced on its own. The walk also notes the states that something
outside the instance refers to (a module-level variable, a registry): a trace
that touched one of those through the instance cannot tell whether it reached
it through the instance or from outside, so it is never shared
(:attr:`GraphDefinition.referenced_outside`).
"""

from __future__ import annotations

import functools
import hashlib
import struct
import sys
import types
import weakref
from typing import Any, Dict, FrozenSet, Hashable, List, Optional, Tuple

import jax
import numpy as np

from brainx.graph.node import Node
from brainx.state.hook_manager import hooks_active
from brainx.state.weak_refs import only_brainx_refs
from brainx.state.state import State
from brainx.dtype_names import dtype_name

__all__ = ["graph_definition", "GraphDefinition"]

_MAX_NODES = 20_000
_BY_VALUE = (bool, int, str, bytes, type(None), type(Ellipsis))
_SCALARS = frozenset(_BY_VALUE + (float, complex))
_PARTIALS = (functools.partial, jax.tree_util.Partial)
# State attributes that say where and when it was made, not what it computes with.
_STATE_BOOKKEEPING = frozenset({"_level", "_source", "_value", "name"})

try:  # brainunit is a dependency, but the key must not fail without it
    from brainunit import Quantity as _Quantity, Unit as _Unit
except ImportError:  # pragma: no cover
    _Quantity = _Unit = ()


class _Unshareable(Exception):
    pass


class _Identity:
    """A key item equal only to the same object, while that object is alive.

    It holds the object weakly where the object allows it, so a key kept in a
    cache (a shared method's templates) does not keep a user's object (or the
    instance it refers to) alive; once the object is gone the item equals
    nothing, so an object later made at the same address is not taken for
    it. An object that cannot be weakly referenced (a ``dict``, a ``list``)
    is held strongly.

    Examples
    --------
    >>> from brainx.transform.compiled.instance_sharing import _Identity
    >>> class Thing:
    ...     pass
    >>> a = Thing()
    >>> _Identity(a) == _Identity(a), _Identity(a) == _Identity(Thing())
    (True, False)
    """

    __slots__ = ("_ref", "_hash")

    def __init__(self, obj: Any):
        self._hash = id(obj)
        try:
            self._ref = weakref.ref(obj)
        except TypeError:  # not weakly referenceable: held, so its id is not reused
            self._ref = _Strong(obj)

    @property
    def obj(self) -> Any:
        """The object (``None`` once it was garbage collected)."""
        return self._ref()

    def __eq__(self, other: Any) -> bool:
        if type(other) is not _Identity or other._hash != self._hash:
            return False
        obj = self._ref()
        return obj is not None and other._ref() is obj

    def __hash__(self) -> int:
        return self._hash


class _Strong:
    """A strong reference called like a weak one."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __call__(self) -> Any:
        return self.obj


class GraphDefinition:
    """An object graph's sharing key and states.

    ``key`` is hashable; ``states`` maps each path to the State found there;
    ``referenced_outside`` holds the paths of the states something outside
    the graph also refers to.
    """

    __slots__ = ("key", "states", "referenced_outside")

    def __init__(self, key: Hashable, states: Dict[Tuple, State],
                 referenced_outside: FrozenSet[Tuple] = frozenset()):
        self.key = key
        self.states = states
        self.referenced_outside = referenced_outside


def graph_definition(obj: Any) -> Optional[GraphDefinition]:
    """The graph definition of ``obj`` and its states by path (``None``: not shareable).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.transform.compiled.instance_sharing import graph_definition
    >>> class Cell(brainx.nn.Module):
    ...     def __init__(self, tau):
    ...         super().__init__()
    ...         self.tau = tau
    ...         self.v = brainx.HiddenState(jnp.zeros(3))
    >>> a, b, c = graph_definition(Cell(10.0)), graph_definition(Cell(10.0)), graph_definition(Cell(5.0))
    >>> a.key == b.key, a.key == c.key, list(a.states)
    (True, False, [('v',)])
    """
    if hooks_active():  # a hook runs inside the trace: what it does is not in the key
        return None
    walker = _Walker()
    try:
        key = walker.node(obj, ())
    except (_Unshareable, RecursionError):
        return None
    return GraphDefinition(key, walker.states, walker.referenced_outside())


class _Walker:
    def __init__(self):
        self.seen: Dict[int, Tuple] = {}  # id -> path where first met (shared references)
        self.states: Dict[Tuple, State] = {}
        self.met: Dict[int, int] = {}  # id(state) -> how many references to it the graph holds
        self.class_keys: Dict[type, Hashable] = {}
        self.count = 0

    def node(self, x: Any, path: Tuple) -> Hashable:
        self.count += 1
        if self.count > _MAX_NODES:
            raise _Unshareable
        t = type(x)
        if t in _SCALARS:
            return _scalar_key(x)
        if id(x) in self.seen:
            if isinstance(x, State):
                self.met[id(x)] += 1
            return ("ref", self.seen[id(x)])
        if isinstance(x, jax.core.Tracer):
            raise _Unshareable
        if isinstance(x, State):
            self.seen[id(x)] = path
            self.states[path] = x
            self.met[id(x)] = 1
            return self._state(x, path)
        if t is np.ndarray or isinstance(x, (jax.Array, np.generic)):
            return _array_key(x)
        if _Quantity and t is _Quantity:
            return ("quantity", x.unit, _array_key(x.mantissa))
        if _Unit and t is _Unit:
            return ("unit", x)
        if t is np.dtype:
            return ("dtype", x)
        if (t is set or t is frozenset) and all(type(e) in _BY_VALUE for e in x):
            # (by type and value: {1} and {True} differ)
            return (t, frozenset((type(e), e) for e in x))
        self.seen[id(x)] = path
        if t is list or t is tuple:
            return (t, tuple(self.node(v, path + (i,)) for i, v in enumerate(x)))
        if _is_namedtuple(x):
            return (_Identity(t), tuple(self.node(v, path + (f,)) for f, v in zip(t._fields, x)))
        if t is dict:
            if not all(type(k) in _BY_VALUE for k in x):
                return ("id", _Identity(x))
            return (dict, tuple(((type(k), k), self.node(v, path + (k,)))  # True is not 1
                                for k, v in x.items()))
        if isinstance(x, Node):
            return ("node", _Identity(t), self._class_key(t),
                    tuple((k, self.node(v, path + (k,))) for k, v in _attributes(x)))
        if t in _PARTIALS:
            return ("partial", _Identity(t), self.node(x.func, path + ("func",)),
                    self.node(x.args, path + ("args",)), self.node(x.keywords, path + ("keywords",)))
        if t is types.FunctionType:
            return self._function(x, path)
        if t is types.MethodType:
            return ("method", self.node(x.__func__, path + ("__func__",)),
                    self.node(x.__self__, path + ("__self__",)))
        if getattr(t, "_share_by_attributes", False):
            return ("value", _Identity(t), self._class_key(t),
                    tuple((k, self.node(v, path + (k,))) for k, v in _attributes(x)))
        return self._pytree(x, path)

    def _pytree(self, x: Any, path: Tuple) -> Hashable:
        """A registered pytree node by type, metadata and children; anything else by identity."""
        children, treedef = jax.tree_util.tree_flatten(x, is_leaf=lambda y: y is not x)
        if treedef.num_nodes == 1 and len(children) == 1 and children[0] is x:
            return ("id", _Identity(x))
        node_type, aux = treedef.node_data()
        return ("pytree", _Identity(node_type), self.node(aux, path + ("<aux>",)),
                tuple(self.node(v, path + (i,)) for i, v in enumerate(children)))

    def _state(self, s: State, path: Tuple) -> Hashable:
        metadata = tuple((k, self.node(v, path + ("<metadata>", k)))
                         for k, v in vars(s).items()
                         if k not in _STATE_BOOKKEEPING and not k.startswith("__brainx"))
        return ("state", _Identity(type(s)), self.node(s.name, path + ("<name>",)), metadata,
                _value_type(s._value))

    def _function(self, f: types.FunctionType, path: Tuple) -> Hashable:
        cells = ()
        if f.__closure__:
            cells = tuple(self.node(_cell_contents(c), path + ("<closure>", i))
                          for i, c in enumerate(f.__closure__))
        return ("function", _Identity(f.__code__), _Identity(f.__globals__),
                self.node(f.__defaults__, path + ("<defaults>",)),
                self.node(f.__kwdefaults__, path + ("<kwdefaults>",)), cells,
                self.node(dict(vars(f)), path + ("<dict>",)))

    def _class_key(self, cls: type) -> Hashable:
        """The attributes of ``cls`` and its bases (changed before a trace: another key).

        Scalars by value; methods, properties, nested classes and other
        objects by identity, so a method or class attribute rebound on the
        class (``Cell.helper = other``) between two instances' first calls
        is seen. Dunder names (``__init__``, ``__doc__``) are left out.
        """
        key = self.class_keys.get(cls)
        if key is None:
            items = []
            for base in cls.__mro__[:-1]:
                for name, value in vars(base).items():
                    if name.startswith("__"):
                        continue
                    items.append((base.__qualname__, name, self._class_value(value)))
            key = self.class_keys[cls] = tuple(items)
        return key

    def _class_value(self, value: Any) -> Hashable:
        t = type(value)
        if t in _SCALARS:
            return _scalar_key(value)
        if t is types.FunctionType:  # a method: equal only to itself (held, as its class is)
            return value
        return ("id", _Identity(value))  # one object, the same for every instance of the class

    def referenced_outside(self) -> FrozenSet[Tuple]:
        """Paths of states with more references than the graph holds (something outside has one)."""
        counts = _reference_counts(self.states)
        return frozenset(path for path, s in self.states.items()
                         if counts[path] - _COUNT_BASE[0] > self.met[id(s)]
                         or not only_brainx_refs(s))  # a weak registry reaches it too


def _reference_counts(states: Dict[Tuple, Any]) -> Dict[Tuple, int]:
    return {path: sys.getrefcount(s) for path, s in states.items()}


def _count_base() -> int:
    """What :func:`_reference_counts` counts for an object held by its dict alone."""
    return _reference_counts({(): object()})[()]


_COUNT_BASE = [_count_base()]


def _attributes(x: Any) -> List[Tuple[str, Any]]:
    """An object's attributes, from ``__dict__`` and ``__slots__``."""
    found: List[Tuple[str, Any]] = [(k, v) for k, v in getattr(x, "__dict__", {}).items()
                                    if not k.startswith("__brainx")]
    for cls in type(x).__mro__:
        slots = getattr(cls, "__slots__", ())
        for name in ([slots] if isinstance(slots, str) else slots):
            if name not in ("__dict__", "__weakref__") and hasattr(x, name):
                found.append((name, getattr(x, name)))
    return found


def _is_namedtuple(x: Any) -> bool:
    t = type(x)
    return (isinstance(x, tuple) and t.__bases__ == (tuple,) and hasattr(t, "_fields")
            and not hasattr(x, "__dict__"))


def _cell_contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (a name not bound yet)
        return Ellipsis


def _value_type(value: Any) -> Hashable:
    leaves, treedef = jax.tree.flatten(value)
    return (treedef, tuple(_leaf_type(v) for v in leaves))


def _scalar_key(x: Any) -> Hashable:
    """A Python scalar by type and value; floats by their bits (``0.0`` and ``-0.0`` differ)."""
    t = type(x)
    if t is float:
        return (float, struct.pack("<d", x))
    if t is complex:
        return (complex, struct.pack("<dd", x.real, x.imag))
    return (t, x)


def _leaf_type(x: Any) -> Hashable:
    if type(x) in _SCALARS:
        return _scalar_key(x)
    if isinstance(x, jax.core.Tracer):
        raise _Unshareable
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        raise _Unshareable
    sharding = getattr(x, "sharding", None) if isinstance(x, jax.Array) else None
    return (tuple(np.shape(x)), dtype_name(dtype), bool(getattr(x, "weak_type", False)), sharding)


def _array_key(x: Any) -> Hashable:
    if isinstance(x, jax.core.Tracer):
        raise _Unshareable
    try:
        data = np.asarray(x)
    except Exception:  # a typed PRNG key, a deleted buffer: compare by identity
        return ("id", _Identity(x))
    digest = hashlib.blake2b(np.ascontiguousarray(data).tobytes(), digest_size=16).hexdigest()
    sharding = x.sharding if isinstance(x, jax.Array) else None
    return ("array", type(x).__name__, data.shape, dtype_name(data.dtype),  # float8s differ
            bool(getattr(x, "weak_type", False)), sharding, digest)
