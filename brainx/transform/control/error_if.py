"""`jit_error_if`: raise an error from compiled code when a condition holds.

Eagerly (a concrete ``pred``) the error is raised at once, as a plain Python
exception. Traced (inside ``jit``, a loop, ``vmap``), the check is compiled
in: a ``lax.cond`` on ``pred`` calls back to the host, which raises; JAX
reports it as its runtime error with this message inside. Under ``vmap`` the
check runs when ``pred`` holds in any lane (:func:`~brainx.transform.unvmap`)
and the error is raised with the arguments of the first lane where it holds
(brainstate passes the arguments of all lanes, stacked).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Union

import jax
import jax.numpy as jnp
from jax.core import Tracer

from brainx.transform.core.unvmap import unvmap

__all__ = ["jit_error_if"]


def _raise_message(msg: str, *args, **kwargs) -> None:
    if args:
        try:
            msg = msg % args
        except (TypeError, ValueError):  # not %-style: "{}" placeholders
            msg = msg.format(*args)
    if kwargs:
        msg = msg.format(**kwargs)
    raise ValueError(msg)


def jit_error_if(pred: Any, error: Union[Callable[..., Any], str], *err_args,
                 **err_kwargs) -> None:
    """Raise an error when ``pred`` is true, also inside compiled code.

    Parameters
    ----------
    pred : bool or bool array
        The condition (a non-scalar array counts as true if any element is).
    error : str or callable
        A message (``ValueError`` is raised; it is formatted with
        ``err_args`` by ``%`` or ``{}`` and with ``err_kwargs`` by
        ``str.format``), or a function ``error(*err_args, **err_kwargs)``
        that raises.
    *err_args, **err_kwargs
        Arrays passed to ``error`` (as their concrete values, on the host).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> @brainx.transform.jit
    ... def safe_sqrt(x):
    ...     brainx.transform.jit_error_if(x < 0, "x must be >= 0, got {x}", x=x)
    ...     return jnp.sqrt(x)
    >>> float(safe_sqrt(4.0))
    2.0
    >>> try:
    ...     safe_sqrt(-1.0)
    ... except Exception as e:
    ...     print("x must be >= 0, got -1.0" in str(e))
    True
    """
    if isinstance(error, str):
        error = functools.partial(_raise_message, error)
    elif not callable(error):
        raise TypeError(f"jit_error_if: error must be a message string or a function that "
                        f"raises, got {error!r}.")
    flag = unvmap(pred, op="any")
    if not isinstance(flag, Tracer):
        if bool(flag):
            error(*err_args, **err_kwargs)
        return
    # Under vmap the callback runs once per lane; only a lane where pred holds raises.
    jax.lax.cond(flag, lambda p, a, k: jax.debug.callback(_if_true(error), p, *a, **k,
                                                           ordered=True),
                 lambda p, a, k: None, jnp.any(pred), err_args, err_kwargs)


def _if_true(error: Callable[..., Any]) -> Callable[..., None]:
    def call(lane_pred, *args, **kwargs):
        if lane_pred:
            error(*args, **kwargs)

    return call
