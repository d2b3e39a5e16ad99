"""`clip_grad_norm`: scale a gradient pytree so that its global norm is at most ``max_norm``."""

from __future__ import annotations

from typing import Any, Union

import jax
import jax.numpy as jnp

__all__ = ["clip_grad_norm"]


def clip_grad_norm(grad: Any, max_norm: Union[float, jax.Array],
                   norm_type: Union[int, float, str, None] = 2.0, return_norm: bool = False):
    """Scale every leaf of ``grad`` by ``min(1, max_norm / (norm + 1e-6))``.

    The norm is that of all leaves flattened into one vector.

    Parameters
    ----------
    grad : pytree
        The gradients (for example the dict that ``brainx.transform.grad`` returns).
    max_norm : float
        The largest global norm kept.
    norm_type : float, ``"inf"`` or ``"-inf"``
        The order of the norm (``None``: 2).
    return_norm : bool
        Also return the norm before clipping.

    Returns
    -------
    pytree, or (pytree, Array)
        The clipped gradients (and the original norm).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import clip_grad_norm
    >>> g, norm = clip_grad_norm({"w": jnp.array([3.0, 4.0])}, max_norm=1.0, return_norm=True)
    >>> float(norm), [round(v, 4) for v in g["w"].tolist()]
    (5.0, [0.6, 0.8])
    """
    order = {None: 2.0, "inf": jnp.inf, "-inf": -jnp.inf}.get(norm_type, norm_type)
    leaves = jax.tree.leaves(grad)
    if not leaves:
        return (grad, jnp.array(0.0)) if return_norm else grad
    total = jnp.linalg.norm(jnp.concatenate([jnp.ravel(g) for g in leaves]), ord=order)
    factor = jnp.minimum(1.0, max_norm / (total + 1e-6))
    clipped = jax.tree.map(lambda g: g * factor, grad)
    return (clipped, total) if return_norm else clipped
