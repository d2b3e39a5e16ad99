"""brainstate's private helpers of ``brainstate.random`` (see :mod:`brainx.compat.private`).

Served as ``brainstate.random._state``. Each helper is brainx's own function
under the name brainstate's tests import:

==================  ===========================================================
brainstate name     brainx
==================  ===========================================================
``formalize_key``   :func:`brainx.random.state.as_key` (a seed, typed or raw key
                    to a typed key)
``_size2shape``     :func:`brainx.random.params.shape_of` (``size`` to a shape)
``_check_py_seq``   :func:`brainx.random.params.as_param` (a list or tuple
                    parameter to an array)
==================  ===========================================================

Examples
--------
>>> import jax
>>> from brainx.compat.private.random import formalize_key, _size2shape
>>> formalize_key(0).dtype, _size2shape([2, 3]), _size2shape(None)
(key<fry>, (2, 3), ())
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from brainx.compat.private import public_fallback
from brainx.random.params import Size, as_param, shape_of
from brainx.random.state import as_key

__all__ = ["formalize_key", "_size2shape", "_check_py_seq"]


def formalize_key(key: Any) -> Any:
    """A typed PRNG key from an integer seed (also a length-one integer array, as brainstate
    takes), a typed key or a raw ``uint32[2]`` key."""
    dtype = getattr(key, "dtype", None)
    if dtype is not None and np.shape(key) == (1,) and jnp.issubdtype(dtype, jnp.integer):
        key = key.reshape(())
    return as_key(key, "key")


def _size2shape(size: Size) -> tuple:
    """``size`` as a shape tuple (``None`` is ``()``, an integer ``(n,)``)."""
    return shape_of(size)


def _check_py_seq(seq: Any) -> Any:
    """A list or tuple as an array; anything else as it is."""
    return as_param(seq)


__getattr__ = public_fallback(__name__, "brainx.random")
