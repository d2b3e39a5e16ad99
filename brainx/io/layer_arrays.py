"""Arrays a module saves besides its states: the :class:`SavesArrays` protocol.

Some of what makes a model is not a :class:`~brainx.State`: the synapses of a
sparse layer drawn when it was built are constants of every compiled step (a
State would make them inputs of each step instead). A module that implements
two methods has such arrays saved by :func:`brainx.io.save` and restored by
:func:`brainx.io.load`, beside its states, with the same checks:

``saved_arrays() -> dict``
    The arrays (NumPy or JAX arrays, Quantities, Python numbers) that rebuild
    the module's constants, by name. Return the least that does: a layer drawn
    from a seed returns ``{"seed": seed}``, one drawn from an unseeded generator
    its arrays. They are written to the file from their memory, with no copy.
``prepare_arrays(arrays) -> callable or None``
    Check ``arrays`` (what the file holds for this module, decoded; ``None``
    when the file holds nothing for it, as in files written before 2026-12-07)
    and raise ``ValueError`` naming what does not fit and what to do; return a
    function of no arguments that installs them (it must not fail: only
    assignments), or ``None`` when nothing needs to change.

A load first checks every state, then prepares every module's arrays, and only
then writes: a ``prepare_arrays`` that raises leaves the whole target as it was.
The installs run in two rounds: first those of the modules that saved arrays, then
those of the modules that saved none (``{}``), so a module whose constants derive
from other modules' (a group that fuses its layers' synapses,
:class:`~brainx.nn.EventFixedProbGroup`) saves ``{}`` and returns, from
``prepare_arrays``, the function that derives them again. After the arrays are
installed, compiled functions trace again on their next call
(:func:`~brainx.state.state.structure_changed`), so no compiled step keeps the
constants it was traced with.

Example
-------
>>> import os, tempfile, numpy as np, brainx
>>> class Table(brainx.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.table = np.random.permutation(5)          # a constant, not a State
...     def saved_arrays(self):
...         return {"table": self.table}
...     def prepare_arrays(self, arrays):
...         if arrays is None:
...             raise ValueError("the file holds no table; save the model with brainx.io.save.")
...         table = np.asarray(arrays["table"])
...         return lambda: setattr(self, "table", table)
>>> path = os.path.join(tempfile.mkdtemp(), "t.msgpack")
>>> saved = Table()
>>> brainx.io.save(path, {"t": saved, "w": brainx.ParamState(np.zeros(2))})
>>> fresh = Table()
>>> _ = brainx.io.load(path, {"t": fresh, "w": brainx.ParamState(np.ones(2))})
>>> bool((fresh.table == saved.table).all())
True
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Protocol, runtime_checkable

__all__ = ["SavesArrays"]


@runtime_checkable
class SavesArrays(Protocol):
    """A module whose non-State arrays :mod:`brainx.io` saves and restores (see the module)."""

    def saved_arrays(self) -> Dict[str, Any]:
        """The arrays that rebuild the module's constants, by name."""

    def prepare_arrays(self, arrays: Optional[Mapping[str, Any]]) -> Optional[Callable[[], None]]:
        """Check ``arrays`` (``None``: none saved); return what installs them, or ``None``."""
