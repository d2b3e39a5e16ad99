"""Hand ``jax.jit`` the jaxpr a brainx trace found, so the pure function is not traced again.

``transform.jit`` compiles ``pure(state_values, *args) -> (out, written)``,
which evaluates the jaxpr that discovery traced (see
:mod:`brainx.transform.core.stateful`). Left to itself, ``jax.jit`` traces
``pure`` once more on its first call: it makes an input per state value,
copies every equation of the found jaxpr into a new one, and flattens the
outputs, about a fifth of a first call's tracing for a step with a thousand
states. That jaxpr is, up to the order of its inputs, the one discovery
already has.

:func:`prime` builds it by renaming inputs, and files it in ``jax.jit``'s
own parameter cache under the key the coming call will look up (function,
jit options, argument signature, abstract values, mesh), exactly where
``jax.jit`` files what its trace produced. The call then lowers that jaxpr
with no trace; anything else (another argument type, another context) misses
the cache and traces as usual.

This reaches into JAX's private pjit module (through :mod:`brainx._jax.internals`):
JAX has no public way to give ``jax.jit`` a jaxpr. It is done only where the parameters
are plain (no shardings, layouts, devices or meshes: those go through JAX's own trace, which resolves
them), and any change in JAX's private names turns it off for the process
(:data:`AVAILABLE`), leaving JAX to trace as before.
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Sequence

import jax
from jax.extend.core import ClosedJaxpr as _ClosedJaxpr

from brainx._jax.internals import UnspecifiedValue as _Unspecified
from brainx._jax.internals import api_util as _api_util
from brainx._jax.internals import config as _config
from brainx._jax.internals import core as _core
from brainx._jax.internals import fun_name as _fun_name
from brainx._jax.internals import jax_jit as _jax_jit
from brainx._jax.internals import pjit as _pjit
from brainx._jax.internals import tree_util as _tree_util
from brainx.transform.core.state_values import is_single_array

AVAILABLE = _pjit is not None and all(hasattr(_pjit, name) for name in (
    "_infer_params_cached", "get_ctx_mesh", "PjitParams", "UNSPECIFIED"))

__all__ = ["prime", "AVAILABLE"]


def prime(jitted: Any, pure: Any, trace: Any, values: Sequence[Any], dyn_args: tuple,
          dyn_kwargs: dict) -> bool:
    """File ``trace``'s jaxpr as ``jitted``'s trace for ``jitted(values, *dyn_args)``.

    ``jitted`` must be ``jax.jit(pure)``, with ``pure`` evaluating ``trace``
    with the states' ``values`` in order, and every written state's new value
    of arrays only, in order (a fresh :class:`~brainx.transform.compiled.jit_entry.JitEntry`
    of one trace). Returns whether it was filed; when not, ``jax.jit``
    traces ``pure`` itself.
    """
    global AVAILABLE
    if not AVAILABLE or dyn_kwargs or getattr(jitted, "_fun", None) is not pure:
        return False
    try:
        return _prime(jitted, trace, values, dyn_args)
    except Exception:  # pragma: no cover - JAX's private layout moved: trace as JAX does
        AVAILABLE = False
        return False


def _plain_options(info: Any) -> bool:
    """Whether the jit options leave shardings, layouts and placement to JAX's defaults."""
    unflatten = jax.tree_util.tree_unflatten
    return (not info.backend and not info.device and not info.use_resource_env
            and isinstance(unflatten(info.in_shardings_treedef, info.in_shardings_leaves),
                           _Unspecified)
            and isinstance(unflatten(info.out_shardings_treedef, info.out_shardings_leaves),
                           _Unspecified)
            and unflatten(info.in_layouts_treedef, info.in_layouts_leaves) is None
            and unflatten(info.out_layouts_treedef, info.out_layouts_leaves) is None)


def _prime(jitted: Any, trace: Any, values: Sequence[Any], dyn_args: tuple) -> bool:
    fun, info = jitted._fun, jitted._jit_info
    if (not _plain_options(info) or not all(trace.arg_mask) or any(trace.input_statics)
            or getattr(trace.jaxpr, "is_high", False)
            or any(spec.wrap for spec in trace.written_specs)
            or _config.debug_key_reuse.value or _config.enable_checks.value
            or any(isinstance(c, _core.Tracer) for c in trace.consts)):
        return False
    mesh = _pjit.get_ctx_mesh(info.use_resource_env)
    if not mesh.empty:
        return False
    args = (list(values), *dyn_args)
    signature, flat_args = _jax_jit.parse_arguments(
        args, (), (), info.static_argnums, info.static_argnames, _tree_util.tracing_registry)
    # The key's avals are the trace's own (discovery abstracted these very values), so they
    # are not computed again: the jaxpr is what jax.jit would trace `pure` to for them
    # whatever the values are now, and a call with other types misses the key.
    invars = _pure_invars(trace, values)
    if invars is None or len(invars) != len(flat_args):
        return False
    avals = tuple(v.aval for v in invars)
    if any(getattr(a, "has_qdd", False) for a in avals):
        return False
    cached = _pjit._infer_params_cached(fun, info, signature, avals, mesh)
    if cached.pjit_params is not None:
        return True  # jax.jit has it already
    args_tree = jax.tree.structure((args, {}))
    outputs = (_zeros(trace.out_tree),  # what pure returns, with 0 for each array
               [_zeros(spec.treedef) for spec in trace.written_specs])
    out_tree = jax.tree.structure(outputs)
    source = trace.jaxpr.debug_info.func_src_info
    jaxpr = trace.jaxpr.replace(invars=invars, debug_info=_core.DebugInfo(
        "jit", source, None, _result_paths(trace.jaxpr.debug_info, outputs)))
    donated = (False,) * len(avals)
    if (info.donate_argnums or info.donate_argnames) and not _config.debug_nans.value:
        donated = _api_util.donation_vector(info.donate_argnums, info.donate_argnames, args_tree)
    n_out = len(jaxpr.outvars)
    params = dict(
        jaxpr=_ClosedJaxpr(jaxpr, list(trace.consts)),  # (a Jaxpr with its consts in 0.12)
        in_shardings=(_pjit.UNSPECIFIED,) * len(avals),
        out_shardings=(_pjit.UNSPECIFIED,) * n_out,
        in_layouts=(None,) * len(avals),
        out_layouts=(None,) * n_out,
        donated_invars=donated,
        ctx_mesh=mesh,
        name=_fun_name(fun),
        keep_unused=info.keep_unused,
        inline=info.inline,
        compiler_options_kvs=info.compiler_options_kvs,
    )
    cached.pjit_params = _pjit.PjitParams([], params, avals, args_tree, out_tree,
                                          ("",) * len(avals))
    return True


def _result_paths(debug: Any, outputs: tuple) -> tuple:
    """``debug.set_result_paths(outputs)``'s paths, a written array's spelled out (1000s of them)."""
    out, written = outputs
    paths = list(debug.set_result_paths((out, [])).result_paths)
    for k, value in enumerate(written):
        if value == 0:  # one array
            paths.append(f"result[1][{k}]")
        else:
            paths += [f"result[1][{k}]{p[len('result'):]}"
                      for p in debug.set_result_paths(value).result_paths]
    return tuple(paths)


@functools.lru_cache(maxsize=256)  # read only: a structure to name the outputs by
def _zeros(treedef: Any) -> Any:
    return jax.tree.unflatten(treedef, [0] * treedef.num_leaves)


def _pure_invars(trace: Any, values: Sequence[Any]) -> Optional[list]:
    """``trace``'s jaxpr inputs in ``pure``'s order: every state's leaves, then the arguments.

    Discovery's jaxpr takes the arguments first, then the leaves of the
    states it read (``trace.inputs``) in the order it read them; a state only
    written gets inputs that nothing reads, of its leaves' types, as it would
    in ``jax.jit``'s trace.
    """
    invars = trace.jaxpr.invars
    n_args = len(trace.arg_mask)
    read_vars = iter(invars[n_args:])
    read = set(trace.inputs)
    out = []
    for i, value in enumerate(values):
        if i in read:
            n = 1 if is_single_array(value) else len(jax.tree.leaves(value))
            out += [next(read_vars, None) for _ in range(n)]
        else:
            out += [_core.Var(_core.shaped_abstractify(x)) for x in jax.tree.leaves(value)]
    if next(read_vars, None) is not None or None in out:
        return None  # not the layout assumed: let jax.jit trace
    return out + list(invars[:n_args])
