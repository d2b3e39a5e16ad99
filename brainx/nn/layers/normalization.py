"""Normalisation layers: `BatchNorm0d/1d/2d/3d`, `LayerNorm`, `RMSNorm`, `GroupNorm`.

Each subtracts a mean, divides by ``sqrt(var + epsilon)`` and applies a
learnt per-feature ``scale`` and ``bias`` (one ``ParamState`` ``weight``
holding ``{"scale": ..., "bias": ...}``; :class:`RMSNorm` keeps only a scale,
in ``self.scale``, and does not subtract the mean).

=============  ==============================================  ==================
layer          statistics over                                 state
=============  ==============================================  ==================
BatchNorm      the batch and the spatial axes, per feature     running mean/var
LayerNorm      ``reduction_axes`` (default: the features)      none
RMSNorm        ``reduction_axes``, mean of squares only        none
GroupNorm      each sample's spatial axes and channel group    none
=============  ==============================================  ==================

**BatchNorm and the batch axis.** The input is one sample ``in_size`` or a
batch ``(N, *in_size)``. With a batch, the statistics include axis 0. Under
``brainx.transform.vmap(..., axis_name="batch")`` each lane sees one sample;
give the layer ``axis_name="batch"`` and the statistics are averaged across
lanes with ``jax.lax.pmean``, so every lane computes the same batch
statistics and the running statistics stay one shared value.

**Training and evaluation.** While fitting (``brainx.environ`` setting
``fit=True``, as in brainstate) BatchNorm normalises with the batch
statistics and updates ``running_mean`` / ``running_var`` (``BatchState``),
``running = momentum * running + (1 - momentum) * batch``, with the biased
batch variance. With ``fit=False`` it normalises with the running statistics
and changes nothing. ``track_running_stats=False``: always the batch
statistics, no state, and ``fit`` need not be set (brainstate 0.6).

Examples
--------
>>> import jax.numpy as jnp, brainx
>>> from brainx import nn
>>> bn = nn.BatchNorm1d((5, 3))
>>> x = jnp.arange(30.0).reshape(2, 5, 3)
>>> with brainx.environ.context(fit=True):
...     y = bn(x)
>>> [round(float(v), 4) for v in (y.mean(), y.std())]
[0.0, 1.0]
>>> [round(100 * float(v), 1) for v in bn.running_mean.value.ravel()]   # 1% of the batch means
[13.5, 14.5, 15.5]
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Tuple, Union

import jax
import jax.numpy as jnp

from brainx import environ
from brainx.nn.init import Constant, ZeroInit, param, to_size
from brainx.nn.modules.module import Module
from brainx.state.state import BatchState, ParamState

__all__ = ["BatchNorm0d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "RMSNorm",
           "GroupNorm"]

Axes = Union[int, Sequence[int]]


def _axes(axes: Axes, ndim: int, what: str) -> Tuple[int, ...]:
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"{what}: axis {a} is out of range for {ndim} dimensions.")
    return tuple(sorted(a % ndim for a in axes))


def _stats(x, axes, axis_name=None, axis_index_groups=None, use_mean=True, mask=None,
           use_fast_variance=True):
    """Mean and (biased) variance of ``x`` over ``axes`` (kept as size-1 axes), pooled over ``axis_name``."""
    x = jnp.asarray(x, jnp.promote_types(jnp.result_type(x), jnp.float32))

    def mean(v):
        m = jnp.mean(v, axis=axes, keepdims=True, where=mask)
        return m if axis_name is None else jax.lax.pmean(m, axis_name,
                                                         axis_index_groups=axis_index_groups)

    if not use_mean:
        var = mean(_abs_sq(x))
        return jnp.zeros_like(var), var
    mu = mean(x)
    if use_fast_variance:
        return mu, jnp.maximum(mean(_abs_sq(x)) - _abs_sq(mu), 0.0)
    return mu, mean(_abs_sq(x - mu))


def _abs_sq(x):
    """``|x|^2`` elementwise (real for a complex ``x``)."""
    if jnp.iscomplexobj(x):
        return jnp.square(x.real) + jnp.square(x.imag)
    return jnp.square(x)


def _affine(y, weights: Optional[dict]):
    if weights is None:
        return y
    if "scale" in weights:
        y = y * weights["scale"]
    if "bias" in weights:
        y = y + weights["bias"]
    return y


def _feature_shape(in_size: Tuple[int, ...], feature_axes: Tuple[int, ...]) -> Tuple[int, ...]:
    return tuple(n if i in feature_axes else 1 for i, n in enumerate(in_size))


def _weights(param_type, feature_shape, scale_init, bias_init, name="weight"):
    w = {}
    if scale_init is not None:
        w["scale"] = param(scale_init, feature_shape)
    if bias_init is not None:
        w["bias"] = param(bias_init, feature_shape)
    return param_type(w, name=name) if w else None


class _BatchNorm(Module):
    num_spatial_dims: int = 0

    def __init__(self, in_size: Sequence[int], feature_axis: Axes = -1, *,
                 track_running_stats: bool = True, epsilon: float = 1e-5,
                 momentum: float = 0.99, affine: bool = True,
                 bias_initializer: Union[Callable, Any] = Constant(0.0),
                 scale_initializer: Union[Callable, Any] = Constant(1.0),
                 axis_name: Optional[Union[str, Sequence[str]]] = None,
                 axis_index_groups: Optional[Sequence[Sequence[int]]] = None,
                 use_fast_variance: bool = True, name: Optional[str] = None, dtype: Any = None,
                 param_type: type = ParamState, mean_type: type = BatchState):
        super().__init__(name=name)
        what = type(self).__name__
        if len(to_size(in_size)) != self.num_spatial_dims + 1:
            raise ValueError(f"{what}: in_size must have {self.num_spatial_dims + 1} entries "
                             f"({self.num_spatial_dims} spatial and the features), got "
                             f"{to_size(in_size)}.")
        self.in_size = in_size
        self.out_size = in_size
        self.feature_axes = _axes(feature_axis, len(self.in_size), what)
        self.epsilon, self.momentum = epsilon, momentum
        self.track_running_stats, self.affine = track_running_stats, affine
        self.axis_name, self.axis_index_groups = axis_name, axis_index_groups
        self.use_fast_variance = use_fast_variance
        self.dtype = dtype or environ.dftype()
        shape = _feature_shape(self.in_size, self.feature_axes)
        if track_running_stats:
            self.running_mean = mean_type(jnp.zeros(shape, self.dtype), name="running_mean")
            self.running_var = mean_type(jnp.ones(shape, self.dtype), name="running_var")
        else:
            self.running_mean = self.running_var = None
        self.weight = (_weights(param_type, shape, scale_initializer, bias_initializer)
                       if affine else None)

    def update(self, x: Any, mask: Optional[jax.Array] = None) -> jax.Array:
        """Normalise ``x`` (one sample ``in_size`` or a batch ``(N, *in_size)``)."""
        shape = tuple(jnp.shape(x))
        batched = len(shape) == len(self.in_size) + 1
        if shape[-len(self.in_size):] != self.in_size or not (batched or len(shape) == len(
                self.in_size)):
            raise ValueError(f"{type(self).__name__}: expected an input of shape {self.in_size} "
                             f"or (batch, *{self.in_size}), got {shape}.")
        offset = int(batched)
        axes = tuple(i for i in range(len(shape)) if i - offset not in self.feature_axes)
        # without running statistics the batch's own are always used: no need to ask for fit
        fit = self.track_running_stats and environ.get(
            "fit", desc="whether the model is being fitted: True in a training step, False when "
                        "evaluating")
        if fit or not self.track_running_stats:
            mean, var = _stats(x, axes, self.axis_name, self.axis_index_groups, mask=mask,
                               use_fast_variance=self.use_fast_variance)
            mean, var = mean.reshape(self.running_shape), var.reshape(self.running_shape)
            if self.track_running_stats:
                m = self.momentum
                self.running_mean.value = m * self.running_mean.value + (1 - m) * mean
                self.running_var.value = m * self.running_var.value + (1 - m) * var
        else:
            mean, var = self.running_mean.value, self.running_var.value
        y = (x - mean) * jax.lax.rsqrt(var + self.epsilon)
        y = _affine(y, None if self.weight is None else self.weight.value)
        return jnp.asarray(y, self.dtype)

    @property
    def running_shape(self) -> Tuple[int, ...]:
        return _feature_shape(self.in_size, self.feature_axes)


_BN_DOC = """Batch normalisation of {what} inputs: one sample ``{shape}`` or a batch ``(N, {shape_args})``.

    Parameters
    ----------
    in_size : sequence of int
        One sample's shape, ``{shape}``.
    feature_axis : int or sequence of int
        The feature axes of ``in_size`` (per-feature statistics and parameters).
    track_running_stats : bool
        Keep ``running_mean``/``running_var`` (``BatchState``) and use them when not fitting.
    epsilon, momentum : float
        Added to the variance; weight of the old running value.
    affine : bool
        Learn a ``scale`` and ``bias`` (``self.weight``).
    axis_name : str, optional
        The ``vmap`` axis name to pool the statistics over (see the module docstring).
    """


class BatchNorm0d(_BatchNorm):
    __doc__ = _BN_DOC.format(what="feature-vector", shape="(C,)", shape_args="C")
    num_spatial_dims = 0


class BatchNorm1d(_BatchNorm):
    __doc__ = _BN_DOC.format(what="1-D", shape="(L, C)", shape_args="L, C")
    num_spatial_dims = 1


class BatchNorm2d(_BatchNorm):
    __doc__ = _BN_DOC.format(what="2-D", shape="(H, W, C)", shape_args="H, W, C")
    num_spatial_dims = 2


class BatchNorm3d(_BatchNorm):
    __doc__ = _BN_DOC.format(what="3-D", shape="(D, H, W, C)", shape_args="D, H, W, C")
    num_spatial_dims = 3


class LayerNorm(Module):
    """Normalise over ``reduction_axes`` of each input (default: the last axis).

    Parameters
    ----------
    in_size : sequence of int
        One sample's shape.
    reduction_axes : int or sequence of int
        Axes of the input to compute the statistics over (negative: from the end).
    feature_axes : int or sequence of int
        Axes of ``in_size`` that get their own ``scale`` and ``bias``.
    epsilon : float
        Added to the variance.
    use_bias, use_scale : bool
        Learn a bias / a scale.
    axis_name : str, optional
        A ``vmap`` axis name to pool the statistics over.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx import nn
    >>> y = nn.LayerNorm(4)(jnp.array([[1.0, 2.0, 3.0, 4.0]]))
    >>> [round(float(v), 3) for v in y[0]]
    [-1.342, -0.447, 0.447, 1.342]
    """

    use_mean = True

    def __init__(self, in_size: Sequence[int], reduction_axes: Axes = -1,
                 feature_axes: Axes = -1, *, epsilon: float = 1e-6, use_bias: bool = True,
                 use_scale: bool = True, bias_init: Union[Callable, Any] = ZeroInit(),
                 scale_init: Union[Callable, Any] = Constant(1.0),
                 axis_name: Optional[str] = None, axis_index_groups: Any = None,
                 use_fast_variance: bool = True, dtype: Any = None,
                 param_type: type = ParamState):
        super().__init__()
        self.in_size = in_size
        self.out_size = in_size
        self.feature_axes = _axes(feature_axes, len(self.in_size), type(self).__name__)
        self.reduction_axes = ((reduction_axes,) if isinstance(reduction_axes, int)
                               else tuple(reduction_axes))
        self.epsilon, self.dtype = epsilon, dtype
        self.axis_name, self.axis_index_groups = axis_name, axis_index_groups
        self.use_bias, self.use_scale = use_bias, use_scale
        self.use_fast_variance = use_fast_variance
        shape = _feature_shape(self.in_size, self.feature_axes)
        self.weight = _weights(param_type, shape, scale_init if use_scale else None,
                               bias_init if use_bias else None)

    def _normalize(self, x, mask, weights):
        axes = _axes(self.reduction_axes, jnp.ndim(x), type(self).__name__)
        mean, var = _stats(x, axes, self.axis_name, self.axis_index_groups, self.use_mean, mask,
                           self.use_fast_variance)
        y = _affine((x - mean) * jax.lax.rsqrt(var + self.epsilon), weights)
        return y if self.dtype is None else jnp.asarray(y, self.dtype)

    def update(self, x: Any, *, mask: Optional[jax.Array] = None) -> jax.Array:
        """Normalise ``x``; ``mask`` selects the entries that count in the statistics."""
        return self._normalize(x, mask, None if self.weight is None else self.weight.value)


class RMSNorm(LayerNorm):
    """Divide by the root mean square over ``reduction_axes`` (no mean subtracted), then scale.

    Parameters as :class:`LayerNorm`, without a bias; the scale is in
    ``self.scale`` (a ``ParamState`` holding ``{"scale": ...}``), as in brainstate.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx import nn
    >>> [round(float(v), 3) for v in nn.RMSNorm(2, epsilon=0.0)(jnp.array([3.0, 4.0]))]
    [0.849, 1.131]
    """

    use_mean = False

    def __init__(self, in_size: Sequence[int], *, epsilon: float = 1e-6, dtype: Any = None,
                 use_scale: bool = True, scale_init: Union[Callable, Any] = Constant(1.0),
                 reduction_axes: Axes = -1, feature_axes: Axes = -1,
                 axis_name: Optional[str] = None, axis_index_groups: Any = None,
                 use_fast_variance: bool = True, param_type: type = ParamState):
        super().__init__(in_size, reduction_axes, feature_axes, epsilon=epsilon, use_bias=False,
                         use_scale=False, axis_name=axis_name, axis_index_groups=axis_index_groups,
                         use_fast_variance=use_fast_variance, dtype=dtype, param_type=param_type)
        del self.weight
        shape = _feature_shape(self.in_size, self.feature_axes)
        self.use_scale = use_scale
        self.scale = (_weights(param_type, shape, scale_init, None, name="scale")
                      if use_scale else None)

    def update(self, x: Any, *, mask: Optional[jax.Array] = None) -> jax.Array:
        """``x / sqrt(mean(x**2) + epsilon) * scale``."""
        return self._normalize(x, mask, None if self.scale is None else self.scale.value)


class GroupNorm(Module):
    """Normalise each sample over its spatial axes and groups of channels (the last axis).

    Parameters
    ----------
    in_size : sequence of int
        One sample's shape, channels last.
    feature_axis : int
        Must be the last axis (channels).
    num_groups, group_size : int
        Give one of them (``group_size`` needs ``num_groups=None``).
    epsilon : float
        Added to the variance.
    use_bias, use_scale : bool
        Learn a per-channel bias / scale.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx import nn
    >>> gn = nn.GroupNorm((3, 4), num_groups=2)
    >>> y = gn(jnp.arange(24.0).reshape(2, 3, 4))
    >>> round(float(y[0, :, :2].mean()), 4), round(float(y[0, :, :2].std()), 3)
    (0.0, 1.0)
    """

    def __init__(self, in_size: Sequence[int], feature_axis: Axes = -1,
                 num_groups: Optional[int] = 32, group_size: Optional[int] = None, *,
                 epsilon: float = 1e-6, dtype: Any = None, use_bias: bool = True,
                 use_scale: bool = True, bias_init: Union[Callable, Any] = ZeroInit(),
                 scale_init: Union[Callable, Any] = Constant(1.0),
                 reduction_axes: Optional[Axes] = None, axis_name: Optional[str] = None,
                 axis_index_groups: Any = None, use_fast_variance: bool = True,
                 param_type: type = ParamState):
        super().__init__()
        self.in_size = in_size
        self.out_size = in_size
        self.feature_axes = _axes(feature_axis, len(self.in_size), "GroupNorm")
        if self.feature_axes != (len(self.in_size) - 1,):
            raise ValueError(f"GroupNorm: the channels must be the last axis of in_size; got "
                             f"feature_axis={feature_axis!r}.")
        channels = self.in_size[-1]
        if (num_groups is None) == (group_size is None):
            raise ValueError("GroupNorm: give exactly one of num_groups and group_size (pass "
                             "num_groups=None with group_size).")
        if group_size is not None:
            num_groups = channels // group_size if channels % group_size == 0 else 0
        if not num_groups or channels % num_groups:
            raise ValueError(f"GroupNorm: {channels} channels cannot be split into "
                             f"{num_groups or 'groups of ' + str(group_size)} equal groups.")
        self.num_groups, self.group_size = num_groups, channels // num_groups
        self.reduction_axes = reduction_axes
        self.epsilon, self.dtype = epsilon, dtype
        self.axis_name, self.axis_index_groups = axis_name, axis_index_groups
        self.use_fast_variance = use_fast_variance
        shape = _feature_shape(self.in_size, self.feature_axes)
        self.weight = _weights(param_type, shape, scale_init if use_scale else None,
                               bias_init if use_bias else None)

    def update(self, x: Any, *, mask: Optional[jax.Array] = None) -> jax.Array:
        """Normalise one sample ``in_size`` or a batch ``(N, *in_size)``; any other input whose
        last axis has the channels is read as brainstate does, ``(N, *spatial, channels)``."""
        shape = tuple(jnp.shape(x))
        offset = len(shape) - len(self.in_size)
        if offset not in (0, 1) or shape[offset:] != self.in_size:
            if len(shape) < 2 or shape[-1] != self.in_size[-1]:
                raise ValueError(f"GroupNorm: expected an input of shape {self.in_size} or "
                                 f"(batch, *{self.in_size}), or (batch, ..., "
                                 f"{self.in_size[-1]}) channels last, got {shape}.")
            offset = 1   # brainstate's reading: (batch, any spatial axes, channels)
        grouped = jnp.reshape(x, shape[:-1] + (self.num_groups, self.group_size))
        if self.reduction_axes is None:
            axes = tuple(range(offset, len(shape) - 1)) + (len(shape),)
        else:
            axes = _axes(self.reduction_axes, len(shape) + 1, "GroupNorm")
        if mask is not None:
            mask = jnp.reshape(mask, grouped.shape)
        mean, var = _stats(grouped, axes, self.axis_name, self.axis_index_groups, mask=mask,
                           use_fast_variance=self.use_fast_variance)
        y = jnp.reshape((grouped - mean) * jax.lax.rsqrt(var + self.epsilon), shape)
        y = _affine(y, None if self.weight is None else self.weight.value)
        return y if self.dtype is None else jnp.asarray(y, self.dtype)
