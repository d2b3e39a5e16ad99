"""What a state's value may be, and how it is shown.

A state created inside a transform holds a tracer of that transform's trace;
when the trace ends its value becomes an :class:`_Expired` stand-in, so that a
later read can say where the state was made instead of failing inside JAX.
:func:`describe_value` is the short form of a value used in reprs and errors.
"""

from __future__ import annotations

from typing import Any, Optional

import brainunit as u
import jax
import numpy as np

__all__ = ["describe_value", "dtype_name"]

# The values a HiddenState (one array) may hold.
_ARRAY_TYPES = (jax.Array, np.ndarray, np.generic, int, float, complex, u.Quantity)


class _Expired:
    """Stands in for the value of a state whose tracer died with its transform."""

    __slots__ = ("where",)

    def __init__(self, where: Optional[str]):
        self.where = where


def describe_value(value: Any) -> str:
    """``shape=(3,), dtype=float32`` for one array; a tree of ``float32[3]`` otherwise.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.state.values import describe_value
    >>> describe_value(jnp.zeros((2, 3)))
    'shape=(2, 3), dtype=float32'
    >>> describe_value({"w": jnp.zeros(2)})
    "value={'w': 'float32[2]'}"
    """
    if type(value) is _Expired:
        return f"<expired: created inside {value.where or 'a transform'}>"
    leaves, treedef = jax.tree.flatten(value)
    if treedef.num_leaves == 1 and treedef.num_nodes == 1:
        return _describe_array(value)
    unit = _unit_of(value)
    if unit is not None and len(leaves) == 1:
        return f"{_describe_array(leaves[0])}, unit={unit}"
    short = jax.tree.map(_short_array, value)
    return f"value={short}"


def _describe_array(x: Any) -> str:
    shape, dtype = np.shape(x), getattr(x, "dtype", None)
    if dtype is None:
        return f"value={x!r}"
    return f"shape={tuple(shape)}, dtype={dtype_name(dtype)}"


def _short_array(x: Any) -> str:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return repr(x)
    return f"{dtype_name(dtype)}{list(np.shape(x))}"


def dtype_name(dtype: Any) -> str:
    """A dtype's name: ``'float32'``, or ``'key<fry>'`` for a typed PRNG key (which
    ``numpy.dtype`` cannot read).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.state.values import dtype_name
    >>> dtype_name(jnp.float32), dtype_name(jax.random.key(0).dtype)
    ('float32', 'key<fry>')
    """
    if jax.dtypes.issubdtype(dtype, jax.dtypes.extended):
        return str(dtype.name)
    return np.dtype(dtype).name


def _unit_of(value: Any):
    return value.unit if isinstance(value, u.Quantity) else None
