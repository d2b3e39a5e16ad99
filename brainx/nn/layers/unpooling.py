"""Max unpooling: `MaxUnpool1d`, `MaxUnpool2d`, `MaxUnpool3d`, partial inverses of `MaxPool*`.

``MaxPool*(..., return_indices=True)`` returns the pooled values and, for each,
the flat position of the maximum it came from. An unpooling layer puts each
value back at that position and zeros everywhere else.

The positions are counted in a layout that depends only on the pooled shape
and the pooling parameters: ``(L - 1) * stride + kernel_size - padding`` along
each pooled axis (``L`` the pooled length), the other axes keeping their size
(see :func:`brainx.nn.layers.pooling.index_layout`). Several input lengths pool
to the same ``L`` (5 and 4 both give 2 with kernel and stride 2), so the
layout cannot be the input's own; it is when the windows tile an unpadded
input exactly. The output defaults to the natural length
``(L - 1) * stride - 2 * padding + kernel_size``; ``output_size`` asks for
another (the original odd length, say), and a position outside it is dropped.

Examples
--------
>>> import jax.numpy as jnp
>>> from brainx import nn
>>> pool = nn.MaxPool1d(2, return_indices=True, channel_axis=None)
>>> unpool = nn.MaxUnpool1d(2, channel_axis=None)
>>> y, where = pool(jnp.array([1.0, 3.0, 2.0, 0.0, 9.0]))
>>> unpool(y, where).tolist(), unpool(y, where, output_size=5).tolist()
([0.0, 3.0, 2.0, 0.0], [0.0, 3.0, 2.0, 0.0, 0.0])
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from brainx.nn.layers.conv import replicate
from brainx.nn.layers.pooling import _pool_axes
from brainx.nn.modules.module import Module

__all__ = ["MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]

Size = Union[int, Sequence[int]]


class _MaxUnpool(Module):
    pool_dim: int = 1

    def __init__(self, kernel_size: Size, stride: Optional[Size] = None, padding: Size = 0,
                 channel_axis: Optional[int] = -1, name: Optional[str] = None,
                 in_size: Optional[Sequence[int]] = None):
        super().__init__(name=name)
        n, what = self.pool_dim, type(self).__name__
        self.kernel_size = replicate(kernel_size, n, "kernel_size")
        self.stride = replicate(self.kernel_size if stride is None else stride, n, "stride")
        if isinstance(padding, str) or np.ndim(padding) > 1:
            raise TypeError(f"{what}: padding must be an int or {n} ints (the pooling's symmetric "
                            f"padding per axis), got {padding!r}.")
        self.padding = replicate(padding, n, "padding")
        if channel_axis is not None and not isinstance(channel_axis, int):
            raise TypeError(f"{what}: channel_axis must be an int or None, got {channel_axis!r}.")
        self.channel_axis = channel_axis
        if in_size is not None:
            self.in_size = tuple(in_size)

    def _shapes(self, shape: Tuple[int, ...], output_size: Any):
        """The index layout of the pooled ``shape`` and the requested output shape."""
        axes = _pool_axes(len(shape), self.pool_dim, self.channel_axis, type(self).__name__)
        layout, natural = list(shape), list(shape)
        for i, axis in enumerate(axes):
            k, s, p = self.kernel_size[i], self.stride[i], self.padding[i]
            layout[axis] = (shape[axis] - 1) * s + k - p
            natural[axis] = (shape[axis] - 1) * s + k - 2 * p
        if output_size is None:
            return tuple(layout), tuple(natural)
        sizes = (output_size,) * self.pool_dim if isinstance(output_size, int) else tuple(output_size)
        if len(sizes) == len(shape):
            return tuple(layout), tuple(int(n) for n in sizes)
        if len(sizes) != self.pool_dim:
            raise ValueError(f"{type(self).__name__}: output_size must be an int, {self.pool_dim} "
                             f"ints (the pooled axes) or {len(shape)} ints (the whole output), "
                             f"got {output_size!r}.")
        out = list(shape)
        for axis, n in zip(axes, sizes):
            out[axis] = int(n)
        return tuple(layout), tuple(out)

    def update(self, x: Any, indices: Any, output_size: Any = None) -> jax.Array:
        """Put each value of ``x`` at the position ``indices`` gives it, zeros elsewhere.

        Parameters
        ----------
        x : array
            The pooled values (``MaxPool*``'s first output).
        indices : int array of ``x``'s shape
            ``MaxPool*``'s second output.
        output_size : int or sequence of int, optional
            The output length per pooled axis, or the whole output shape
            (default: the natural ``(L - 1) * stride - 2 * padding + kernel_size``).

        Returns
        -------
        array
        """
        x, indices = jnp.asarray(x), jnp.asarray(indices)
        if indices.shape != x.shape:
            raise ValueError(f"{type(self).__name__}: indices of shape {indices.shape} must match "
                             f"the pooled values' shape {x.shape}.")
        layout, out_shape = self._shapes(x.shape, output_size)
        size = int(np.prod(out_shape))
        flat = indices.reshape(-1)
        if layout != out_shape:
            coords = jnp.unravel_index(flat, layout)
            inside = jnp.ones(flat.shape, bool)
            for c, n in zip(coords, out_shape):
                inside = inside & (c < n)
            moved = jnp.ravel_multi_index(coords, out_shape, mode="clip")
            flat = jnp.where(inside, moved, size)            # outside: a slot dropped below
        out = jnp.zeros(size + 1, x.dtype).at[flat].set(x.reshape(-1))
        return out[:size].reshape(out_shape)


_UNPOOL_DOC = """Partial inverse of ``MaxPool{n}d(..., return_indices=True)``: maxima back in place, zeros elsewhere.

    Parameters
    ----------
    kernel_size, stride : int or sequence of int
        The pooling's (``stride`` defaults to ``kernel_size``).
    padding : int or sequence of int
        The pooling's symmetric padding per pooled axis (default 0).
    channel_axis : int or None
        The axis not pooled, as in the pooling.
    in_size : sequence of int, optional
        One pooled sample's shape.

    Calling it: ``unpool(pooled, indices, output_size=None)`` (see
    :meth:`update`); the module docstring describes the index layout.
    """


class MaxUnpool1d(_MaxUnpool):
    __doc__ = _UNPOOL_DOC.format(n=1)
    pool_dim = 1


class MaxUnpool2d(_MaxUnpool):
    __doc__ = _UNPOOL_DOC.format(n=2)
    pool_dim = 2


class MaxUnpool3d(_MaxUnpool):
    __doc__ = _UNPOOL_DOC.format(n=3)
    pool_dim = 3
