"""The brainx side of every conversion: where brainx's layers keep their weights.

Each supported layer kind has a spec (a plain record of its weights and
settings, in one neutral layout), a ``read_*`` that takes it out of a brainx
layer and a ``build_*`` that makes a brainx layer from it. The framework
modules only translate specs to and from their own layers, so the layout of
brainx's states lives here alone.

Neutral layouts: a dense kernel is ``(in, out)``; a convolution kernel is
``(*kernel_size, in // groups, out)`` with a bias ``(out,)``; every per-feature
vector (norm scales and biases, running statistics) is ``(features,)``.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple, Optional, Tuple

import jax.numpy as jnp

from brainx import nn
from brainx.interop.context import Context, plain_array
from brainx.interop.errors import ConversionError, UnsupportedLayerError

__all__ = ["LinearSpec", "EmbedSpec", "ConvSpec", "NormSpec", "BatchNormSpec", "DropoutSpec",
           "read_linear", "build_linear", "read_embedding", "build_embedding", "read_conv",
           "build_conv", "read_norm", "build_norm", "read_batchnorm", "build_batchnorm",
           "read_dropout", "build_dropout", "CONV_TYPES", "BATCHNORM_TYPES", "NORM_TYPES"]

CONV_TYPES = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
BATCHNORM_TYPES = {0: nn.BatchNorm0d, 1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}
NORM_TYPES = {"layer": nn.LayerNorm, "rms": nn.RMSNorm, "group": nn.GroupNorm}


class LinearSpec(NamedTuple):
    weight: Any                 # (in, out)
    bias: Optional[Any]         # (out,)


class EmbedSpec(NamedTuple):
    table: Any                  # (num_embeddings, features)


class ConvSpec(NamedTuple):
    kernel: Any                 # (*kernel_size, in // groups, out)
    bias: Optional[Any]         # (out,)
    stride: Tuple[int, ...]
    padding: Any                # "SAME", "VALID" or ((low, high), ...) per spatial axis
    lhs_dilation: Tuple[int, ...]
    rhs_dilation: Tuple[int, ...]
    groups: int
    channel_first: bool = False

    @property
    def num_spatial_dims(self) -> int:
        return self.kernel.ndim - 2


class NormSpec(NamedTuple):
    kind: str                   # "layer", "rms" or "group"
    features: int
    scale: Optional[Any]        # (features,)
    bias: Optional[Any]         # (features,)
    epsilon: float
    use_fast_variance: bool = True
    num_groups: Optional[int] = None


class BatchNormSpec(NamedTuple):
    scale: Optional[Any]        # (features,)
    bias: Optional[Any]
    mean: Any                   # running mean (features,)
    var: Any                    # running variance (features,)
    epsilon: float
    momentum: float
    use_fast_variance: bool = True
    axis_name: Any = None

    @property
    def features(self) -> int:
        return int(self.mean.shape[-1])


class DropoutSpec(NamedTuple):
    rate: float                 # probability to DROP (flax / equinox convention)
    broadcast_dims: Tuple[int, ...] = ()


def _vec(x, what):
    return None if x is None else plain_array(x, what).reshape(-1)


def _check_features(ctx: Context, n: int, name: str, axis: int = -1):
    if ctx.cur_size is not None and (not ctx.cur_size or ctx.cur_size[axis] != n):
        raise ConversionError(
            f"`{name}` expects {n} features on axis {axis} of its input, but the input shape "
            f"reaching it is {ctx.cur_size} (from `sample_input` and the layers before it). Pass "
            f"a `sample_input` of the model's real input shape.")


# -- Linear ---------------------------------------------------------------------------------

def read_linear(layer: nn.Linear) -> LinearSpec:
    """The kernel (masked by ``w_mask``, if any) and bias of a brainx ``Linear``."""
    params = layer.weight.value
    w = plain_array(params["weight"], "Linear weight")
    if layer.w_mask is not None:
        w = w * layer.w_mask          # the mask is part of the function; it is baked in
    b = params.get("bias")
    return LinearSpec(w, None if b is None else plain_array(b, "Linear bias"))


def build_linear(spec: LinearSpec, ctx: Context) -> nn.Linear:
    """A brainx ``Linear`` with ``spec``'s weights (its ``in_size`` from the context if known)."""
    n_in, n_out = (int(n) for n in spec.weight.shape)
    _check_features(ctx, n_in, "Linear")
    in_size = ctx.cur_size if ctx.cur_size is not None else (n_in,)
    out_size = tuple(in_size[:-1]) + (n_out,)
    layer = nn.Linear(in_size, out_size, w_init=jnp.asarray(spec.weight),
                      b_init=None if spec.bias is None else jnp.asarray(spec.bias))
    ctx.advance(out_size)
    return layer


# -- Embedding ------------------------------------------------------------------------------

def read_embedding(layer: nn.Embedding) -> EmbedSpec:
    """The table of a brainx ``Embedding`` (its forward must be a plain lookup)."""
    if layer.max_norm is not None:
        raise UnsupportedLayerError(
            "Embedding with max_norm renormalises the rows it looks up (and writes them back), "
            "which no flax/equinox embedding does. Build it with max_norm=None to convert it.")
    if len(layer.embedding_size) != 1:
        raise UnsupportedLayerError(
            f"Embedding with a multi-axis embedding_size {layer.embedding_size} has no "
            f"flax/equinox counterpart (their tables are 2-D). Use an int embedding_size.")
    dropped = [k for k, on in (("padding_idx", layer.padding_idx is not None),
                               ("scale_grad_by_freq", layer.scale_grad_by_freq),
                               ("freeze", layer.freeze)) if on]
    if dropped:
        warnings.warn(f"Embedding: {', '.join(dropped)} only change(s) the gradient, which the "
                      f"converted embedding does not reproduce; the forward pass is the same.",
                      UserWarning, stacklevel=4)
    return EmbedSpec(plain_array(layer.weight.value, "Embedding table"))


def build_embedding(spec: EmbedSpec, ctx: Context) -> nn.Embedding:
    """A brainx ``Embedding`` holding ``spec.table``."""
    n, features = (int(k) for k in spec.table.shape)
    layer = nn.Embedding(n, features, embedding_init=jnp.asarray(spec.table))
    ctx.advance(None if ctx.cur_size is None else tuple(ctx.cur_size) + (features,))
    return layer


# -- Convolutions ---------------------------------------------------------------------------

def read_conv(layer) -> ConvSpec:
    """The kernel, bias and geometry of a brainx ``Conv1d/2d/3d``."""
    params = layer.weight.value
    kernel = plain_array(layer._kernel(params), f"{type(layer).__name__} kernel")
    bias = params.get("bias")
    return ConvSpec(kernel, _vec(bias, f"{type(layer).__name__} bias"), tuple(layer.stride),
                    layer.padding, tuple(layer.lhs_dilation), tuple(layer.rhs_dilation),
                    int(layer.groups), bool(layer.channel_first))


def build_conv(spec: ConvSpec, ctx: Context):
    """A brainx ``Conv{n}d`` for ``spec``, built for the context's input shape."""
    n = spec.num_spatial_dims
    if n not in CONV_TYPES:
        raise UnsupportedLayerError(f"A {n}-D convolution has no brainx layer (Conv1d, Conv2d and "
                                    "Conv3d exist).")
    name = CONV_TYPES[n].__name__
    in_size = ctx.require_size(name)
    if len(in_size) != n + 1:
        raise ConversionError(
            f"`{name}` takes one sample of {n} spatial axes and channels, but the input shape "
            f"reaching it is {in_size}. Pass `sample_input=` with the shape of one unbatched "
            f"example (no batch axis).")
    channels = in_size[0] if spec.channel_first else in_size[-1]
    expected = int(spec.kernel.shape[-2]) * spec.groups
    if channels != expected:
        raise ConversionError(
            f"`{name}`'s kernel takes {expected} input channels ({spec.kernel.shape[-2]} per "
            f"group x {spec.groups} groups), but the input shape reaching it is {in_size}. Pass a "
            f"`sample_input` whose channel axis has {expected} entries.")
    layer = CONV_TYPES[n](
        in_size, int(spec.kernel.shape[-1]), tuple(spec.kernel.shape[:n]), stride=spec.stride,
        padding=spec.padding, lhs_dilation=spec.lhs_dilation, rhs_dilation=spec.rhs_dilation,
        groups=spec.groups, w_init=jnp.asarray(spec.kernel),
        b_init=None if spec.bias is None else jnp.asarray(spec.bias).reshape(
            (-1,) + (1,) * n if spec.channel_first else (1,) * n + (-1,)),
        channel_first=spec.channel_first)
    ctx.advance(layer.out_size)
    return layer


# -- LayerNorm / RMSNorm / GroupNorm --------------------------------------------------------

def _last_axis_only(layer) -> None:
    last = len(layer.in_size) - 1
    if tuple(layer.reduction_axes) != (-1,) or tuple(layer.feature_axes) != (last,):
        raise UnsupportedLayerError(
            f"{type(layer).__name__} with reduction_axes={layer.reduction_axes} and feature_axes="
            f"{layer.feature_axes}: only normalisation over the last axis (the features, "
            f"reduction_axes=-1) converts; build the layer with the defaults to convert it.")


def read_norm(layer) -> NormSpec:
    """The affine parameters and settings of a brainx ``LayerNorm``, ``RMSNorm`` or ``GroupNorm``."""
    name = type(layer).__name__
    if isinstance(layer, nn.GroupNorm):
        if layer.reduction_axes is not None or layer.axis_name is not None:
            raise UnsupportedLayerError(f"{name} with reduction_axes or axis_name set does not "
                                        "convert; use the defaults.")
        w = None if layer.weight is None else layer.weight.value
        kind, groups = "group", int(layer.num_groups)
    else:
        _last_axis_only(layer)
        if layer.axis_name is not None:
            raise UnsupportedLayerError(f"{name} with axis_name={layer.axis_name!r} pools its "
                                        "statistics across a vmap axis; it does not convert.")
        state = layer.scale if isinstance(layer, nn.RMSNorm) else layer.weight
        w = None if state is None else state.value
        kind, groups = ("rms" if isinstance(layer, nn.RMSNorm) else "layer"), None
    w = w or {}
    return NormSpec(kind, int(layer.in_size[-1]), _vec(w.get("scale"), f"{name} scale"),
                    _vec(w.get("bias"), f"{name} bias"), float(layer.epsilon),
                    bool(layer.use_fast_variance), groups)


def build_norm(spec: NormSpec, ctx: Context):
    """A brainx ``LayerNorm``, ``RMSNorm`` or ``GroupNorm`` from ``spec``."""
    cls = NORM_TYPES[spec.kind]
    _check_features(ctx, spec.features, cls.__name__)
    scale = None if spec.scale is None else jnp.asarray(spec.scale)
    bias = None if spec.bias is None else jnp.asarray(spec.bias)
    if spec.kind == "rms":
        layer = nn.RMSNorm((spec.features,), epsilon=spec.epsilon, use_scale=scale is not None,
                           scale_init=scale, use_fast_variance=spec.use_fast_variance)
    elif spec.kind == "layer":
        layer = nn.LayerNorm((spec.features,), epsilon=spec.epsilon, use_scale=scale is not None,
                             use_bias=bias is not None, scale_init=scale, bias_init=bias,
                             use_fast_variance=spec.use_fast_variance)
    else:
        in_size = ctx.cur_size if ctx.cur_size is not None else (spec.features,)
        shape = (1,) * (len(in_size) - 1) + (spec.features,)
        layer = nn.GroupNorm(in_size, num_groups=spec.num_groups, epsilon=spec.epsilon,
                             use_scale=scale is not None, use_bias=bias is not None,
                             scale_init=None if scale is None else scale.reshape(shape),
                             bias_init=None if bias is None else bias.reshape(shape),
                             use_fast_variance=spec.use_fast_variance)
    ctx.advance(ctx.cur_size)
    return layer


# -- BatchNorm ------------------------------------------------------------------------------

def read_batchnorm(layer) -> BatchNormSpec:
    """Affine parameters, running statistics and settings of a brainx ``BatchNorm{0,1,2,3}d``."""
    name = type(layer).__name__
    if not layer.track_running_stats:
        raise UnsupportedLayerError(
            f"{name} with track_running_stats=False always normalises with the batch "
            f"statistics, while the converted flax BatchNorm evaluates with running statistics. "
            f"Build it with track_running_stats=True to convert it.")
    if layer.feature_axes != (len(layer.in_size) - 1,):
        raise UnsupportedLayerError(f"{name} with feature_axis={layer.feature_axes}: only the "
                                    "last axis as features converts.")
    w = {} if layer.weight is None else layer.weight.value
    return BatchNormSpec(_vec(w.get("scale"), f"{name} scale"), _vec(w.get("bias"), f"{name} bias"),
                         _vec(layer.running_mean.value, f"{name} running_mean"),
                         _vec(layer.running_var.value, f"{name} running_var"),
                         float(layer.epsilon), float(layer.momentum),
                         bool(layer.use_fast_variance), layer.axis_name)


def build_batchnorm(spec: BatchNormSpec, ctx: Context):
    """A brainx ``BatchNorm{n}d`` (``n`` from the input shape) with ``spec``'s statistics."""
    in_size = ctx.require_size("BatchNorm")
    n = len(in_size) - 1
    if n not in BATCHNORM_TYPES:
        raise ConversionError(f"BatchNorm: no brainx batch norm takes one sample of shape "
                              f"{in_size} (BatchNorm0d to BatchNorm3d take 1 to 4 axes).")
    _check_features(ctx, spec.features, BATCHNORM_TYPES[n].__name__)
    layer = BATCHNORM_TYPES[n](
        in_size, epsilon=spec.epsilon, momentum=spec.momentum,
        affine=spec.scale is not None or spec.bias is not None,
        scale_initializer=None if spec.scale is None else nn.init.Constant(1.0),
        bias_initializer=None if spec.bias is None else nn.init.Constant(0.0),
        use_fast_variance=spec.use_fast_variance, axis_name=spec.axis_name)
    shape = layer.running_shape
    if layer.weight is not None:
        layer.weight.value = {k: jnp.asarray(v).reshape(shape)
                              for k, v in (("scale", spec.scale), ("bias", spec.bias))
                              if v is not None}
    layer.running_mean.value = jnp.asarray(spec.mean, layer.running_mean.value.dtype).reshape(shape)
    layer.running_var.value = jnp.asarray(spec.var, layer.running_var.value.dtype).reshape(shape)
    ctx.advance(in_size)
    return layer


# -- Dropout --------------------------------------------------------------------------------

def read_dropout(layer: nn.Dropout) -> DropoutSpec:
    """The drop rate (``1 - prob``) and shared-mask axes of a brainx ``Dropout``."""
    return DropoutSpec(1.0 - float(layer.prob), tuple(layer.broadcast_dims))


def build_dropout(spec: DropoutSpec, ctx: Context) -> nn.Dropout:
    """A brainx ``Dropout`` keeping each element with probability ``1 - spec.rate``."""
    ctx.advance(ctx.cur_size)
    return nn.Dropout(prob=1.0 - float(spec.rate), broadcast_dims=tuple(spec.broadcast_dims))
