"""`ParamDescriber`: a layer described now and built later, once its input size is known.

``Linear.desc(out_size=10)`` records the class and the arguments but builds
nothing. A container that knows the size flowing into that position (see
:class:`~brainx.nn.Sequential`) calls the describer with ``in_size=...`` and
gets the layer. One describer can build many layers, each with its own
parameters.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ParamDescriber"]


class ParamDescriber:
    """A class and some of its arguments; calling it builds an instance.

    Parameters
    ----------
    cls : type
        The class to build.
    *args, **kwargs
        Arguments given now. A call adds its positional arguments after
        these, and its keyword arguments override these.

    Examples
    --------
    >>> import brainx
    >>> d = brainx.nn.Linear.desc(out_size=4)
    >>> d
    ParamDescriber(Linear(out_size=4))
    >>> layer = d(in_size=3)
    >>> layer.in_size, layer.out_size
    ((3,), (4,))
    """

    def __init__(self, cls: type, *args: Any, **kwargs: Any):
        if not isinstance(cls, type):
            raise TypeError(f"ParamDescriber needs a class, got {cls!r}.")
        self.cls = cls
        self.args = args
        self.kwargs = kwargs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.cls(*self.args, *args, **{**self.kwargs, **kwargs})

    init = __call__

    def __repr__(self) -> str:
        fields = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"ParamDescriber({self.cls.__name__}({', '.join(fields)}))"
