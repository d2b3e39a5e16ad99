"""brainstate's private helpers of its autodiff and checking transforms (see
:mod:`brainx.compat.private`).

Served as ``brainstate.transform._grad_jacobian``, ``_grad_transform`` and ``_error_if``;
each name is brainx's own function, then the public names of ``brainx.transform``:

===============================  ==========================================================
brainstate name                  brainx
===============================  ==========================================================
``_jacrev``, ``_jacfwd``         ``jax.jacrev`` / ``jax.jacfwd`` of a function without
                                 states (``unit_aware=True``: ``brainunit.autograd``'s)
``_check_nan_jit_compatible``    :func:`brainx.transform.control.nan_debug.has_nan_or_inf`
                                 (inexact leaves only; complex NaN in either part)
``_error_msg``                   the message ``jit_error_if`` raises, as a ``ValueError``
                                 (``%``-style, ``{}``-style or keyword arguments)
===============================  ==========================================================

Examples
--------
>>> import jax.numpy as jnp
>>> from brainx.compat.private.autodiff import _jacfwd, _check_nan_jit_compatible
>>> float(_jacfwd(lambda x: x ** 2)(3.0)), bool(_check_nan_jit_compatible({"a": jnp.nan}))
(6.0, True)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, Union

import brainunit as u
import jax

from brainx.compat.private import public_fallback
from brainx.transform.control.error_if import _raise_message
from brainx.transform.control.nan_debug import has_nan_or_inf

__all__ = ["_jacrev", "_jacfwd", "_check_nan_jit_compatible", "_error_msg"]

Argnums = Union[int, Sequence[int]]


def _jacrev(fn: Callable, argnums: Argnums = 0, holomorphic: bool = False,
            allow_int: bool = False, has_aux: bool = False, unit_aware: bool = False) -> Callable:
    """The reverse-mode Jacobian of ``fn`` (unit-aware with ``unit_aware=True``)."""
    jacrev = u.autograd.jacrev if unit_aware else jax.jacrev
    return jacrev(fn, argnums=argnums, has_aux=has_aux, holomorphic=holomorphic,
                  allow_int=allow_int)


def _jacfwd(fn: Callable, argnums: Argnums = 0, holomorphic: bool = False,
            has_aux: bool = False, unit_aware: bool = False) -> Callable:
    """The forward-mode Jacobian of ``fn`` (unit-aware with ``unit_aware=True``)."""
    jacfwd = u.autograd.jacfwd if unit_aware else jax.jacfwd
    return jacfwd(fn, argnums=argnums, has_aux=has_aux, holomorphic=holomorphic)


def _check_nan_jit_compatible(tree: Any) -> Any:
    """A scalar bool: whether an inexact leaf of ``tree`` holds a NaN or an Inf."""
    return has_nan_or_inf(tree)


def _error_msg(msg: str, *args: Any, **kwargs: Any) -> None:
    """Raise ``ValueError(msg)`` formatted with ``args`` / ``kwargs``."""
    _raise_message(msg, *args, **kwargs)


__getattr__ = public_fallback(__name__, "brainx.transform")
