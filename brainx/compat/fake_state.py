"""`FakeState`: a stand-in with a ``value`` and a ``name`` that no transform threads.

Code written against states (``x.value``) can be handed a :class:`FakeState`
to run on a plain value: reads and writes go to the object, are not recorded
by any :class:`~brainx.StateTraceStack`, and run no hook. Inside a transform a
fake state's value is a constant of the trace, so write only concrete values.
Users reach it as ``brainx.FakeState`` and ``brainx.state.FakeState``
(``brainx/__init__.py`` sets the latter).
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["FakeState"]


class FakeState:
    """A ``value`` holder that looks like a State to the code reading it (brainstate's name).

    Parameters
    ----------
    value : any
        The value.
    name : str, optional
        Its name.

    Examples
    --------
    >>> import brainx
    >>> fake = brainx.FakeState(3, name="count")
    >>> fake.value += 1
    >>> fake
    FakedState(value=4)
    """

    def __init__(self, value: Any, name: Optional[str] = None, **kwargs: Any):
        self._value = value
        self._name = name

    @property
    def value(self) -> Any:
        """The value (no trace records this read)."""
        return self._value

    @value.setter
    def value(self, value: Any) -> None:
        self._value = value

    @property
    def name(self) -> Optional[str]:
        """The name."""
        return self._name

    @name.setter
    def name(self, name: Optional[str]) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"FakedState(value={self._value})"  # brainstate's spelling
