"""Activation layers: each applies one function of :mod:`brainx.nn.layers.activations` element-wise.

They are :class:`~brainx.nn.ElementWiseBlock` s, so a
:class:`~brainx.nn.Sequential` passes the size through them. Only
:class:`PReLU` has a parameter (its slope, a ``ParamState``); :class:`RReLU`
draws random slopes from :mod:`brainx.random`.

Examples
--------
>>> import jax.numpy as jnp
>>> from brainx import nn
>>> nn.LeakyReLU(0.1)(jnp.array([-1.0, 2.0])).tolist()
[-0.10000000149011612, 2.0]
>>> nn.Softmax(dim=0)(jnp.zeros(4)).tolist()
[0.25, 0.25, 0.25, 0.25]
"""

from __future__ import annotations

from typing import Any, Optional

import jax.numpy as jnp

from brainx.nn.layers import activations as F
from brainx.nn.modules.containers import ElementWiseBlock
from brainx.state.state import ParamState

__all__ = [
    "Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU",
    "Mish", "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU",
    "LogSigmoid", "Softplus", "Softshrink", "PReLU", "Softsign", "Tanhshrink", "Softmin",
    "Softmax", "Softmax2d", "LogSoftmax", "Identity", "SpikeBitwise",
]


class _Activation(ElementWiseBlock):
    """A parameter-free activation: ``update(x) = fn(x, **self.options)``."""

    fn = staticmethod(lambda x: x)
    options: tuple = ()  # names of attributes passed to fn as keywords

    def update(self, x: Any) -> Any:
        return type(self).fn(x, **{k: getattr(self, k) for k in self.options})


class Identity(_Activation):
    """Returns its input unchanged."""


class ReLU(_Activation):
    """:func:`~brainx.nn.relu`."""
    fn = staticmethod(F.relu)


class Sigmoid(_Activation):
    """:func:`~brainx.nn.sigmoid`."""
    fn = staticmethod(F.sigmoid)


class Hardsigmoid(_Activation):
    """:func:`~brainx.nn.hard_sigmoid`."""
    fn = staticmethod(F.hard_sigmoid)


class Tanh(_Activation):
    """:func:`~brainx.nn.tanh`."""
    fn = staticmethod(F.tanh)


class SiLU(_Activation):
    """:func:`~brainx.nn.silu`."""
    fn = staticmethod(F.silu)


class Mish(_Activation):
    """:func:`~brainx.nn.mish`."""
    fn = staticmethod(F.mish)


class Hardswish(_Activation):
    """:func:`~brainx.nn.hard_swish`."""
    fn = staticmethod(F.hard_swish)


class SELU(_Activation):
    """:func:`~brainx.nn.selu`."""
    fn = staticmethod(F.selu)


class LogSigmoid(_Activation):
    """:func:`~brainx.nn.log_sigmoid`."""
    fn = staticmethod(F.log_sigmoid)


class Softplus(_Activation):
    """:func:`~brainx.nn.softplus`."""
    fn = staticmethod(F.softplus)


class Softsign(_Activation):
    """:func:`~brainx.nn.soft_sign`."""
    fn = staticmethod(F.soft_sign)


class Tanhshrink(_Activation):
    """:func:`~brainx.nn.tanh_shrink`."""
    fn = staticmethod(F.tanh_shrink)


class Threshold(_Activation):
    """``x`` where ``x > threshold``, else ``value``."""

    options = ("threshold", "value")

    def __init__(self, threshold: float, value: float):
        super().__init__()
        self.threshold, self.value = threshold, value

    @staticmethod
    def fn(x, threshold, value):
        return jnp.where(x > threshold, x, jnp.asarray(value, jnp.result_type(x)))


class ELU(_Activation):
    """:func:`~brainx.nn.elu` with slope ``alpha``."""

    fn = staticmethod(F.elu)
    options = ("alpha",)

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha


class CELU(ELU):
    """:func:`~brainx.nn.celu` with scale ``alpha``."""

    fn = staticmethod(F.celu)


class GELU(_Activation):
    """:func:`~brainx.nn.gelu`; exact (erf) by default, the tanh formula with ``approximate``."""

    fn = staticmethod(F.gelu)
    options = ("approximate",)

    def __init__(self, approximate: bool = False):
        super().__init__()
        self.approximate = approximate


class LeakyReLU(_Activation):
    """:func:`~brainx.nn.leaky_relu` with ``negative_slope``."""

    fn = staticmethod(F.leaky_relu)
    options = ("negative_slope",)

    def __init__(self, negative_slope: float = 1e-2):
        super().__init__()
        self.negative_slope = negative_slope


class Hardtanh(_Activation):
    """:func:`~brainx.nn.hard_tanh`: clip to ``[min_val, max_val]``."""

    fn = staticmethod(F.hard_tanh)
    options = ("min_val", "max_val")

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0):
        super().__init__()
        if max_val <= min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val "
                             f"({min_val}).")
        self.min_val, self.max_val = min_val, max_val


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)``."""

    def __init__(self):
        super().__init__(0.0, 6.0)


class Hardshrink(_Activation):
    """:func:`~brainx.nn.hard_shrink` with threshold ``lambd``."""

    fn = staticmethod(F.hard_shrink)
    options = ("lambd",)

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd


class Softshrink(Hardshrink):
    """:func:`~brainx.nn.soft_shrink` with threshold ``lambd``."""

    fn = staticmethod(F.soft_shrink)


class RReLU(_Activation):
    """:func:`~brainx.nn.rrelu`: random negative slopes in ``[lower, upper)``."""

    fn = staticmethod(F.rrelu)
    options = ("lower", "upper")

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3):
        super().__init__()
        self.lower, self.upper = lower, upper


class GLU(_Activation):
    """:func:`~brainx.nn.glu` along axis ``dim`` (halves that axis)."""

    options = ("dim",)

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    @staticmethod
    def fn(x, dim):
        return F.glu(x, axis=dim)


class _AlongDim(_Activation):
    options = ("dim",)
    along = staticmethod(F.softmax)

    def __init__(self, dim: Optional[int] = None):
        super().__init__()
        self.dim = dim

    def update(self, x: Any) -> Any:
        return type(self).along(x, axis=-1 if self.dim is None else self.dim)


class Softmax(_AlongDim):
    """:func:`~brainx.nn.softmax` along ``dim`` (default: the last axis)."""


class Softmin(_AlongDim):
    """:func:`~brainx.nn.softmin` along ``dim`` (default: the last axis)."""
    along = staticmethod(F.softmin)


class LogSoftmax(_AlongDim):
    """:func:`~brainx.nn.log_softmax` along ``dim`` (default: the last axis)."""
    along = staticmethod(F.log_softmax)


class Softmax2d(_Activation):
    """Softmax over the channels of an image, axis ``-3`` of ``(C, H, W)`` or ``(N, C, H, W)``."""

    def update(self, x: Any) -> Any:
        if jnp.ndim(x) not in (3, 4):
            raise ValueError(f"Softmax2d expects a 3-D or 4-D input, got shape {jnp.shape(x)}.")
        return F.softmax(x, axis=-3)


class PReLU(ElementWiseBlock):
    """:func:`~brainx.nn.prelu` with a learnt slope (``num_parameters`` of them, on the last axis).

    Parameters
    ----------
    num_parameters : int
        1 (one slope) or the number of features.
    init : float
        The initial slope.
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, dtype: Any = None):
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = ParamState(jnp.full((num_parameters,), init, dtype=dtype or float))

    def update(self, x: Any) -> Any:
        return F.prelu(x, self.weight.value)


_SPIKE_OPS = {
    "add": lambda x, y: x + y,
    "and": lambda x, y: x * y,
    "iand": lambda x, y: (1 - x) * y,
    "or": lambda x, y: x + y - x * y,
}


class SpikeBitwise(ElementWiseBlock):
    """Combine two spike tensors bitwise (SEW-ResNet's connect functions), as brainstate.

    ============  ===================  ====================
    ``op``        ``g(x, y)``          computed as
    ============  ===================  ====================
    ``"add"``     x + y                ``x + y``
    ``"and"``     x and y              ``x * y``
    ``"iand"``    (not x) and y        ``(1 - x) * y``
    ``"or"``      x or y               ``x + y - x * y``
    ============  ===================  ====================

    Written with arithmetic, so it takes float spikes and is differentiable
    (booleans are taken as 0/1).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> x, y = jnp.array([0., 1., 1.]), jnp.array([1., 1., 0.])
    >>> brainx.nn.SpikeBitwise("or")(x, y).tolist(), brainx.nn.SpikeBitwise("iand")(x, y).tolist()
    ([1.0, 1.0, 1.0], [1.0, 0.0, 0.0])
    """

    def __init__(self, op: str = "add", name: Any = None):
        super().__init__(name=name)
        if op not in _SPIKE_OPS:
            raise ValueError(f"SpikeBitwise: op must be one of {sorted(_SPIKE_OPS)}; got {op!r}.")
        self.op = op

    def update(self, x: Any, y: Any) -> Any:
        if getattr(x, "dtype", None) == bool:
            x = x.astype("float32")
        if getattr(y, "dtype", None) == bool:
            y = y.astype("float32")
        return _SPIKE_OPS[self.op](x, y)
