"""equinox: the layer mappings and the container adapter.

equinox follows PyTorch's layouts: a dense weight is ``(out, in)``, a
convolution weight ``(out, in // groups, *kernel)`` with a bias
``(out, 1, ..., 1)``, and inputs are one sample with the channels first. So
kernels are transposed, an equinox convolution becomes a brainx one built with
``channel_first=True``, and a channels-last brainx convolution (or spatial
group norm) is exported between two steps that move the channels, so that the
equinox model takes the same inputs. equinox modules are immutable; weights
are put in with ``eqx.tree_at``.

``BatchNorm`` does not convert: equinox keeps its running statistics outside
the model, in an ``eqx.nn.State`` passed through every call.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, List, Optional

import jax
import jax.numpy as jnp

from brainx import nn
from brainx.interop import brainx_layers as B
from brainx.interop.context import require
from brainx.interop.engine import Adapter
from brainx.interop.errors import UnsupportedLayerError
from brainx.interop.functions import _identity, move_channels
from brainx.interop.registry import LayerMapping, mark_unsupported

__all__ = ["load", "builtin_mappings", "EquinoxAdapter"]

eqx: Any = None     # equinox, imported by load()

_BATCHNORM = ("BatchNorm does not convert to or from equinox: equinox keeps the running "
              "statistics outside the model, in an `eqx.nn.State` passed through every call, "
              "which a single converted model cannot carry. Convert it with to_nnx/to_linen, or "
              "take it out of the model and rebuild it with eqx.nn.BatchNorm by hand.")


def _key(ctx) -> Any:
    return ctx.key if ctx.key is not None else jax.random.PRNGKey(0)


def _put(module: Any, **fields: Any) -> Any:
    names = [n for n, v in fields.items() if v is not None]
    if not names:
        return module
    return eqx.tree_at(lambda m: [getattr(m, n) for n in names], module,
                       [jnp.asarray(fields[n]) for n in names])


def _wrap(layer: Any, n: int) -> Any:
    """``layer`` (channels first) between steps that take and give channels-last samples."""
    c = -(n + 1)
    return eqx.nn.Sequential([eqx.nn.Lambda(functools.partial(move_channels, src=-1, dst=c)),
                              layer,
                              eqx.nn.Lambda(functools.partial(move_channels, src=c, dst=-1))])


class EquinoxAdapter(Adapter):
    """equinox's containers: ``eqx.nn.Sequential``, with ``Lambda``/``Identity`` steps."""

    name = "equinox"

    def children(self, node: Any) -> Optional[List[Any]]:
        return list(node.layers) if isinstance(node, eqx.nn.Sequential) else None

    def as_function(self, node: Any) -> Optional[Callable]:
        if isinstance(node, eqx.nn.Lambda):
            return node.fn
        if isinstance(node, eqx.nn.Identity):
            return _identity
        if callable(node) and not isinstance(node, eqx.Module):
            return node
        return None

    def has_submodules(self, node: Any) -> bool:
        if not dataclasses.is_dataclass(node):
            return False
        leaves = [getattr(node, f.name, None) for f in dataclasses.fields(node)]
        return any(isinstance(x, eqx.Module) for v in leaves
                   for x in (v if isinstance(v, (list, tuple)) else [v]))

    def function(self, fn: Callable) -> Any:
        return eqx.nn.Identity() if fn is _identity else eqx.nn.Lambda(fn)

    def sequential(self, children: List[Any]) -> Any:
        return eqx.nn.Sequential(list(children))


# -- per-layer conversions ------------------------------------------------------------------

def _linear_in(m, ctx):
    if m.in_features == "scalar" or m.out_features == "scalar":
        raise UnsupportedLayerError("eqx.nn.Linear with a 'scalar' input or output has no brainx "
                                    "counterpart; use in/out features of 1 and reshape.")
    return B.build_linear(B.LinearSpec(jnp.asarray(m.weight).T,
                                       None if m.bias is None else jnp.asarray(m.bias)), ctx)


def _one_vector(layer) -> None:
    """equinox's Linear and norms take one feature vector: refuse a layer built for more axes."""
    in_size = tuple(layer.in_size)
    if len(in_size) > 1:
        name = type(layer).__name__
        raise UnsupportedLayerError(
            f"{name} with in_size={in_size}: eqx.nn.{name} takes one feature vector per call, so "
            f"the converted layer could not take this layer's {in_size} samples. Build the "
            f"brainx layer with in_size=({in_size[-1]},) (it still takes any batch of vectors), "
            f"or convert it to flax (to_nnx/to_linen) instead.")


def _linear_out(layer, ctx):
    _one_vector(layer)
    s = B.read_linear(layer)
    m = eqx.nn.Linear(*(int(n) for n in s.weight.shape), use_bias=s.bias is not None,
                      dtype=s.weight.dtype, key=_key(ctx))
    return _put(m, weight=s.weight.T, bias=s.bias)


def _embed_in(m, ctx):
    return B.build_embedding(B.EmbedSpec(jnp.asarray(m.weight)), ctx)


def _embed_out(layer, ctx):
    s = B.read_embedding(layer)
    return eqx.nn.Embedding(weight=s.table)


def _conv_in(m, ctx):
    name = type(m).__name__
    if m.padding_mode != "ZEROS":
        raise UnsupportedLayerError(f"eqx.nn.{name} with padding_mode={m.padding_mode!r}: brainx "
                                    "convolutions pad with zeros. Pad the input yourself.")
    if isinstance(m.padding, str) and m.padding not in ("SAME", "VALID"):
        raise UnsupportedLayerError(f"eqx.nn.{name} with padding={m.padding!r}: use 'SAME', "
                                    "'VALID' or explicit (low, high) pairs to convert it.")
    n = m.num_spatial_dims
    kernel = jnp.transpose(jnp.asarray(m.weight), tuple(range(2, n + 2)) + (1, 0))
    spec = B.ConvSpec(kernel, None if m.bias is None else jnp.asarray(m.bias).reshape(-1),
                      tuple(m.stride), m.padding, (1,) * n, tuple(m.dilation), int(m.groups),
                      channel_first=ctx.layout != "last")
    return B.build_conv(spec, ctx)


_CONV_OUT = {}


def _conv_out(layer, ctx):
    s = B.read_conv(layer)
    n = s.num_spatial_dims
    if any(d != 1 for d in s.lhs_dilation):
        raise UnsupportedLayerError(f"{type(layer).__name__} with lhs_dilation={s.lhs_dilation}: "
                                    "equinox convolutions have no input dilation.")
    m = _CONV_OUT[n](int(s.kernel.shape[-2]) * s.groups, int(s.kernel.shape[-1]),
                     tuple(s.kernel.shape[:n]), stride=s.stride, padding=s.padding,
                     dilation=s.rhs_dilation, groups=s.groups, use_bias=s.bias is not None,
                     dtype=s.kernel.dtype, key=_key(ctx))
    weight = jnp.transpose(s.kernel, (n + 1, n) + tuple(range(n)))
    bias = None if s.bias is None else s.bias.reshape((-1,) + (1,) * n)
    m = _put(m, weight=weight, bias=bias)
    return m if s.channel_first else _wrap(m, n)


def _shape_1d(m, what) -> int:
    shape = (m.shape,) if isinstance(m.shape, int) else tuple(m.shape)
    if len(shape) != 1:
        raise UnsupportedLayerError(f"eqx.nn.{what} over a {len(shape)}-D shape {shape}: only "
                                    "normalisation over one axis (the features) converts.")
    return int(shape[0])


def _layernorm_in(m, ctx):
    spec = B.NormSpec("layer", _shape_1d(m, "LayerNorm"), m.weight, m.bias, float(m.eps),
                      use_fast_variance=False)
    return B.build_norm(spec, ctx)


def _rmsnorm_in(m, ctx):
    if m.bias is not None and bool(jnp.any(jnp.asarray(m.bias) != 0)):
        raise UnsupportedLayerError("eqx.nn.RMSNorm with a (non-zero) bias: brainx RMSNorm has "
                                    "no bias. Add a bias after the converted layer by hand.")
    spec = B.NormSpec("rms", _shape_1d(m, "RMSNorm"), m.weight, None, float(m.eps))
    return B.build_norm(spec, ctx)


def _groupnorm_in(m, ctx):
    size = ctx.cur_size
    if ctx.layout != "last" and size is not None and len(size) > 1:
        raise UnsupportedLayerError(
            f"eqx.nn.GroupNorm on channels-first samples of shape {size}: brainx's GroupNorm "
            f"takes the channels last. Move the channels last around it (jnp.moveaxis) and "
            f"convert the layer alone, or convert a model of feature vectors.")
    channels = m.channels if m.channels is not None else ctx.require_size("GroupNorm")[-1]
    spec = B.NormSpec("group", int(channels), m.weight, m.bias, float(m.eps),
                      use_fast_variance=False, num_groups=int(m.groups))
    return B.build_norm(spec, ctx)


def _norm_out(layer, ctx):
    s = B.read_norm(layer)
    dtype = next((v.dtype for v in (s.scale, s.bias) if v is not None), jnp.float32)
    if s.kind == "group":
        affine = s.scale is not None or s.bias is not None
        m = eqx.nn.GroupNorm(s.num_groups, s.features, eps=s.epsilon, channelwise_affine=affine,
                             dtype=dtype)
        if affine:      # equinox has both or neither: the missing one is the identity
            m = _put(m, weight=s.scale if s.scale is not None else jnp.ones(s.features, dtype),
                     bias=s.bias if s.bias is not None else jnp.zeros(s.features, dtype))
        return m if len(layer.in_size) == 1 else _wrap(m, len(layer.in_size) - 1)
    _one_vector(layer)
    cls = eqx.nn.RMSNorm if s.kind == "rms" else eqx.nn.LayerNorm
    m = cls(s.features, eps=s.epsilon, use_weight=s.scale is not None,
            use_bias=s.bias is not None, dtype=dtype)
    return _put(m, weight=s.scale, bias=s.bias)


def _dropout_in(m, ctx):
    return B.build_dropout(B.DropoutSpec(float(m.p)), ctx)


def _dropout_out(layer, ctx):
    s = B.read_dropout(layer)
    if s.broadcast_dims:
        raise UnsupportedLayerError(f"Dropout with broadcast_dims={s.broadcast_dims}: "
                                    "eqx.nn.Dropout draws one mask value per element.")
    return eqx.nn.Dropout(s.rate, inference=True)


# -- loading --------------------------------------------------------------------------------

def load() -> EquinoxAdapter:
    """Import equinox (or raise :class:`MissingDependencyError`) and return the adapter."""
    global eqx
    eqx = require("equinox", "equinox")
    _CONV_OUT.update({1: eqx.nn.Conv1d, 2: eqx.nn.Conv2d, 3: eqx.nn.Conv3d})
    return EquinoxAdapter()


def builtin_mappings(adapter: EquinoxAdapter) -> List[LayerMapping]:
    """The built-in equinox mappings (:func:`load` has run)."""
    pairs = [(nn.Linear, eqx.nn.Linear, _linear_in, _linear_out),
             (nn.Embedding, eqx.nn.Embedding, _embed_in, _embed_out),
             (nn.LayerNorm, eqx.nn.LayerNorm, _layernorm_in, _norm_out),
             (nn.RMSNorm, eqx.nn.RMSNorm, _rmsnorm_in, _norm_out),
             (nn.GroupNorm, eqx.nn.GroupNorm, _groupnorm_in, _norm_out),
             (nn.Dropout, eqx.nn.Dropout, _dropout_in, _dropout_out)]
    pairs += [(B.CONV_TYPES[n], _CONV_OUT[n], _conv_in, _conv_out) for n in (1, 2, 3)]
    mappings = [LayerMapping(b, "equinox", f, i, o) for b, f, i, o in pairs]
    # the generic eqx.nn.Conv(num_spatial_dims, ...) converts like Conv1d/2d/3d
    mappings.append(LayerMapping(nn.Conv2d, "equinox", eqx.nn.Conv, _conv_in, _conv_out))
    for cls in B.BATCHNORM_TYPES.values():
        mark_unsupported("equinox", cls, f"{cls.__name__}: {_BATCHNORM}")
    mark_unsupported("equinox", eqx.nn.BatchNorm, f"eqx.nn.BatchNorm: {_BATCHNORM}")
    return mappings
