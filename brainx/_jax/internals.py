"""JAX's private modules that brainx imports: the only file that names them.

Each import says what brainx uses it for and what public API would replace it;
when JAX publishes one, the users switch to it and the line goes. The required
ones fail at import on a JAX that moved them (brainx cannot run without them);
the optional ones are ``None`` where a JAX lacks them, and their users fall
back (``jit_cache_seed`` then lets ``jax.jit`` trace again, ``environ`` assumes the
backends may have started).
"""

from __future__ import annotations

# -- required --------------------------------------------------------------------------------
# debug_info(name, fun, args, kwargs): the DebugInfo of a traced function (argument names in
# errors). Public: none (jax.extend.linear_util.wrap_init takes one but cannot make it).
from jax._src import api_util
# trace_context() (what keys jax.jit's cache), disable_jit's holder, the config value holders.
# Public: jax.config reads settings, not the trace context.
from jax._src import config
# trace_ctx (the current trace), shaped_abstractify, typeof, Literal, AxisEnv, Tracer.
# Public: jax.extend.core has the IR types, not the trace context.
from jax._src import core
# wrap_init / WrappedFun: the function object the tracer takes. Public: jax.extend.linear_util
# has wrap_init, but its WrappedFun is another class on some versions.
from jax._src import linear_util
# the abstract mesh of the trace context (an empty mesh reads as none). Public: jax.sharding has
# the mesh classes, not the one in the context.
from jax._src import mesh
# ArrayImpl: the concrete array class, for an exact-type test on the hot path. Public: jax.Array
# is an abstract base class, whose isinstance is slower and also true for tracers' values.
from jax._src.array import ArrayImpl
# partial_eval: DynamicJaxprTrace (tracing into a jaxpr that later equations extend),
# trace_to_jaxpr_dynamic, inline_jaxpr_into_trace, try_constant_folding. Public: jax.make_jaxpr
# traces a whole function only.
from jax._src.interpreters import partial_eval
# batching: BatchTrace / BatchTracer, to find the lanes of vmap. Public: none.
from jax._src.interpreters import batching
# convert_element_type with weak_type=: a cast that keeps Python scalars' weak typing. Public:
# lax.convert_element_type has no weak_type argument.
from jax._src.lax.lax import _convert_element_type as convert_element_type

# -- optional --------------------------------------------------------------------------------
try:  # input effects are renamed when a jaxpr's inputs move. Older JAX: none to rename
    from jax._src.effects import JaxprInputEffect
except ImportError:  # pragma: no cover - depends on the JAX version
    JaxprInputEffect = ()
try:  # the typed-key array class. Public: jax.dtypes.prng_key tells dtypes, not this class
    from jax._src.random.prng import PRNGKeyArray
except ImportError:  # JAX before the random package moved
    from jax._src.prng import PRNGKeyArray
try:  # whether XLA's backends have started (a platform can no longer change). Public: none
    from jax._src import xla_bridge
except ImportError:  # pragma: no cover - depends on the JAX version
    xla_bridge = None
try:  # jax.jit's cache of traces, which jit_cache_seed fills with a trace brainx made. Public: none
    from jax._src import pjit
    from jax._src import tree_util
    from jax._src.lib import jax_jit
    from jax._src.sharding_impls import UnspecifiedValue
    from jax._src.util import fun_name
except ImportError:  # pragma: no cover - another JAX layout: jax.jit traces again instead
    pjit = tree_util = jax_jit = UnspecifiedValue = fun_name = None

__all__ = ["api_util", "config", "core", "linear_util", "mesh", "ArrayImpl", "partial_eval",
           "batching", "convert_element_type", "JaxprInputEffect", "PRNGKeyArray", "xla_bridge",
           "pjit", "tree_util", "jax_jit", "UnspecifiedValue", "fun_name"]
