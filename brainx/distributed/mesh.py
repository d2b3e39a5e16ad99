"""Meshes for stateful code: ``make_mesh`` with axes the compiler partitions (``Auto``).

``jax.make_mesh`` now gives *explicit* axes by default: every array then
carries its sharding in its type, and operations on differently sharded arrays
must be resharded by hand. brainx's transforms place states and arguments and
let XLA partition the rest, which is what ``Auto`` axes mean; use
:func:`make_mesh` (or pass ``axis_types`` yourself) for meshes that states
live on.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

__all__ = ["make_mesh"]


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str],
              devices: Optional[Sequence[jax.Device]] = None) -> Mesh:
    """A device mesh whose axes XLA partitions automatically.

    Parameters
    ----------
    axis_shapes : sequence of int
        Devices along each axis (their product: the number of devices used).
    axis_names : sequence of str
        A name per axis, used in ``PartitionSpec`` s and collectives.
    devices : sequence of Device, optional
        The devices (default: all of them, as ``jax.make_mesh`` orders them).

    Returns
    -------
    jax.sharding.Mesh

    Examples
    --------
    >>> import brainx
    >>> mesh = brainx.distributed.make_mesh((1,), ("data",))
    >>> dict(mesh.shape)
    {'data': 1}
    """
    axis_shapes, axis_names = tuple(axis_shapes), tuple(axis_names)
    if len(axis_shapes) != len(axis_names):
        raise ValueError(f"make_mesh: {len(axis_shapes)} axis sizes {axis_shapes} but "
                         f"{len(axis_names)} names {axis_names}.")
    types = (AxisType.Auto,) * len(axis_names)
    if devices is None:
        return jax.make_mesh(axis_shapes, axis_names, axis_types=types)
    n = math.prod(axis_shapes)
    if len(devices) != n:
        raise ValueError(f"make_mesh: the axes {axis_shapes} need {n} devices, got "
                         f"{len(devices)}.")
    return Mesh(np.asarray(devices).reshape(axis_shapes), axis_names, axis_types=types)
