"""`Param` and `Const`: a model parameter read through a transform.

A :class:`Param` keeps the *unconstrained* value ``x = t.inverse(value)`` in a
:class:`~brainx.ParamState` (``self.val``), so an optimiser moves ``x``
freely, and the model reads ``param.value()``, which is ``t.forward(x)``:
always in the transform's range (:mod:`brainx.nn.params.param_transforms`). The
gradient that reaches ``x`` is the chain rule through ``t.forward``. A
:class:`Const` is the same read-out over a plain array, not a State: no
transform collects or trains it.

``value()`` computes ``t.forward`` at every call unless the parameter was
cached (:meth:`Param.cache`, or a module's ``param_precompute()`` block):
then it returns the cached value as long as ``val`` still holds the value it
was computed from. Any write to ``val`` (an optimiser step, a transform
entering or leaving a trace) makes the next read compute afresh, so a cache
never hands a stale value or a tracer from another trace to the model.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import warnings

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx.nn.init import to_size
from brainx.nn.modules.module import Module
from brainx.nn.params.param_transforms import IdentityT, Transform
from brainx.state.state import ParamState, State

__all__ = ["Param", "Const"]


class Param(Module):
    """A parameter stored unconstrained and read constrained: ``value() = t.forward(val)``.

    Parameters
    ----------
    value : array-like or Quantity
        The initial value, in the constrained space (inside ``t``'s range).
    t : Transform
        The constraint (:class:`~brainx.nn.SoftplusT`, :class:`~brainx.nn.SigmoidT`, ...).
    reg : object, optional
        A regulariser with ``loss(value)`` (and ``reset_value()`` for
        :meth:`reset_to_prior`); :meth:`reg_loss` calls it.
    precompute : callable, optional
        Applied to ``t.forward(val)`` by :meth:`Param.value <brainx.nn.Param.value>`.
    fit : bool
        ``True``: ``val`` is a trainable ``ParamState``; ``False``: a plain array.

    Examples
    --------
    >>> import jax, brainunit as u, brainx
    >>> from brainx.nn import Param, SoftplusT
    >>> tau = Param(10.0 * u.ms, t=SoftplusT(0.0 * u.ms))      # stays positive
    >>> round(float(tau.value().to_decimal(u.ms)), 4)
    10.0
    >>> list(tau.states())
    ['val']
    >>> g = brainx.transform.grad(lambda: tau.value().to_decimal(u.ms), grad_states=tau.val)()
    >>> round(float(g), 4)                                   # d softplus(x)/dx = sigmoid(x)
    1.0
    """

    _is_param = True

    def __init__(self, value: Any, t: Transform = IdentityT(), reg: Any = None,
                 precompute: Optional[Callable] = None, fit: bool = True):
        super().__init__()
        self._cached = None       # (the val it was computed from, the value), or None
        if not isinstance(t, Transform):
            raise TypeError(f"{type(self).__name__}: t must be a brainx.nn Transform "
                            f"(SoftplusT, SigmoidT, ...), got {type(t).__name__}.")
        if reg is not None and not callable(getattr(reg, "loss", None)):
            raise TypeError(f"{type(self).__name__}: reg must have a loss(value) method, "
                            f"got {type(reg).__name__}.")
        if precompute is not None and not callable(precompute):
            raise TypeError(f"{type(self).__name__}: precompute must be callable or None.")
        self.t = t
        self.reg = reg
        self.precompute = precompute
        self.fit = fit
        unconstrained = _unconstrained(t, u.math.asarray(value, dtype=float), type(self).__name__)
        self.val = ParamState(unconstrained) if fit else unconstrained

    #: attributes the repr leaves out: the cache and what computes it
    _REPR_HIDDEN = ("_cached", "precompute", "_enable_cache_logging", "_cache_lock",
                    "_cached_value", "_cache_valid", "_cache_logger",
                    "_cache_invalidation_hook_handle")

    def __pretty_repr_item__(self, name: str, value: Any) -> Optional[Any]:
        """As :meth:`Module.__pretty_repr_item__ <brainx.nn.Module.__pretty_repr_item__>`,
        the cache and ``precompute`` left out.

        Examples
        --------
        >>> import jax.numpy as jnp, brainx
        >>> brainx.nn.Param(jnp.ones(2), t=brainx.nn.SoftplusT(0.0))
        Param(t=SoftplusT(lower=0.0), fit=True, val=ParamState(f32[2]))  # 2 params (8 B)
        """
        if name in self._REPR_HIDDEN:
            return None
        return super().__pretty_repr_item__(name, value)

    def _raw(self):
        return self.val.value if isinstance(self.val, State) else self.val

    def value(self):
        """The constrained value ``t.forward(val)`` (then ``precompute``), or the cached one."""
        val = self._raw()
        if self._cached is not None and self._cached[0] is val:
            return self._cached[1]
        y = self.t.forward(val)
        return y if self.precompute is None else self.precompute(y)

    def cache(self):
        """Compute ``value()`` now and return it from later reads until ``val`` changes.

        Examples
        --------
        >>> import jax.numpy as jnp
        >>> from brainx.nn import Param, SoftplusT
        >>> p = Param(jnp.array([1.0, 2.0]), t=SoftplusT(0.0))
        >>> _ = p.cache()
        >>> p.cache_stats
        {'valid': True, 'has_cached_value': True}
        >>> p.val.value = p.val.value + 1.0          # a write: the next read recomputes
        >>> p.cache_stats['valid']
        False
        """
        self._cached = None
        val = self._raw()
        self._cached = (val, self.value())
        return self._cached[1]

    def clear_cache(self) -> None:
        """Forget the cached value: the next read computes ``t.forward(val)``."""
        self._cached = None

    @property
    def cache_stats(self) -> dict:
        """``{'valid': ..., 'has_cached_value': ...}``: whether a read now returns the cache."""
        has = self._cached is not None
        return {"valid": has and self._cached[0] is self._raw(), "has_cached_value": has}

    def set_value(self, value: Any) -> None:
        """Store ``t.inverse(value)``: ``value`` is in the constrained space."""
        self._cached = None
        x = self.t.inverse(value)
        if isinstance(self.val, State):
            self.val.value = x
        else:
            self.val = x

    def reg_loss(self):
        """``reg.loss(value())`` for a trainable parameter with a regulariser, else ``0.0``."""
        if not self.fit or self.reg is None:
            return 0.0
        return self.reg.loss(self.value())

    def reset_to_prior(self) -> None:
        """Set the value to the regulariser's ``reset_value()`` (nothing without one)."""
        if self.reg is not None:
            self.set_value(self.reg.reset_value())

    def clip(self, min_val: Any = None, max_val: Any = None) -> None:
        """Clip the constrained value in place."""
        self.set_value(u.math.clip(self.value(), min_val, max_val))

    @classmethod
    def init(cls, data: Any, sizes: Union[int, Sequence[int], None] = None,
             allow_none: bool = True, **kwargs) -> Optional["Param"]:
        """A parameter from an initialiser, an array or a ``Param``.

        Parameters
        ----------
        data : callable, array-like, Quantity, Param or None
            An initialiser is called with ``sizes``; an array becomes a :class:`Const`;
            a ``Param`` is returned as is.
        sizes : int or sequence of int, optional
            The shape the value must broadcast to.
        allow_none : bool
            Whether ``data=None`` gives ``None`` (else a ``ValueError``).
        **kwargs
            Passed to the initialiser.

        Examples
        --------
        >>> import jax.numpy as jnp
        >>> from brainx.nn import Const, Param
        >>> p = Param.init(jnp.ones(3), sizes=3)
        >>> type(p).__name__, p.value().tolist()
        ('Const', [1.0, 1.0, 1.0])
        """
        if data is None:
            if allow_none:
                return None
            raise ValueError("Param.init: got None, and allow_none=False; give a value, "
                             "an initialiser or a Param.")
        size = None if sizes is None else to_size(sizes)
        if not isinstance(data, Param):
            if callable(data) and not isinstance(data, (u.Quantity, jnp.ndarray, np.ndarray)):
                if size is None:
                    raise ValueError("Param.init: an initialiser needs sizes.")
                data = data(size, **kwargs)
            data = Const(data)
        if size is not None:
            got = jnp.shape(u.get_mantissa(data.value()))
            try:
                np.broadcast_shapes(got, size)
            except ValueError:
                raise ValueError(f"Param.init: a value of shape {got} does not broadcast to "
                                 f"the size {size}.") from None
        return data


def _unconstrained(t: Transform, value: Any, who: str):
    """``t.inverse(value)``, with a value on the bound of ``t``'s range nudged just inside.

    brainstate stores the infinite inverse of a value on the bound (``SigmoidT(0, 1)`` given
    1.0): its gradient is NaN from the first step. brainx moves each such element towards the
    inside of the range, by one step of its dtype and then by growing fractions of its distance
    to ``t.forward(0)``, until the inverse is finite, and warns. A value outside the range
    (its inverse NaN even so) is refused. A traced value (a model built inside ``jax.grad``)
    is not checked: its inverse is taken as it is.
    """
    x = t.inverse(value)
    x_m = u.get_mantissa(x)
    if isinstance(x_m, jax.core.Tracer) or isinstance(u.get_mantissa(value), jax.core.Tracer):
        return x
    bad = ~np.isfinite(np.asarray(x_m))
    if not bad.any():
        return x
    unit = u.get_unit(value)
    y = np.array(u.get_mantissa(value), copy=True)
    inside = t.forward(jnp.zeros(y.shape, y.dtype))
    inside = np.broadcast_to(np.asarray(u.get_mantissa(
        inside.in_unit(unit) if isinstance(inside, u.Quantity) else inside), y.dtype), y.shape)
    nudged, still = y, bad
    for step in (None, 1e-7, 1e-6, 1e-5, 1e-4):         # float16 and rounding need more
        moved = (np.nextafter(y, inside) if step is None
                 else y + (inside - y) * np.asarray(step, y.dtype))
        nudged = np.where(still, moved, nudged)
        x = t.inverse(nudged if unit.is_unitless else u.Quantity(nudged, unit=unit))
        still = ~np.isfinite(np.asarray(u.get_mantissa(x)))
        if not still.any():
            break
    else:
        raise ValueError(f"{who}: the initial value {value!r} is outside the range of {t!r} "
                         f"(its inverse is not finite); give a value inside the range.")
    warnings.warn(f"{who}: {int(bad.sum())} element(s) of the initial value lie on the bound "
                  f"of {t!r}, where its inverse is infinite; they were moved just inside "
                  f"(to {nudged[bad].ravel()[:3].tolist()}...), so that the parameter can be "
                  f"trained (brainstate stores the infinite value).", UserWarning, stacklevel=3)
    return x


class Const(Param):
    """A :class:`Param` that is not trained: ``val`` is a plain array, not a State.

    It can still be changed explicitly with :meth:`set_value`.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import Const
    >>> c = Const(jnp.array([1.0, 2.0]))
    >>> c.value().tolist(), list(c.states())
    ([1.0, 2.0], [])
    """

    def __init__(self, value: Any, **kwargs):
        if kwargs.pop("fit", False):
            raise ValueError("Const is never trained (fit=False); use Param(value, fit=True) "
                             "for a trainable parameter.")
        super().__init__(value, fit=False, **kwargs)
