"""How ``transform.jit`` compiles an entry: shardings of states and arguments, donated states.

A :class:`~brainx.transform.compiled.jit_entry.JitEntry` hands ``jax.jit`` the pure
function ``pure(state_values, *args, **kwargs) -> (out, written_values)``.
This module decides the options of that ``jax.jit``, once, when the entry is
built (not per call):

* **State shardings.** A state whose ``sharding`` attribute is set (see
  :func:`brainx.distributed.shard_states`) is constrained to that sharding
  where the compiled function reads it, and its new value is an output with
  that sharding (``out_shardings``), so a sharded model stays sharded from one
  call to the next with no resharding. The input side uses the values as they
  are placed (a value already on its sharding costs nothing); with the user's
  ``in_shardings``, the states' shardings are passed as in-shardings too.
* **Kept placements.** A written state with no ``sharding`` attribute whose
  value is spread over several devices keeps that value's sharding: its new
  value is constrained to it (a value computed from nothing the state had,
  ``jnp.zeros_like(s.value)``, would otherwise land on one device). The
  sharding is read from the value at each call (:class:`_KeepPlacement`, only
  when the process has more than one device), so a value the user placed
  elsewhere between calls keeps its new place; a ``sharding`` attribute
  (:func:`brainx.distributed.shard_states`) decides instead.
* **Argument shardings.** ``in_shardings`` / ``out_shardings`` given to
  ``jit`` apply to the function's own arguments and output, as in ``jax.jit``
  (with ``in_shardings``, keyword arguments are refused by JAX). One
  sharding given alone is broadcast over every positional argument, as in
  ``jax.jit``.
* **Donated states.** With ``donate_states``, the buffers of the states the
  function writes are donated: XLA writes the new values into them, so a step
  holds one copy of a large state instead of two. The donated values are
  passed as a separate argument (``jax.jit`` donates whole arguments);
  :class:`DonatingCall` splits them off before each call.

With none of these, the entry gets the plain ``jax.jit`` it always had.

:func:`state_sharding` and :func:`check_spec_fits` are how every transform
reads and checks a state's sharding (``shard_map`` uses them too).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional, Sequence, Tuple

import jax
import numpy as np
from jax.core import Tracer
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["compile_pure", "state_sharding", "check_spec_fits", "DonatingCall"]

_UNSET = object()


def state_sharding(state: Any) -> Optional[jax.sharding.Sharding]:
    """The sharding a state asks for (``None``: none).

    A ``PartitionSpec`` without a mesh is resolved on the mesh of the state's
    current value (when that value has a ``NamedSharding``).
    """
    spec = getattr(state, "sharding", None)
    if spec is None or isinstance(spec, jax.sharding.Sharding):
        return spec
    if isinstance(spec, PartitionSpec):
        placed = getattr(state._value, "sharding", None)
        if isinstance(placed, NamedSharding):
            return NamedSharding(placed.mesh, spec)
        return None
    raise TypeError(f"{state!r} has sharding={spec!r}; expected a jax.sharding.Sharding or a "
                    "PartitionSpec. Set it with brainx.distributed.shard_states(...).")


def check_spec_fits(state: Any, spec: PartitionSpec, mesh: Mesh,
                    path: Tuple[Any, ...] = (), value: Any = _UNSET) -> None:
    """Raise ``ValueError`` naming ``state`` if ``spec`` cannot shard its value on ``mesh``.

    ``value``: the value to check (default: the state's own, outside any trace).
    """
    where = f"{state!r}" + (f" at {'.'.join(map(str, path))}" if path else "")
    sizes = dict(mesh.shape)
    named = [a for axes in spec if axes is not None
             for a in (axes if isinstance(axes, tuple) else (axes,))]
    unknown = [a for a in named if a not in sizes]
    if unknown:      # before any shape check: the same message on any number of devices
        raise ValueError(f"{where}: its spec {spec} names mesh axis {unknown[0]!r}, but "
                         f"the mesh has axes {tuple(sizes)}.")
    for leaf in jax.tree.leaves(state._value if value is _UNSET else value):
        shape = np.shape(leaf)
        if len(spec) > len(shape):
            raise ValueError(f"{where} has shape {tuple(shape)} but its spec {spec} shards "
                             f"{len(spec)} axes. Give it a spec with at most {len(shape)} "
                             "entries.")
        for dim, (n, axes) in enumerate(zip(shape, spec)):
            names = () if axes is None else (axes if isinstance(axes, tuple) else (axes,))
            parts = int(np.prod([sizes[a] for a in names])) if names else 1
            if n % parts:
                raise ValueError(f"{where} has shape {tuple(shape)}: dimension {dim} (size {n}) "
                                 f"cannot be split into {parts} equal parts over mesh axes "
                                 f"{names} (spec {spec}). Pad it to a multiple of {parts}, or "
                                 "shard another dimension.")


def compile_pure(pure: Callable, owner: Any, states: Sequence[Any],
                 write_states: Sequence[Any]) -> Callable:
    """``jax.jit`` of ``pure`` with the shardings and donation of ``owner`` and these states.

    A single ``in_shardings`` (not a tuple or list) is broadcast over every
    positional argument, as ``jax.jit`` does: the number of arguments is
    known only at the call, so one ``jax.jit`` is made per number of
    arguments (:class:`_PerArity`).
    """
    kwargs = dict(owner._jit_kwargs)
    in_user = kwargs.pop("in_shardings", _UNSET)
    # What the owner and the states decide is read now: the result (kept by a cache that
    # other instances share) holds neither, so it keeps no instance or state alive.
    plan = _StatePlan(owner, states, write_states)
    if in_user is not _UNSET and not isinstance(in_user, (tuple, list)):
        return _PerArity(lambda n: _compile(pure, plan, kwargs, (in_user,) * n))
    return _compile(pure, plan, kwargs, _UNSET if in_user is _UNSET else tuple(in_user))


class _StatePlan:
    """What :func:`compile_pure` needs of its owner and states, read once (holding neither)."""

    def __init__(self, owner: Any, states: Sequence[Any], write_states: Sequence[Any]):
        self.state_in = [state_sharding(s) for s in states]
        self.state_out = [state_sharding(s) for s in write_states]
        donates = getattr(owner, "_donate_states", None)
        written = {id(s) for s in write_states}
        self.donated = [] if donates is None else [i for i, s in enumerate(states)
                                                   if id(s) in written and donates(s)]
        self.names = [repr(states[i]) for i in self.donated]
        self.n_states = len(states)
        self.donate = owner._donate
        where = {id(s): i for i, s in enumerate(states)}
        self.write_pos = [where[id(s)] for s in write_states]


def _compile(pure: Callable, plan: _StatePlan, kwargs: dict, in_user: Any) -> Callable:
    """:func:`compile_pure` with ``in_user``: one sharding per positional argument, or unset.

    What the states decide (their shardings, which are donated, their names) was
    read once, into ``plan``: the functions made here and later (per placement)
    hold no state.
    """
    state_out = plan.state_out
    build = functools.partial(_build, n_states=plan.n_states, kwargs=kwargs, in_user=in_user,
                              donate=plan.donate, state_in=plan.state_in, donated=plan.donated,
                              names=plan.names)
    kept = [k for k, sh in enumerate(state_out) if sh is None]
    if kept and jax.device_count() > 1:  # a written value may be spread over several devices
        def make(placements: tuple, exact: bool) -> Callable:
            out = list(state_out)
            if exact:
                for k, where in zip(kept, placements):
                    out[k] = _one_sharding(where)
            return build(_placed(pure, kept, placements, exact), state_out=out)

        return _KeepPlacement(make, [plan.write_pos[k] for k in kept])
    return build(pure, state_out=state_out)


def _build(pure: Callable, *, n_states: int, kwargs: dict, in_user: Any, donate: tuple,
           state_in: list, state_out: list, donated: List[int], names: List[str]) -> Callable:
    """The ``jax.jit`` (a :class:`DonatingCall` when states are donated) of :func:`_compile`."""
    kwargs = dict(kwargs)
    out_user = kwargs.pop("out_shardings", _UNSET)
    if any(x is not None for x in state_in):
        pure = _constrained(pure, state_in)
    if any(x is not None for x in state_out) or out_user is not _UNSET:
        kwargs["out_shardings"] = (None if out_user is _UNSET else out_user, state_out)
    if not donated:
        if in_user is not _UNSET:
            kwargs["in_shardings"] = (state_in, *in_user)
        return jax.jit(pure, donate_argnums=donate, **kwargs)
    kept = [i for i in range(n_states) if i not in donated]
    if in_user is not _UNSET:
        kwargs["in_shardings"] = ([state_in[i] for i in donated], [state_in[i] for i in kept],
                                  *in_user)

    def split_pure(donated_values, kept_values, *args, **kw):
        values: List[Any] = [None] * n_states
        for i, v in zip(donated, donated_values):
            values[i] = v
        for i, v in zip(kept, kept_values):
            values[i] = v
        return pure(values, *args, **kw)

    split_pure.__name__ = getattr(pure, "__name__", "pure")
    jitted = jax.jit(split_pure, donate_argnums=(0,) + tuple(d + 1 for d in donate), **kwargs)
    return DonatingCall(jitted, donated, kept, names)


class _PerArity:
    """Entry functions made per number of positional arguments (one broadcast ``in_shardings``).

    Called like the plain entry function, ``(state_values, *args, **kwargs)``.
    """

    def __init__(self, make: Callable[[int], Callable]):
        self._make = make
        self._made: dict = {}

    def _for(self, args: tuple) -> Callable:
        jitted = self._made.get(len(args))
        if jitted is None:
            jitted = self._made[len(args)] = self._make(len(args))
        return jitted

    def __call__(self, values, *args, **kwargs):
        return self._for(args)(values, *args, **kwargs)

    def lower(self, values, *args, **kwargs):
        return self._for(args).lower(values, *args, **kwargs)

    def trace(self, values, *args, **kwargs):
        return self._for(args).trace(values, *args, **kwargs)


def _placement(value: Any) -> Optional[tuple]:
    """``((sharding, shape), ...)`` per leaf of a value spread over several devices, else ``None``.

    A leaf on one device (or not a concrete array) gets ``None``; so does a
    value with no leaf spread over several devices.
    """
    if isinstance(value, jax.Array):
        if isinstance(value, Tracer):
            return None
        sharding = value.sharding
        return ((sharding, value.shape),) if len(sharding.device_set) > 1 else None
    placed = []
    for leaf in jax.tree.leaves(value):
        sharding = getattr(leaf, "sharding", None) if isinstance(leaf, jax.Array) and \
            not isinstance(leaf, Tracer) else None
        placed.append((sharding, leaf.shape) if sharding is not None
                      and len(sharding.device_set) > 1 else None)
    return tuple(placed) if any(p is not None for p in placed) else None


class _ShapeChanged(Exception):
    """A written value has another shape or tree than before the call: no out-sharding for it."""


class _KeepPlacement:
    """Entry functions made per placement of the written states' values (see the module docstring).

    Called like the plain entry function, ``(state_values, *args, **kwargs)``:
    it reads the placement of the values at ``positions`` (the written states
    with no ``sharding`` attribute) and calls the function made for it, whose
    ``out_shardings`` are those placements (so a new value has the very
    sharding object the old one had). If a new value turns out to have another
    shape, the function is made again with sharding constraints only, where
    the shapes allow them.
    """

    #: placements kept (the made functions hold their ``jax.jit`` caches)
    max_made = 32

    def __init__(self, make: Callable[[tuple, bool], Callable], positions: List[int]):
        self._make = make
        self._positions = positions
        self._made: dict = {}

    def _run(self, values: Sequence[Any], call: Callable[[Callable], Any]) -> Any:
        key = tuple(_placement(values[i]) for i in self._positions)
        made = self._made.get(key)
        if made is None:
            if len(self._made) >= self.max_made:
                self._made.pop(next(iter(self._made)))
            made = self._made[key] = self._make(key, True)
        try:
            return call(made)
        except _ShapeChanged:
            made = self._made[key] = self._make(key, False)
            return call(made)

    def __call__(self, values, *args, **kwargs):
        return self._run(values, lambda f: f(values, *args, **kwargs))

    def lower(self, values, *args, **kwargs):
        return self._run(values, lambda f: f.lower(values, *args, **kwargs))

    def trace(self, values, *args, **kwargs):
        return self._run(values, lambda f: f.trace(values, *args, **kwargs))


def _one_sharding(where: Optional[tuple]) -> Optional[jax.sharding.Sharding]:
    """The sharding every leaf of a placement has (an out-sharding for the value), else ``None``."""
    if not where or any(w is None for w in where):
        return None
    first = where[0][0]
    return first if all(w[0] == first for w in where) else None


def _placed(pure: Callable, kept: List[int], placements: tuple, exact: bool) -> Callable:
    """``pure`` whose new value of written state ``kept[j]`` keeps the placement ``placements[j]``.

    Each leaf spread over several devices before the call is constrained to
    its sharding, where the new leaf has the same shape (a value of another
    shape or tree is left to XLA). With ``exact``, a value that gets its
    placement as an out-sharding (:func:`_one_sharding`) must keep its shapes:
    otherwise :class:`_ShapeChanged` is raised (while JAX traces).
    """
    if all(p is None for p in placements):
        return pure

    def placed(values, *args, **kwargs):
        out, written = pure(values, *args, **kwargs)
        written = list(written)
        for k, where in zip(kept, placements):
            if where is None:
                continue
            leaves, tree = jax.tree.flatten(written[k])
            fits = len(leaves) == len(where) and all(
                w is None or np.shape(x) == w[1] for x, w in zip(leaves, where))
            if exact and not fits and _one_sharding(where) is not None:
                raise _ShapeChanged()
            if len(leaves) != len(where):
                continue
            leaves = [x if w is None or np.shape(x) != w[1]
                      else jax.lax.with_sharding_constraint(x, w[0])
                      for x, w in zip(leaves, where)]
            written[k] = jax.tree.unflatten(tree, leaves)
        return out, written

    placed.__name__ = getattr(pure, "__name__", "pure")
    return placed


def _constrained(pure: Callable, shardings: List[Optional[jax.sharding.Sharding]]) -> Callable:
    """``pure`` reading each state value under its sharding constraint."""

    def constrained(values, *args, **kwargs):
        values = [v if sh is None else jax.lax.with_sharding_constraint(v, sh)
                  for v, sh in zip(values, shardings)]
        return pure(values, *args, **kwargs)

    constrained.__name__ = getattr(pure, "__name__", "pure")
    return constrained


class DonatingCall:
    """A ``jax.jit`` whose first argument (the written states' values) is donated.

    Called like the plain entry function, ``(state_values, *args, **kwargs)``;
    it splits the donated values off, and refuses (naming the state) a value
    whose buffer was donated already or that would be donated while also
    passed elsewhere.
    """

    def __init__(self, jitted: Callable, donated: List[int], kept: List[int], states: list):
        self.jitted = jitted
        self.donated, self.kept = donated, kept
        # the states' names (reprs, or given as strings): no strong reference to the states
        self._names = [s if isinstance(s, str) else repr(s) for s in states]

    def split(self, values: Sequence[Any], args: tuple, kwargs: dict) -> tuple:
        donated = [values[i] for i in self.donated]
        elsewhere = {id(x) for x in jax.tree.leaves(([values[i] for i in self.kept], args,
                                                     kwargs))}
        seen = set()
        for name, value in zip(self._names, donated):
            for leaf in jax.tree.leaves(value):
                if isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer):
                    if leaf.is_deleted():
                        raise ValueError(
                            f"{name} holds an array whose buffer was donated to an earlier call "
                            "of a jit with donate_states, and has been deleted. An array read "
                            "from a donated state before a call is invalid after it; copy it "
                            "first (jnp.array(x, copy=True)) if you need the old value.")
                    if id(leaf) in elsewhere or id(leaf) in seen:
                        raise ValueError(
                            f"{name} is donated (donate_states) but its array is also another "
                            "state's value or an argument of the call; donating it would "
                            "delete that one too. Give the state its own copy, or leave it "
                            "out of donate_states.")
                    seen.add(id(leaf))
        return (donated, [values[i] for i in self.kept])

    def __call__(self, values, *args, **kwargs):
        return self.jitted(*self.split(values, args, kwargs), *args, **kwargs)

    def lower(self, values, *args, **kwargs) -> "_SplitStage":
        return _SplitStage(self.jitted.lower(*self.split(values, args, kwargs), *args, **kwargs),
                           self)


class _SplitStage:
    """A lowered (then compiled) :class:`DonatingCall`: called with the whole value list."""

    def __init__(self, stage: Any, call: DonatingCall):
        self._stage, self._call = stage, call

    def compile(self, *args, **kwargs) -> "_SplitStage":
        return _SplitStage(self._stage.compile(*args, **kwargs), self._call)

    def __call__(self, values, *args, **kwargs):
        return self._stage(*self._call.split(values, args, kwargs), *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._stage, name)
