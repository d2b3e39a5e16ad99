"""`Linear`: a dense layer ``y = x @ W + b`` whose weights are one `ParamState`."""

from __future__ import annotations

from typing import Optional

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx.nn.init import KaimingNormal, ZeroInit, param, to_size
from brainx.nn.modules.module import Module
from brainx.state.state import ParamState

__all__ = ["Linear"]


class Linear(Module):
    """Dense layer ``y = x @ W + b``.

    As in brainstate, the weights live in one :class:`~brainx.ParamState`,
    ``self.weight``, whose value is a dict ``{"weight": W, "bias": b}`` (no
    ``"bias"`` when ``b_init`` is ``None``). Give ``w_init`` / ``b_init`` a
    ``unit`` to make the output a quantity (``KaimingNormal(unit=u.mA)``: spikes
    in, currents out); the default zero bias then takes the weight's unit.

    Parameters
    ----------
    in_size, out_size : int or tuple of int
        Feature sizes (the last axis of ``x`` and of ``y``).
    w_init, b_init : initialiser or array
        Initial weight ``(in, out)`` and bias ``(out,)``; ``b_init=None``: no bias.
    w_mask : array or callable, optional
        Multiplies the weight (fixed connectivity, e.g. no self-connections).
        A callable (an initialiser, or ``f(shape)``) is called with the
        weight's shape ``(in, out)``, as in brainstate.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainunit as u, brainx
    >>> layer = brainx.nn.Linear(3, 2, w_init=jnp.ones((3, 2)), b_init=jnp.zeros(2))
    >>> layer(jnp.ones((4, 3))).tolist()[0]
    [3.0, 3.0]
    >>> list(layer.states())
    ['weight']
    """

    def __init__(self, in_size, out_size, w_init=KaimingNormal(), b_init=ZeroInit(),
                 w_mask=None, name: Optional[str] = None):
        super().__init__(name=name)
        self.in_size = in_size
        self.out_size = out_size
        shape = (self.in_size[-1], self.out_size[-1])
        if w_init is None:
            raise ValueError("Linear needs a w_init (an initialiser or an array).")
        weights = {"weight": _init(w_init, shape, "weight")}
        if b_init is not None:
            bias = _init(b_init, (self.out_size[-1],), "bias")
            W = weights["weight"]
            if isinstance(b_init, ZeroInit) and b_init.unit is None and isinstance(W, u.Quantity):
                bias = u.Quantity(bias, unit=W.unit)   # a zero bias takes the weight's unit
            weights["bias"] = bias
        if callable(w_mask) and not isinstance(w_mask, (jax.Array, np.ndarray)):
            w_mask = param(w_mask, shape)
        self.w_mask = None if w_mask is None else jnp.asarray(w_mask)
        if self.w_mask is not None:
            jnp.broadcast_shapes(self.w_mask.shape, shape)
        self.weight = ParamState(weights)

    def update(self, x):
        """``x @ (W * mask) + b``."""
        params = self.weight.value
        W = params["weight"]
        if self.w_mask is not None:
            W = W * self.w_mask
        if isinstance(x, u.Quantity) or isinstance(W, u.Quantity):
            y = u.math.matmul(x, W)
        else:  # no unit to carry: jnp directly (brainunit's dispatch costs each trace)
            y = jnp.matmul(x, W)
        if "bias" in params:
            y = y + params["bias"]
        return y


def _init(init, shape, what: str):
    value = init(shape) if callable(init) and not isinstance(init, u.Quantity) else init
    got = jnp.shape(value.mantissa if isinstance(value, u.Quantity) else value)
    if tuple(got) != tuple(to_size(shape)):
        raise ValueError(f"Linear: the initial {what} has shape {tuple(got)}, expected {shape}.")
    return value if isinstance(value, u.Quantity) else jnp.asarray(value)
