"""Pooling: `MaxPool*`, `AvgPool*` (``jax.lax.reduce_window``) and `AdaptiveAvgPool*` / `AdaptiveMaxPool*`.

The pooled axes are the last ``n`` non-channel axes of the input
(``channel_axis=-1`` by default, ``None``: no channel axis); any leading axes
(a batch) are left alone, so one layer pools one sample or a batch.

======================  ======================  ==========================================
layer                   ``stride`` default      padding
======================  ======================  ==========================================
``MaxPool*``            ``kernel_size``          ``-inf`` (never the maximum)
``AvgPool*``            ``1`` (brainstate's)     averages only the real (unpadded) entries
``LPPool*``             ``kernel_size``          zeros; ``(sum |x|^p / kernel size)^(1/p)``
``Adaptive*Pool*``      -                        none: ``target_size`` windows per axis
======================  ======================  ==========================================

An adaptive pool cuts an axis of length ``L`` into ``target`` consecutive
windows that cover it exactly, as brainstate does: the first ``L % target``
windows have ``L // target + 1`` elements, the others ``L // target``.

Examples
--------
>>> import jax.numpy as jnp
>>> from brainx import nn
>>> x = jnp.arange(16.0).reshape(4, 4, 1)
>>> nn.MaxPool2d(2)(x)[..., 0].tolist()
[[5.0, 7.0], [13.0, 15.0]]
>>> nn.AvgPool2d(2, stride=2)(x)[..., 0].tolist()
[[2.5, 4.5], [10.5, 12.5]]
>>> nn.AdaptiveAvgPool1d(2, channel_axis=None)(jnp.arange(5.0)).tolist()
[1.0, 3.5]
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from brainx import environ
from brainx.nn.layers.conv import parse_padding, replicate
from brainx.nn.modules.module import Module

__all__ = [
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "LPPool1d", "LPPool2d", "LPPool3d",
]

Size = Union[int, Sequence[int]]


def _pool_axes(ndim: int, n: int, channel_axis: Optional[int], what: str) -> List[int]:
    """The ``n`` axes to pool: the last ``n`` axes that are not the channel axis."""
    axes = list(range(ndim))
    if channel_axis is not None:
        if not -ndim <= channel_axis < ndim:
            raise ValueError(f"{what}: channel_axis {channel_axis} is out of range for a "
                             f"{ndim}-D input.")
        axes.pop(channel_axis % ndim)
    if len(axes) < n:
        raise ValueError(f"{what}: pools {n} axes, so the input needs at least "
                         f"{n + (channel_axis is not None)} dimensions, got {ndim}.")
    return axes[-n:]


def _out_size(layer: Module, in_size) -> None:
    """Set ``in_size`` and, from a probe with a batch axis, ``out_size``."""
    if in_size is not None:
        layer.in_size = in_size
        probe = jax.ShapeDtypeStruct((1,) + layer.in_size, environ.dftype())
        out = jax.eval_shape(layer.update, probe)
        layer.out_size = (out[0] if isinstance(out, tuple) else out).shape[1:]


class _Pool(Module):
    pool_dim: int = 1
    init_value: float = 0.0
    computation: Callable = staticmethod(jax.lax.add)

    def __init__(self, kernel_size: Size, stride: Optional[Size] = None,
                 padding: Any = "VALID", channel_axis: Optional[int] = -1,
                 name: Optional[str] = None, in_size: Optional[Sequence[int]] = None):
        super().__init__(name=name)
        n = self.pool_dim
        self.kernel_size = replicate(kernel_size, n, "kernel_size")
        self.stride = replicate(self.kernel_size if stride is None else stride, n, "stride")
        self.padding = parse_padding(padding, n, type(self).__name__)
        if channel_axis is not None and not isinstance(channel_axis, int):
            raise TypeError(f"channel_axis must be an int or None, got {channel_axis!r}.")
        self.channel_axis = channel_axis
        _out_size(self, in_size)

    def _window(self, ndim: int) -> Tuple[tuple, tuple, Any]:
        """Window, strides and padding over all ``ndim`` axes (1 / no padding off the pooled ones)."""
        axes = _pool_axes(ndim, self.pool_dim, self.channel_axis, type(self).__name__)
        window, strides, pads = [1] * ndim, [1] * ndim, [(0, 0)] * ndim
        for i, axis in enumerate(axes):
            window[axis], strides[axis] = self.kernel_size[i], self.stride[i]
            if not isinstance(self.padding, str):
                pads[axis] = self.padding[i]
        return tuple(window), tuple(strides), (self.padding if isinstance(self.padding, str)
                                               else tuple(pads))

    def _reduce(self, x, window, strides, pads):
        # A NumPy constant, so lax.reduce_window sees a concrete identity and picks the
        # differentiable reduce_window_max / _sum primitive (not the generic one).
        init = np.asarray(self.init_value, jnp.result_type(x))
        return jax.lax.reduce_window(x, init, type(self).computation, window, strides, pads)

    def update(self, x: Any) -> jax.Array:
        window, strides, pads = self._window(jnp.ndim(x))
        return self._reduce(x, window, strides, pads)


class _MaxPool(_Pool):
    init_value = -np.inf
    computation = staticmethod(jax.lax.max)

    def __init__(self, kernel_size: Size, stride: Optional[Size] = None,
                 padding: Any = "VALID", channel_axis: Optional[int] = -1,
                 return_indices: bool = False, name: Optional[str] = None,
                 in_size: Optional[Sequence[int]] = None):
        self.return_indices = bool(return_indices)
        super().__init__(kernel_size, stride, padding, channel_axis, name, in_size)

    def update(self, x: Any):
        window, strides, pads = self._window(jnp.ndim(x))
        pooled = self._reduce(x, window, strides, pads)
        if not self.return_indices:
            return pooled
        if isinstance(pads, str):
            pads = tuple(jax.lax.padtype_to_pads(jnp.shape(x), window, strides, pads))
        return pooled, argmax_indices(x, window, strides, pads)


def index_layout(shape: Sequence[int], window, strides, pads) -> Tuple[int, ...]:
    """The shape whose flat positions :meth:`MaxPool.update` indices are (per axis).

    Along each axis, ``(out - 1) * stride + window - pad_low``: the extent the
    windows cover, counted from the first real element. It depends on the
    pooled shape and the pooling parameters only, so :class:`MaxUnpool1d` (2d,
    3d) can decode it without the input's size; for an unpadded input whose
    length the windows tile exactly, it is the input's own shape.
    """
    layout = []
    for n, k, s, (lo, hi) in zip(shape, window, strides, pads):
        out = (n + lo + hi - k) // s + 1
        layout.append((out - 1) * s + k - lo)
    return tuple(layout)


def argmax_indices(x, window, strides, pads) -> jax.Array:
    """For each max-pooling window, the flat position (in :func:`index_layout`) of its maximum.

    Ties go to the smallest position; a window of padding only reports 0.
    The indices carry no gradient.
    """
    layout = index_layout(jnp.shape(x), window, strides, pads)
    total = int(np.prod(layout))
    place = jnp.zeros(jnp.shape(x), jnp.int32)
    step = 1
    for axis in reversed(range(jnp.ndim(x))):
        shape = [1] * jnp.ndim(x)
        shape[axis] = jnp.shape(x)[axis]
        place = place + (jnp.arange(shape[axis], dtype=jnp.int32) * step).reshape(shape)
        step *= layout[axis]

    def better(a, b):
        (va, ia), (vb, ib) = a, b
        take_b = (vb > va) | ((vb == va) & (ib < ia))
        return jnp.where(take_b, vb, va), jnp.where(take_b, ib, ia)

    x = jax.lax.stop_gradient(x)
    init = (np.asarray(-np.inf, jnp.result_type(x)), np.asarray(total, np.int32))
    _, found = jax.lax.reduce_window((x, place), init, better, window, strides, pads)
    return jnp.where(found == total, 0, found)


class _AvgPool(_Pool):
    def __init__(self, kernel_size: Size, stride: Optional[Size] = 1, padding: Any = "VALID",
                 channel_axis: Optional[int] = -1, name: Optional[str] = None,
                 in_size: Optional[Sequence[int]] = None):
        super().__init__(kernel_size, stride, padding, channel_axis, name, in_size)

    def update(self, x: Any) -> jax.Array:
        window, strides, pads = self._window(jnp.ndim(x))
        total = self._reduce(x, window, strides, pads)
        if pads == "VALID":
            return total / np.prod(window)
        counts = self._reduce(jnp.ones(jnp.shape(x), jnp.result_type(x)), window, strides, pads)
        return total / counts


_POOL_DOC = """{kind} pooling over the last {n} non-channel axes.

    Parameters
    ----------
    kernel_size : int or sequence of int
        Window size per pooled axis.
    stride : int or sequence of int, optional
        Step per pooled axis (default: {stride}).
    padding : "SAME", "VALID", int, or (low, high) pairs
        Padding per pooled axis.
    channel_axis : int or None
        The axis not pooled (``None``: every trailing axis is spatial).
    in_size : sequence of int, optional
        One sample's shape; gives ``out_size``.
    """


_MAX_DOC = _POOL_DOC + """return_indices : bool
        Also return, for each output, the flat position of its maximum, for
        ``MaxUnpool{n}d``: ``update`` gives ``(pooled, indices)``. Positions
        are in a layout of ``(out - 1) * stride + kernel_size - padding_low``
        per pooled axis (the other axes keep their size), the input's own
        layout when the windows tile an unpadded input exactly (brainstate
        0.6's layout).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx import nn
    >>> pool = nn.MaxPool1d(2, return_indices=True, channel_axis=None)
    >>> y, where = pool(jnp.array([1.0, 3.0, 2.0, 0.0]))
    >>> y.tolist(), where.tolist()
    ([3.0, 2.0], [1, 2])
    """


class MaxPool1d(_MaxPool):
    __doc__ = _MAX_DOC.format(kind="Max", n=1, stride="``kernel_size``")
    pool_dim = 1


class MaxPool2d(_MaxPool):
    __doc__ = _MAX_DOC.format(kind="Max", n=2, stride="``kernel_size``")
    pool_dim = 2


class MaxPool3d(_MaxPool):
    __doc__ = _MAX_DOC.format(kind="Max", n=3, stride="``kernel_size``")
    pool_dim = 3


class AvgPool1d(_AvgPool):
    __doc__ = _POOL_DOC.format(kind="Average", n=1, stride="1")
    pool_dim = 1


class AvgPool2d(_AvgPool):
    __doc__ = _POOL_DOC.format(kind="Average", n=2, stride="1")
    pool_dim = 2


class AvgPool3d(_AvgPool):
    __doc__ = _POOL_DOC.format(kind="Average", n=3, stride="1")
    pool_dim = 3


class _LPPool(_Pool):
    def __init__(self, norm_type: float, kernel_size: Size, stride: Optional[Size] = None,
                 padding: Any = "VALID", channel_axis: Optional[int] = -1,
                 name: Optional[str] = None, in_size: Optional[Sequence[int]] = None):
        if not (np.isfinite(norm_type) and norm_type > 0):
            raise ValueError(f"{type(self).__name__}: norm_type (p) must be a positive finite "
                             f"number, got {norm_type!r}.")
        self.norm_type = norm_type
        super().__init__(kernel_size, stride, padding, channel_axis, name, in_size)

    def update(self, x: Any) -> jax.Array:
        window, strides, pads = self._window(jnp.ndim(x))
        mean = self._reduce(jnp.abs(x) ** self.norm_type, window, strides, pads) / np.prod(window)
        positive = mean > 0      # the root's derivative is infinite at 0: keep 0 out of it
        return jnp.where(positive, jnp.where(positive, mean, 1.0) ** (1.0 / self.norm_type), 0.0)


_LP_DOC = """Power-average pooling over the last {n} non-channel axes: ``(mean |x|^p)^(1/p)`` per window.

    ``p = 1`` is the mean of ``|x|``, a large ``p`` approaches max pooling of
    ``|x|``. The mean divides by the kernel size (padding counts as zeros),
    as brainstate does; the gradient is 0 (not NaN) on an all-zero window.

    Parameters
    ----------
    norm_type : float
        The power ``p`` (positive).
    kernel_size, stride, padding, channel_axis, in_size
        As ``MaxPool{n}d`` (``stride`` defaults to ``kernel_size``).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx import nn
    >>> nn.LPPool1d(2, 2, channel_axis=None)(jnp.array([3.0, 4.0, 1.0, 1.0])).tolist()
    [3.535533905029297, 1.0]
    """


class LPPool1d(_LPPool):
    __doc__ = _LP_DOC.format(n=1)
    pool_dim = 1


class LPPool2d(_LPPool):
    __doc__ = _LP_DOC.format(n=2)
    pool_dim = 2


class LPPool3d(_LPPool):
    __doc__ = _LP_DOC.format(n=3)
    pool_dim = 3


# -- adaptive ----------------------------------------------------------------------------
def _adaptive_axis(x, axis: int, target: int, reduce: Callable):
    """Reduce ``axis`` of ``x`` to ``target`` windows that tile it (larger windows first)."""
    length = x.shape[axis]
    if target > length:
        raise ValueError(f"Adaptive pooling cannot grow an axis: target {target} > input "
                         f"length {length}.")
    small, n_big = divmod(length, target)
    sizes = [small + 1] * n_big + [small] * (target - n_big)
    bounds = np.cumsum(sizes)[:-1].tolist()
    parts = jnp.split(x, bounds, axis=axis)
    return jnp.concatenate([reduce(p, axis=axis, keepdims=True) for p in parts], axis=axis)


class _AdaptivePool(Module):
    pool_dim: int = 1
    reduce: Callable = staticmethod(jnp.mean)

    def __init__(self, target_size: Union[int, Sequence[Optional[int]]],
                 channel_axis: Optional[int] = -1, name: Optional[str] = None,
                 in_size: Optional[Sequence[int]] = None):
        super().__init__(name=name)
        n = self.pool_dim
        target = (target_size,) * n if isinstance(target_size, int) else tuple(target_size)
        if len(target) != n or any(t is not None and (not isinstance(t, int) or t < 1)
                                   for t in target):
            raise ValueError(f"{type(self).__name__}: target_size must be a positive int or "
                             f"{n} positive ints (None: keep that axis), got {target_size!r}.")
        self.target_shape = target
        self.channel_axis = channel_axis
        _out_size(self, in_size)

    def update(self, x: Any) -> jax.Array:
        axes = _pool_axes(jnp.ndim(x), self.pool_dim, self.channel_axis, type(self).__name__)
        for axis, target in zip(axes, self.target_shape):
            if target is not None:
                x = _adaptive_axis(x, axis, target, type(self).reduce)
        return x


_ADAPTIVE_DOC = """Adaptive {kind} pooling: the last {n} non-channel axes become ``target_size``.

    Parameters
    ----------
    target_size : int or sequence of int (or None)
        Output length per pooled axis (``None``: leave that axis).
    channel_axis : int or None
        The axis not pooled.
    in_size : sequence of int, optional
        One sample's shape; gives ``out_size``.
    """


class AdaptiveAvgPool1d(_AdaptivePool):
    __doc__ = _ADAPTIVE_DOC.format(kind="average", n=1)
    pool_dim = 1


class AdaptiveAvgPool2d(_AdaptivePool):
    __doc__ = _ADAPTIVE_DOC.format(kind="average", n=2)
    pool_dim = 2


class AdaptiveAvgPool3d(_AdaptivePool):
    __doc__ = _ADAPTIVE_DOC.format(kind="average", n=3)
    pool_dim = 3


class AdaptiveMaxPool1d(_AdaptivePool):
    __doc__ = _ADAPTIVE_DOC.format(kind="max", n=1)
    pool_dim = 1
    reduce = staticmethod(jnp.max)


class AdaptiveMaxPool2d(_AdaptivePool):
    __doc__ = _ADAPTIVE_DOC.format(kind="max", n=2)
    pool_dim = 2
    reduce = staticmethod(jnp.max)


class AdaptiveMaxPool3d(_AdaptivePool):
    __doc__ = _ADAPTIVE_DOC.format(kind="max", n=3)
    pool_dim = 3
    reduce = staticmethod(jnp.max)
