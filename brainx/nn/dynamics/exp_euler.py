r"""`exp_euler_step`: one exponential-Euler step of ``dx/dt = f(x, ...)`` over ``dt``.

The exponential Euler scheme linearises ``f`` around the current ``x`` along
its diagonal, ``J = df_i/dx_i``, and integrates that linear part exactly:

.. math::  x_{n+1} = x_n + \mathrm{d}t\,\varphi(\mathrm{d}t\,J)\,f(x_n),
           \qquad \varphi(z) = \frac{e^z - 1}{z}.

For a smooth autonomous ``f`` it is second order (exponential Rosenbrock-Euler),
and stable for stiff decays where forward Euler is not. Coupling between
components (``df_i/dx_j``, ``i != j``) is treated explicitly.

Most equations of neurons and synapses are *affine* in the state,
``dx/dt = a x + b`` (a leaky membrane, a conductance-based input
``g (E - V)``, a decaying synapse, with the inputs held over the step). The
step then is the exact solution, and this module computes it in closed form:

.. math::  x_\infty = -b / a, \qquad x_{n+1} = x_\infty + (x_n - x_\infty)\,e^{a\,\mathrm{d}t}

(``x + b dt`` where ``a = 0``). ``exp_euler_step`` traces ``f`` once and
reads ``a`` and ``b`` off its jaxpr (:mod:`brainx.nn.dynamics.affine`); no
derivative is taken. When ``a`` depends only on parameters (``-1 / tau``),
``e^{a dt}`` and ``(e^{a dt} - 1) / a`` are constants of the compiled step. Any other
``f`` takes the general scheme above (``jax.jvp`` for ``J``).

=====================  ==========================================  ============================
``f`` in ``x``         what one step computes                      derivative work
=====================  ==========================================  ============================
independent of ``x``   ``x + dt f``                                 none
affine, ``a`` known    ``x_inf + (x - x_inf) e^{a dt}``, constants  none
affine, ``a`` traced   the same, ``x + dt b`` where ``a = 0``       none
anything else          ``x + dt phi(dt J) f(x)``                   one ``jax.jvp``
=====================  ==========================================  ============================

``dt`` comes from :mod:`brainx.environ`; ``x``, ``f`` and ``dt`` may be
brainunit quantities (``f`` in units of ``x`` per time).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from brainx import environ
from brainx import random as brainx_random
from brainx.nn.dynamics.affine import affine_form, is_concrete

__all__ = ["exp_euler_step"]


def exp_euler_step(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    r"""One exponential-Euler step of ``dx/dt = fn(x, *rest)`` (an SDE with a diffusion ``g``).

    Arguments
    ---------
    fn : callable
        The drift ``f(x, *rest, **kwargs)``, in units of ``x`` per unit of ``dt``.
        It should be element-wise in ``x`` (its Jacobian's diagonal is used). It
        is traced once, with ``jax.make_jaxpr``: it must not write states, nor
        branch in Python on the value of ``x``. When it is affine in ``x`` the
        step is the exact closed form (see the module's table).
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

    out_unit = []

    def drift(m):
        value = fn(u.maybe_decimal(u.Quantity(m, unit=unit)), *rest, **kwargs)
        out_unit.append(u.get_unit(value))
        return jnp.asarray(u.get_mantissa(value))

    form, jaxpr = affine_form(drift, mantissa)
    rate_unit = out_unit[0] / unit
    dt = environ.get_dt()
    _check_rate_unit(dt, rate_unit, out_unit[0], unit)
    if form is None:
        x_next = _general_step(jaxpr, x, mantissa, dt, rate_unit, out_unit[0])
    else:
        x_next = _affine_step(form, x, dt, rate_unit, out_unit[0])
        shape = np.broadcast_shapes(mantissa.shape, jaxpr.out_avals[0].shape)
        if u.math.shape(x_next) != shape:           # a part folded away held the shape
            x_next = u.math.broadcast_to(x_next, shape)
    if diffusion is not None:
        noise = diffusion(x, *rest, **kwargs) * u.math.sqrt(dt) * brainx_random.randn_like(mantissa)
        if not u.have_same_dim(noise, x_next):
            raise u.UnitMismatchError(
                f"exp_euler_step: the diffusion g(x) * sqrt(dt) has unit {u.get_unit(noise)}, but x "
                f"has unit {unit}: give g in units of x per square root of time.")
        x_next = x_next + noise
    return x_next


def _check_rate_unit(dt, rate_unit, out_unit, unit) -> None:
    if not u.get_dim(dt * u.Quantity(1.0, unit=rate_unit)).is_dimensionless:
        raise u.UnitMismatchError(
            f"exp_euler_step: fn returned unit {out_unit} for x in unit {unit}, but with "
            f"dt = {dt!r} it must return a unit of x per time ({unit} / {u.get_unit(dt)}): divide "
            "by a time constant with units, or set a unitless dt.")


def _quantity(mantissa, unit):
    return u.maybe_decimal(u.Quantity(mantissa, unit=unit))


def _affine_step(form, x, dt, rate_unit, out_unit):
    """The exact step of ``dx/dt = a x + b``: ``x_inf + (x - x_inf) e^{a dt}``, ``x_inf = -b / a``.

    With ``f = s (c x + o)`` (``s`` the form's known scale) and ``h = s dt``: ``a dt = c h``
    and ``x_inf = -o / c``, so the scale costs nothing. A coefficient known when
    the step is traced makes ``e^{c h}`` and ``(e^{c h} - 1) / c`` constants
    (the step is then ``x e^{c h} + o (e^{c h} - 1) / c``, accurate at every ``c``);
    a traced one goes through :func:`_traced_step`.
    """
    coef = form.coef
    if coef is None or (is_concrete(coef) and not np.any(np.asarray(coef) != 0)):
        if form.offset is None:
            return x                                              # f = 0
        return x + (form.scale * dt) * _quantity(form.offset, out_unit)   # f ignores x
    # h = s dt as a number in the unit 1 / rate_unit (coef * h is then a pure number)
    h = u.maybe_decimal(form.scale * dt * u.Quantity(1.0, unit=rate_unit))
    if is_concrete(coef, h):
        with jax.ensure_compile_time_eval():                      # constants of the step
            decay = jnp.exp(coef * h)
            growth = None if form.offset is None else _growth(jnp.asarray(coef), h)
        if growth is None:
            return x * decay
        time_unit = u.get_unit(1.0 / u.Quantity(1.0, unit=rate_unit))
        return x * decay + _quantity(form.offset, out_unit) * _quantity(growth, time_unit)
    if form.offset is None:
        return x * jnp.exp(coef * h)
    unit = u.get_unit(x)
    value = _traced_step(jnp.asarray(u.get_mantissa(x)), jnp.asarray(coef),
                         jnp.asarray(form.offset), h)
    return _quantity(value, unit)


def _growth(c, h):
    """``(e^{c h} - 1) / c``, and ``h`` where ``c = 0``."""
    zero = c == 0
    return jnp.where(zero, h, jnp.expm1(c * h) / jnp.where(zero, 1.0, c))


@jax.custom_jvp
def _traced_step(x, c, o, h):
    """``x_inf + (x - x_inf) e^{c h}`` with ``x_inf = -o / c`` for a traced ``c``; ``x + o h`` where ``c = 0``.

    The closed form as a hand-written step computes it, and what it compiles to:
    the division in one fused loop, the exponential in the next. Its rounding
    error is that of ``x_inf``, a few ulps of ``|o / c|``: nothing next to one
    step's increment unless ``|c h|`` is tiny and the equilibrium far from ``x``
    (a rate known when the step is traced has no such limit). Formulas without
    that limit (``expm1``; a series branch near ``c = 0``) were measured in a COBA
    network: XLA on CPU fuses them into a loop it splits over threads, or into one
    it runs more slowly, up to 1.6 times the neurons' time (at 4000 neurons). The
    derivatives are those of the exact solution (the rule below).
    """
    zero = c == 0
    y = o / jnp.where(zero, 1.0, c)        # -x_inf (no negation); o where c = 0: x + o h there
    return jnp.where(zero, x + y * h, (x + y) * jnp.exp(c * h) - y)


def _traced_step_jvp(primals, tangents):
    x, c, o, h = primals
    tx, tc, to, th = (None if type(t) is SymbolicZero else t for t in tangents)
    out = _traced_step(x, c, o, h)
    z = c * h
    e = jnp.exp(z)
    tangent = jnp.zeros_like(out)
    if tx is not None:
        tangent = tangent + e * tx
    if to is not None:
        tangent = tangent + _growth(c, h) * to
    if tc is not None:                # d/dc = x h e^z + o h^2 psi(z)
        tangent = tangent + (x * h * e + o * h * h * _psi(z)) * tc
    if th is not None:                # d/dh = (c x + o) e^z
        tangent = tangent + (c * x + o) * e * th
    return out, tangent


def _psi(z):
    r"""``(z e^z - e^z + 1) / z^2`` (the derivative of ``(e^z - 1) / z``) to a few ulps.

    That closed form loses about ``1 - log2|z|`` bits to cancellation near 0.
    For ``|z| < 1`` this sums its Taylor series ``sum_n (n + 1) z^n / (n + 2)!``
    instead, with as many terms as the dtype needs (:func:`_psi_terms`: 11 in
    float32, 18 in float64); beyond, the closed form as ``(1 + e^z (z - 1)) / z^2``:
    its two terms have one sign for ``z >= 1``, and lose at most 2 bits for
    ``z <= -1`` (at ``z = -1``). Measured against exact rationals over ``|z|`` in
    ``[1e-12, 10]``: within 3 eps in float32 and float64 (1e8 eps in float64, 40
    in float32, with the 5-term series for ``|z| < 0.1`` this replaced).
    """
    small = jnp.abs(z) < 1
    s = jnp.where(small, z, 0.0)
    series = jnp.zeros_like(z)
    for k in range(_psi_terms(z.dtype) - 1, -1, -1):     # Horner
        series = series * s + (k + 1) / math.factorial(k + 2)
    b = jnp.where(small, 2.0, z)                           # |b| >= 1: both branches finite
    direct = (1.0 + jnp.exp(b) * (b - 1.0)) / (b * b)
    return jnp.where(small, series, direct)


def _psi_terms(dtype) -> int:
    """How many terms of ``_psi``'s series ``dtype`` needs on ``|z| < 1``: the series
    alternates for ``z < 0``, so its error is below the first term left out,
    ``(n + 1) / (n + 2)!``; that is kept under ``eps / 4`` times ``psi(-1) = 1 - 2 / e``,
    the least ``psi`` there."""
    bound = float(jnp.finfo(dtype).eps) / 4 * (1 - 2 / math.e)
    n = 1
    while (n + 1) / math.factorial(n + 2) >= bound:
        n += 1
    return n


_traced_step.defjvp(_traced_step_jvp, symbolic_zeros=True)


def _general_step(jaxpr, x, mantissa, dt, rate_unit, out_unit):
    """``x + dt phi(dt J) f(x)`` with ``J`` the Jacobian's diagonal from one ``jax.jvp``."""
    fun = jax.extend.core.jaxpr_as_fun(jaxpr)
    (value,), (tangent,) = jax.jvp(fun, (mantissa,), (jnp.ones_like(mantissa),))
    jacobian = _quantity(tangent, rate_unit)
    return x + dt * u.math.exprel(dt * jacobian) * _quantity(value, out_unit)
