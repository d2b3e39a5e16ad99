"""Transforms used as method decorators.

``@transform.jit`` on ``def step(self, x)`` must give each instance its own
transform (its own states, its own cache) with ``self`` bound, not passed
through JAX. Argument numbers keep JAX's convention for methods: ``self`` is
argument 0, so ``static_argnums=1`` names ``x``.

The bindings of an instance live on the instance (freed with it), one per
transform, each held with a weak reference to its transform: a method
replaced on the class (``Net.step = jit(new)``) frees its old binding and
function, and a new transform that Python allocates where a dead one was is
never given the dead one's binding (an ``id`` alone would be reused). The
attribute is bookkeeping, not a child: graph walks, reprs and copies of a
:class:`~brainx.graph.Node` leave it out, and a copy of the instance that
shares it binds afresh.
"""

from __future__ import annotations

import types
import weakref
from typing import Any, Callable, Dict, Tuple

from brainx.graph.node import BOUND_TRANSFORMS_ATTR

__all__ = ["bind_to_instance"]

_ARGNUM_OPTIONS = ("static_argnums", "donate_argnums")


class _Bindings(dict):
    """``id(transform) -> (weak reference to the transform, bound transform)`` of one instance.

    ``owner`` is the instance's ``id``: a shallow copy of an instance shares
    this table, and must not run the original's bindings. The owner cannot
    die while an entry lives (a binding holds its instance), so its ``id``
    cannot be reused meanwhile.
    """

    def __init__(self, owner: int):
        super().__init__()
        self.owner = owner

    def __deepcopy__(self, memo: dict) -> "_Bindings":
        return _Bindings(-1)   # a copied instance binds afresh

    def __reduce__(self):
        return _Bindings, (-1,)


def bind_to_instance(transform: Any, instance: Any, factory: Callable[..., Any],
                     options: Dict[str, Any]) -> Any:
    """The transform of ``transform.fun`` bound to ``instance`` (made once per instance).

    Parameters
    ----------
    transform : object
        The transform found on the class (``JittedFunction``, ...), with ``fun``.
    instance : object
        The instance it is looked up on.
    factory : callable
        ``factory(bound_method, **options)`` makes the bound transform.
    options : dict
        The transform's options; argument numbers are shifted past ``self``.

    Returns
    -------
    object
        The bound transform, the same one at every lookup while ``transform`` lives.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> class Net(brainx.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = brainx.ParamState(jnp.ones(2))
    ...     @brainx.transform.jit
    ...     def step(self, x):
    ...         return (self.w.value * x).sum()
    >>> net = Net()
    >>> net.step is net.step, float(net.step(2.0))
    (True, 4.0)
    """
    table = _instance_table(transform, instance)
    key = id(transform)
    found = table.get(key)
    if found is not None and found[0]() is transform:
        return found[1]
    shifted = dict(options)
    for name in _ARGNUM_OPTIONS:
        if name in shifted:
            shifted[name] = _shift(shifted[name])
    bound = factory(types.MethodType(transform.fun, instance), **shifted)
    table[key] = (_weak(transform, table, key), bound)
    return bound


def _instance_table(transform: Any, instance: Any) -> _Bindings:
    """The bindings of ``instance``: on the instance, or for ``__slots__`` on ``transform``."""
    attrs = getattr(instance, "__dict__", None)
    if attrs is None:  # __slots__ without __dict__
        return _slots_cache(transform, instance)
    table = attrs.get(BOUND_TRANSFORMS_ATTR)
    if type(table) is not _Bindings or table.owner != id(instance):
        table = attrs[BOUND_TRANSFORMS_ATTR] = _Bindings(id(instance))
    return table


def _weak(transform: Any, table: _Bindings, key: int) -> Callable[[], Any]:
    """A weak reference to ``transform`` that drops its entry of ``table`` when it dies."""
    table_ref = weakref.ref(table)

    def drop(ref: weakref.ref) -> None:
        t = table_ref()
        if t is not None and t.get(key, (None,))[0] is ref:
            del t[key]

    try:
        return weakref.ref(transform, drop)
    except TypeError:  # not weakly referable: held, so its id stays its own
        return lambda: transform


_SLOTS_LIMIT = 256


def _slots_cache(transform: Any, instance: Any) -> _Bindings:
    """The bound transforms of an instance with no ``__dict__``, kept on ``transform``.

    A bound transform holds its instance (as a bound method does), so the
    table keeps the instances it holds alive: only the ``_SLOTS_LIMIT`` most
    recently bound are kept (an instance dropped from it and bound again
    traces again). The weak reference drops an entry early when its
    instance dies some other way and frees the id for a new object.
    """
    table: Dict[int, Tuple[Any, _Bindings]] = transform.__dict__.setdefault("_slots_bound", {})
    key = id(instance)
    found = table.get(key)
    if found is not None and found[0]() is instance:
        table[key] = table.pop(key)  # the most recently used last
        return found[1]
    per_instance = _Bindings(key)
    try:
        ref = weakref.ref(instance, lambda _r, key=key: table.pop(key, None))
    except TypeError:  # no __weakref__ slot either
        ref = (lambda obj: (lambda: obj))(instance)
    table.pop(key, None)
    while len(table) >= _SLOTS_LIMIT:
        del table[next(iter(table))]
    table[key] = (ref, per_instance)
    return per_instance


def _shift(argnums):
    if argnums is None:
        return argnums
    if isinstance(argnums, int):
        argnums = (argnums,)
    return tuple(i - 1 if i > 0 else i for i in argnums if i != 0)
