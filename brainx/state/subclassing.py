"""brainstate's protocol for State subclasses that keep their value themselves.

Some libraries subclass brainstate's ``State`` and store the value in a slot
of their own (brainpy's ``Variable(State, Array)``). Their ``value`` property
calls ``record_state_value_read(self)`` and then ``self._read_value()``, and
the setter ``record_state_value_write(self)`` and then ``self._write_value(v)``.

In brainx a state's reads and writes are recorded where the value is read and
written: ``_read_value`` and ``_write_value`` are ``State.value``'s getter and
setter (inside a transform they go to the trace's overlay, so the subclass
never holds a tracer), and the two ``record_*`` functions have nothing left to
do. They are kept so those libraries run unchanged.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from brainx.state.trace import mark_written

__all__ = ["record_state_value_read", "record_state_value_write", "ValueProtocol"]


def record_state_value_read(state: Any) -> None:
    """brainstate's hook before a subclass reads its value: brainx records in ``_read_value``.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.state.subclassing import record_state_value_read
    >>> s = brainx.State(jnp.ones(2))
    >>> record_state_value_read(s); s._read_value().tolist()
    [1.0, 1.0]
    """


def record_state_value_write(state: Any) -> None:
    """brainstate's hook before a subclass writes: the state counts as written in every open scope.

    A write through ``_write_value`` is recorded there anyway; this call matters for
    a subclass that changes something besides the value (braincell's
    ``DiffEqState.derivative``) and reports it this way: a ``StateTraceStack``
    open around it lists the state as written, and a transform makes it an
    output (with its value unchanged). Nothing is assigned.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.state.subclassing import record_state_value_write
    >>> s = brainx.State(jnp.ones(2))
    >>> with brainx.StateTraceStack() as trace:
    ...     record_state_value_write(s)
    >>> trace.get_write_states() == (s,), s.value.tolist()
    (True, [1.0, 1.0])
    """
    mark_written(state)


class ValueProtocol:
    """``_read_value`` / ``_write_value`` / ``_check_value_tree``: the value paths by brainstate's names."""

    __slots__ = ()

    def _read_value(self) -> Any:
        """Read the value as ``state.value`` does (recorded; inside a transform, the trace's)."""
        return _BOUND["value"].fget(self)

    def _write_value(self, value: Any) -> None:
        """Write the value as ``state.value = value`` does (checked; inside a transform, traced)."""
        _BOUND["value"].fset(self, value)

    def _check_value_tree(self, value: Any) -> None:
        """Raise if ``value`` has another tree structure or leaf shapes than the current value."""
        _BOUND["tree_check"](self, value)


# ``brainx.state.state`` binds these once ``State`` exists (this module does not import it).
_BOUND: Dict[str, Any] = {}


def bind(value: property, tree_check: Callable[[Any, Any], None]) -> None:
    """Give :class:`ValueProtocol` ``State.value`` and the tree check (called by ``state.py``)."""
    _BOUND.update(value=value, tree_check=tree_check)
