r"""`exp_euler_step`: one exponential-Euler step of ``dx/dt = f(x, ...)`` over ``dt``.

The exponential Euler scheme linearises ``f`` around the current ``x`` along
its diagonal, ``J = df_i/dx_i``, and integrates that linear part exactly:

.. math::  x_{n+1} = x_n + \mathrm{d}t\,\varphi(\mathrm{d}t\,J)\,f(x_n),
           \qquad \varphi(z) = \frac{e^z - 1}{z}.

For an element-wise *linear* equation ``dx/dt = a x + b`` (a leaky membrane,
a decaying synapse with the input held over the step) the step is exact;
for a smooth autonomous ``f`` it is second order (exponential
Rosenbrock-Euler), and stable for stiff decays where forward Euler is not. Coupling between components (``df_i/dx_j``, ``i != j``) is
treated explicitly. ``dt`` comes from :mod:`brainx.environ`; ``x``, ``f``
and ``dt`` may be brainunit quantities (``f`` in units of ``x`` per time).
"""

from __future__ import annotations

from typing import Any, Callable

import brainunit as u
import jax
import jax.numpy as jnp

from brainx import environ
from brainx import random as brainx_random

__all__ = ["exp_euler_step"]


def exp_euler_step(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    r"""One exponential-Euler step of ``dx/dt = fn(x, *rest)`` (an SDE with a diffusion ``g``).

    Arguments
    ---------
    fn : callable
        The drift ``f(x, *rest, **kwargs)``, in units of ``x`` per unit of ``dt``.
        It should be element-wise in ``x`` (its Jacobian's diagonal is used) and
        must not write states (it is differentiated with ``jax.jvp``).
    *args
        ``x, *rest``; or ``g, x, *rest`` for the SDE
        ``dx = f dt + g dW`` (``g`` a callable with the signature of ``fn``, in
        units of ``x`` per square root of time; the noise is drawn from
        :mod:`brainx.random`).
    **kwargs
        Passed to ``fn`` (and ``g``).

    Returns
    -------
    The state after one step of ``environ.get_dt()``, with the unit of ``x``.

    Examples
    --------
    >>> import brainunit as u, brainx
    >>> with brainx.environ.context(dt=0.1 * u.ms):
    ...     V = brainx.nn.exp_euler_step(lambda v: (-60 * u.mV - v) / (10 * u.ms), -70. * u.mV)
    >>> round(float(V.to_decimal(u.mV)), 4)    # -60 - 10 exp(-0.01), exact
    -69.9005
    """
    if not callable(fn):
        raise TypeError(f"exp_euler_step: the drift fn must be callable, got {fn!r}.")
    diffusion = None
    if args and callable(args[0]):
        diffusion, args = args[0], args[1:]
    if not args:
        raise TypeError("exp_euler_step: give the state x after the drift (and the diffusion): "
                        "exp_euler_step(f, x, *rest) or exp_euler_step(f, g, x, *rest).")
    x, rest = args[0], args[1:]
    unit = u.get_unit(x)
    mantissa = jnp.asarray(u.get_mantissa(x))
    if not jnp.issubdtype(mantissa.dtype, jnp.floating):
        raise TypeError(f"exp_euler_step: x must hold floats, got dtype {mantissa.dtype}; cast the "
                        "initial value (e.g. 0.0 instead of 0).")

    def drift(m):
        return fn(u.maybe_decimal(u.Quantity(m, unit=unit)), *rest, **kwargs)

    value, tangent = jax.jvp(drift, (mantissa,), (jnp.ones_like(mantissa),))
    # d mantissa(f) / d mantissa(x), in units of f per unit of x (1 / time).
    jacobian = u.maybe_decimal(u.Quantity(u.get_mantissa(tangent),
                                          unit=u.get_unit(value) / unit))
    dt = environ.get_dt()
    z = dt * jacobian
    if not u.get_dim(z).is_dimensionless:
        raise u.UnitMismatchError(
            f"exp_euler_step: fn returned unit {u.get_unit(value)} for x in unit {unit}, but with "
            f"dt = {dt!r} it must return a unit of x per time ({unit} / {u.get_unit(dt)}): divide "
            "by a time constant with units, or set a unitless dt.")
    x_next = x + dt * u.math.exprel(z) * value
    if diffusion is not None:
        noise = diffusion(x, *rest, **kwargs) * u.math.sqrt(dt) * brainx_random.randn_like(mantissa)
        if not u.have_same_dim(noise, x_next):
            raise u.UnitMismatchError(
                f"exp_euler_step: the diffusion g(x) * sqrt(dt) has unit {u.get_unit(noise)}, but x "
                f"has unit {unit}: give g in units of x per square root of time.")
        x_next = x_next + noise
    return x_next
