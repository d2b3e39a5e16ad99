"""A hint on JAX's concretization errors: which arguments to make static, or how to branch on data.

A Python ``if`` (or ``while``, ``and``, ``bool()``, ``int()``, ``range()``) on a traced value
inside ``transform.jit`` or ``transform.checkpoint`` raises JAX's
:class:`jax.errors.TracerBoolConversionError` (or another
:class:`~jax.errors.ConcretizationTypeError`, or :class:`~jax.errors.TracerIntegerConversionError`),
whose message speaks of brainx's internal ``arrays``. :func:`add_static_hint` appends what to do
to that exception's message in place, so it is still JAX's exception, caught as before.
"""

from __future__ import annotations

import inspect
import re
from typing import Callable, Optional, Sequence

import jax

__all__ = ["CONCRETIZATION_ERRORS", "add_static_hint", "add_non_array_hint"]

#: the exceptions JAX raises when Python needs the value of a tracer
CONCRETIZATION_ERRORS = (jax.errors.ConcretizationTypeError,
                         jax.errors.TracerIntegerConversionError)

_MARK = "brainx: "


def _as_tuple(value) -> tuple:
    """``static_argnums``/``static_argnames`` as given (one int or name, or several) as a tuple."""
    return (value,) if isinstance(value, (int, str)) else tuple(value)


def _parameters(fun: Callable) -> list:
    """``fun``'s parameters, or ``[]`` when its signature cannot be read."""
    try:
        return list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return []


def _traced_names(fun: Callable, static_argnums: Sequence[int],
                  static_argnames: Sequence[str]) -> list:
    """The names of ``fun``'s parameters that are traced (not static), or ``[]`` if unknown."""
    params = _parameters(fun)
    names = []
    for i, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            names.append(("*" if p.kind is p.VAR_POSITIONAL else "**") + p.name)
        elif i not in static_argnums and p.name not in static_argnames:
            names.append(p.name)
    return names


def add_static_hint(error: BaseException, transform: str, fun: Callable,
                    static_argnums: Sequence[int] = (), static_argnames: Sequence[str] = ()) -> None:
    """Append to ``error``'s message how to make an argument static or branch on data.

    ``transform`` is ``"jit"`` or ``"checkpoint"``; ``static_argnums`` and ``static_argnames``
    are those already given. An error that already carries a hint (an inner transform added
    it) is left as it is.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> @brainx.transform.jit
    ... def relu(x):
    ...     return x if x > 0 else 0.0
    >>> try:
    ...     relu(jnp.float32(1.0))
    ... except jax.errors.TracerBoolConversionError as e:
    ...     print("static_argnums" in str(e))
    True
    """
    message = str(error.args[0]) if error.args else ""
    if _MARK in message:
        return
    name = getattr(fun, "__name__", "fun")
    statics = _as_tuple(static_argnums)
    names = _as_tuple(static_argnames)
    traced = _traced_names(fun, statics, names)
    traced_text = f" ({', '.join(traced)})" if traced else ""
    hint = (f"\n\n{_MARK}{transform}({name}) traces its arguments{traced_text} and the values of "
            f"the states it reads, so Python cannot decide an `if`, `while`, `and`/`or`, bool(), "
            f"int() or range() on them. If the value is a Python setting (a flag, a size, a mode), "
            f"make that argument static: brainx.transform.{transform}({name}, static_argnums=(i,)) "
            f"or static_argnames=('name',), and each value gets its own trace. If it is data, "
            f"branch without Python: jnp.where, brainx.transform.cond or brainx.transform.ifelse.")
    error.args = (message + hint, *error.args[1:])


_NON_ARRAY = re.compile(r"Error interpreting argument to .* as an abstract array\. The problematic "
                        r"value is of type (?P<type><class '[^']+'>) and was passed to the function "
                        r"at path dyn_(?P<where>args\[(?P<pos>\d+)\]|kwargs\['(?P<kw>[^']+)'\])",
                        re.S)


def _original_position(dyn_position: int, static_argnums: Sequence[int]) -> int:
    """The position among all arguments of dynamic argument ``dyn_position``."""
    dynamic = [i for i in range(dyn_position + len(static_argnums) + 1) if i not in static_argnums]
    return dynamic[dyn_position]


def add_non_array_hint(error: BaseException, transform: str, fun: Callable,
                       static_argnums: Sequence[int] = (),
                       static_argnames: Sequence[str] = ()) -> None:
    """Append to JAX's "Error interpreting argument ... as an abstract array" which argument of
    ``fun`` it was (by name and position) and how to make it static.

    Examples
    --------
    >>> import brainx
    >>> scale = brainx.transform.jit(lambda x, mode: x * 2 if mode == "double" else x)
    >>> try:
    ...     scale(1.0, "double")
    ... except TypeError as e:
    ...     print(str(e).split("brainx: ")[1][:52])
    jit(<lambda>): argument 'mode' (position 1) is a str
    """
    message = str(error.args[0]) if error.args else ""
    found = _NON_ARRAY.search(message)
    if found is None or _MARK in message:
        return
    name = getattr(fun, "__name__", "fun")
    kind = found["type"][len("<class '"):-2].rsplit(".", 1)[-1]
    statics = _as_tuple(static_argnums)
    if found["kw"] is not None:
        which, fix, alt = f"argument {found['kw']!r}", f"static_argnames=('{found['kw']}',)", ""
    else:
        position = _original_position(int(found["pos"]), statics)
        param = _parameter_name(fun, position)
        which = (f"argument {param!r} (position {position})" if param
                 else f"argument {position}")
        fix = f"static_argnums=({position},)"
        alt = f" (or static_argnames=('{param}',))" if param else ""
    hint = (f"\n\n{_MARK}{transform}({name}): {which} is a {kind}, which JAX cannot trace. If it "
            f"is a Python setting (a mode, a flag, a size), make it static: "
            f"brainx.transform.{transform}({name}, {fix}){alt}; each value then gets its own "
            f"trace. If it is data, pass it as an array.")
    error.args = (message + hint, *error.args[1:])


def _parameter_name(fun: Callable, position: int) -> Optional[str]:
    params = _parameters(fun)
    if position < len(params) and params[position].kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        return params[position].name
    return None
