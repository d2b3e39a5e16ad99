"""`Mixin`: the root of the behaviour-only base classes in :mod:`brainx.mixin`.

A mixin adds methods to a class through multiple inheritance and holds no
state of its own, so it needs no ``__init__`` and can sit anywhere in a base
list. :class:`~brainx.mixin.ParamDesc` (the ``desc`` classmethod) and
:class:`~brainx.mixin.Mode` (computation modes) derive from it.
"""

__all__ = ["Mixin"]


class Mixin:
    """Base class for behaviour-only extensions (no ``__init__``, no state).

    Subclass it to group methods that other classes take on by inheriting
    from it next to their main base class. A mixin should not define
    ``__init__``: the class it is mixed into owns construction.

    Examples
    --------
    >>> import brainx
    >>> class Greets(brainx.mixin.Mixin):
    ...     def greet(self):
    ...         return f"hello from {type(self).__name__}"
    >>> class Layer(brainx.nn.Module, Greets):
    ...     pass
    >>> Layer().greet()
    'hello from Layer'
    >>> isinstance(Layer(), brainx.mixin.Mixin)
    True
    """

    __slots__ = ()
