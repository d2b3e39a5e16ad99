"""`Flatten` and `Unflatten`: reshape layers that merge or split axes.

Both take an optional ``in_size`` (the shape of one sample, without batch).
With it, the axes count from the end of that sample shape, so the same layer
works on batched and unbatched inputs, and ``out_size`` is known (which
:class:`~brainx.nn.Sequential` passes on to the next layer).

Examples
--------
>>> import jax.numpy as jnp
>>> from brainx import nn
>>> flat = nn.Flatten(in_size=(4, 4, 3))
>>> flat.out_size, flat(jnp.ones((2, 4, 4, 3))).shape, flat(jnp.ones((4, 4, 3))).shape
((48,), (2, 48), (48,))
>>> nn.Unflatten(-1, (4, 12))(jnp.ones((2, 48))).shape
(2, 4, 12)
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import jax.numpy as jnp

from brainx.nn.modules.module import Module

__all__ = ["Flatten", "Unflatten"]


def _axis(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{what}: axis {axis} is out of range for a {ndim}-D input.")
    return axis % ndim


class Flatten(Module):
    """Merge axes ``start_axis`` to ``end_axis`` (inclusive) into one.

    Parameters
    ----------
    start_axis, end_axis : int
        The first and last axes to merge. Without ``in_size`` they index the
        input as given; with it, the sample (so a leading batch axis is kept).
    in_size : sequence of int, optional
        The shape of one sample.
    """

    def __init__(self, start_axis: int = 0, end_axis: int = -1,
                 in_size: Optional[Sequence[int]] = None):
        super().__init__()
        self.start_axis, self.end_axis = start_axis, end_axis
        if in_size is not None:
            self.in_size = in_size
            self.out_size = self._flatten_shape(self.in_size, 0)

    def _bounds(self, ndim: int, offset: int):
        sample_ndim = ndim - offset
        start = _axis(self.start_axis, sample_ndim, "Flatten") + offset
        end = _axis(self.end_axis, sample_ndim, "Flatten") + offset
        if start > end:
            raise ValueError(f"Flatten: start_axis {self.start_axis} comes after end_axis "
                             f"{self.end_axis}.")
        return start, end

    def _flatten_shape(self, shape, offset: int):
        start, end = self._bounds(len(shape), offset)
        return tuple(shape[:start]) + (math.prod(shape[start:end + 1]),) + tuple(shape[end + 1:])

    def update(self, x: Any) -> Any:
        shape = jnp.shape(x)
        offset = 0
        if self.in_size is not None:
            offset = len(shape) - len(self.in_size)
            if offset < 0 or tuple(shape[offset:]) != self.in_size:
                raise ValueError(f"Flatten: expected inputs ending in shape {self.in_size}, got "
                                 f"{tuple(shape)}.")
        return jnp.reshape(x, self._flatten_shape(shape, offset))


class Unflatten(Module):
    """Split axis ``axis`` into ``sizes``.

    Parameters
    ----------
    axis : int
        The axis to split (of the input as given).
    sizes : sequence of int
        The new axes; their product must equal the size of ``axis``.
    in_size : sequence of int, optional
        The shape of one sample; gives ``out_size``.
    """

    def __init__(self, axis: int, sizes: Sequence[int], name: Optional[str] = None,
                 in_size: Optional[Sequence[int]] = None):
        super().__init__(name=name)
        if not isinstance(sizes, (tuple, list)) or not all(isinstance(s, int) for s in sizes):
            raise TypeError(f"Unflatten: sizes must be a tuple or list of ints, got {sizes!r}.")
        self.axis, self.sizes = axis, tuple(sizes)
        if in_size is not None:
            self.in_size = in_size
            self.out_size = self._shape(self.in_size)

    def _shape(self, shape):
        axis = _axis(self.axis, len(shape), "Unflatten")
        if math.prod(self.sizes) != shape[axis]:
            raise ValueError(f"Unflatten: sizes {self.sizes} (product {math.prod(self.sizes)}) "
                             f"do not match axis {self.axis} of size {shape[axis]}.")
        return tuple(shape[:axis]) + self.sizes + tuple(shape[axis + 1:])

    def update(self, x: Any) -> Any:
        return jnp.reshape(x, self._shape(jnp.shape(x)))
