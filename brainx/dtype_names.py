"""A dtype's printed name, for reprs and errors in ``brainx.state`` and ``brainx.util`` alike.

It sits below both packages (``brainx.util`` imports ``brainx.state``), so
either can use it without an import circle.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

__all__ = ["dtype_name"]


def dtype_name(dtype: Any) -> str:
    """A dtype's name: ``'float32'``, or ``'key<fry>'`` for a typed PRNG key (which
    ``numpy.dtype`` cannot read).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.dtype_names import dtype_name
    >>> dtype_name(jnp.float32), dtype_name(jax.random.key(0).dtype)
    ('float32', 'key<fry>')
    """
    if jax.dtypes.issubdtype(dtype, jax.dtypes.extended):
        return str(dtype.name)
    return np.dtype(dtype).name
