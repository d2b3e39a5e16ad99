"""Several stateful functions that share one set of states.

The branches of ``cond``/``switch`` and the condition and body of a while
loop are separate functions that JAX must see with one common signature:
the same state values in, the same state values out. :class:`StateUnion`
discovers each function's :class:`~brainx.transform.StateSignature`, takes
the union of their states (a state is *written* if any function writes it)
and gives every function the pure form

    pure_i(union_values, *args) -> (out, written_values)

where ``written_values`` holds a value for every state written by *any*
function: the function's new value where it wrote the state, the value it
was given otherwise (so a branch that leaves a state alone returns it
unchanged).

Loops split ``union_values`` into the written values, which travel in the
carry, and the read-only values, which are loop constants.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from brainx.state.state import State
from brainx.transform.core.value_types import check_state_types
from brainx.transform.core.stateful import StatefulFunction, StateSignature

__all__ = ["StateUnion", "UnionSignature"]


class UnionSignature:
    """The union of the states of several functions, and how to run each on it."""

    def __init__(self, union: "StateUnion", sigs: Sequence[StateSignature]):
        self.union = union
        self.sigs = tuple(sigs)
        index: Dict[State, int] = {}
        written: List[bool] = []
        for sig in sigs:
            for s, w in zip(sig.states, sig.written):
                if s not in index:
                    index[s] = len(written)
                    written.append(False)
                written[index[s]] = written[index[s]] or w
        self.states: Tuple[State, ...] = tuple(index)
        self.written: Tuple[bool, ...] = tuple(written)
        self.index = index
        self.write_indices = tuple(i for i, w in enumerate(written) if w)
        self.read_indices = tuple(i for i, w in enumerate(written) if not w)
        self.write_states = tuple(self.states[i] for i in self.write_indices)
        self.read_only_states = tuple(self.states[i] for i in self.read_indices)

    def split(self, values: Sequence[Any]) -> Tuple[list, list]:
        """``(written_values, read_only_values)`` of a list of union values."""
        return [values[i] for i in self.write_indices], [values[i] for i in self.read_indices]

    def merge(self, written_values: Sequence[Any], read_only_values: Sequence[Any]) -> list:
        """Inverse of :meth:`split`."""
        values: list = [None] * len(self.states)
        for i, v in zip(self.write_indices, written_values):
            values[i] = v
        for i, v in zip(self.read_indices, read_only_values):
            values[i] = v
        return values

    def pure(self, which: int, *, check: Optional[str] = None,
             weak_promotion: bool = False) -> Callable:
        """``pure(union_values, *args, **kwargs) -> (out, written_values)`` for function ``which``.

        With ``check`` (a description such as ``"branch 1 of switch"``), a
        written state whose new value has another type than the value given
        raises :class:`~brainx.StateTypeError` while the function is traced.
        """
        sig = self.sigs[which]
        sf = self.union.functions[which]
        inner = sf.pure(sig, ())
        local = tuple(self.index[s] for s in sig.states)
        write_pos = {j: k for k, j in enumerate(self.write_indices)}
        own = tuple(write_pos[self.index[s]] for s in sig.write_states)
        write_indices, write_states = self.write_indices, self.write_states

        def pure(values, *args, **kwargs):
            out, new_values = inner([values[i] for i in local], *args, **kwargs)
            result = [values[i] for i in write_indices]
            for k, v in zip(own, new_values):
                result[k] = v
            if check is not None:
                old = [values[write_indices[k]] for k in own]
                check_state_types([write_states[k] for k in own], old,
                                  [result[k] for k in own], check,
                                  weak_promotion=weak_promotion)
            return out, result

        pure.__name__ = f"union_{getattr(sf.fun, '__name__', 'fun')}"
        return pure


class StateUnion:
    """Functions called on the same arguments and run by one JAX primitive.

    Parameters
    ----------
    functions : sequence of callables
        The functions (the branches, or a loop's condition and body).
    names : sequence of str
        Their names in error messages.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.transform.core.state_union import StateUnion
    >>> a, b = brainx.State(jnp.zeros(())), brainx.State(jnp.ones(()))
    >>> def f(x):
    ...     a.value = x
    >>> def g(x):
    ...     return b.value + x
    >>> union = StateUnion([f, g], ["f", "g"])
    >>> sig = union.call(lambda sig: sig, (1.0,))
    >>> sig.states == (a, b), sig.written
    (True, (True, False))
    """

    def __init__(self, functions: Sequence[Callable], names: Sequence[str]):
        self.functions = [f if isinstance(f, StatefulFunction) else StatefulFunction(f, name=n)
                          for f, n in zip(functions, names)]

    def signature(self, args: Sequence[tuple],
                  kwargs: Optional[Sequence[dict]] = None) -> UnionSignature:
        """The union signature; ``args[i]`` are example arguments of function ``i``.

        Each function is traced once (see :meth:`StatefulFunction.discover`).
        """
        kwargs = kwargs or [{}] * len(self.functions)
        return UnionSignature(self, [sf.discover((), a, k)
                                     for sf, a, k in zip(self.functions, args, kwargs)])

    def call(self, run: Callable[[UnionSignature], Any], args: tuple,
             per_function_args: Optional[Sequence[tuple]] = None):
        """``run(union_signature)``.

        Every function is traced with ``args`` unless ``per_function_args``
        gives each its own example arguments.
        """
        return run(self.signature(per_function_args or [args] * len(self.functions)))
