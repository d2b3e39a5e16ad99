"""Small helpers of :mod:`brainx.mixin`: a hashability test and a "not implemented" marker."""

import functools
from typing import Any, Callable

__all__ = ["hashable", "not_implemented", "is_not_implemented"]


def hashable(x: Any) -> bool:
    """Whether ``hash(x)`` succeeds.

    Parameters
    ----------
    x : Any
        The object to test.

    Returns
    -------
    bool
        ``True`` if ``x`` can be hashed (and so used as a dict key or set
        member), ``False`` if hashing it raises ``TypeError``.

    Examples
    --------
    >>> import brainx
    >>> brainx.mixin.hashable((1, "a")), brainx.mixin.hashable([1, 2])
    (True, False)
    """
    try:
        hash(x)
    except TypeError:
        return False
    return True


def not_implemented(func: Callable) -> Callable:
    """Mark ``func`` as a placeholder: calling it raises ``NotImplementedError``.

    The returned function keeps ``func``'s name and docstring and carries
    ``not_implemented = True``, which :func:`is_not_implemented` tests, so a
    base class can declare an optional hook and callers can ask whether a
    subclass filled it in.

    Parameters
    ----------
    func : callable
        The function (or method) to mark. Its body is never run.

    Returns
    -------
    callable
        A function with the same name that raises ``NotImplementedError``.

    Examples
    --------
    >>> import brainx
    >>> class Base:
    ...     @brainx.mixin.not_implemented
    ...     def reset(self):
    ...         "Reset the model."
    >>> brainx.mixin.is_not_implemented(Base.reset), Base.reset.__doc__
    (True, 'Reset the model.')
    >>> Base().reset()
    Traceback (most recent call last):
    ...
    NotImplementedError: Base.reset is not implemented.
    """
    if not callable(func):
        raise TypeError(f"not_implemented decorates a function, got {func!r}.")
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))

    @functools.wraps(func)
    def placeholder(*args, **kwargs):
        raise NotImplementedError(f"{name} is not implemented.")

    placeholder.not_implemented = True
    return placeholder


def is_not_implemented(fn: Any) -> bool:
    """Whether ``fn`` was made by :func:`not_implemented` (a placeholder).

    Parameters
    ----------
    fn : Any
        A function, a bound method or any other object.

    Returns
    -------
    bool
        ``True`` only for placeholders (bound methods of placeholders
        included); ``False`` for anything else.

    Examples
    --------
    >>> import brainx
    >>> brainx.mixin.is_not_implemented(len)
    False
    """
    return getattr(fn, "not_implemented", False) is True
