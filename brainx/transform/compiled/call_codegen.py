"""The call of a compiled ``transform.jit`` entry, as straight-line code made per entry.

Once a jitted function is traced and compiled, a call does three things: read
the value of every state it touches, call the compiled ``jax.jit`` function,
and write the new values of the written states back. Written as loops, the
Python around ``jax.jit`` costs a list-comprehension frame, a ``zip`` and two
attribute lookups per state. :func:`make_fast_call` generates one function
per cache entry with the guards, reads and writes spelled out (as
:mod:`dataclasses` generates ``__init__``): measured with a stub in place of
``jax.jit``, the Python time of a call drops from 1.7 to 1.0 µs at 1 state and
from 17 to 7 µs at 100 states. ``JittedFunction`` calls it directly (its
``__call__`` resolves to it without a Python frame of its own), so a call of a
function without static arguments runs one Python frame around ``jax.jit``.

Whatever the fast path cannot take goes to ``slow(args, kwargs, traced)``: a
structure change since the entry was made (``brainx.state.structure_changed``),
an open brainx trace (the state values must come from its scopes), a state
garbage collected since (its weak reference is dead), or argument types this
entry has no trace for (``jax.jit`` traces the pure function, which raises
:class:`~brainx.transform.core.stateful.RetraceNeeded`). Entries with more than
:data:`MAX_UNROLLED` states use loops instead of generated code.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

from brainx._jax.traces import DISABLE_JIT

from brainx.environ.reads import VERSION
from brainx.state.state import _EPOCH
from brainx.state.trace import _THREAD
from brainx.state.lending import LENT
from brainx.transform.core.jaxpr_builder import CONCRETE_TYPES
from brainx.transform.core.stateful import RetraceNeeded

__all__ = ["MAX_UNROLLED", "make_fast_call"]

#: Entries with more states than this use loops instead of generated code. Straight-line
#: code is faster per state (1000 states: 35 us of Python a call against 57 us with loops)
#: but costs 20-50 us per state once, to generate: at 1000 states that is 3-10 % of the first
#: call, which matters more than 2 % of each later one.
MAX_UNROLLED = 512

_GLOBALS = {"_EPOCH": _EPOCH, "_ENV": VERSION, "_THREAD": _THREAD, "LENT": LENT,
            "DISABLE_JIT": DISABLE_JIT,
            "CONCRETE_TYPES": CONCRETE_TYPES, "RetraceNeeded": RetraceNeeded}

_TEMPLATE = '''\
def fast_call(*args, **kwargs):
    if DISABLE_JIT.value:
        return fun(*args, **kwargs)
    if _EPOCH[0] != epoch or _THREAD.frames or LENT:  # LENT: a state holds a raw trace's tracer
        return slow(args, kwargs, False)
    if _ENV[0] != env_version[0] and not settings_hold():  # a setting it read changed
        return slow(args, kwargs, False)
    try:
{reads}
    except AttributeError:  # a dead weak reference gave None
        return slow(args, kwargs, False)
    try:
        out, new = jitted(values, *args, **kwargs)
    except RetraceNeeded as e:  # argument types without a trace
        if e.owner is not None and e.owner is not owner:
            raise
        return slow(args, kwargs, True)
    except TypeError:  # jax.jit refused a value: a state now holds a string?
        if not static_changed():
            raise
        return slow(args, kwargs, False)
{writes}
    return out
'''


def make_fast_call(jitted: Callable, refs: Sequence[Callable[[], Any]],
                   write_positions: Sequence[int], *, plain: bool, epoch: int,
                   fun: Callable, slow: Callable[[tuple, dict, bool], Any],
                   write_back: Callable[[list], None], owner: Any,
                   env_version: Optional[Sequence[int]] = None,
                   settings_hold: Optional[Callable[[], bool]] = None,
                   static_changed: Callable[[], bool] = lambda: False) -> Callable:
    """``fast_call(*args, **kwargs)``: read the states, call ``jitted``, write back.

    Parameters
    ----------
    jitted : callable
        ``jitted(values, *args, **kwargs) -> (out, new_values)``.
    refs : sequence of weak references
        The states whose values ``jitted`` takes, in order.
    write_positions : sequence of int
        For each new value, the position in ``refs`` of the state it belongs to.
    plain : bool
        Every new value is a single array. Otherwise (a state holds a dict or
        another pytree) every call writes back through ``write_back``.
    epoch : int
        ``brainx.state`` structure epoch the entry was made in.
    env_version : list of one int
        The ``brainx.environ`` settings version the entry's traces hold at
        (read in place: the owner moves it when the settings still hold);
        another version goes to ``slow``, which compares the settings read.
        ``None``: settings are not checked.
    settings_hold : callable, optional
        Called when the version moved: ``True`` if the settings read still
        hold (it moves ``env_version``), and the call goes on here.
    fun : callable
        The user's function, called as it is under ``jax.disable_jit()``.
    slow : callable
        ``slow(args, kwargs, traced)``, the general call, for what the fast path
        cannot take (see the module docstring).
    write_back : callable
        Called with the new values instead of assigning them when they are not
        single concrete arrays (a raw JAX transform is tracing the call, or the
        values are pytrees); it handles them as ``write_state_values`` does.
    owner : StatefulFunction
        Whose :class:`RetraceNeeded` means "trace me again"; others propagate.
    static_changed : callable, optional
        Asked when ``jitted`` raises ``TypeError``: ``True`` if a state's value
        gained leaves JAX cannot trace (a string) since the entry was traced;
        the call then goes to ``slow``, which traces again. Otherwise the
        error propagates.

    Example
    -------
    >>> import weakref, jax, jax.numpy as jnp, brainx
    >>> s = brainx.State(jnp.zeros(2))
    >>> step = jax.jit(lambda values, x: (x.sum(), [values[0] + x]))
    >>> call = make_fast_call(step, [weakref.ref(s)], [0], plain=True, epoch=_EPOCH[0],
    ...                       fun=None, slow=None, write_back=None, owner=None)
    >>> float(call(jnp.ones(2)))
    2.0
    >>> s.value
    Array([1., 1.], dtype=float32)
    """
    n = len(refs)
    if n > MAX_UNROLLED:
        reads = ["        states = [r() for r in refs]",
                 "        values = [s._value for s in states]"]
    else:
        reads = [f"        s{i} = r{i}()" for i in range(n)]
        reads.append(f"        values = [{', '.join(f's{i}._value' for i in range(n))}]")
    writes = []
    if write_positions and not plain:
        writes = ["    write_back(new)"]
    elif write_positions:
        writes = ["    if type(new[0]) not in CONCRETE_TYPES:  # a raw JAX transform traces us",
                  "        write_back(new)", "        return out"]
        if n > MAX_UNROLLED:
            writes += ["    for i, v in zip(write_positions, new):",
                       "        states[i]._value = v"]
        else:
            writes += [f"    s{i}._value = new[{k}]" for k, i in enumerate(write_positions)]
    source = _TEMPLATE.format(reads="\n".join(reads), writes="\n".join(writes))
    namespace = dict(_GLOBALS, jitted=jitted, refs=list(refs), write_positions=list(write_positions),
                     epoch=epoch, fun=fun, slow=slow, write_back=write_back, owner=owner,
                     env_version=VERSION if env_version is None else env_version,
                     settings_hold=settings_hold, static_changed=static_changed)
    namespace.update((f"r{i}", r) for i, r in enumerate(refs))
    exec(_compiled(source), namespace)
    return namespace["fast_call"]


@functools.lru_cache(maxsize=64)
def _compiled(source: str) -> Any:
    """The code object of ``source``: entries with the same layout of states share it."""
    return compile(source, "<brainx.transform.jit fast call>", "exec")
