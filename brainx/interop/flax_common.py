"""What flax.nnx and flax.linen layers share: settings with the same names and meanings.

Both keep brainx's layouts (dense kernels ``(in, out)``, channels-last
convolution kernels ``(*k, in // groups, out)``), so only the way weights are
stored differs between them; the settings of a layer translate here once.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import jax.numpy as jnp

from brainx.interop.brainx_layers import BatchNormSpec, ConvSpec, DropoutSpec, NormSpec
from brainx.interop.errors import UnsupportedLayerError

__all__ = ["conv_spec", "conv_kwargs", "norm_spec", "batchnorm_spec", "dropout_spec",
           "check_last_axis"]


def _tuple(value: Any, n: int, default: int = 1) -> tuple:
    if value is None:
        return (default,) * n
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    return value * n if len(value) == 1 else value


def _padding(padding: Any, n: int, where: str) -> Any:
    if isinstance(padding, str):
        if padding.upper() in ("SAME", "VALID"):
            return padding.upper()
        raise UnsupportedLayerError(
            f"{where} with padding={padding!r}: brainx convolutions pad with zeros ('SAME', "
            f"'VALID' or explicit (low, high) pairs). Pad the input yourself and use 'VALID'.")
    if isinstance(padding, int):
        return ((padding, padding),) * n
    pads = tuple((p, p) if isinstance(p, int) else tuple(int(q) for q in p) for p in padding)
    return pads * n if len(pads) == 1 else pads


def conv_spec(m: Any, kernel: Any, bias: Optional[Any], where: str) -> ConvSpec:
    """The :class:`ConvSpec` of a flax ``Conv`` ``m`` with the given kernel and bias."""
    n = kernel.ndim - 2
    mask = getattr(m, "mask", None)
    if mask is not None:
        kernel = kernel * jnp.asarray(mask)
    return ConvSpec(jnp.asarray(kernel), None if bias is None else jnp.asarray(bias).reshape(-1),
                    _tuple(m.strides, n), _padding(m.padding, n, where),
                    _tuple(m.input_dilation, n), _tuple(m.kernel_dilation, n),
                    int(m.feature_group_count or 1))


def conv_kwargs(spec: ConvSpec) -> Dict[str, Any]:
    """The keyword arguments of a flax ``Conv`` with ``spec``'s geometry."""
    return dict(kernel_size=tuple(spec.kernel.shape[:spec.num_spatial_dims]),
                strides=tuple(spec.stride), padding=spec.padding,
                input_dilation=tuple(spec.lhs_dilation), kernel_dilation=tuple(spec.rhs_dilation),
                feature_group_count=spec.groups, use_bias=spec.bias is not None)


def check_last_axis(m: Any, where: str, *names: str) -> None:
    """Raise unless each named axis setting of ``m`` is the last axis."""
    for name in names:
        value = getattr(m, name, -1)
        if value not in (-1, (-1,), [-1]):
            raise UnsupportedLayerError(
                f"{where} with {name}={value!r}: only statistics over the last axis (the "
                f"features) convert to brainx. Build the layer with {name}=-1 to convert it.")
    if getattr(m, "axis_name", None) is not None and where.endswith("Norm") and "Batch" not in where:
        raise UnsupportedLayerError(f"{where} with axis_name={m.axis_name!r} pools its "
                                    "statistics across devices; it does not convert.")


def norm_spec(kind: str, m: Any, features: int, scale: Any, bias: Any, where: str) -> NormSpec:
    """The :class:`NormSpec` of a flax ``LayerNorm`` / ``RMSNorm`` / ``GroupNorm``."""
    if kind == "group":
        if getattr(m, "reduction_axes", None) is not None:
            raise UnsupportedLayerError(f"{where} with reduction_axes={m.reduction_axes!r} does "
                                        "not convert; use the default (None).")
        check_last_axis(m, where, "feature_axis")
        groups = m.num_groups if m.num_groups is not None else features // int(m.group_size)
    else:
        check_last_axis(m, where, "reduction_axes", "feature_axes")
        groups = None
    return NormSpec(kind, int(features), None if scale is None else jnp.asarray(scale),
                    None if bias is None else jnp.asarray(bias), float(m.epsilon),
                    bool(getattr(m, "use_fast_variance", True)),
                    None if groups is None else int(groups))


def batchnorm_spec(m: Any, scale: Any, bias: Any, mean: Any, var: Any, where: str) -> BatchNormSpec:
    """The :class:`BatchNormSpec` of a flax ``BatchNorm`` and its running statistics."""
    check_last_axis(m, where, "axis")
    as_vec = (lambda v: None if v is None else jnp.asarray(v).reshape(-1))
    return BatchNormSpec(as_vec(scale), as_vec(bias), as_vec(mean), as_vec(var),
                         float(m.epsilon), float(m.momentum),
                         bool(getattr(m, "use_fast_variance", True)), m.axis_name)


def dropout_spec(m: Any) -> DropoutSpec:
    """The :class:`DropoutSpec` of a flax ``Dropout``."""
    return DropoutSpec(float(m.rate), tuple(m.broadcast_dims or ()))
