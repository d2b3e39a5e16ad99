"""A hint on JAX's concretization errors: which arguments to make static, or how to branch on data.

A Python ``if`` (or ``while``, ``and``, ``bool()``, ``int()``, ``range()``) on a traced value
inside ``transform.jit`` or ``transform.checkpoint`` raises JAX's
:class:`jax.errors.TracerBoolConversionError` (or another
:class:`~jax.errors.ConcretizationTypeError`, or :class:`~jax.errors.TracerIntegerConversionError`),
whose message speaks of brainx's internal ``arrays``. :func:`add_static_hint` appends what to do
to that exception's message in place, so it is still JAX's exception, caught as before.

The hint names the transform whose trace made the value and a fix that applies there: a
jitted or checkpointed function's argument can be made static; a loop's step variables cannot
(:func:`add_loop_hint`: close over the Python value instead); a per-step setting of
``brainx.environ`` read as an input (``t``, ``i``) is made static with
``environ.set_per_step(key, False)``. The innermost transform adds it; the ones around leave it.
"""

from __future__ import annotations

import inspect
import re
import types
from typing import Callable, Optional, Sequence

import jax

from brainx.environ.reads import per_step_reads

__all__ = ["CONCRETIZATION_ERRORS", "add_static_hint", "add_loop_hint", "with_loop_hint",
           "add_non_array_hint"]

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
    what, setting_fix = _per_step_parts(error, f"its arguments{traced_text}")
    hint = (f"\n\n{_MARK}{transform}({name}) traces {what}, so Python cannot decide an `if`, "
            f"`while`, `and`/`or`, bool(), int() or range() on them.{setting_fix} If the value "
            f"is a Python setting (a flag, a size, a mode) passed as an argument, make that "
            f"argument static: "
            f"brainx.transform.{transform}({name}, static_argnums=(i,)) or "
            f"static_argnames=('name',), and each value gets its own trace. If it is data, "
            f"branch without Python: jnp.where, brainx.transform.cond or brainx.transform.ifelse.")
    error.args = (message + hint, *error.args[1:])


def _per_step_parts(error: BaseException, first: str) -> tuple:
    """``(traced, fix)``: what the failed trace traced, starting with ``first``, and how to make
    a per-step setting it read as an input static (``""`` when it read none)."""
    keys = per_step_reads(error)
    if not keys:
        return f"{first} and the values of the states it reads", ""
    names = ", ".join(repr(k) for k in keys)
    key = keys[0]
    traced = (f"{first}, the values of the states it reads and the per-step "
              f"setting{'s' if len(keys) > 1 else ''} {names} of brainx.environ (inputs at "
              f"each call, not part of its key)")
    fix = (f" If the value is the setting {key!r} (`if environ.get({key!r}) > ...`), make the "
           f"setting static: brainx.environ.set_per_step({key!r}, False) before the first call "
           f"(each new value then traces and compiles again), or keep it traced and use "
           f"jnp.where.")
    return traced, fix


#: What JAX's message says made the tracer: "... while tracing the function f at ... for NAME."
_TRACED_FOR = re.compile(r"The error occurred while tracing the function .*? for "
                         r"(?P<name>.+?)\.(\s|$)")


_OWN_ARGUMENT = "because it depends on the value of the argument"


def add_loop_hint(error: BaseException, kind: str, fun: Callable, passes: str) -> None:
    """Append to ``error``'s message what to do about a Python branch on a loop's traced value.

    ``kind`` is the loop (``"for_loop"``, ``"scan"``, ``"while_loop"``, ...), ``fun`` its
    step function and ``passes`` what the loop passes to it (``"its loop variables"``). A loop
    step's variables cannot be made static, so the hint says to close over a Python value
    instead. Left to the transform around when JAX's message says another trace made the value
    (a value the step closes over from an enclosing ``jit``), or when a hint is there already.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> try:
    ...     brainx.transform.for_loop(lambda i: i if i > 2 else 0, jnp.arange(4))
    ... except jax.errors.TracerBoolConversionError as e:
    ...     print("static_argnums" in str(e), "close over" in str(e))
    False True
    """
    message = str(error.args[0]) if error.args else ""
    if _MARK in message:
        return
    found = _TRACED_FOR.search(message)
    if found is not None and not re.match(rf"{re.escape(kind)}[( ]", found["name"]):
        return  # another transform's value: that transform says what to do
    # JAX names the argument when the value is one of the step's inputs; else the step may
    # have computed it from a value it closes over, an argument of a transform around the loop
    around = "" if _OWN_ARGUMENT in message else (
        " If it is computed from a value the step closes over (an argument of a jit around the "
        "loop), make that argument static there (static_argnums or static_argnames).")
    name = getattr(fun, "__name__", "fun")
    what, setting_fix = _per_step_parts(error, f"what it passes to {name} at each step "
                                               f"({passes})")
    hint = (f"\n\n{_MARK}{kind}({name}) traces {what}, so Python cannot decide an `if`, "
            f"`while`, `and`/`or`, bool(), int() or range() on them.{setting_fix} A "
            f"value that changes from step to step is always traced: branch without Python "
            f"(jnp.where, brainx.transform.cond or brainx.transform.ifelse). If it is a Python "
            f"setting (a flag, a size, a mode), do not pass it through the loop: let {name} "
            f"close over it (a Python variable, or functools.partial), and each value gets its "
            f"own loop.{around}")
    error.args = (message + hint, *error.args[1:])


def with_loop_hint(kind: str, fun: Callable, loop: Callable) -> Callable:
    """``loop``, adding :func:`add_loop_hint` to JAX's error for a Python branch on a traced
    value (the ``jit`` that compiles the loop would otherwise name ``static_argnums``)."""
    passes = ("its loop variables, xs" if kind.endswith("for_loop") else
              "the loop value" if kind.endswith("while_loop") else "the carry and x")
    # only the name: the loop cache holds ``run``, and a user's function it kept alive would
    # never be released (the cache holds functions weakly)
    named = types.SimpleNamespace(__name__=getattr(fun, "__name__", "fun"))

    def run(*args):
        try:
            return loop(*args)
        except CONCRETIZATION_ERRORS as error:
            add_loop_hint(error, kind, named, passes)
            raise

    run.__name__ = "fun"  # the compiled loop's name, as before
    return run


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
