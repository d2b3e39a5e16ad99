"""Stateful transforms: JAX transforms for functions that read and write states."""

from brainx.transform.autodiff import (
    GradientTransform, grad, hessian, jacfwd, jacobian, jacrev, vector_grad,
)
from brainx.transform.checkpoint import CheckpointedFunction, checkpoint, remat
from brainx.transform.checkpoint_strategies import (
    Binomial, CheckpointStrategy, Nested, NestedRemat, PerStepRemat,
)
from brainx.transform.checkpointed_loops import (
    checkpointed_for_loop, checkpointed_scan, checkpointed_while_loop,
)
from brainx.transform.conditions import cond, ifelse, switch
from brainx.transform.inspect import eval_shape, make_jaxpr
from brainx.transform.jit import JittedFunction, jit
from brainx.transform.loop_cache import clear_loop_cache
from brainx.transform.loops import bounded_while_loop, for_loop, scan, while_loop
from brainx.transform.mapping import VmappedFunction, map, vmap
from brainx.transform.new_states import vmap_new_states
from brainx.transform.products import jvp, vjp
from brainx.transform.progress_bar import ProgressBar
from brainx.transform.residuals import print_saved_residuals, saved_residuals
from brainx.transform.stateful import (
    RetraceNeeded, StatefulFunction, StateSignature, read_state_values, write_state_values,
)

__all__ = [
    "StatefulFunction", "StateSignature", "RetraceNeeded", "read_state_values",
    "write_state_values", "make_jaxpr", "eval_shape", "jit", "JittedFunction", "checkpoint",
    "remat", "CheckpointedFunction", "grad", "vector_grad", "jacrev", "jacobian", "jacfwd",
    "hessian", "GradientTransform", "print_saved_residuals", "saved_residuals", "vjp", "jvp",
    "cond", "switch", "ifelse", "scan", "for_loop", "while_loop", "bounded_while_loop",
    "ProgressBar", "clear_loop_cache", "vmap", "vmap_new_states", "map", "VmappedFunction",
    "checkpointed_scan", "checkpointed_for_loop", "checkpointed_while_loop",
    "CheckpointStrategy", "PerStepRemat", "NestedRemat", "Nested", "Binomial",
]
