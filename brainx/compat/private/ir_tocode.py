"""brainstate's code-generation registry (``_ir_tocode.prim_to_python`` and its decorators).

brainstate keeps one dict, ``prim_to_python``, from a primitive's name to its handler;
brainx's writer (:mod:`brainx.transform.ir.codegen`) keeps the handlers given to
:func:`~brainx.transform.register_prim_handler` apart from its own rules. Here
``prim_to_python`` is a view of both: reading a name gives the registered handler, else
brainx's rule; writing registers a handler; deleting removes a registered one (a rule of
brainx's stays). A name is *in* it when brainx can write code for it, by a handler, a
rule, or the ``jax.lax`` function of that name.

A handler is brainx's kind, ``handler(writer, eqn, operands) -> expression`` (source
text); brainstate's handlers build Python syntax trees from a ``SourcerorState`` and do
not run here.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Callable, Iterator

import jax

from brainx.transform.ir import codegen as jaxpr_code
from brainx.transform.ir.codegen_rules import RULES, value_code

__all__ = ["prim_to_python", "register_prim_as", "normal_fn"]


class _Handlers(MutableMapping):
    """brainx's code handlers by primitive name: the registered ones over brainx's rules."""

    def __getitem__(self, name: str) -> Callable:
        handler = jaxpr_code._HANDLERS.get(name) or RULES.get(name)
        if handler is None:
            raise KeyError(name)
        return handler

    def __setitem__(self, name: str, handler: Callable) -> None:
        jaxpr_code._HANDLERS[name] = handler

    def __delitem__(self, name: str) -> None:
        del jaxpr_code._HANDLERS[name]

    def __contains__(self, name: object) -> bool:
        return (name in jaxpr_code._HANDLERS or name in RULES
                or (isinstance(name, str) and callable(getattr(jax.lax, name, None))))

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(set(jaxpr_code._HANDLERS) | set(RULES)))

    def __len__(self) -> int:
        return len(set(jaxpr_code._HANDLERS) | set(RULES))

    def __repr__(self) -> str:
        return f"prim_to_python(<{len(self)} handlers and rules of brainx>)"


prim_to_python = _Handlers()


def register_prim_as(prim_name: str) -> Callable[[Callable], Callable]:
    """A decorator: ``register_prim_handler(prim_name, fn)``, giving ``fn`` back.

    Examples
    --------
    >>> @register_prim_as("my_primitive")
    ... def _write(writer, eqn, operands):
    ...     return f"jax.numpy.negative({operands[0]})"
    >>> prim_to_python["my_primitive"] is _write
    True
    >>> del prim_to_python["my_primitive"]
    """

    def decorator(fn: Callable) -> Callable:
        jaxpr_code.register_prim_handler(prim_name, fn)
        return fn

    return decorator


def normal_fn(fn_name: str) -> Callable:
    """A handler writing ``fn_name(*operands, **params)`` (parameters that are ``None`` left out).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> eqn = jax.make_jaxpr(lambda x: jax.lax.rev(x, (0,)))(jnp.ones(2)).eqns[0]
    >>> normal_fn("jax.lax.rev")(None, eqn, ["a"])
    'jax.lax.rev(a, dimensions=(0,))'
    """

    def handler(writer: Any, eqn: Any, operands: list) -> str:
        params = [f"{k}={value_code(v)}" for k, v in sorted(eqn.params.items()) if v is not None]
        return f"{fn_name}({', '.join([*operands, *params])})"

    return handler
