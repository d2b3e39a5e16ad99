"""flax.nnx: the layer mappings and the container adapter.

nnx modules, like brainx's, hold their weights as mutable variables, in the
same layouts; the conversions copy arrays and translate settings. Exported
layers that behave differently in training and evaluation (``Dropout``,
``BatchNorm``) are built in evaluation mode (``deterministic=True``,
``use_running_average=True``); call ``model.train()`` on the nnx model to train it.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional

import jax.numpy as jnp

from brainx import nn
from brainx.interop import brainx_layers as B
from brainx.interop import flax_common as F
from brainx.interop.context import require
from brainx.interop.engine import Adapter
from brainx.interop.functions import move_channels
from brainx.interop.registry import LayerMapping

__all__ = ["load", "builtin_mappings", "NnxAdapter"]

nnx: Any = None     # flax.nnx, imported by load()


def _get(var: Any) -> Optional[jnp.ndarray]:
    if var is None:
        return None
    try:
        return jnp.asarray(var[...])
    except (TypeError, IndexError):     # an older flax without Variable.__getitem__
        return jnp.asarray(var.value)


def _set(var: Any, value: Any) -> None:
    if hasattr(var, "set_value"):
        var.set_value(jnp.asarray(value))
    else:                               # flax < 0.12
        var.value = jnp.asarray(value)


def _rngs(ctx) -> Any:
    return ctx.rngs if ctx.rngs is not None else nnx.Rngs(0)


class NnxAdapter(Adapter):
    """flax.nnx's containers: ``nnx.Sequential`` and plain functions in it."""

    name = "nnx"

    def children(self, node: Any) -> Optional[List[Any]]:
        return list(node.layers) if isinstance(node, nnx.Sequential) else None

    def as_function(self, node: Any) -> Optional[Callable]:
        return node if callable(node) and not isinstance(node, nnx.Module) else None

    def has_submodules(self, node: Any) -> bool:
        return any(m is not node for _, m in nnx.iter_graph(node) if isinstance(m, nnx.Module))

    def function(self, fn: Callable) -> Any:
        return fn

    def sequential(self, children: List[Any]) -> Any:
        return nnx.Sequential(*children)


# -- per-layer conversions ------------------------------------------------------------------

def _linear_in(m, ctx):
    return B.build_linear(B.LinearSpec(_get(m.kernel), _get(m.bias)), ctx)


def _linear_out(layer, ctx):
    s = B.read_linear(layer)
    m = nnx.Linear(*s.weight.shape, use_bias=s.bias is not None, param_dtype=s.weight.dtype,
                   rngs=_rngs(ctx))
    _set(m.kernel, s.weight)
    if s.bias is not None:
        _set(m.bias, s.bias)
    return m


def _embed_in(m, ctx):
    return B.build_embedding(B.EmbedSpec(_get(m.embedding)), ctx)


def _embed_out(layer, ctx):
    s = B.read_embedding(layer)
    m = nnx.Embed(*s.table.shape, param_dtype=s.table.dtype, rngs=_rngs(ctx))
    _set(m.embedding, s.table)
    return m


def _conv_in(m, ctx):
    spec = F.conv_spec(m, _get(m.kernel), _get(m.bias), "nnx.Conv")
    return B.build_conv(spec._replace(channel_first=ctx.layout == "first"), ctx)


def _conv_out(layer, ctx):
    s = B.read_conv(layer)
    m = nnx.Conv(int(s.kernel.shape[-2]) * s.groups, int(s.kernel.shape[-1]), **F.conv_kwargs(s),
                 param_dtype=s.kernel.dtype, rngs=_rngs(ctx))
    _set(m.kernel, s.kernel)
    if s.bias is not None:
        _set(m.bias, s.bias)
    if not s.channel_first:
        return m
    c = -(s.num_spatial_dims + 1)     # brainx takes channels first: move them around the conv
    return nnx.Sequential(functools.partial(move_channels, src=c, dst=-1), m,
                          functools.partial(move_channels, src=-1, dst=c))


def _norm_in(kind):
    def convert(m, ctx):
        features = m.num_features if kind != "group" else m.num_groups * m.group_size
        spec = F.norm_spec(kind, m, features, _get(m.scale), _get(getattr(m, "bias", None)),
                           f"nnx.{type(m).__name__}")
        return B.build_norm(spec, ctx)
    return convert


def _norm_out(layer, ctx):
    s = B.read_norm(layer)
    dtype = next((v.dtype for v in (s.scale, s.bias) if v is not None), jnp.float32)
    common = dict(epsilon=s.epsilon, use_scale=s.scale is not None, param_dtype=dtype,
                  use_fast_variance=s.use_fast_variance, rngs=_rngs(ctx))
    if s.kind == "rms":
        m = nnx.RMSNorm(s.features, **common)
    elif s.kind == "layer":
        m = nnx.LayerNorm(s.features, use_bias=s.bias is not None, **common)
    else:
        m = nnx.GroupNorm(s.features, num_groups=s.num_groups, use_bias=s.bias is not None,
                          **common)
    if s.scale is not None:
        _set(m.scale, s.scale)
    if s.bias is not None:
        _set(m.bias, s.bias)
    return m


def _batchnorm_in(m, ctx):
    spec = F.batchnorm_spec(m, _get(m.scale), _get(m.bias), _get(m.mean), _get(m.var),
                            "nnx.BatchNorm")
    return B.build_batchnorm(spec, ctx)


def _batchnorm_out(layer, ctx):
    s = B.read_batchnorm(layer)
    m = nnx.BatchNorm(s.features, use_running_average=True, momentum=s.momentum,
                      epsilon=s.epsilon, use_scale=s.scale is not None,
                      use_bias=s.bias is not None, use_fast_variance=s.use_fast_variance,
                      axis_name=s.axis_name, param_dtype=s.mean.dtype, rngs=_rngs(ctx))
    for var, value in ((m.scale, s.scale), (m.bias, s.bias), (m.mean, s.mean), (m.var, s.var)):
        if value is not None:
            _set(var, value)
    return m


def _dropout_in(m, ctx):
    return B.build_dropout(F.dropout_spec(m), ctx)


def _dropout_out(layer, ctx):
    s = B.read_dropout(layer)
    return nnx.Dropout(s.rate, broadcast_dims=s.broadcast_dims, deterministic=True,
                       rngs=_rngs(ctx))


# -- loading --------------------------------------------------------------------------------

def load() -> NnxAdapter:
    """Import flax.nnx (or raise :class:`MissingDependencyError`) and return the adapter."""
    global nnx
    nnx = require("flax.nnx", "flax.nnx")
    return NnxAdapter()


def builtin_mappings(adapter: NnxAdapter) -> List[LayerMapping]:
    """The built-in nnx mappings (:func:`load` has run)."""
    pairs = [(nn.Linear, nnx.Linear, _linear_in, _linear_out),
             (nn.Embedding, nnx.Embed, _embed_in, _embed_out),
             (nn.LayerNorm, nnx.LayerNorm, _norm_in("layer"), _norm_out),
             (nn.RMSNorm, nnx.RMSNorm, _norm_in("rms"), _norm_out),
             (nn.GroupNorm, nnx.GroupNorm, _norm_in("group"), _norm_out),
             (nn.Dropout, nnx.Dropout, _dropout_in, _dropout_out)]
    pairs += [(cls, nnx.Conv, _conv_in, _conv_out) for cls in B.CONV_TYPES.values()]
    pairs += [(cls, nnx.BatchNorm, _batchnorm_in, _batchnorm_out)
              for cls in B.BATCHNORM_TYPES.values()]
    return [LayerMapping(b, "nnx", f, i, o) for b, f, i, o in pairs]
