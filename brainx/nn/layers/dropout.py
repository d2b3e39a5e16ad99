"""Dropout layers: zero random inputs while fitting, pass them through otherwise.

Whether the model is being fitted is the setting ``fit`` of
:mod:`brainx.environ`, as in brainstate: run a training step inside
``with brainx.environ.context(fit=True):`` and evaluate inside
``context(fit=False)``. Reading it when it was never set is an error that
says how to set it. The setting is read when a step is traced, so a jitted
step keeps the phase it was compiled in: jit one step per phase.

``prob`` is the probability to **keep** an element (brainstate's
convention); kept elements are scaled by ``1 / prob`` so the expected output
equals the input. The masks come from :mod:`brainx.random` (under
``brainx.transform.vmap`` every lane draws its own).

Examples
--------
>>> import jax.numpy as jnp, brainx
>>> from brainx import nn
>>> brainx.random.seed(0)
>>> drop = nn.Dropout(prob=0.5)
>>> with brainx.environ.context(fit=True):
...     y = drop(jnp.ones(1000))
>>> sorted(set(y.tolist())), 400 < int((y > 0).sum()) < 600
([0.0, 2.0], True)
>>> with brainx.environ.context(fit=False):
...     drop(jnp.ones(3)).tolist()
[1.0, 1.0, 1.0]
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import jax.numpy as jnp

from brainx import environ, random
from brainx.nn.modules.containers import ElementWiseBlock

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


def _fitting() -> bool:
    return bool(environ.get("fit", desc="whether the model is being fitted: True in a "
                                        "training step, False when evaluating"))


def _check_prob(prob: float) -> float:
    if not 0.0 <= prob <= 1.0:
        raise ValueError(f"Dropout: prob is the probability to keep an element and must be in "
                         f"[0, 1], got {prob}.")
    return prob


def _keep(x: Any, prob: float, mask_shape: Sequence[int]) -> Any:
    keep = jnp.broadcast_to(random.bernoulli(prob, tuple(mask_shape)), jnp.shape(x))
    return jnp.where(keep, x / prob, jnp.zeros((), jnp.result_type(x)))


class Dropout(ElementWiseBlock):
    """Keep each element with probability ``prob`` (scaled by ``1 / prob``) while fitting.

    Parameters
    ----------
    prob : float
        Probability to keep an element.
    broadcast_dims : sequence of int
        Axes along which one mask value is shared (``(0,)``: the same mask
        for every sample of a batch).
    """

    def __init__(self, prob: float = 0.5, broadcast_dims: Sequence[int] = (),
                 name: Optional[str] = None):
        super().__init__(name=name)
        self.prob = _check_prob(prob)
        self.broadcast_dims = tuple(broadcast_dims)

    def update(self, x: Any) -> Any:
        if not (_fitting() and self.prob < 1.0):
            return x
        shape = list(jnp.shape(x))
        for d in self.broadcast_dims:
            shape[d] = 1
        return _keep(x, self.prob, shape)


class _DropoutNd(ElementWiseBlock):
    """Drop whole channels: one mask value per (sample, channel)."""

    minimal_dim: int = 2

    def __init__(self, prob: float = 0.5, channel_axis: int = -1, name: Optional[str] = None):
        super().__init__(name=name)
        self.prob = _check_prob(prob)
        self.channel_axis = channel_axis

    def update(self, x: Any) -> Any:
        ndim = jnp.ndim(x)
        if ndim not in (self.minimal_dim, self.minimal_dim + 1):
            raise ValueError(
                f"{type(self).__name__} expects a {self.minimal_dim}-D input (spatial axes and "
                f"channels) or {self.minimal_dim + 1}-D (with a leading batch axis), got shape "
                f"{jnp.shape(x)}.")
        batched = ndim == self.minimal_dim + 1
        channel = self.channel_axis + (ndim if self.channel_axis < 0 else int(batched))
        if batched and channel == 0:
            raise ValueError(f"{type(self).__name__}: channel_axis {self.channel_axis} points "
                             "at the batch axis.")
        if not (_fitting() and self.prob < 1.0):
            return x
        keep = {channel, 0} if batched else {channel}
        shape = [n if i in keep else 1 for i, n in enumerate(jnp.shape(x))]
        return _keep(x, self.prob, shape)


class Dropout1d(_DropoutNd):
    """Drop whole channels of ``(L, C)`` / ``(N, L, C)`` inputs (``prob``: keep probability)."""

    minimal_dim = 2


class Dropout2d(_DropoutNd):
    """Drop whole channels of ``(H, W, C)`` / ``(N, H, W, C)`` inputs (``prob``: keep probability)."""

    minimal_dim = 3


class Dropout3d(_DropoutNd):
    """Drop whole channels of ``(D, H, W, C)`` / ``(N, D, H, W, C)`` inputs."""

    minimal_dim = 4
