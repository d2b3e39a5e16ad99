"""Which JAX trace an object was created under: :class:`StateJaxTracer`.

JAX traces a function under ``jit``/``grad``/``vmap`` by running it with
tracers; a value made inside one trace is invalid outside it. Code that keeps
objects across calls (states, caches) can record the trace it was made in
with a :class:`StateJaxTracer` and later ask :meth:`StateJaxTracer.is_valid`:
"am I still inside that same trace?". Outside every transformation the answer
stays ``True``; inside a ``jax.jit``-traced function a tracer made outside is
no longer valid, and one made inside is invalid once the trace is over.

Examples
--------
>>> import jax
>>> from brainx.util import StateJaxTracer
>>> outer = StateJaxTracer()
>>> outer.is_valid()
True
>>> @jax.jit
... def f(x):
...     inner = StateJaxTracer()
...     assert inner.is_valid() and not outer.is_valid()
...     return x
>>> _ = f(1.0)
"""

from __future__ import annotations

from typing import Any, Iterator, Union

from jax.extend.core import get_opaque_trace_state

from brainx.util.pretty import PrettyAttr, PrettyRepr, PrettyType

__all__ = ["StateJaxTracer", "current_jax_trace"]


def current_jax_trace() -> Any:
    """An opaque token for the JAX trace now running; tokens compare equal within one trace."""
    return get_opaque_trace_state(convention="brainx")


class StateJaxTracer(PrettyRepr):
    """Remembers the JAX trace current when it was made.

    Two ``StateJaxTracer`` are equal when they were made in the same trace.
    See the module docstring for an example.
    """

    __slots__ = ("_jax_trace",)

    def __init__(self) -> None:
        self._jax_trace = current_jax_trace()

    @property
    def jax_trace(self) -> Any:
        """The opaque trace token recorded at construction."""
        return self._jax_trace

    def is_valid(self) -> bool:
        """Whether the trace now running is the one this object was made in."""
        return self._jax_trace == current_jax_trace()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StateJaxTracer) and self._jax_trace == other._jax_trace

    def __hash__(self) -> int:
        return hash(StateJaxTracer)   # the token itself is unhashable

    def __pretty_repr__(self) -> Iterator[Union[PrettyType, PrettyAttr]]:
        yield PrettyType(type(self).__name__)
        yield PrettyAttr("jax_trace", self._jax_trace)
