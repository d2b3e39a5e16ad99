"""Static and dynamic arguments: ``static_argnums`` / ``static_argnames`` as ``jax.jit`` reads them."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional, Sequence, Tuple

from brainx.errors import UnhashableStaticError
from brainx.typing import Missing

__all__ = ["no_function", "normalize_argnums", "infer_static", "fixed_positional_count", "function_name",
           "check_static_argnames", "check_hashable"]

def normalize_argnums(fun: Callable, argnums, what: str = "static_argnums") -> Tuple[int, ...]:
    """Sorted non-negative positional indices; negative ones resolved against ``fun``'s signature."""
    if argnums is None:
        return ()
    if isinstance(argnums, int):
        argnums = (argnums,)
    argnums = tuple(argnums)
    for i in argnums:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"{what} must be ints, got {i!r}.")
    if any(i < 0 for i in argnums):
        n = fixed_positional_count(fun)
        if n is None:
            raise ValueError(
                f"{what}={argnums} has a negative index, which is ambiguous for "
                f"{function_name(fun)}: it takes *args or has no inspectable signature. Use "
                "non-negative indices.")
        resolved = []
        for i in argnums:
            j = i + n if i < 0 else i
            if j < 0:
                raise ValueError(_out_of_range(what, argnums, i, fun, n))
            resolved.append(j)
        argnums = tuple(resolved)
    n = fixed_positional_count(fun)
    if n is not None:
        for i in argnums:
            if i >= n:
                raise ValueError(_out_of_range(what, argnums, i, fun, n))
    return tuple(sorted(set(argnums)))


def no_function(fun: Any) -> bool:
    """Whether a transform was given no function (``None``, or brainstate's ``Missing()``).

    Then it returns a decorator, as brainstate's transforms do: brainstate
    defaults ``fun`` to ``Missing()``, and libraries built on it pass that on.
    """
    return fun is None or isinstance(fun, Missing)


def _out_of_range(what: str, argnums: Tuple[int, ...], i: int, fun: Callable, n: int) -> str:
    return (f"{what} contains index {i} ({what}={argnums}), out of range for "
            f"{function_name(fun)}, which takes {n} positional arguments. Use indices from "
            f"{-n} to {n - 1}.")


def infer_static(fun: Callable, argnums: Tuple[int, ...], argnames: Tuple[str, ...]):
    """Complete each list from the other through ``fun``'s signature, as ``jax.jit`` does.

    So a static argument may be passed by position or by keyword.
    """
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return argnums, argnames
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = list(argnames)
    for i in argnums:
        if i < len(positional) and positional[i].kind is positional[i].POSITIONAL_OR_KEYWORD:
            if positional[i].name not in names:
                names.append(positional[i].name)
    nums = set(argnums)
    for i, p in enumerate(positional):
        if p.name in argnames and p.kind is p.POSITIONAL_OR_KEYWORD:
            nums.add(i)
    return tuple(sorted(nums)), tuple(names)


def fixed_positional_count(fun: Callable) -> Optional[int]:
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return None
    n = 0
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n


def function_name(fun: Callable) -> str:
    return getattr(fun, "__qualname__", None) or getattr(fun, "__name__", None) or repr(fun)


def check_static_argnames(fun: Callable, names: Sequence[str], where: str) -> None:
    """Refuse static_argnames the function has no parameter for, as ``jax.jit`` does."""
    try:
        params = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    known = {p.name for p in params if p.kind is not p.POSITIONAL_ONLY}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"{where}: static_argnames {unknown} are not parameters of the "
                         f"function, whose parameters are {sorted(known)}.")


def check_hashable(value: Any, what: str, name: str) -> None:
    try:
        hash(value)
    except TypeError:
        raise UnhashableStaticError(
            f"Static {what} of {name} must be hashable, got a {type(value).__name__}: "
            f"{value!r}. Pass a hashable value (a tuple instead of a list, say), or make the "
            "argument dynamic.") from None
