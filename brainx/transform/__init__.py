"""Stateful transforms: JAX transforms for functions that read and write states."""

from brainx.transform.autodiff import (
    GradientTransform, grad, hessian, jacfwd, jacobian, jacrev, vector_grad,
)
from brainx.transform.checkpoint import CheckpointedFunction, checkpoint, remat
from brainx.transform.inspect import eval_shape, make_jaxpr
from brainx.transform.jit import JittedFunction, jit
from brainx.transform.mapping import VmappedFunction, map, vmap
from brainx.transform.new_states import vmap_new_states
from brainx.transform.products import jvp, vjp
from brainx.transform.residuals import print_saved_residuals, saved_residuals
from brainx.transform.stateful import (
    RetraceNeeded, StatefulFunction, StateSignature, read_state_values, write_state_values,
)

__all__ = [
    "StatefulFunction", "StateSignature", "RetraceNeeded", "read_state_values",
    "write_state_values", "make_jaxpr", "eval_shape", "jit", "JittedFunction", "checkpoint",
    "remat", "CheckpointedFunction", "grad", "vector_grad", "jacrev", "jacobian", "jacfwd",
    "hessian", "GradientTransform", "print_saved_residuals", "saved_residuals", "vjp", "jvp",
    "vmap", "vmap_new_states", "map", "VmappedFunction",
]
