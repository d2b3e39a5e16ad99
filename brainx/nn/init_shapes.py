"""Shapes and gains for :mod:`brainx.nn.init`: sizes as tuples, brainstate's broadcasting test, the
gain recommended for a nonlinearity.

:mod:`brainx.nn.init` re-exports every name here; brainstate's tests reach the private
helpers through it (``brainstate.nn.init._format_shape``).

Examples
--------
>>> from brainx.nn.init_shapes import to_size, are_broadcastable_shapes
>>> to_size(3), are_broadcastable_shapes((1, 3), (4, 3))
((3,), True)
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import brainunit as u
import numpy as np

from brainx.nn.plain_arrays import is_scalar

__all__ = ["to_size", "are_broadcastable_shapes", "calculate_init_gain"]


def to_size(size: int | Sequence[int] | None) -> Optional[Tuple[int, ...]]:
    """``3 -> (3,)``, ``(2, 3) -> (2, 3)``, ``None -> None`` (as brainstate).

    Examples
    --------
    >>> from brainx.nn.init import to_size
    >>> to_size(3), to_size([2, 3]), to_size(None)
    ((3,), (2, 3), None)
    """
    if size is None:
        return None
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    if not isinstance(size, (tuple, list)):
        raise ValueError(f"A size is an int or a sequence of ints, got {size!r}.")
    size = tuple(int(s) for s in size)
    if any(s < 0 for s in size):
        raise ValueError(f"Sizes must be non-negative, got {size}.")
    return size


def _format_shape(shape) -> Tuple[int, ...]:
    # brainstate's helper: an int, a shape, or a shape wrapped in a one-element sequence
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    if len(shape) == 0:
        raise ValueError("An initialiser needs a non-empty shape, got ().")
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def are_broadcastable_shapes(shape1: Sequence[int], shape2: Sequence[int]) -> bool:
    """Whether the trailing axes of two shapes agree or are 1 (brainstate's check in ``param``)."""
    return all(a == b or 1 in (a, b) for a, b in zip(reversed(shape1), reversed(shape2)))


def _is_scalar(x) -> bool:
    return is_scalar(x)   # brainunit's isscalar of a float Quantity imports torch (issue 45)


def _expand_params_to_match_sizes(value, sizes):
    # leading length-1 axes until value has as many axes as sizes
    for _ in range(len(sizes) - value.ndim):
        value = u.math.expand_dims(value, axis=0)
    return value


def calculate_init_gain(nonlinearity: str, param: Optional[float] = None) -> float:
    """The gain recommended for a nonlinearity (PyTorch's table, as brainstate).

    ``linear``, the ``conv*`` names and ``sigmoid``: 1; ``tanh``: 5/3; ``relu``:
    sqrt(2); ``leaky_relu``: sqrt(2 / (1 + slope^2)) with ``param`` the slope
    (default 0.01); ``selu``: 3/4.

    Examples
    --------
    >>> from brainx.nn.init import calculate_init_gain
    >>> calculate_init_gain("tanh")
    1.6666666666666667
    """
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_init_gain: the leaky_relu slope must be a number, "
                             f"got {param!r}.")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_init_gain: unsupported nonlinearity {nonlinearity!r}; use one "
                     f"of {linear + ('tanh', 'relu', 'leaky_relu', 'selu')}.")
