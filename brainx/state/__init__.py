"""States and the state trace.

:class:`FakeState` (brainstate's stand-in for a state) and :func:`check_state_jax_tracer`
(brainstate's switch, which changes nothing here) are
:class:`brainx.compat.fake_state.FakeState` and
:func:`brainx.compat.no_op_switches.check_state_jax_tracer`: brainstate compatibility lives
in :mod:`brainx.compat`, above this package, so ``brainx/__init__.py`` sets them here.
"""

from brainx.errors import TraceContextError
from brainx.state.dict_manager import StateDictManager
from brainx.state.global_hooks import (
    GlobalHookRegistry, clear_state_hooks, has_state_hooks, list_state_hooks, register_state_hook,
    unregister_state_hook,
)
from brainx.state.groups import HiddenGroupState, HiddenTreeState
from brainx.state.hook_manager import HookConfig, HookManager
from brainx.state.hooks import (
    Hook, HookCancellationError, HookContext, HookError, HookExecutionError, HookHandle,
    HookRegistrationError, HookWarning, InitHookContext, MutableWriteHookContext,
    ReadHookContext, RestoreHookContext, WriteHookContext,
)
from brainx.state.state import (
    BatchState, DelayState, HiddenState, LongTermState, NonBatchState, ParamState, ShortTermState,
    State, StateMetadata, maybe_state, structure_changed, structure_epoch,
)
from brainx.state.value_checks import check_state_value_tree
from brainx.state.trace import (
    NewStateCatcher, StateCatcher, StateTraceStack, active_traces, catch_new_states,
)
from brainx.state.subclassing import record_state_value_read, record_state_value_write
from brainx.state.snapshots import TreefyState

__all__ = [
    "State", "ShortTermState", "LongTermState", "ParamState", "HiddenState", "BatchState",
    "StateTraceStack", "StateCatcher", "catch_new_states", "active_traces",
    "structure_epoch", "structure_changed", "DelayState", "HiddenGroupState", "HiddenTreeState",
    "maybe_state", "check_state_value_tree", "TraceContextError", "NonBatchState",
    "StateMetadata", "check_state_jax_tracer", "FakeState", "NewStateCatcher", "StateDictManager",
    "TreefyState", "record_state_value_read", "record_state_value_write",
    # state hooks
    "HookContext", "ReadHookContext", "WriteHookContext", "MutableWriteHookContext",
    "RestoreHookContext", "InitHookContext", "Hook", "HookHandle", "HookManager", "HookConfig",
    "GlobalHookRegistry", "HookError", "HookExecutionError", "HookRegistrationError",
    "HookCancellationError", "HookWarning", "register_state_hook", "unregister_state_hook",
    "clear_state_hooks", "has_state_hooks", "list_state_hooks",
]
