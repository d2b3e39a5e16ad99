"""A name on every intermediate value, so a policy can save "everything except these".

``jax.checkpoint`` asks its policy about each operation: may its output be
kept? A policy sees the primitive, never which value it makes, so "keep
everything except the value named ``pre``" cannot be said directly: the
operation that computes ``pre`` (a ``dot``) is saveable like any other, and
its output, kept, makes the name pointless (in jax 0.10,
``save_anything_except_these_names`` keeps everything for this reason).

Here the function is traced once more to a jaxpr in which every value an
operation computes carries the name :data:`AUTO`, except the values that
already go into a ``checkpoint_name`` (the user's, or a state's): for those,
their own name decides. A policy then keeps a value by its name alone (every
name but the excluded ones) and the unnamed operations are recomputed, so
what is excluded really is recomputed. Only the function's own equations are
named: inside a loop or a call in the function, values are recomputed unless
they leave it, and so are the values derivative rules make from the named
ones (the ``cos`` of a ``sin``), from what is kept.

A name is the identity at run time: results do not change.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.extend.core as jex_core

from brainx.transform.remat.state_names import NAME_PRIMITIVE, insert_names

__all__ = ["AUTO", "name_intermediates", "with_named_intermediates"]

#: The name every intermediate value gets.
AUTO = "brainx.intermediate"


def name_intermediates(jaxpr: Any) -> Any:
    """A copy of ``jaxpr`` where each value an equation computes is named :data:`AUTO`.

    Left alone: outputs of ``checkpoint_name`` equations, values that go
    into one (their name decides), and values that are not arrays (tokens).

    >>> import jax, jax.numpy as jnp
    >>> closed = jax.make_jaxpr(lambda x: jnp.sin(x) * 2)(1.0)
    >>> named = name_intermediates(closed.jaxpr)
    >>> [e.primitive.name for e in named.eqns]
    ['sin', 'name', 'mul', 'name']
    """
    already = set()
    for eqn in jaxpr.eqns:
        if eqn.primitive is NAME_PRIMITIVE:
            already.update(v for v in eqn.invars if not isinstance(v, jex_core.Literal))
    names = {}
    for eqn in jaxpr.eqns:
        if eqn.primitive is NAME_PRIMITIVE:
            continue
        for v in eqn.outvars:
            if v not in already and hasattr(v.aval, "shape") and not isinstance(
                    v, jex_core.DropVar):
                names[v] = AUTO
    return insert_names(jaxpr, names)


def with_named_intermediates(fun: Callable) -> Callable:
    """``fun`` evaluated from its jaxpr with :func:`name_intermediates` applied.

    The result takes and returns what ``fun`` does (pytrees of arrays);
    ``fun`` is traced at each call, as ``jax.checkpoint`` traces it.
    """
    def named(*args, **kwargs):
        closed, out_shape = jax.make_jaxpr(lambda a, k: fun(*a, **k), return_shape=True)(
            args, kwargs)
        jaxpr = name_intermediates(closed.jaxpr)
        run = jex_core.jaxpr_as_fun(jex_core.ClosedJaxpr(jaxpr, closed.consts))
        out = run(*jax.tree.leaves((args, kwargs)))
        return jax.tree.unflatten(jax.tree.structure(out_shape), out)

    named.__name__ = getattr(fun, "__name__", "fun")
    return named
