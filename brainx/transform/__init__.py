"""Stateful transforms: JAX transforms for functions that read and write states.

:func:`in_new_state_probe` (brainstate's question, always ``False`` here) is
:func:`brainx.compat.new_state_probe.in_new_state_probe`: brainstate compatibility lives in
:mod:`brainx.compat`, above this package, so ``brainx/__init__.py`` sets it here.
"""

from brainx.transform.autodiff.gradients import (
    GradientTransform, grad, hessian, jacfwd, jacobian, jacrev, vector_grad,
)
from brainx.transform.autodiff.fwd_grad import fwd_grad
from brainx.transform.control.checkify import (
    all_checks, automatic_checks, check, check_error, checkify, div_checks, float_checks,
    index_checks, nan_checks, user_checks,
)
from brainx.transform.control.error_if import jit_error_if
from brainx.transform.control.nan_debug import breakpoint_if, debug_nan, debug_nan_if
from brainx.transform.core.naming import named_call, named_scope
from brainx.transform.core.state_finder import StateFinder
from brainx.transform.mapping.module_states import vmap2_new_states
from brainx.transform.mapping.stateful_mapping import StatefulMapping, vmap2
from brainx.transform.core.unvmap import unvmap
from brainx.transform.remat.checkpoint import CheckpointedFunction, checkpoint, remat
from brainx.transform.remat.checkpoint_strategies import (
    Binomial, CheckpointStrategy, Nested, NestedRemat, NoRemat, PerStepRemat,
)
from brainx.transform.remat.checkpointed_loops import (
    checkpointed_for_loop, checkpointed_scan, checkpointed_while_loop,
)
from brainx.transform.control.conditions import cond, ifelse, switch
from brainx.transform.core.inspect import eval_shape, make_jaxpr
from brainx.transform.ir.from_eqns import eqns_to_closed_jaxpr, eqns_to_jaxpr
from brainx.transform.ir.inline import inline_jit
from brainx.transform.ir.codegen import (
    UnsupportedPrimitiveError, fn_to_python_code, jaxpr_to_python_code, register_prim_handler,
)
from brainx.transform.ir.optimize import (
    algebraic_simplification, common_subexpression_elimination, constant_fold, copy_propagation,
    dead_code_elimination, optimize_jaxpr,
)
from brainx.transform.compiled.jit import JittedFunction, jit
from brainx.transform.control.loop_cache import clear_loop_cache
from brainx.transform.control.loops import bounded_while_loop, for_loop, scan, while_loop
from brainx.transform.mapping.vmap import VmappedFunction, map, vmap
from brainx.transform.mapping.new_states import vmap_new_states
from brainx.transform.mapping.pmap import pmap2, pmap2_new_states
from brainx.transform.mapping.shard_map import ShardMappedFunction, shard_map
from brainx.transform.autodiff.products import jvp, vjp
from brainx.transform.control.progress_bar import ProgressBar
from brainx.transform.remat.residuals import (
    Residual, ResidualReport, gradient_temp_bytes, print_saved_residuals, saved_residuals,
)
from brainx.transform.remat.memory_report import MemoryReport, MemoryRow, memory_report
from brainx.transform import policies
from brainx.transform.core.stateful import (
    RetraceNeeded, StatefulFunction, StateSignature, read_state_values, write_state_values,
)

__all__ = [
    "StatefulFunction", "StateSignature", "RetraceNeeded", "read_state_values",
    "write_state_values", "make_jaxpr", "jaxpr_to_python_code", "fn_to_python_code", "register_prim_handler",
    "UnsupportedPrimitiveError", "eqns_to_jaxpr", "eqns_to_closed_jaxpr",
    "inline_jit", "eval_shape", "jit", "JittedFunction", "checkpoint",
    "remat", "CheckpointedFunction", "grad", "vector_grad", "jacrev", "jacobian", "jacfwd",
    "hessian", "GradientTransform", "print_saved_residuals", "saved_residuals",
    "Residual", "ResidualReport", "gradient_temp_bytes", "memory_report", "MemoryReport",
    "MemoryRow", "policies", "vjp", "jvp",
    "cond", "switch", "ifelse", "scan", "for_loop", "while_loop", "bounded_while_loop",
    "ProgressBar", "clear_loop_cache", "vmap", "vmap_new_states", "in_new_state_probe", "map", "VmappedFunction",
    "checkpointed_scan", "checkpointed_for_loop", "checkpointed_while_loop",
    "CheckpointStrategy", "NoRemat", "PerStepRemat", "NestedRemat", "Nested", "Binomial",
    # brainstate's extras (docs/transform-extras.md)
    "fwd_grad", "unvmap", "jit_error_if", "debug_nan", "debug_nan_if", "breakpoint_if",
    "checkify", "check", "check_error", "all_checks", "user_checks", "nan_checks",
    "div_checks", "index_checks", "float_checks", "automatic_checks", "named_call",
    "named_scope", "StateFinder", "vmap2", "StatefulMapping", "vmap2_new_states",
    # IR optimisation (docs/transform-extras.md)
    "optimize_jaxpr", "constant_fold", "dead_code_elimination",
    "common_subexpression_elimination", "copy_propagation", "algebraic_simplification",
    # devices (docs/distributed.md)
    "shard_map", "ShardMappedFunction", "pmap2", "pmap2_new_states",
]
