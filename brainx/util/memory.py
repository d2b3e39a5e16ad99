"""Freeing device memory by hand: :func:`clear_buffer_memory`.

JAX frees an array's device buffer when the last Python reference to it goes
away. In a notebook or a long sweep, references linger (``_``, tracebacks,
caches) and GPU memory fills up; :func:`clear_buffer_memory` deletes *every*
live array on a platform, optionally clears JAX's compilation caches, and runs
the garbage collector.

.. warning::

   Every live array is deleted, including the values of your states and model
   parameters: reading them afterwards raises ``RuntimeError: Array has been
   deleted``. Use it between independent runs, and re-create (or reload)
   what you need after it.
"""

from __future__ import annotations

import gc
import warnings
from typing import Optional

import jax

__all__ = ["clear_buffer_memory"]


def clear_buffer_memory(platform: Optional[str] = None, array: bool = True,
                        compilation: bool = False) -> None:
    """Delete every live JAX array on ``platform`` and/or clear the compilation caches.

    Parameters
    ----------
    platform : str, optional
        ``"cpu"``, ``"gpu"``, ``"tpu"``; default: JAX's default backend.
    array : bool
        Delete the live arrays (default ``True``). An array that cannot be
        deleted gives a ``RuntimeWarning`` and is left.
    compilation : bool
        Also clear JAX's caches of compiled functions (``jax.clear_caches``).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.util import clear_buffer_memory
    >>> x = jnp.ones(3)
    >>> clear_buffer_memory(array=False, compilation=True)   # caches only: x survives
    >>> float(x.sum())
    3.0
    """
    if array:
        for arr in jax.live_arrays(platform):
            try:
                arr.delete()
            except Exception as e:  # pragma: no cover - depends on the backend
                warnings.warn(f"clear_buffer_memory: could not delete a live array of shape "
                              f"{getattr(arr, 'shape', '?')}: {e}", RuntimeWarning, stacklevel=2)
    if compilation:
        jax.clear_caches()
    gc.collect()
