"""Describe an object now, build it later: :class:`ParamDesc` and :class:`ParamDescriber`.

``Linear.desc(out_size=10)`` records a class and some of its arguments and
builds nothing. Calling the describer later (``d(in_size=3)``) builds a fresh
instance with the recorded arguments plus the new ones, so one describer is a
template for many objects. :class:`~brainx.nn.Sequential` uses this to build a
layer once the size flowing into it is known.
"""

import types
from typing import Any, Optional, Sequence

from brainx.mixin.base import Mixin
from brainx.mixin.helpers import hashable
from brainx.pretty_repr.layout import render

__all__ = ["ParamDesc", "ParamDescriber", "HashableDict", "NoSubclassMeta"]


class HashableDict(dict):
    """A ``dict`` that can be hashed: unhashable values are stored as their ``str``.

    It makes keyword arguments usable inside a hash key (see
    :attr:`ParamDescriber.identifier`). The hash does not depend on the
    order of the items, and keys of mutually unorderable types (``1`` and
    ``"x"``) are fine. The hash follows the contents, so do not change the
    dict after using it as a key.

    Parameters
    ----------
    the_dict : dict
        The items. Values that cannot be hashed (lists, arrays, ...) are
        replaced by their ``str``.

    Examples
    --------
    >>> import brainx
    >>> d = brainx.mixin.HashableDict({"sizes": [3, 4], "lr": 0.1})
    >>> d["sizes"]
    '[3, 4]'
    >>> hash(d) == hash(brainx.mixin.HashableDict({"lr": 0.1, "sizes": [3, 4]}))
    True
    """

    def __init__(self, the_dict: dict):
        super().__init__({k: (v if hashable(v) else str(v)) for k, v in dict(the_dict).items()})

    def __hash__(self) -> int:
        return hash(frozenset(self.items()))


class NoSubclassMeta(type):
    """Metaclass of a class that cannot be subclassed (:class:`ParamDescriber` uses it).

    Raises
    ------
    TypeError
        When a class statement names a class made with this metaclass as a base.

    Examples
    --------
    >>> import brainx
    >>> class Final(metaclass=brainx.mixin.NoSubclassMeta):
    ...     pass
    >>> class Sub(Final):
    ...     pass
    Traceback (most recent call last):
    ...
    TypeError: type 'Final' is not an acceptable base type
    """

    def __new__(mcs, name, bases, namespace, **kwargs):
        for base in bases:
            if isinstance(base, NoSubclassMeta):
                raise TypeError(f"type '{base.__name__}' is not an acceptable base type")
        return super().__new__(mcs, name, bases, dict(namespace), **kwargs)


class ParamDescriber(metaclass=NoSubclassMeta):
    """A class and some of its arguments; calling the describer builds an instance.

    Each call builds a new object: ``cls(*args, *call_args, **{**kwargs, **call_kwargs})``,
    that is, the positional arguments given now come first, and keyword
    arguments given at the call override those given now. The class cannot
    be subclassed.

    Parameters
    ----------
    cls : type
        The class to build.
    *desc_tuple
        Positional arguments recorded now.
    **desc_dict
        Keyword arguments recorded now.

    Raises
    ------
    TypeError
        If ``cls`` is not a class.

    Notes
    -----
    ``isinstance(d, describer)`` is ``True`` when ``d`` is a describer of
    ``describer.cls`` or of one of its subclasses; ``ParamDescriber[C]`` is
    the describer of ``C`` with no arguments, handy as that check's second
    argument (and inside :data:`~brainx.mixin.JointTypes`). brainstate takes
    any ``cls``; brainx asks for a class, so a mistake shows where it is
    made, not at the later call.

    Examples
    --------
    >>> import brainx
    >>> d = brainx.nn.Linear.desc(out_size=4)
    >>> d
    ParamDescriber(Linear(out_size=4))
    >>> a, b = d(in_size=3), d(in_size=5)
    >>> a is b, a.in_size, b.in_size, b.out_size
    (False, (3,), (5,), (4,))
    >>> isinstance(d, brainx.mixin.ParamDescriber[brainx.nn.Module])
    True
    """

    def __init__(self, cls: type, *desc_tuple: Any, **desc_dict: Any):
        if not isinstance(cls, type):
            raise TypeError(f"ParamDescriber needs a class as its first argument, got {cls!r}.")
        self.cls = cls
        self.args = desc_tuple
        self.kwargs = desc_dict
        args = tuple(a if hashable(a) else str(a) for a in desc_tuple)
        self._identifier = (cls, args, HashableDict(desc_dict))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Build an instance: recorded arguments, then these (keywords given here win)."""
        return self.cls(*self.args, *args, **{**self.kwargs, **kwargs})

    def init(self, *args: Any, **kwargs: Any) -> Any:
        """Build an instance; the same as calling the describer."""
        return self(*args, **kwargs)

    def __repr__(self) -> str:
        fields = ([render(a) for a in self.args]
                  + [f"{k}={render(v)}" for k, v in self.kwargs.items()])
        return f"ParamDescriber({self.cls.__name__}({', '.join(fields)}))"

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, ParamDescriber) and issubclass(instance.cls, self.cls)

    def __class_getitem__(cls, item: Any) -> Any:
        """``ParamDescriber[X]``: a describer of class ``X`` (usable in ``isinstance``).

        For anything but a class (a ``TypeVar`` in ``Union[ParamDescriber[T], T]``,
        another annotation) it is the generic alias a type annotation expects,
        as brainstate's annotations need.
        """
        if not isinstance(item, type):
            return types.GenericAlias(cls, (item,))
        return ParamDescriber(item)

    @property
    def identifier(self):
        """A hashable key ``(cls, args, kwargs)`` of this describer; read-only.

        Unhashable arguments appear as their ``str`` (see
        :class:`HashableDict`), so describers with the same arguments have
        equal identifiers.
        """
        return self._identifier

    @identifier.setter
    def identifier(self, value: Any):
        raise AttributeError("ParamDescriber.identifier is read-only.")


class ParamDesc(Mixin):
    """Gives a class the :meth:`desc` classmethod, which returns a :class:`ParamDescriber`.

    :class:`brainx.nn.Module` is a ``ParamDesc``, so every layer has
    ``Layer.desc(...)``; any other class can mix it in too.

    Examples
    --------
    >>> import brainx
    >>> class Neuron(brainx.mixin.ParamDesc):
    ...     def __init__(self, size, tau=10.0):
    ...         self.size, self.tau = size, tau
    >>> template = Neuron.desc(tau=20.0)
    >>> n = template(100)
    >>> n.size, n.tau
    (100, 20.0)
    """

    __slots__ = ()

    #: Names of constructor parameters whose values are not hashable (brainstate's
    #: attribute, kept for subclasses that read it; brainx itself does not use it).
    non_hashable_params: Optional[Sequence[str]] = None

    @classmethod
    def desc(cls, *args: Any, **kwargs: Any) -> ParamDescriber:
        """Describe an instance of this class without building it.

        Parameters
        ----------
        *args, **kwargs
            Arguments recorded now and passed to the class when the describer
            is called.

        Returns
        -------
        ParamDescriber
            Call it (with more arguments if needed) to build an instance.
        """
        return ParamDescriber(cls, *args, **kwargs)
