"""States and the state trace."""

from brainx.errors import TraceContextError
from brainx.state.groups import HiddenGroupState, HiddenTreeState
from brainx.state.state import (
    BatchState, DelayState, HiddenState, LongTermState, ParamState, ShortTermState, State,
    check_state_value_tree, maybe_state, structure_changed, structure_epoch,
)
from brainx.state.trace import StateCatcher, StateTraceStack, active_traces, catch_new_states

__all__ = [
    "State", "ShortTermState", "LongTermState", "ParamState", "HiddenState", "BatchState",
    "StateTraceStack", "StateCatcher", "catch_new_states", "active_traces",
    "structure_epoch", "structure_changed", "DelayState", "HiddenGroupState", "HiddenTreeState",
    "maybe_state", "check_state_value_tree", "TraceContextError",
]
