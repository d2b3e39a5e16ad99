"""Convolutions: `Conv1d/2d/3d` and the transposed `ConvTranspose1d/2d/3d`.

Both are one call to ``jax.lax.conv_general_dilated``. Inputs are
channels-last by default, ``(*spatial, C)`` for one sample or
``(N, *spatial, C)`` for a batch (``channel_first=True``: ``(C, *spatial)``).
As in brainstate, ``in_size`` is the shape of one sample, ``out_size`` is
computed from it, and the weights are one ``ParamState`` ``weight`` holding
``{"weight": kernel, "bias": b}`` (no ``"bias"`` without ``b_init``).

- ``Conv*``: kernel ``(*kernel_size, C_in // groups, C_out)``; with stride ``s``,
  an axis of length ``L`` gives ``ceil(L / s)`` (SAME) or
  ``ceil((L - d*(k-1)) / s)`` (VALID).
- ``ConvTranspose*``: kernel ``(*kernel_size, C_out, C_in // groups)``; ``L``
  gives ``L * s`` (SAME) or ``L * s + max(d*(k-1) + 1 - s, 0)`` (VALID).

A transposed convolution is the adjoint of a convolution: with the same
kernel array, ``ConvTranspose`` maps a convolution's output space back to its
input space (it upsamples by ``stride``); it is computed as a convolution of
the ``stride``-dilated input with the spatially flipped kernel.

Examples
--------
>>> import jax.numpy as jnp, brainx
>>> from brainx import nn
>>> conv = nn.Conv2d((8, 8, 3), out_channels=4, kernel_size=3, stride=2)
>>> conv.out_size, conv(jnp.ones((2, 8, 8, 3))).shape, conv(jnp.ones((8, 8, 3))).shape
((4, 4, 4), (2, 4, 4, 4), (4, 4, 4))
>>> up = nn.ConvTranspose1d((5, 4), out_channels=2, kernel_size=3, stride=2)
>>> up.out_size
(10, 2)
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from brainx.nn.init import XavierNormal, param
from brainx.nn.modules.module import Module
from brainx.state.state import ParamState

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

Padding = Union[str, int, Sequence[int], Sequence[Tuple[int, int]]]
_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def replicate(value: Union[int, Sequence[int]], n: int, name: str) -> Tuple[int, ...]:
    """``3 -> (3, 3)``; a sequence of length 1 or ``n`` is kept (repeated).

    A value that is not an int or a sequence of ints is a ``TypeError``, a
    sequence of another length a ``ValueError`` (as brainstate).
    """
    if np.ndim(value) == 0 and not isinstance(value, (bool, np.bool_)):
        try:
            return (operator.index(value),) * n
        except TypeError:
            raise TypeError(f"{name} must be an int or a sequence of ints, got {value!r}.") from None
    try:
        value = tuple(operator.index(v) for v in value)
    except TypeError:
        raise TypeError(f"{name} must be an int or a sequence of ints, got {value!r}.") from None
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise ValueError(f"{name} must be an int or a sequence of 1 or {n} ints, got {value}.")
    return value


def parse_padding(padding: Padding, n: int, what: str):
    """``"SAME"``/``"VALID"``, or ``n`` explicit ``(low, high)`` pairs."""
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ValueError(f"{what}: padding must be 'SAME', 'VALID', an int or (low, high) "
                             f"pairs, got {padding!r}.")
        return padding.upper()
    if isinstance(padding, int):
        return ((padding, padding),) * n
    if not isinstance(padding, (tuple, list)):
        raise TypeError(f"{what}: padding must be 'SAME', 'VALID', an int or (low, high) pairs, "
                        f"got {padding!r}.")
    padding = tuple(padding)
    if padding and all(isinstance(p, int) for p in padding):
        if n == 1 and len(padding) == 2:
            return (padding,)
        if len(padding) == n:
            return tuple((p, p) for p in padding)
    elif padding and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in padding):
        if len(padding) == 1:
            return (tuple(padding[0]),) * n
        if len(padding) == n:
            return tuple(tuple(p) for p in padding)
    raise ValueError(f"{what}: padding {padding!r} must be an int, {n} ints, or 1 or {n} "
                     "(low, high) pairs.")


def _transpose_pads(k: int, s: int, padding: str) -> Tuple[int, int]:
    """Padding of the dilated input that makes a transposed conv the adjoint of a SAME/VALID conv."""
    if padding == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else -(-total // 2)
    else:
        total = k + s - 2 + max(k - s, 0)
        low = k - 1
    return low, total - low


class _Conv(Module):
    num_spatial_dims: int = 1
    transpose: bool = False

    def __init__(self, in_size: Sequence[int], out_channels: int,
                 kernel_size: Union[int, Sequence[int]], stride: Union[int, Sequence[int]] = 1,
                 padding: Padding = "SAME", lhs_dilation: Union[int, Sequence[int]] = 1,
                 rhs_dilation: Union[int, Sequence[int]] = 1, groups: int = 1,
                 w_init: Union[Callable, Any] = XavierNormal(),
                 b_init: Optional[Union[Callable, Any]] = None, w_mask: Any = None,
                 channel_first: bool = False, name: Optional[str] = None,
                 param_type: type = ParamState):
        super().__init__(name=name)
        n, what = self.num_spatial_dims, type(self).__name__
        if len(tuple(in_size)) != n + 1:
            raise ValueError(f"{what}: in_size must have {n + 1} entries ({n} spatial and the "
                             f"channels), got {tuple(in_size)}.")
        self.in_size = in_size
        self.channel_first = channel_first
        self.in_channels = self.in_size[0] if channel_first else self.in_size[-1]
        self.out_channels = out_channels
        self.kernel_size = replicate(kernel_size, n, "kernel_size")
        self.stride = replicate(stride, n, "stride")
        self.lhs_dilation = replicate(lhs_dilation, n, "lhs_dilation")
        self.rhs_dilation = replicate(rhs_dilation, n, "rhs_dilation")
        self.padding = parse_padding(padding, n, what)
        self.groups = groups
        for label, c in (("in_channels", self.in_channels), ("out_channels", out_channels)):
            if c % groups:
                raise ValueError(f"{what}: {label} ({c}) must be divisible by groups ({groups}).")
        io = ((out_channels, self.in_channels // groups) if self.transpose
              else (self.in_channels // groups, out_channels))
        self.kernel_shape = self.kernel_size + io
        image = ("NC" + _SPATIAL[n]) if channel_first else ("N" + _SPATIAL[n] + "C")
        kernel = _SPATIAL[n] + ("OI" if self.transpose else "IO")
        self.dimension_numbers = jax.lax.conv_dimension_numbers(
            (1,) * (n + 2), (1,) * (n + 2), (image, kernel, image))
        self.w_mask = param(w_mask, self.kernel_shape)
        params = {"weight": param(w_init, self.kernel_shape, allow_none=False)}
        if b_init is not None:
            bias_shape = (out_channels,) + (1,) * n if channel_first else (1,) * n + (out_channels,)
            params["bias"] = param(b_init, bias_shape)
        self.weight = param_type(params)
        probe = jax.ShapeDtypeStruct((1,) + self.in_size, params["weight"].dtype)
        self.out_size = jax.eval_shape(self._conv, probe, params).shape[1:]

    def _kernel(self, params):
        w = params["weight"]
        return w if self.w_mask is None else w * self.w_mask

    def _conv(self, x, params):
        y = jax.lax.conv_general_dilated(
            x, self._kernel(params), window_strides=self.stride, padding=self.padding,
            lhs_dilation=self.lhs_dilation, rhs_dilation=self.rhs_dilation,
            dimension_numbers=self.dimension_numbers, feature_group_count=self.groups)
        return y + params["bias"] if "bias" in params else y

    def update(self, x: Any) -> jax.Array:
        """The convolution of ``x``: one sample ``in_size`` or a batch ``(N, *in_size)``."""
        shape = tuple(jnp.shape(x))
        if shape[-len(self.in_size):] != self.in_size or len(shape) - len(self.in_size) not in (0, 1):
            raise ValueError(f"{type(self).__name__}: expected an input of shape {self.in_size} "
                             f"or (batch, *{self.in_size}), got {shape}.")
        if len(shape) == len(self.in_size):
            return self._conv(x[None], self.weight.value)[0]
        return self._conv(x, self.weight.value)


class _ConvTranspose(_Conv):
    transpose = True

    def __init__(self, in_size: Sequence[int], out_channels: int,
                 kernel_size: Union[int, Sequence[int]], stride: Union[int, Sequence[int]] = 1,
                 padding: Padding = "SAME", rhs_dilation: Union[int, Sequence[int]] = 1,
                 groups: int = 1, w_init: Union[Callable, Any] = XavierNormal(),
                 b_init: Optional[Union[Callable, Any]] = None, w_mask: Any = None,
                 channel_first: bool = False, name: Optional[str] = None,
                 param_type: type = ParamState):
        super().__init__(in_size, out_channels, kernel_size, stride=stride, padding=padding,
                         rhs_dilation=rhs_dilation, groups=groups, w_init=w_init, b_init=b_init,
                         w_mask=w_mask, channel_first=channel_first, name=name,
                         param_type=param_type)

    def _conv(self, x, params):
        pads = self.padding
        if isinstance(pads, str):
            pads = tuple(_transpose_pads((k - 1) * d + 1, s, pads)
                         for k, s, d in zip(self.kernel_size, self.stride, self.rhs_dilation))
        w = jnp.flip(self._kernel(params), axis=tuple(range(self.num_spatial_dims)))
        y = jax.lax.conv_general_dilated(
            x, w, window_strides=(1,) * self.num_spatial_dims, padding=pads,
            lhs_dilation=self.stride, rhs_dilation=self.rhs_dilation,
            dimension_numbers=self.dimension_numbers, feature_group_count=self.groups)
        return y + params["bias"] if "bias" in params else y


_DOC = """{n}-D convolution{extra}.

    Parameters
    ----------
    in_size : sequence of int
        One sample's shape: ``{shape}`` (channels last) or channels first
        with ``channel_first=True``.
    out_channels : int
        Number of output channels.
    kernel_size, stride, rhs_dilation : int or sequence of int
        Per spatial axis (an int is repeated).
    padding : "SAME", "VALID", int, or (low, high) pairs
        {padding}
    groups : int
        Feature groups: ``in_channels`` and ``out_channels`` split into
        ``groups`` independent convolutions.
    w_init, b_init : initialiser or array
        Kernel (shapes in the module docstring) and bias (``None``: no bias).
    w_mask : array, optional
        Multiplies the kernel.
    lhs_dilation : int or sequence of int
        (``Conv*`` only) dilation of the input.
    channel_first : bool
        Channels before the spatial axes.
    """

_UP = ", transposed (upsamples by ``stride``)"
_PAD = {False: "Zero padding of the input.",
        True: "'SAME'/'VALID' make it the adjoint of a convolution with that padding; an "
              "explicit padding pads the stride-dilated input."}


class Conv1d(_Conv):
    __doc__ = _DOC.format(n=1, extra="", shape="(L, C)", padding=_PAD[False])
    num_spatial_dims = 1


class Conv2d(_Conv):
    __doc__ = _DOC.format(n=2, extra="", shape="(H, W, C)", padding=_PAD[False])
    num_spatial_dims = 2


class Conv3d(_Conv):
    __doc__ = _DOC.format(n=3, extra="", shape="(D, H, W, C)", padding=_PAD[False])
    num_spatial_dims = 3


class ConvTranspose1d(_ConvTranspose):
    __doc__ = _DOC.format(n=1, extra=_UP, shape="(L, C)", padding=_PAD[True])
    num_spatial_dims = 1


class ConvTranspose2d(_ConvTranspose):
    __doc__ = _DOC.format(n=2, extra=_UP, shape="(H, W, C)", padding=_PAD[True])
    num_spatial_dims = 2


class ConvTranspose3d(_ConvTranspose):
    __doc__ = _DOC.format(n=3, extra=_UP, shape="(D, H, W, C)", padding=_PAD[True])
    num_spatial_dims = 3
