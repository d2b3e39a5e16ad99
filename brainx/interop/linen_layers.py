"""flax.linen: the layer mappings and the container adapter.

A linen model is a module (the architecture) plus a tree of variables (the
weights: ``{"params": ..., "batch_stats": ...}``). The walk carries both in a
:class:`LinenNode`, each node holding the slice of the variables its module
owns; ``nn.Sequential`` names its children's slices ``layers_0``,
``layers_1``... by position. Layouts are brainx's, as in nnx.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, Tuple

import jax.numpy as jnp

from brainx import nn
from brainx.interop import brainx_layers as B
from brainx.interop import flax_common as F
from brainx.interop.context import require
from brainx.interop.engine import Adapter
from brainx.interop.errors import ConversionError
from brainx.interop.functions import move_channels
from brainx.interop.registry import LayerMapping

__all__ = ["load", "builtin_mappings", "LinenAdapter", "LinenNode"]

linen: Any = None     # flax.linen, imported by load()

# the variable collections the mappings read; a mapping with none of them is a bare params tree
_COLLECTIONS = frozenset({"params", "batch_stats"})


class LinenNode:
    """A linen module and the variables that belong to it (``{"params": {...}, ...}``)."""

    __slots__ = ("module", "variables")

    def __init__(self, module: Any, variables: Dict[str, Any]):
        self.module, self.variables = module, variables

    def __repr__(self) -> str:
        return f"LinenNode({type(self.module).__name__}, {sorted(self.variables)})"


def _plain(tree: Any) -> Any:
    if isinstance(tree, Mapping):
        return {k: _plain(v) for k, v in tree.items()}
    return tree


def _params(node: LinenNode) -> Dict[str, Any]:
    return node.variables.get("params", {}) or {}


def _arr(x: Any) -> Optional[jnp.ndarray]:
    return None if x is None else jnp.asarray(x)


class LinenAdapter(Adapter):
    """flax.linen's containers: ``nn.Sequential`` and plain functions in it."""

    name = "linen"

    def wrap(self, module: Any, variables: Any) -> LinenNode:
        """The node of a user's ``(module, variables)``; bare params are put under ``"params"``."""
        if not isinstance(module, linen.Module):
            raise TypeError(f"from_linen: expected a flax.linen Module, got {module!r}.")
        if not isinstance(variables, Mapping):
            raise TypeError("from_linen: params must be the variables mapping that "
                            f"`module.init` returns, got {type(variables).__name__}.")
        variables = _plain(variables)
        # a module without parameters (a batch norm with use_scale=use_bias=False) has
        # only "batch_stats": that is a variables dict too, not a params tree
        if not _COLLECTIONS.intersection(variables):
            variables = {"params": variables}
        return LinenNode(module, variables)

    def finalize(self, node: Any) -> Tuple[Any, Dict[str, Any]]:
        """``(module, variables)`` of a converted model."""
        if not isinstance(node, LinenNode):      # a bare function
            node = self.sequential([node])
        return node.module, node.variables

    def node_type(self, node: Any) -> type:
        return type(node.module) if isinstance(node, LinenNode) else type(node)

    def children(self, node: Any) -> Optional[List[Any]]:
        if not isinstance(node, LinenNode) or not isinstance(node.module, linen.Sequential):
            return None
        out = []
        for i, layer in enumerate(node.module.layers):
            if not isinstance(layer, linen.Module):
                out.append(layer)
                continue
            key = f"layers_{i}"
            out.append(LinenNode(layer, {c: t[key] for c, t in node.variables.items()
                                         if isinstance(t, Mapping) and key in t}))
        return out

    def as_function(self, node: Any) -> Optional[Callable]:
        if isinstance(node, LinenNode) or isinstance(node, linen.Module):
            return None
        return node if callable(node) else None

    def has_submodules(self, node: Any) -> bool:
        return any(isinstance(v, Mapping) for v in _params(node).values())

    def function(self, fn: Callable) -> Any:
        return fn

    def sequential(self, children: List[Any]) -> LinenNode:
        merged: Dict[str, Dict[str, Any]] = {}
        for i, child in enumerate(children):
            if isinstance(child, LinenNode):
                for coll, tree in child.variables.items():
                    merged.setdefault(coll, {})[f"layers_{i}"] = tree
        layers = [c.module if isinstance(c, LinenNode) else c for c in children]
        return LinenNode(linen.Sequential(layers), merged)

    def leaf(self, converted: Any) -> Any:
        if isinstance(converted, tuple) and len(converted) == 2:
            return LinenNode(converted[0], _plain(converted[1]))
        return converted


_adapter: Optional[LinenAdapter] = None


# -- per-layer conversions ------------------------------------------------------------------

def _dense_in(node, ctx):
    p = _params(node)
    return B.build_linear(B.LinearSpec(_arr(p["kernel"]), _arr(p.get("bias"))), ctx)


def _dense_out(layer, ctx):
    s = B.read_linear(layer)
    params = {"kernel": s.weight} if s.bias is None else {"kernel": s.weight, "bias": s.bias}
    return LinenNode(linen.Dense(int(s.weight.shape[1]), use_bias=s.bias is not None,
                                 param_dtype=s.weight.dtype), {"params": params})


def _embed_in(node, ctx):
    return B.build_embedding(B.EmbedSpec(_arr(_params(node)["embedding"])), ctx)


def _embed_out(layer, ctx):
    s = B.read_embedding(layer)
    return LinenNode(linen.Embed(*(int(n) for n in s.table.shape), param_dtype=s.table.dtype),
                     {"params": {"embedding": s.table}})


def _conv_in(node, ctx):
    p = _params(node)
    spec = F.conv_spec(node.module, _arr(p["kernel"]), _arr(p.get("bias")), "linen.Conv")
    return B.build_conv(spec._replace(channel_first=ctx.layout == "first"), ctx)


def _conv_out(layer, ctx):
    s = B.read_conv(layer)
    params = {"kernel": s.kernel} if s.bias is None else {"kernel": s.kernel, "bias": s.bias}
    conv = LinenNode(linen.Conv(int(s.kernel.shape[-1]), param_dtype=s.kernel.dtype,
                                **F.conv_kwargs(s)), {"params": params})
    if not s.channel_first:
        return conv
    c = -(s.num_spatial_dims + 1)
    return _adapter.sequential([functools.partial(move_channels, src=c, dst=-1), conv,
                                functools.partial(move_channels, src=-1, dst=c)])


def _features(node, ctx, *arrays) -> int:
    for a in arrays:
        if a is not None:
            return int(jnp.shape(a)[-1])
    return int(ctx.require_size(f"linen.{type(node.module).__name__}")[-1])


def _norm_in(kind):
    def convert(node, ctx):
        p = _params(node)
        scale, bias = _arr(p.get("scale")), _arr(p.get("bias"))
        spec = F.norm_spec(kind, node.module, _features(node, ctx, scale, bias), scale, bias,
                           f"linen.{type(node.module).__name__}")
        return B.build_norm(spec, ctx)
    return convert


def _norm_out(layer, ctx):
    s = B.read_norm(layer)
    dtype = next((v.dtype for v in (s.scale, s.bias) if v is not None), jnp.float32)
    common = dict(epsilon=s.epsilon, use_scale=s.scale is not None, param_dtype=dtype,
                  use_fast_variance=s.use_fast_variance)
    if s.kind == "rms":
        module = linen.RMSNorm(**common)
    elif s.kind == "layer":
        module = linen.LayerNorm(use_bias=s.bias is not None, **common)
    else:
        module = linen.GroupNorm(num_groups=s.num_groups, use_bias=s.bias is not None, **common)
    params = {k: v for k, v in (("scale", s.scale), ("bias", s.bias)) if v is not None}
    return LinenNode(module, {"params": params})


def _batchnorm_in(node, ctx):
    p, stats = _params(node), node.variables.get("batch_stats")
    if not stats or "mean" not in stats:
        raise ConversionError("linen.BatchNorm: the variables have no 'batch_stats' (running "
                              "mean and var). Pass the whole variables dict that `init` "
                              "returned, not only its 'params'.")
    spec = F.batchnorm_spec(node.module, _arr(p.get("scale")), _arr(p.get("bias")),
                            _arr(stats["mean"]), _arr(stats["var"]), "linen.BatchNorm")
    return B.build_batchnorm(spec, ctx)


def _batchnorm_out(layer, ctx):
    s = B.read_batchnorm(layer)
    module = linen.BatchNorm(use_running_average=True, momentum=s.momentum, epsilon=s.epsilon,
                             use_scale=s.scale is not None, use_bias=s.bias is not None,
                             use_fast_variance=s.use_fast_variance, axis_name=s.axis_name,
                             param_dtype=s.mean.dtype)
    params = {k: v for k, v in (("scale", s.scale), ("bias", s.bias)) if v is not None}
    variables = {"batch_stats": {"mean": s.mean, "var": s.var}}
    if params:
        variables["params"] = params
    return LinenNode(module, variables)


def _dropout_in(node, ctx):
    return B.build_dropout(F.dropout_spec(node.module), ctx)


def _dropout_out(layer, ctx):
    s = B.read_dropout(layer)
    return LinenNode(linen.Dropout(s.rate, broadcast_dims=s.broadcast_dims, deterministic=True),
                     {})


# -- loading --------------------------------------------------------------------------------

def load() -> LinenAdapter:
    """Import flax.linen (or raise :class:`MissingDependencyError`) and return the adapter."""
    global linen, _adapter
    linen = require("flax.linen", "flax.linen")
    _adapter = LinenAdapter()
    return _adapter


def builtin_mappings(adapter: LinenAdapter) -> List[LayerMapping]:
    """The built-in linen mappings (:func:`load` has run)."""
    pairs = [(nn.Linear, linen.Dense, _dense_in, _dense_out),
             (nn.Embedding, linen.Embed, _embed_in, _embed_out),
             (nn.LayerNorm, linen.LayerNorm, _norm_in("layer"), _norm_out),
             (nn.RMSNorm, linen.RMSNorm, _norm_in("rms"), _norm_out),
             (nn.GroupNorm, linen.GroupNorm, _norm_in("group"), _norm_out),
             (nn.Dropout, linen.Dropout, _dropout_in, _dropout_out)]
    pairs += [(cls, linen.Conv, _conv_in, _conv_out) for cls in B.CONV_TYPES.values()]
    pairs += [(cls, linen.BatchNorm, _batchnorm_in, _batchnorm_out)
              for cls in B.BATCHNORM_TYPES.values()]
    return [LayerMapping(b, "linen", f, i, o) for b, f, i, o in pairs]
