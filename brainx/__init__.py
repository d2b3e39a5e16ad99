"""brainx: stateful transforms for JAX.

States (:class:`State` and its kinds) hold mutable values; the functions in
:mod:`brainx.transform` turn code that reads and writes them into pure JAX.
"""

from brainx import environ, errors, mixin, random, state, transform
from brainx import io, nn, optim  # noqa: E402  (they import environ and the states)
from brainx import graph, util  # noqa: E402  (graph walks brainx.nn modules)
from brainx import typing  # noqa: E402  (type aliases; names the filters of brainx.util)
from brainx import distributed  # noqa: E402  (places the states graph finds)
from brainx import interop  # noqa: E402  (flax/equinox conversions; imports neither until used)
from brainx.compat.deprecated import augment, compile, functional  # noqa: E402,A004  (brainstate's old names)
from brainx.compat.fake_state import FakeState  # noqa: E402
from brainx.compat.no_op_switches import check_state_jax_tracer  # noqa: E402
from brainx.compat.new_state_probe import in_new_state_probe as _in_new_state_probe  # noqa: E402
from brainx.errors import (
    BatchAxisError, BrainStateError, ExpiredStateError, StateTypeError, TraceContextError,
    TracerLeakError,
)
from brainx.state import (
    BatchState, DelayState, HiddenGroupState, HiddenState, HiddenTreeState, LongTermState,
    ParamState, ShortTermState, State, StateCatcher, StateTraceStack, catch_new_states,
    check_state_value_tree, maybe_state,
)
from brainx.state.snapshots import TreefyState  # noqa: E402  (brainstate's top-level name)
from brainx.state import StateDictManager  # noqa: E402
from brainx.state import (  # state hooks
    GlobalHookRegistry, Hook, HookCancellationError, HookConfig, HookContext, HookError,
    HookExecutionError, HookHandle, HookManager, HookRegistrationError, HookWarning,
    InitHookContext, MutableWriteHookContext, ReadHookContext, RestoreHookContext,
    WriteHookContext, clear_state_hooks, has_state_hooks, list_state_hooks, register_state_hook,
    unregister_state_hook,
)

# Names a lower package answers to that live above it; the package that imports both puts them
# there. brainstate has ``util.breakpoint_if``: brainx.transform's function, and brainx.util sits
# below brainx.transform. ``state.FakeState``, ``state.check_state_jax_tracer`` and
# ``transform.in_new_state_probe`` are brainstate compatibility, which lives in brainx.compat, on
# the top floor.
util.breakpoint_if = transform.breakpoint_if
state.FakeState = FakeState
state.check_state_jax_tracer = check_state_jax_tracer
transform.in_new_state_probe = _in_new_state_probe

__version__ = "0.1.0"

__all__ = [
    "State", "ShortTermState", "LongTermState", "ParamState", "HiddenState", "BatchState",
    "StateTraceStack", "StateCatcher", "catch_new_states", "transform", "errors",
    "TracerLeakError", "ExpiredStateError", "StateTypeError", "random", "BatchAxisError",
    "environ", "mixin", "nn", "optim", "io", "DelayState", "HiddenGroupState", "HiddenTreeState",
    "check_state_value_tree", "maybe_state", "TraceContextError", "BrainStateError",
    "graph", "util", "typing", "distributed", "TreefyState", "FakeState", "check_state_jax_tracer",
    "StateDictManager", "interop",
    # state hooks
    "HookContext", "ReadHookContext", "WriteHookContext", "MutableWriteHookContext",
    "RestoreHookContext", "InitHookContext", "Hook", "HookHandle", "HookManager", "HookConfig",
    "GlobalHookRegistry", "HookError", "HookExecutionError", "HookRegistrationError",
    "HookCancellationError", "HookWarning", "register_state_hook", "unregister_state_hook",
    "clear_state_hooks", "has_state_hooks", "list_state_hooks",
]
