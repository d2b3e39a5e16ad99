"""How a :class:`~brainx.nn.Delay` reads between two recorded steps: the interpolation functions.

:meth:`Delay.retrieve_at_time <brainx.nn.Delay.retrieve_at_time>` asks for a
time that usually falls between two rows of the ring buffer. ``"nearest"`` and
``"linear"`` are built into the delay (one or two gathers). Any other method is a
function of brainstate's protocol::

    fn(history, indices, float_idx, max_length) -> value

``history`` is the buffer (a pytree of arrays, rows first, in the delay's units
stripped), ``indices`` the extra index arrays of the read (``()`` for a whole
row), ``float_idx`` the fractional *row* wanted (the latest written row minus the
steps back: row ``floor(float_idx)`` is older, the next one newer; rows wrap
modulo ``max_length``), and the result has one row's structure. Give such a
function as ``Delay(..., interpolation=fn)``, or register it by name with
:class:`InterpolationRegistry` and give the name.

The built-in methods, and the rows each reads around ``i = floor(float_idx)``:

* ``"nearest"`` (``"round"``): row ``i`` or ``i + 1``, whichever is nearer;
* ``"linear"`` (``"linear_interp"``): rows ``i`` and ``i + 1``, on a straight line;
* ``"cubic"`` and ``"hermite"``: rows ``i - 1`` to ``i + 2``, a cubic Hermite spline
  whose slopes are the central differences (Catmull-Rom: both names give the same
  curve, exact up to quadratics);
* ``"polynomial2"``: rows ``i - 1`` to ``i + 1``, the parabola through them;
* ``"polynomial3"``: rows ``i - 1`` to ``i + 2``, the cubic through them.

The stencils that reach ``i + 2`` read one row past the latest when asked for
less than one step back, and the cubic and spline methods need a buffer of at
least four rows; register a delay long enough (brainstate's rule, kept).

Examples
--------
>>> import jax.numpy as jnp
>>> from brainx.nn.dynamics.interpolation import InterpolationRegistry
>>> rows = jnp.array([0.0, 1.0, 8.0, 27.0, 64.0])          # x**3 at rows 0..4
>>> float(InterpolationRegistry.get("polynomial3")(rows, (), 1.5, 5))   # exact for a cubic
3.375
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

import jax
import jax.numpy as jnp

__all__ = ["InterpolationRegistry"]

Interpolation = Callable[[Any, Tuple, Any, int], Any]


def _stencil(history: Any, indices: Tuple, float_idx: Any, max_length: int,
             offsets: Sequence[int], weights: Callable[[Any], Sequence[Any]]) -> Any:
    """``sum_k weights(t)[k] * row(i + offsets[k])``, ``i = floor(float_idx)``, ``t`` the fraction."""
    base = jnp.floor(float_idx)
    t = float_idx - base
    base = base.astype(jnp.int32)
    ws = weights(t)
    rows = [((base + k) % max_length,) + tuple(indices) for k in offsets]

    def mix(h):
        return sum(w * h[row] for w, row in zip(ws, rows))

    return jax.tree.map(mix, history)


def nearest(history: Any, indices: Tuple, float_idx: Any, max_length: int) -> Any:
    """The row nearest to ``float_idx``."""
    row = (jnp.round(float_idx).astype(jnp.int32) % max_length,) + tuple(indices)
    return jax.tree.map(lambda h: h[row], history)


def linear(history: Any, indices: Tuple, float_idx: Any, max_length: int) -> Any:
    """The two rows around ``float_idx``, mixed by its fraction."""
    return _stencil(history, indices, float_idx, max_length, (0, 1), lambda t: (1 - t, t))


def catmull_rom(history: Any, indices: Tuple, float_idx: Any, max_length: int) -> Any:
    """The cubic Hermite spline through rows ``i`` and ``i + 1`` with central-difference slopes."""
    def weights(t):
        t2, t3 = t * t, t * t * t
        return (-0.5 * t3 + t2 - 0.5 * t, 1.5 * t3 - 2.5 * t2 + 1.0,
                -1.5 * t3 + 2.0 * t2 + 0.5 * t, 0.5 * t3 - 0.5 * t2)
    return _stencil(history, indices, float_idx, max_length, (-1, 0, 1, 2), weights)


def lagrange(offsets: Sequence[int]) -> Interpolation:
    """The polynomial through the rows at ``offsets`` from ``floor(float_idx)`` (Lagrange form)."""
    offsets = tuple(offsets)

    def weights(t):
        out = []
        for k in offsets:
            w = 1.0
            for j in offsets:
                if j != k:
                    w = w * (t - j) / (k - j)
            out.append(w)
        return out

    def interpolate(history: Any, indices: Tuple, float_idx: Any, max_length: int) -> Any:
        return _stencil(history, indices, float_idx, max_length, offsets, weights)

    interpolate.__doc__ = f"The polynomial through the rows at offsets {offsets}."
    return interpolate


class InterpolationRegistry:
    """The interpolation methods a :class:`~brainx.nn.Delay` knows by name (brainstate's registry).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.nn import InterpolationRegistry
    >>> def floor_row(history, indices, float_idx, max_length):
    ...     row = (jnp.floor(float_idx).astype(jnp.int32) % max_length,) + indices
    ...     return jax.tree.map(lambda h: h[row], history)
    >>> InterpolationRegistry.register("floor", floor_row)
    >>> InterpolationRegistry.get("floor") is floor_row, "cubic" in InterpolationRegistry.list_methods()
    (True, True)
    """

    _methods: Dict[str, Interpolation] = {}

    @classmethod
    def register(cls, name: str, method: Interpolation) -> None:
        """Register ``method`` (``fn(history, indices, float_idx, max_length)``) as ``name``."""
        if not isinstance(name, str):
            raise TypeError(f"InterpolationRegistry.register: the name must be a string, got "
                            f"{name!r}.")
        if not callable(method):
            raise TypeError(f"InterpolationRegistry.register: {name!r} must be a function "
                            f"fn(history, indices, float_idx, max_length), got {method!r}.")
        cls._methods[name] = method

    @classmethod
    def get(cls, name: str) -> Interpolation:
        """The method registered as ``name`` (``ValueError`` naming the known ones if none)."""
        try:
            return cls._methods[name]
        except (KeyError, TypeError):
            raise ValueError(f"Unknown interpolation method: {name!r}. Registered: "
                             f"{cls.list_methods()}; add one with "
                             "InterpolationRegistry.register(name, fn).") from None

    @classmethod
    def list_methods(cls) -> List[str]:
        """The registered names."""
        return list(cls._methods)


for _name, _method in (("nearest", nearest), ("round", nearest), ("linear", linear),
                       ("linear_interp", linear), ("cubic", catmull_rom),
                       ("hermite", catmull_rom), ("polynomial2", lagrange((-1, 0, 1))),
                       ("polynomial3", lagrange((-1, 0, 1, 2)))):
    InterpolationRegistry.register(_name, _method)
