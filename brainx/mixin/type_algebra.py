"""Intersection and union of classes for ``isinstance`` checks: :data:`JointTypes`, :data:`OneOfTypes`.

``JointTypes[A, B]`` is satisfied by objects that are instances of ``A`` *and*
``B``; ``OneOfTypes[A, B]`` by instances of ``A`` *or* ``B``. Both work with
``isinstance``/``issubclass`` and as annotations, compare equal regardless of
the order of their classes, hash, and pickle.

brainstate builds these on ``typing._GenericAlias``, a private class of the
standard library whose behaviour changes between Python versions; brainx's
:class:`_JointGenericAlias` and :class:`_OneOfGenericAlias` are plain objects
with the same public surface (``__origin__``, ``__args__``, the checks,
equality, hash, pickling), so they do not depend on it.
"""

import types
import typing
from typing import Any, Tuple

__all__ = ["JointTypes", "OneOfTypes", "_JointGenericAlias", "_OneOfGenericAlias"]


def _checkable(t: Any) -> bool:
    """Whether ``t`` can be the second argument of ``isinstance``."""
    if isinstance(t, types.UnionType):
        return True
    return any("__instancecheck__" in vars(k) for k in type(t).__mro__)


class _TypeCombination:
    """Shared machinery of :class:`_JointGenericAlias` and :class:`_OneOfGenericAlias`."""

    __slots__ = ("__origin__", "__args__")
    _name = ""

    def __init__(self, origin: Any, args: Any):
        if not isinstance(args, tuple):
            args = (args,)
        object.__setattr__(self, "__origin__", origin)
        object.__setattr__(self, "__args__", args)

    def __setattr__(self, name, value):
        raise AttributeError(f"{self._name}[...] is immutable.")

    def _test(self, results) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def __instancecheck__(self, obj: Any) -> bool:
        return self._test(isinstance(obj, t) for t in self.__args__)

    def __subclasscheck__(self, cls: type) -> bool:
        return self._test(issubclass(cls, t) for t in self.__args__)

    def __eq__(self, other: Any) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return set(self.__args__) == set(other.__args__)

    def __hash__(self) -> int:
        return hash((self._name, frozenset(self.__args__)))

    def __repr__(self) -> str:
        def name(t):
            if isinstance(t, type):
                return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
            return repr(t)
        return f"{self._name}[{', '.join(name(t) for t in self.__args__)}]"

    def __reduce__(self):
        return type(self), (self.__origin__, self.__args__)

    def __call__(self, *args, **kwargs):
        raise TypeError(
            f"Cannot instantiate {self!r}: it is a type for isinstance/issubclass checks and "
            f"annotations, not a class. Instantiate one of its classes instead.")

    def __mro_entries__(self, bases):
        raise TypeError(
            f"Cannot subclass {self!r}: list its classes as the bases instead "
            f"(class C({', '.join(getattr(t, '__name__', repr(t)) for t in self.__args__)}): ...).")


class _JointGenericAlias(_TypeCombination):
    """The intersection of classes that ``JointTypes[A, B, ...]`` returns.

    ``isinstance(x, JointTypes[A, B])`` is ``isinstance(x, A) and isinstance(x, B)``
    (``issubclass`` likewise). Calling it raises ``TypeError``: it describes
    objects, it does not build them.

    Parameters
    ----------
    origin : Any
        Kept as ``__origin__`` (``object`` for the aliases ``JointTypes`` makes).
    args : tuple
        The classes, kept as ``__args__``.
    """

    __slots__ = ()
    _name = "JointTypes"

    def _test(self, results) -> bool:
        return all(results)


class _OneOfGenericAlias(_TypeCombination):
    """The union of classes that ``OneOfTypes[A, B, ...]`` returns.

    ``isinstance(x, OneOfTypes[A, B])`` is ``isinstance(x, A) or isinstance(x, B)``
    (``issubclass`` likewise).

    Parameters
    ----------
    origin : Any
        Kept as ``__origin__`` (``typing.Union`` for the aliases ``OneOfTypes`` makes).
    args : tuple
        The classes, kept as ``__args__``.
    """

    __slots__ = ()
    _name = "OneOfTypes"

    def _test(self, results) -> bool:
        return any(results)


class _Combinator:
    """``JointTypes``/``OneOfTypes``: callable and subscriptable, returning an alias."""

    def __init__(self, alias: type, origin: Any):
        self._alias = alias
        self._origin = origin
        self._name = alias._name

    def _flatten(self, classes: Tuple[Any, ...]) -> Tuple[Any, ...]:
        out = []
        for t in classes:
            if t is None:
                t = type(None)
            if isinstance(t, self._alias):
                nested = t.__args__
            elif _checkable(t):
                nested = (t,)
            else:
                raise TypeError(
                    f"{self._name} combines classes (anything isinstance accepts as its second "
                    f"argument, or None); got {t!r} of type {type(t).__name__}.")
            out.extend(n for n in nested if n not in out)
        return tuple(out)

    def __call__(self, *classes: Any) -> Any:
        if not classes:
            raise TypeError(f"{self._name} needs at least one class, got none.")
        unique = self._flatten(classes)
        if len(unique) == 1:
            return unique[0]
        return self._alias(self._origin, unique)

    def __getitem__(self, item: Any) -> Any:
        return self(*item) if isinstance(item, tuple) else self(item)

    def __repr__(self) -> str:
        return f"brainx.mixin.{self._name}"

    def __reduce__(self):
        return self._name


JointTypes = _Combinator(_JointGenericAlias, object)
JointTypes.__doc__ = """The intersection of classes, written ``JointTypes[A, B]`` or ``JointTypes(A, B)``.

An object satisfies it when it is an instance of every class. Repeated
classes are dropped, nested ``JointTypes`` are flattened, a single class is
returned as it is, and no class at all raises ``TypeError``; so does an
argument that ``isinstance`` cannot take. ``None`` stands for ``type(None)``.

Examples
--------
>>> import brainx
>>> class Saves: pass
>>> class Plots: pass
>>> class Model(Saves, Plots): pass
>>> SavesAndPlots = brainx.mixin.JointTypes[Saves, Plots]
>>> isinstance(Model(), SavesAndPlots), isinstance(Saves(), SavesAndPlots)
(True, False)
>>> SavesAndPlots == brainx.mixin.JointTypes(Plots, Saves)
True
>>> brainx.mixin.JointTypes[Saves] is Saves
True
"""

OneOfTypes = _Combinator(_OneOfGenericAlias, typing.Union)
OneOfTypes.__doc__ = """The union of classes, written ``OneOfTypes[A, B]`` or ``OneOfTypes(A, B)``.

An object satisfies it when it is an instance of at least one class. The
same simplifications as :data:`JointTypes` apply (``None`` stands for
``type(None)``, so ``OneOfTypes[str, None]`` is an optional string).

Examples
--------
>>> import brainx
>>> Number = brainx.mixin.OneOfTypes[int, float]
>>> isinstance(3, Number), isinstance(2.5, Number), isinstance("3", Number)
(True, True, False)
>>> isinstance(None, brainx.mixin.OneOfTypes[str, None])
True
"""

# the two instances' examples are doctests too (doctest only looks at functions and classes)
__test__ = {"JointTypes": JointTypes.__doc__, "OneOfTypes": OneOfTypes.__doc__}
