"""Computation modes: :class:`Mode`, :class:`Training`, :class:`Batching` and :class:`JointMode`.

A mode says in what context a model computes (training or not, batched or
not) so that code can branch on it: ``mode.has(Training)``. Modes compare
and hash by their class and their parameters (``Batching(2) != Batching(5)``),
so they can be dict keys or static arguments of a jitted function, and a jit
traces again when a static mode's parameters change. brainx's own layers read the training flag from
:mod:`brainx.environ` (``fit``); modes are for code written against
brainstate's ``brainstate.mixin`` modes, and may be kept in the environment
too (``brainx.environ.set(mode=Training())``).
"""

import operator
from typing import Any, Hashable, Iterator, Tuple, Union

from brainx.mixin.base import Mixin
from brainx.mixin.type_algebra import JointTypes, _JointGenericAlias, _OneOfGenericAlias
from brainx.pretty_repr.layout import PrettyAttr, PrettyType, pretty_str, render

__all__ = ["Mode", "JointMode", "Batching", "Training"]


def _bad_spec(method: str, spec: Any) -> TypeError:
    return TypeError(f"Mode.{method} takes a Mode class (Training, Batching, ...) or a "
                     f"JointTypes/OneOfTypes of Mode classes, got {spec!r}.")


class Mode(Mixin):
    """Base class of computation modes; ``Mode()`` itself is the plain (evaluation) mode.

    Two modes are equal when they are of the same class and have equal
    parameters, as :meth:`_eq_key` reports them (``Batching(4) != Batching(8)``,
    as in brainstate 0.6; brainstate 0.5 compared the class only); the hash
    follows, so a jit with a static mode argument traces again for a mode with
    other parameters. A mode subclass with parameters of its own overrides
    :meth:`_eq_key`. Comparing with a non-mode gives ``False``, and
    :meth:`has`/:meth:`is_a` raise ``TypeError`` for an argument that is not a
    class.

    Examples
    --------
    >>> import brainx
    >>> class Inference(brainx.mixin.Mode):
    ...     pass
    >>> m = Inference()
    >>> m, m.is_a(Inference), m.has(brainx.mixin.Mode), m.has(brainx.mixin.Training)
    (Inference, True, True, False)
    >>> m == Inference(), m == brainx.mixin.Training()
    (True, False)
    """

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        """The pretty-repr items: the bare class name (``Training``), no brackets."""
        yield PrettyType(type(self), start="", end="")

    def __repr__(self) -> str:
        return render(self)

    __repr__._uses_pretty_repr = True  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return pretty_str(self)

    def _eq_key(self) -> Hashable:
        """The hashable parameters that tell two modes of one class apart.

        ``()`` for a mode without parameters; a subclass with parameters
        returns them (brainstate 0.6's hook of the same name).

        Examples
        --------
        >>> import brainx
        >>> class Precision(brainx.mixin.Mode):
        ...     def __init__(self, bits):
        ...         self.bits = bits
        ...     def _eq_key(self):
        ...         return self.bits
        >>> Precision(16) == Precision(16), Precision(16) == Precision(32)
        (True, False)
        """
        return ()

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Mode):
            return NotImplemented
        return type(other) is type(self) and other._eq_key() == self._eq_key()

    def __hash__(self) -> int:
        return hash((type(self), self._eq_key()))

    def is_a(self, mode: Any) -> bool:
        """Whether this mode is exactly of class ``mode`` (subclasses do not count).

        Parameters
        ----------
        mode : type or OneOfTypes
            A mode class, or ``OneOfTypes[...]`` of them (exactly one of them).

        Returns
        -------
        bool

        Examples
        --------
        >>> import brainx
        >>> t = brainx.mixin.Training()
        >>> t.is_a(brainx.mixin.Training), t.is_a(brainx.mixin.Mode)
        (True, False)
        """
        if isinstance(mode, _OneOfGenericAlias):
            return any(self.is_a(m) for m in mode.__args__)
        if isinstance(mode, _JointGenericAlias):
            return False  # one mode is never exactly several classes at once
        if not isinstance(mode, type):
            raise _bad_spec("is_a", mode)
        return type(self) is mode

    def has(self, mode: Any) -> bool:
        """Whether this mode is an instance of ``mode`` (subclasses count).

        Parameters
        ----------
        mode : type, JointTypes or OneOfTypes
            A mode class, or a combination of mode classes.

        Returns
        -------
        bool

        Examples
        --------
        >>> import brainx
        >>> class Finetune(brainx.mixin.Training):
        ...     pass
        >>> Finetune().has(brainx.mixin.Training), Finetune().has(brainx.mixin.Batching)
        (True, False)
        """
        if not isinstance(mode, (type, _JointGenericAlias, _OneOfGenericAlias)):
            raise _bad_spec("has", mode)
        return isinstance(self, mode)


class Training(Mode):
    """The training mode: dropout active, normalization statistics updated, and so on.

    Examples
    --------
    >>> import brainx
    >>> mode = brainx.mixin.Training()
    >>> mode, mode.has(brainx.mixin.Training)
    (Training, True)
    """


class Batching(Mode):
    """The batched mode: inputs carry a batch dimension.

    Parameters
    ----------
    batch_size : int, default 1
        The number of samples in a batch (at least 1).
    batch_axis : int, default 0
        The axis of the batch dimension.

    Notes
    -----
    The repr names the fields ``batch_size`` and ``batch_axis``; brainstate's
    prints ``in_size=`` and ``axis=``.

    Examples
    --------
    >>> import brainx
    >>> b = brainx.mixin.Batching(batch_size=32)
    >>> b, b.batch_size, b.batch_axis
    (Batching(batch_size=32, batch_axis=0), 32, 0)
    """

    def __init__(self, batch_size: int = 1, batch_axis: int = 0):
        try:
            batch_size, batch_axis = operator.index(batch_size), operator.index(batch_axis)
        except TypeError:
            raise TypeError(f"Batching: batch_size and batch_axis must be integers, got "
                            f"batch_size={batch_size!r}, batch_axis={batch_axis!r}.") from None
        if batch_size < 1:
            raise ValueError(f"Batching: batch_size must be at least 1, got {batch_size}.")
        self.batch_size = batch_size
        self.batch_axis = batch_axis

    def _eq_key(self) -> Hashable:
        return (self.batch_size, self.batch_axis)

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        """The pretty-repr items: ``batch_size`` and ``batch_axis``."""
        yield PrettyType(type(self))
        yield PrettyAttr("batch_size", self.batch_size)
        yield PrettyAttr("batch_axis", self.batch_axis)


class JointMode(Mode):
    """Several modes at once, e.g. training *and* batching.

    :meth:`has` asks whether any of the modes has a class; attributes not
    found on the joint mode are read from the first mode that has them
    (``joint.batch_size``). Joint modes given as arguments are flattened
    into their modes. Two joint modes are equal when they hold equal modes,
    in any order (``JointMode(Training(), Batching(2)) != JointMode(Training(),
    Batching(3))``), as in brainstate 0.6.

    Parameters
    ----------
    *modes : Mode
        The modes to combine.

    Raises
    ------
    TypeError
        If an argument is not a :class:`Mode` instance.

    Examples
    --------
    >>> import brainx
    >>> from brainx.mixin import Batching, JointMode, JointTypes, Training
    >>> joint = JointMode(Training(), Batching(batch_size=16))
    >>> joint
    JointMode(Training, Batching(batch_size=16, batch_axis=0))
    >>> joint.has(Training), joint.has(Batching), joint.batch_size
    (True, True, 16)
    >>> joint.is_a(Training), joint.is_a(JointTypes[Batching, Training])
    (False, True)
    """

    def __init__(self, *modes: Mode):
        flat = []
        for m in modes:
            if not isinstance(m, Mode):
                raise TypeError(f"JointMode combines Mode instances (Training(), Batching(...), ...); "
                                f"got {m!r} of type {type(m).__name__}.")
            flat.extend(m.modes if isinstance(m, JointMode) else (m,))
        #: the combined modes, in the order given
        self.modes: Tuple[Mode, ...] = tuple(flat)
        #: the classes of the combined modes
        self.types = set(type(m) for m in flat)

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        """The pretty-repr items: one bare item per combined mode."""
        yield PrettyType(type(self))
        for mode in self.modes:
            yield PrettyAttr("", mode)

    def _eq_key(self) -> Hashable:
        return frozenset(self.modes)

    def has(self, mode: Any) -> bool:
        """Whether one of the combined modes is an instance of ``mode``.

        ``JointTypes[A, B]`` asks for both, ``OneOfTypes[A, B]`` for either.

        Examples
        --------
        >>> import brainx
        >>> from brainx.mixin import Batching, JointMode, JointTypes, Mode, Training
        >>> joint = JointMode(Training(), Batching())
        >>> joint.has(Mode), joint.has(JointTypes[Training, Batching])
        (True, True)
        """
        if isinstance(mode, _JointGenericAlias):
            return all(self.has(m) for m in mode.__args__)
        if isinstance(mode, _OneOfGenericAlias):
            return any(self.has(m) for m in mode.__args__)
        if not isinstance(mode, type):
            raise _bad_spec("has", mode)
        return any(issubclass(t, mode) for t in self.types)

    def is_a(self, mode: Any) -> bool:
        """Whether the combined mode classes are exactly ``mode``.

        A joint of one mode is that mode's class; a joint of several is the
        :data:`~brainx.mixin.JointTypes` of their classes (in any order).
        """
        if isinstance(mode, _OneOfGenericAlias):
            return any(self.is_a(m) for m in mode.__args__)
        if not isinstance(mode, (type, _JointGenericAlias)):
            raise _bad_spec("is_a", mode)
        if not self.types:
            return False
        return JointTypes(*self.types) == mode

    def __getattr__(self, item: str) -> Any:
        if item in ("modes", "types") or item.startswith("__"):
            raise AttributeError(item)
        for m in self.modes:
            if hasattr(m, item):
                return getattr(m, item)
        raise AttributeError(f"{self!r} has no attribute {item!r}, and none of its modes has one.")
