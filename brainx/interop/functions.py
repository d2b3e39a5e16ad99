"""Parameter-free steps of a ``Sequential``: brainx activation layers and plain functions.

flax's and equinox's sequential containers hold activations as functions
(``nnx.relu``, ``eqx.nn.Lambda(jax.nn.relu)``); brainx holds them as layers
(``brainx.nn.ReLU()``) or plain callables. Going out, an activation layer
becomes its function (``functools.partial`` with its options); coming in, a
function that one of brainx's activation layers computes becomes that layer,
and any other callable is kept as it is.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from brainx import nn
from brainx.nn.layers import elementwise
from brainx.nn.modules.module import Module

__all__ = ["Function", "activation_to_function", "function_to_layer", "is_activation",
           "move_channels", "layout_step", "wrapped_layout"]


class Function(Module):
    """A brainx layer that applies ``fn``; stands first in a converted ``Sequential``.

    brainx's ``Sequential`` needs a layer first; a foreign sequential that starts
    with a plain function gets it wrapped in this.

    Parameters
    ----------
    fn : callable
        The function of the input.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.interop.functions import Function
    >>> Function(jnp.abs)(jnp.array([-1.0, 2.0])).tolist()
    [1.0, 2.0]
    """

    def __init__(self, fn: Callable[[Any], Any]):
        super().__init__()
        self.fn = fn

    def update(self, x: Any) -> Any:
        return self.fn(x)

    def __repr__(self) -> str:
        return f"Function({getattr(self.fn, '__name__', self.fn)!r})"


def _plain_activations():
    """The activation classes whose output is ``cls.fn(x, **options)``, deterministic."""
    out = []
    for name in elementwise.__all__:
        cls = getattr(elementwise, name)
        if (isinstance(cls, type) and issubclass(cls, elementwise._Activation)
                and cls is not elementwise.RReLU and cls.update is elementwise._Activation.update
                and cls is not elementwise.Identity):
            out.append(cls)
    return out


_PLAIN = _plain_activations()
_ALONG = [nn.Softmax, nn.Softmin, nn.LogSoftmax]
# jax.nn functions equal to a brainx activation with its defaults
_JAX_EQUIVALENTS = {jax.nn.relu: nn.ReLU, jax.nn.sigmoid: nn.Sigmoid, jnp.tanh: nn.Tanh,
                    jax.nn.silu: nn.SiLU, jax.nn.softplus: nn.Softplus,
                    jax.nn.log_sigmoid: nn.LogSigmoid, jax.nn.selu: nn.SELU}


def _identity(x):
    return x


def is_activation(layer: Any) -> bool:
    """Whether ``layer`` is a brainx activation that converts to a function."""
    return (type(layer) in _PLAIN or type(layer) in _ALONG or type(layer) is nn.Identity
            or isinstance(layer, Function))


def activation_to_function(layer: Any) -> Optional[Callable]:
    """The function a brainx activation layer computes, or ``None`` if it has none."""
    cls = type(layer)
    if cls is nn.Identity:
        return _identity
    if cls in _ALONG:
        return functools.partial(cls.along, axis=-1 if layer.dim is None else layer.dim)
    if cls in _PLAIN:
        options = {k: getattr(layer, k) for k in cls.options}
        return functools.partial(cls.fn, **options) if options else cls.fn
    if isinstance(layer, Function):
        return layer.fn
    return None


def function_to_layer(fn: Callable) -> Module:
    """The brainx activation layer computing ``fn``, else ``fn`` wrapped in :class:`Function`."""
    if fn is _identity:
        return nn.Identity()
    try:
        if fn in _JAX_EQUIVALENTS:
            return _JAX_EQUIVALENTS[fn]()
    except TypeError:       # an unhashable callable
        pass
    base, kw = (fn.func, dict(fn.keywords)) if isinstance(fn, functools.partial) else (fn, {})
    if isinstance(fn, functools.partial) and fn.args:
        return Function(fn)
    for cls in _ALONG:
        if base is cls.along and set(kw) == {"axis"}:
            return cls(dim=kw["axis"])
    for cls in _PLAIN:
        if base is cls.fn and set(kw) == set(cls.options):
            try:
                return cls(**kw)
            except TypeError:   # a subclass fixing its options (ReLU6)
                continue
    return Function(fn)


def move_channels(x: Any, src: int, dst: int) -> Any:
    """``jnp.moveaxis(x, src, dst)``: the layout change around a layer of the other layout.

    A channels-last brainx convolution converts to equinox (channels first) as
    ``[move_channels(-1 -> -(n+1)), conv, move_channels(-(n+1) -> -1)]``, and a
    channels-first one to flax the other way round; the stack computes the same
    function on the same inputs, and converts back to the single layer.
    """
    return jnp.moveaxis(x, src, dst)


def layout_step(fn: Any) -> Optional[tuple]:
    """``(src, dst)`` if ``fn`` is a :func:`move_channels` step, else ``None``."""
    if isinstance(fn, functools.partial) and fn.func is move_channels and not fn.args:
        return fn.keywords.get("src"), fn.keywords.get("dst")
    return None


def wrapped_layout(steps: list, as_function: Callable) -> Optional[str]:
    """``"last"``/``"first"``: the brainx layout of a ``[move, layer, move back]`` triple, or ``None``.

    ``"last"`` means the triple takes channels-last input around a
    channels-first layer (so the brainx layer is channels-last).
    """
    if len(steps) < 3:
        return None
    a, c = (layout_step(as_function(s)) for s in (steps[0], steps[2]))
    if a is None or c is None or a != (c[1], c[0]):
        return None
    if a[0] == -1 and a[1] < -1:
        return "last"
    if a[1] == -1 and a[0] < -1:
        return "first"
    return None
