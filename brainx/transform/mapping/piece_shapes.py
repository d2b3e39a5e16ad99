"""The shapes a mapped trace sees for the states its mapping splits.

``vmap2``/``StatefulMapping`` split a batched state into lanes and
``shard_map`` splits a sharded state into per-device blocks; either way the
function is traced once with a *piece* of each split state. A
:class:`PieceShapes` is what ``StatefulFunction.discover`` gets as
``outer_values``: ``state in shapes`` says whether a state is split, and
``shapes[state]`` gives its value's piece as ``ShapeDtypeStruct`` leaves.

It is made before the trace opens its scope, so values are read as the scopes
around the mapping see them (not through the trace's own scope, whose lift
asks for them).
"""

from __future__ import annotations

from typing import Any, Callable, Tuple

import jax

from brainx.state.state import State
from brainx.state.trace import _THREAD
from brainx.transform.core.state_values import is_array_leaf

__all__ = ["PieceShapes"]


class PieceShapes:
    """Base: subclasses say which states are split and the shape of one piece."""

    def __init__(self):
        self.depth = len(_THREAD.frames)

    def outer_value(self, state: State) -> Any:
        """``state``'s value as the scopes around the mapping see it."""
        if not self.depth:
            return state._checked_value()
        return _THREAD.frames[self.depth - 1].read_value(state)

    def splits(self, state: State) -> bool:
        raise NotImplementedError

    def piece_shape(self, state: State, value: Any) -> Callable[[Tuple[int, ...]], Tuple[int, ...]]:
        """A function from a leaf's shape to its piece's shape (it may check and raise)."""
        raise NotImplementedError

    def __contains__(self, state: State) -> bool:
        return self.splits(state)

    def __getitem__(self, state: State) -> Any:
        value = self.outer_value(state)
        shape_of = self.piece_shape(state, value)

        def piece(x):
            if not is_array_leaf(x):
                return x
            aval = jax.typeof(x)
            return jax.ShapeDtypeStruct(shape_of(tuple(aval.shape)), aval.dtype,
                                        weak_type=aval.weak_type)

        return jax.tree.map(piece, value)
