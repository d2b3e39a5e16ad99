"""Linear layers with constrained weights (signed, weight-standardised) and low-rank adapters.

:class:`SignedWLinear` keeps every weight's sign fixed: the trained parameter
is a magnitude, and a fixed sign matrix says which connections excite and
which inhibit (``|W| * sign``), as a network obeying Dale's law needs.
:class:`ScaledWSLinear` standardises the weight of each output unit before
use (:func:`weight_standardization`, from the normaliser-free networks of
Brock et al. 2021), which keeps activations well scaled without batch
statistics. :class:`LoRA` adds a trainable low-rank path ``x @ A @ B`` beside
a frozen base layer (Hu et al. 2021). The names and signatures are brainstate's.
"""

from __future__ import annotations

from typing import Any, Optional

import brainunit as u
import jax
import jax.numpy as jnp

from brainx.nn.init import KaimingNormal, LecunNormal, ZeroInit, param, to_size
from brainx.nn.modules.module import Module
from brainx.state.state import ParamState

__all__ = ["SignedWLinear", "ScaledWSLinear", "LoRA", "weight_standardization"]


def weight_standardization(w: Any, eps: float = 1e-4, gain: Optional[Any] = None,
                           out_axis: int = -1) -> Any:
    """Standardise ``w`` over every axis but ``out_axis``: zero mean, variance ``1 / fan_in``.

    ``w_hat = (w - mean) / sqrt(max(var * fan_in, eps))``, times ``gain`` when
    given (one factor per output unit).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import weight_standardization
    >>> w = jnp.arange(12.0).reshape(3, 4)
    >>> s = weight_standardization(w)
    >>> bool(jnp.allclose(s.mean(axis=0), 0.0, atol=1e-6)), bool(jnp.allclose(s.var(axis=0), 1 / 3))
    (True, True)
    """
    unit = u.get_unit(w)
    w = u.get_mantissa(w)
    out_axis = out_axis % w.ndim
    axes = tuple(i for i in range(w.ndim) if i != out_axis)
    fan_in = 1
    for i in axes:
        fan_in *= w.shape[i]
    mean = jnp.mean(w, axis=axes, keepdims=True)
    var = jnp.var(w, axis=axes, keepdims=True)
    w = (w - mean) * jax.lax.rsqrt(jnp.maximum(var * fan_in, eps))
    if gain is not None:
        w = w * gain
    return w if unit.is_unitless else u.Quantity(w, unit=unit)


class SignedWLinear(Module):
    """``y = x @ (|W| * sign)``: a linear layer whose weights keep their signs.

    Parameters
    ----------
    in_size, out_size : int or tuple of int
        Feature sizes.
    w_init : initialiser or array
        The initial weight ``(in, out)`` (its magnitude is used).
    w_sign : array, optional
        ``+1`` / ``-1`` per weight (broadcastable to ``(in, out)``); ``None``:
        every weight positive.
    name : str, optional
    param_type : type
        The State class of the weight (``ParamState``).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> layer = brainx.nn.SignedWLinear(2, 2, w_init=jnp.array([[1.0, -2.0], [3.0, 4.0]]),
    ...                                 w_sign=jnp.array([[1.0, 1.0], [-1.0, -1.0]]))
    >>> layer(jnp.ones(2)).tolist()
    [-2.0, -2.0]
    """

    def __init__(self, in_size, out_size, w_init=KaimingNormal(), w_sign: Any = None,
                 name: Optional[str] = None, param_type: type = ParamState):
        super().__init__(name=name)
        self.in_size, self.out_size = to_size(in_size), to_size(out_size)
        self.w_sign = w_sign
        self.weight = param_type(param(w_init, (self.in_size[-1], self.out_size[-1]),
                                       allow_none=False))

    def update(self, x):
        w = u.math.abs(self.weight.value)
        return u.math.matmul(x, w if self.w_sign is None else w * self.w_sign)


class ScaledWSLinear(Module):
    """``y = x @ (weight_standardization(W, gain) * mask) + b``.

    Parameters
    ----------
    in_size, out_size : int or tuple of int
        Feature sizes.
    w_init, b_init : initialiser or array
        Initial weight ``(in, out)`` and bias ``(out,)`` (``b_init=None``: no bias).
    w_mask : array or callable, optional
        Multiplies the standardised weight.
    ws_gain : bool
        Learn a gain per output unit (starts at one).
    eps : float
        Lower bound of ``var * fan_in`` in the standardisation.
    name : str, optional
    param_type : type
        The State class of the parameters (``ParamState``).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> layer = brainx.nn.ScaledWSLinear(3, 2)
    >>> sorted(layer.weight.value), layer(jnp.ones((4, 3))).shape
    (['bias', 'gain', 'weight'], (4, 2))
    """

    def __init__(self, in_size, out_size, w_init=KaimingNormal(), b_init=ZeroInit(),
                 w_mask: Any = None, ws_gain: bool = True, eps: float = 1e-4,
                 name: Optional[str] = None, param_type: type = ParamState):
        super().__init__(name=name)
        self.in_size, self.out_size = to_size(in_size), to_size(out_size)
        shape = (self.in_size[-1], self.out_size[-1])
        self.eps = eps
        self.w_mask = param(w_mask, shape) if w_mask is not None else None
        params = {"weight": param(w_init, shape, allow_none=False)}
        if b_init is not None:
            params["bias"] = param(b_init, (self.out_size[-1],), allow_none=False)
        if ws_gain:
            params["gain"] = jnp.ones((1, self.out_size[-1]))
        self.weight = param_type(params)

    def update(self, x):
        params = self.weight.value
        w = weight_standardization(params["weight"], self.eps, params.get("gain"))
        if self.w_mask is not None:
            w = w * self.w_mask
        y = u.math.matmul(x, w)
        return y + params["bias"] if "bias" in params else y


class LoRA(Module):
    """A low-rank adapter: ``y = x @ A @ B`` (plus ``base_module(x)`` when given).

    Parameters
    ----------
    in_features, lora_rank, out_features : int
        ``A`` is ``(in_features, lora_rank)``, ``B`` is ``(lora_rank, out_features)``.
    base_module : callable, optional
        The layer adapted (its output is added; train only the adapter by
        differentiating with respect to ``adapter.weight``).
    kernel_init : initialiser
        Of both ``A`` and ``B``.
    param_type : type
        The State class of ``{"lora_a", "lora_b"}`` (``ParamState``).
    in_size : tuple, optional
        The input shape, when it has leading axes.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> base = brainx.nn.Linear(3, 2)
    >>> adapter = brainx.nn.LoRA(3, 1, 2, base_module=base)
    >>> a, b = adapter.weight.value["lora_a"], adapter.weight.value["lora_b"]
    >>> x = jnp.ones(3)
    >>> bool(jnp.allclose(adapter(x), x @ a @ b + base(x)))
    True
    """

    def __init__(self, in_features: int, lora_rank: int, out_features: int, *,
                 base_module: Optional[Any] = None, kernel_init: Any = LecunNormal(),
                 param_type: type = ParamState, in_size: Any = None):
        super().__init__()
        if base_module is not None and not callable(base_module):
            raise TypeError(f"LoRA: base_module must be callable (a layer), got {base_module!r}.")
        self.in_features, self.out_features = in_features, out_features
        self.in_size, self.out_size = (in_features,), (out_features,)
        if in_size is not None:
            self.in_size = to_size(in_size)
            self.out_size = tuple(self.in_size[:-1]) + (out_features,)
        self.base_module = base_module
        self.weight = param_type({
            "lora_a": param(kernel_init, (in_features, lora_rank), allow_none=False),
            "lora_b": param(kernel_init, (lora_rank, out_features), allow_none=False)})

    def update(self, x):
        params = self.weight.value
        out = x @ params["lora_a"] @ params["lora_b"]
        return out if self.base_module is None else out + self.base_module(x)
