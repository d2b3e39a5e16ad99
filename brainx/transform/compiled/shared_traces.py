"""How the instances of a class share the traces of a ``@transform.jit`` method.

:class:`InstanceSharing` lets the instances of a class share the traces and
the compiled function of a ``@transform.jit`` method: an instance whose graph
definition (:mod:`brainx.transform.compiled.instance_sharing`) equals one already traced runs
that trace on its own states, found by the same paths, with no trace of its
own and no compilation. A :class:`_Template` is one such trace, holding
nothing of the instance it was made from.
"""

from __future__ import annotations

import types
from collections import OrderedDict
from typing import Any, Callable, Hashable, List, Optional, Sequence, Tuple

import jax

from brainx.environ.settings import settings_unchanged
from brainx.environ.step_values import SettingState
from brainx.random.state import DEFAULT_SOURCE
from brainx.state.weak_refs import StateRef
from brainx.transform.compiled.instance_sharing import (
    _SCALARS, GraphDefinition, _Identity, _scalar_key, graph_definition,
)
from brainx.transform.compiled.device_sharding import compile_pure
from brainx.transform.compiled.jit_entry import JitEntry
from brainx.transform.core.jaxpr_builder import abstractify
from brainx.transform.core.stateful import StateSignature

__all__ = ["InstanceSharing", "shares_jit"]


class _Template:
    """A trace of one instance, and how to find the same states in another.

    It holds nothing of the instance it was made from: the method's function
    (not the bound method), the trace (which holds no State), locators
    (paths, or weak references to global states), the compiled function,
    and what the method's code read from its module's globals when it was
    traced (:func:`_globals_key`).
    """

    __slots__ = ("sig_trace", "written", "read", "locators", "jitted", "pure", "func",
                 "names", "globals_key")

    def __init__(self, sig: StateSignature, locators: List[tuple], jitted: Callable,
                 pure: Callable, func: Callable):
        self.sig_trace, self.written, self.read = sig.trace, sig.written, sig.read
        self.locators = locators  # ("path", path) in the instance, or ("ref", weakref) outside it
        self.jitted, self.pure = jitted, pure
        self.func = func  # whose module-level names the outside states must still be
        self.names = _global_names_of(func)
        self.globals_key = _globals_key(func, self.names)

    def globals_hold(self) -> bool:
        """Whether the globals the method's code names still have the values it was traced with."""
        return _globals_key(self.func, self.names) == self.globals_key

    def signature_for(self, graph: GraphDefinition) -> Optional[StateSignature]:
        """This trace's signature on ``graph``'s states (``None``: they cannot take it)."""
        states = []
        for kind, where in self.locators:
            if kind == "path":
                if where in graph.referenced_outside:  # maybe reached from outside: not its own
                    return None
                state = graph.states.get(where)
            else:
                state = where()
                if state is not None and not _all_global([state], self.func):
                    return None  # the global name now names another State: trace anew
            if state is None:
                return None
            states.append(state)
        if len(set(map(id, states))) != len(states):  # its own state is another's global
            return None
        return StateSignature(states=tuple(states), written=self.written, read=self.read,
                              trace=self.sig_trace)


class InstanceSharing:
    """The shared traces of one ``@transform.jit`` method, keyed by graph definition.

    The first instance of a class to call the method traces it; a later
    instance whose graph definition (its attributes, sub-objects, states'
    types and its class's attributes, see
    :mod:`brainx.transform.compiled.instance_sharing`) equals the first's,
    called with arguments of the same types, runs the first one's trace and
    compiled function on its own states, found by the same paths: no trace,
    no compilation.

    What a shared method may depend on, so that sharing is sound: the
    instance's attributes and everything reached from them, the attributes
    and methods of its class (read when each instance first calls), the
    module globals the method's own code names (plain Python scalars by
    value, other objects by identity, checked on reuse), the settings of
    ``brainx.environ`` it reads, and its arguments. What it must not depend
    on, since the graph definition cannot see it: per-instance values kept
    outside the instance (a ``WeakKeyDictionary`` keyed by it, a registry),
    the contents of a mutable object reached by identity (a list on the
    class, a global dict) changed in place, globals read only by helper
    functions it calls, and anything else that differs between instances
    without showing in their attributes. Such a method traces per instance
    when sharing is turned off: ``transform.jit(..., share_instances=False)``
    for one method, or ``__brainx_share_jit__ = False`` on a class (or an
    instance) for all its jitted methods.

    Nothing here keeps an instance alive: a template holds the method's
    function, not the bound method, and its key holds objects reached by
    identity weakly where they allow it. It does keep the constants its
    trace baked in (arrays that are not states), as ``jax.jit`` does.

    At most ``max_templates`` are kept (the oldest is dropped first), as JAX
    bounds its own caches.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> class Cell(brainx.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.v = brainx.HiddenState(jnp.zeros(2))
    ...     @brainx.transform.jit
    ...     def step(self, x):
    ...         self.v.value = self.v.value + x
    ...         return self.v.value
    >>> a, b = Cell(), Cell()
    >>> a.step(1.0).tolist(), b.step(2.0).tolist()  # b runs a's compiled function
    ([1.0, 1.0], [2.0, 2.0])
    >>> class Private(Cell):
    ...     __brainx_share_jit__ = False  # each instance traces its own
    """

    def __init__(self, max_templates: int = 64):
        self.max_templates = max_templates
        self._templates: "OrderedDict[Hashable, _Template]" = OrderedDict()

    @staticmethod
    def _key(graph, key, dyn_args: tuple, dyn_kwargs: dict) -> Optional[Hashable]:
        leaves, treedef = jax.tree.flatten((dyn_args, dyn_kwargs))
        try:
            return (graph.key, key, treedef, tuple(abstractify(x) for x in leaves))
        except TypeError:
            return None

    def entry(self, owner: Any, instance: Any, key, dyn_args: tuple,
              dyn_kwargs: dict) -> Optional[JitEntry]:
        """The entry of an instance that matches a template (``None``: trace it)."""
        graph = graph_definition(instance) if shares_jit(instance) else None
        owner._graph = graph
        if graph is None:
            return None
        tkey = self._key(graph, key, dyn_args, dyn_kwargs)
        template = self._templates.get(tkey) if tkey is not None else None
        if template is None or not settings_unchanged(template.sig_trace.env_reads):
            return None  # none, or traced under other settings (brainx.environ)
        if not template.globals_hold():
            return None  # a global the method names was rebound: trace anew
        sig = template.signature_for(graph)
        if sig is None:
            return None
        return JitEntry(owner, [sig], jitted=template.jitted, pure=template.pure)

    def register(self, owner: Any, key, dyn_args: tuple, dyn_kwargs: dict,
                 sig: StateSignature) -> Optional[JitEntry]:
        """The entry of the first instance with this graph; later ones will share it."""
        graph = owner._graph
        if graph is None or any(spec.wrap for spec in sig.trace.written_specs):
            return None
        if graph.key[0] == "id":  # the instance itself by identity: no other can match
            return None
        tkey = self._key(graph, key, dyn_args, dyn_kwargs)
        if tkey is None:
            return None
        func = getattr(owner.fun, "__func__", owner.fun)  # not the bound method: no instance
        paths = {id(s): p for p, s in graph.states.items()}
        if any(paths[id(s)] in graph.referenced_outside for s in sig.states if id(s) in paths):
            return None  # reached through the instance, or from outside? traced per instance
        outside = [s for s in sig.states if id(s) not in paths]
        if outside and not _all_global(outside, func):
            return None  # found elsewhere (a registry, another object): maybe per instance
        locators = [("path", paths[id(s)]) if id(s) in paths else ("ref", StateRef(s))
                    for s in sig.states]
        # Owner None: the function serves every instance; whoever calls it handles its retrace.
        pure = owner.stateful.pure_of(sig.trace, owner=None, exact=True)
        jitted = compile_pure(pure, owner, sig.states, sig.write_states)
        self._templates[tkey] = _Template(sig, locators, jitted, pure, func)
        while len(self._templates) > self.max_templates:
            self._templates.popitem(last=False)
        return JitEntry(owner, [sig], jitted=jitted, pure=pure)


def shares_jit(instance: Any) -> bool:
    """Whether ``instance``'s jitted methods may share traces with other instances.

    ``False`` when its class (or the instance itself) sets
    ``__brainx_share_jit__ = False``.

    Examples
    --------
    >>> from brainx.transform.compiled.shared_traces import shares_jit
    >>> class Private:
    ...     __brainx_share_jit__ = False
    >>> shares_jit(object()), shares_jit(Private())
    (True, False)
    """
    return bool(getattr(instance, "__brainx_share_jit__", True))


def _all_global(states: Sequence[Any], method: Any) -> bool:
    """Whether every state is the same for every instance: the default generator, or a global.

    A global is a State that the method's code names as a module-level variable, or a
    per-step setting (``t``, ``i``: one :class:`~brainx.environ.step_values.SettingState`
    per key, the same for every instance); a state reached any other way from outside the
    instance (a registry keyed by the instance, an attribute of another object) may be
    another one for the next instance.
    """
    func = getattr(method, "__func__", method)
    code = getattr(func, "__code__", None)
    named = set()
    if code is not None:
        namespace = getattr(func, "__globals__", {})
        named = {id(namespace[n]) for n in _global_names(code) if n in namespace}
    return all(s is DEFAULT_SOURCE[0] or isinstance(s, SettingState) or id(s) in named
               for s in states)


def _global_names(code: types.CodeType) -> set:
    """The names ``code`` (and the functions, lambdas and comprehensions in it) looks up."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _global_names_of(func: Any) -> Tuple[str, ...]:
    """The names ``func``'s code looks up that its module defines, in order."""
    code = getattr(func, "__code__", None)
    namespace = getattr(func, "__globals__", None)
    if code is None or namespace is None:
        return ()
    return tuple(sorted(n for n in _global_names(code) if n in namespace))


_UNBOUND = object()


def _globals_key(func: Any, names: Sequence[str]) -> tuple:
    """The values of ``func``'s module globals ``names``: scalars by value, others by identity.

    Cheap (a dict lookup per name); compared when a template is reused, so a
    global rebound since the trace (``GAIN = 2.0``, a helper function
    replaced) makes the next instance trace anew. A global object changed in
    place (a list appended to) is not seen.

    Examples
    --------
    >>> from brainx.transform.compiled.shared_traces import _globals_key
    >>> def f(x):
    ...     return x * GAIN
    >>> GAIN = 2.0
    >>> before = _globals_key(f, ("GAIN",))
    >>> GAIN = 3.0
    >>> before == _globals_key(f, ("GAIN",))
    False
    """
    namespace = getattr(func, "__globals__", {})
    key = []
    for name in names:
        value = namespace.get(name, _UNBOUND)
        key.append(_scalar_key(value) if type(value) in _SCALARS else _Identity(value))
    return tuple(key)
