"""brainx: stateful transforms for JAX.

States (:class:`State` and its kinds) hold mutable values; the functions in
:mod:`brainx.transform` turn code that reads and writes them into pure JAX.
"""

from brainx import environ, errors, random, transform
from brainx import io, nn, optim  # noqa: E402  (they import environ and the states)
from brainx.errors import BatchAxisError, ExpiredStateError, StateTypeError, TracerLeakError
from brainx.state import (
    BatchState, HiddenState, LongTermState, ParamState, ShortTermState, State, StateCatcher,
    StateTraceStack, catch_new_states,
)

__version__ = "0.1.0"

__all__ = [
    "State", "ShortTermState", "LongTermState", "ParamState", "HiddenState", "BatchState",
    "StateTraceStack", "StateCatcher", "catch_new_states", "transform", "errors",
    "TracerLeakError", "ExpiredStateError", "StateTypeError", "random", "BatchAxisError",
    "environ", "nn", "optim", "io",
]
