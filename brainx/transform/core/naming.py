"""`named_call` and `named_scope`: names for a function's operations in traces and profiles.

The name goes on the name stack of every operation the function records
(``eqn.source_info.name_stack`` in a jaxpr, ``op_name`` metadata in HLO, and
the profiler's trace viewer). Nothing else changes: the function is not
compiled, and reads and writes states exactly as before, so it composes with
every transform.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence, Union

import jax

from brainx.transform.core.arguments import function_name

__all__ = ["named_call", "named_scope"]


def named_call(fun: Optional[Callable] = None, *, name: Optional[str] = None) -> Any:
    """Run ``fun`` inside ``jax.named_scope(name)`` (``name`` defaults to ``fun.__name__``).

    Use it bare (``@named_call``), with a name (``@named_call(name="block")``)
    or directly (``named_call(fun, name="block")``).

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> @brainx.transform.named_call(name="encoder")
    ... def encode(x):
    ...     return jnp.sin(x) * 2.0
    >>> eqn = jax.make_jaxpr(encode)(1.0).eqns[0]
    >>> str(eqn.source_info.name_stack)
    'encoder'
    """
    if name is not None and not isinstance(name, str):
        raise TypeError(f"named_call: name must be a string, got {name!r}.")

    def wrap(f: Callable) -> Callable:
        if not callable(f):
            raise TypeError(f"named_call: expected a callable, got {f!r}.")
        scope = name if name is not None else getattr(f, "__name__", None) or function_name(f)

        @functools.wraps(f)
        def named(*args, **kwargs):
            with jax.named_scope(scope):
                return f(*args, **kwargs)

        return named

    return wrap if fun is None else wrap(fun)


ArgSpec = Union[int, Sequence[int], Callable[..., Any], None]


def named_scope(name: str, static_argnums: ArgSpec = None,
                static_argnames: Union[str, Sequence[str], Callable[..., Any], None] = None
                ) -> Callable[[Callable], Callable]:
    """A decorator: the function's operations carry ``name`` (as :func:`named_call`).

    ``static_argnums`` / ``static_argnames`` (values, or functions of the
    call's arguments that return them) are brainstate's: brainstate compiles
    the function with ``jit(name=name)`` when its ``ir_compilation`` setting
    is on, and calls it unnamed otherwise. brainx has no IR compilation: the
    function always runs as written, inside ``jax.named_scope(name)``; compile
    it (or its caller) with :func:`~brainx.transform.jit` (``name=``) where you
    want a compiled unit. The static specifications are checked and kept as
    attributes of the wrapper.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> class Layer:
    ...     @brainx.transform.named_scope("dense")
    ...     def __call__(self, x):
    ...         return x * 2.0
    >>> jaxpr = jax.make_jaxpr(Layer())(1.0)
    >>> str(jaxpr.eqns[0].source_info.name_stack)
    'dense'
    """
    if not isinstance(name, str):
        raise TypeError(f"named_scope: name must be a string, got {name!r}.")
    for what, spec, kinds in (("static_argnums", static_argnums, int),
                              ("static_argnames", static_argnames, str)):
        if spec is None or callable(spec) or isinstance(spec, kinds):
            continue
        if not all(isinstance(s, kinds) for s in spec):
            raise TypeError(f"named_scope: {what} must be {kinds.__name__}(s) or a function "
                            f"of the call's arguments, got {spec!r}.")

    def decorate(fn: Callable) -> Callable:
        named = named_call(fn, name=name)
        named.fn = fn
        named.static_argnums = static_argnums
        named.static_argnames = static_argnames
        return named

    return decorate
