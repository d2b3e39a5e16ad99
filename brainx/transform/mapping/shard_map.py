"""`shard_map`: ``jax.shard_map`` for functions that read and write states.

``jax.shard_map`` runs a function once per device of a mesh, on that device's
block of each argument, with explicit collectives (``jax.lax.psum``,
``pmean``, ``all_gather``, ...) over the mesh's named axes. States are not
arguments, so each state needs a spec too. A state's spec is, in this order:

=====================================  ======================================
source                                 spec
=====================================  ======================================
``state_in_specs`` (a dict, or one     as given
spec for every state)
the state's own ``sharding`` (see      its ``PartitionSpec``
:func:`brainx.distributed.shard_states`)
otherwise                              ``P()``: replicated, the whole value
                                       on every device
=====================================  ======================================

A written state is written back with its ``state_out_specs`` entry, or else
its input spec: a state split over ``"data"`` is written back split, a
replicated state must be written with the same value on every device (reduce
it with a collective first, e.g. :func:`brainx.distributed.pmean_states`).

As for ``vmap``, the function is traced once per call, inside
``jax.shard_map`` (so axis names are bound and states are seen at their
per-device shapes), and the trace is what runs. Arguments and states are
placed on the mesh before the call, so it works eagerly and inside ``jit``.
JAX's varying-manual-axes check is off (see ``check_vma`` in :func:`shard_map`).

A state left undeclared enters whole, so one that holds a block per device
meets the arguments' blocks with the wrong shape: that shape error (raised by
the trace, before anything is written) names the states read whole and points
to ``state_in_specs``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Optional, Union

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from brainx._jax.traces import current_trace, owned_traces
from brainx.state.state import State
from brainx.transform.core.arguments import function_name, no_function
from brainx.transform.core.stateful import (
    StatefulFunction, StateSignature, is_array_leaf, read_state_values, write_state_values,
)
from brainx.transform.mapping.piece_shapes import PieceShapes
from brainx.transform.compiled.device_sharding import check_spec_fits, state_sharding

__all__ = ["shard_map", "ShardMappedFunction"]

SpecTable = Union[None, PartitionSpec, Dict[State, PartitionSpec]]


def _is_spec(x: Any) -> bool:
    return x is None or isinstance(x, PartitionSpec)


def _place(mesh: Mesh, specs: Any, tree: Any) -> Any:
    """Every array leaf of ``tree`` on ``mesh`` with the spec of its prefix in ``specs``."""
    def put(spec, sub):
        sharding = NamedSharding(mesh, PartitionSpec() if spec is None else spec)
        return jax.tree.map(lambda x: jax.device_put(x, sharding) if is_array_leaf(x) else x, sub)

    return jax.tree.map(put, specs, tree, is_leaf=_is_spec)


class _ShardShapes(PieceShapes):
    """For the trace: a split state's per-device block shape."""

    def __init__(self, owner: "ShardMappedFunction"):
        super().__init__()
        self.owner = owner
        self.whole: list = []  # the states the trace read whole (replicated), in order

    def splits(self, state: State) -> bool:
        split = self.owner.in_spec(state) != PartitionSpec()
        if not split and not any(s is state for s in self.whole):
            self.whole.append(state)
        return split

    def piece_shape(self, state: State, value: Any):
        spec = self.owner.in_spec(state)
        check_spec_fits(state, spec, self.owner.mesh, value=value)
        sizes = dict(self.owner.mesh.shape)

        def block(shape):
            shape = list(shape)
            for dim, axes in enumerate(spec):
                for name in (() if axes is None else axes if isinstance(axes, tuple) else (axes,)):
                    shape[dim] //= sizes[name]
            return tuple(shape)

        return block


class _ShardStatefulFunction(StatefulFunction):
    """Traces ``fun`` for one device, inside ``jax.shard_map`` (axis names bound)."""

    def __init__(self, fun: Callable, owner: "ShardMappedFunction"):
        super().__init__(fun, name=f"shard_map({function_name(fun)})")
        self._owner = owner

    def discover(self, key, dyn_args: tuple, dyn_kwargs: dict,
                 outer_values=None) -> StateSignature:
        owner, outer, found = self._owner, current_trace(), []
        shapes = _ShardShapes(owner)

        def block(args, kwargs):
            with owned_traces(outer):
                found.append(StatefulFunction.discover(self, key, args, kwargs,
                                                       outer_values=shapes))

        arg_specs = owner.arg_specs(dyn_args)
        mapped = jax.shard_map(block, mesh=owner.mesh, in_specs=(arg_specs, PartitionSpec()),
                               out_specs=PartitionSpec(), check_vma=False)
        try:
            jax.eval_shape(lambda a, k: mapped(*_place(owner.mesh, (arg_specs, PartitionSpec()),
                                                       (a, k))), dyn_args, dyn_kwargs)
        except (TypeError, ValueError) as e:
            hint = _replicated_state_hint(self.name, e, shapes.whole, arg_specs)
            if hint is None:
                raise
            raise hint from e
        return found[0]


def _replicated_state_hint(name: str, error: Exception, whole: list,
                           arg_specs: tuple) -> Optional[Exception]:
    """A shape error of a trace that read whole states beside split arguments, explained.

    The usual cause: a state holding one block per device was left undeclared,
    so it entered whole (``P()``) while the arguments entered as blocks.
    ``None`` where that is not the case (another error, nothing split or read whole).
    """
    split_args = any(spec is not None and spec != PartitionSpec()
                     for spec in jax.tree.leaves(arg_specs, is_leaf=_is_spec))
    if "shape" not in str(error).lower() or not whole or not split_args:
        return None
    message = (f"{name}: {error} The arguments enter as per-device blocks (in_specs), but "
               f"{', '.join(map(repr, whole))} entered whole (replicated, spec P()) on every "
               "device. If a state holds one block per device, declare it in state_in_specs "
               "(and state_out_specs if written), e.g. state_in_specs={state: P('x')}, or give "
               "it a sharding. No state was changed.")
    try:
        return type(error)(message)
    except Exception:  # an exception class that cannot be rebuilt from one message
        return ValueError(message)


class ShardMappedFunction:
    """A stateful function mapped over the devices of a mesh; see :func:`shard_map`."""

    def __init__(self, fun: Callable, mesh: Mesh, in_specs: Any, out_specs: Any, *,
                 state_in_specs: SpecTable = None, state_out_specs: SpecTable = None,
                 check_vma: bool = True):
        if not callable(fun):
            raise TypeError(f"shard_map: expected a callable, got {fun!r}.")
        if not isinstance(mesh, Mesh):
            raise TypeError(f"shard_map: mesh must be a jax.sharding.Mesh, got {mesh!r}.")
        self.fun, self.mesh = fun, mesh
        self.in_specs, self.out_specs = in_specs, out_specs
        self.state_in_specs, self.state_out_specs = state_in_specs, state_out_specs
        self.check_vma = check_vma
        self.stateful = _ShardStatefulFunction(fun, self)
        functools.update_wrapper(self, fun, updated=())

    # -- specs --------------------------------------------------------------------------
    def arg_specs(self, args: tuple) -> tuple:
        """One spec (prefix) per positional argument."""
        specs = self.in_specs
        if isinstance(specs, (tuple, list)) and not isinstance(specs, PartitionSpec):
            if len(specs) != len(args):
                raise ValueError(f"{self.stateful.name}: in_specs has {len(specs)} entries but "
                                 f"the function was called with {len(args)} positional "
                                 "arguments.")
            return tuple(specs)
        return (specs,) * len(args)

    def in_spec(self, state: State) -> PartitionSpec:
        """The spec ``state`` enters with (see the module docstring)."""
        spec = _from_table(self.state_in_specs, state)
        if spec is not None:
            return spec
        own = getattr(state, "sharding", None)
        if isinstance(own, PartitionSpec):
            return own
        own = state_sharding(state)
        if isinstance(own, NamedSharding):
            return own.spec
        return PartitionSpec()

    def out_spec(self, state: State) -> PartitionSpec:
        """The spec a written ``state`` is written back with."""
        spec = _from_table(self.state_out_specs, state)
        return self.in_spec(state) if spec is None else spec

    # -- a call ---------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        return self.stateful.call(self._run, args, kwargs)

    def _run(self, sig: StateSignature, key, args: tuple, kwargs: dict):
        states, written = sig.states, sig.write_states
        in_state = [self.in_spec(s) for s in states]
        out_state = [self.out_spec(s) for s in written]
        specs = (in_state, self.arg_specs(args), PartitionSpec())
        pure, outer = self.stateful.pure(sig, key), current_trace()

        def block(values, block_args, block_kwargs):
            with owned_traces(outer):
                return pure(values, *block_args, **block_kwargs)

        mapped = jax.shard_map(block, mesh=self.mesh, in_specs=specs,
                               out_specs=(self.out_specs, out_state), check_vma=False)
        values = read_state_values(states)
        for s, spec, v in zip(states, in_state, values):
            check_spec_fits(s, spec, self.mesh, value=v)
        out, new_values = mapped(*_place(self.mesh, specs, (values, args, kwargs)))
        write_state_values(written, new_values)
        return out

    def __repr__(self) -> str:
        return f"<brainx.transform.{self.stateful.name}>"


def _from_table(table: SpecTable, state: State) -> Optional[PartitionSpec]:
    if table is None:
        return None
    if isinstance(table, PartitionSpec):
        return table
    for s, spec in table.items():
        if s is state:
            return spec
    return None


def shard_map(fun: Optional[Callable] = None, mesh: Optional[Mesh] = None, in_specs: Any = None,
              out_specs: Any = None, *, state_in_specs: SpecTable = None,
              state_out_specs: SpecTable = None, check_vma: bool = True) -> Any:
    """Map a function that reads and writes states over the devices of a mesh (SPMD).

    Parameters
    ----------
    fun : callable, optional
        Runs once per device, on that device's block of each argument and
        state. Without it, ``shard_map(mesh=..., ...)`` returns a decorator.
    mesh : jax.sharding.Mesh
        The devices (see :func:`brainx.distributed.make_mesh`).
    in_specs : PartitionSpec or tuple of PartitionSpec
        One spec per positional argument (or one for all); keyword arguments
        are replicated.
    out_specs : PartitionSpec or pytree of PartitionSpec
        How the output's blocks form the global result.
    state_in_specs : PartitionSpec or dict {State: PartitionSpec}, optional
        States' specs (one for all, or per state); by default a state's own
        ``sharding``, else replicated (see the module docstring).
    state_out_specs : same format, optional
        Specs of written states (default: their input specs).
    check_vma : bool
        Accepted for brainstate's signature. brainx traces with JAX's
        varying-axes check off (as ``jax.pmap`` ran): a state is traced at
        its per-device shape before JAX knows it varies, so a replicated
        output, or a state written back replicated, is *not* checked to be
        the same on every device; reduce it with a collective first.

    Returns
    -------
    ShardMappedFunction
        Called like ``fun``; writes the written states back.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> from jax.sharding import PartitionSpec as P
    >>> mesh = brainx.distributed.make_mesh((1,), ("data",))
    >>> w = brainx.ParamState(jnp.array(2.0))                 # replicated
    >>> h = brainx.HiddenState(jnp.zeros(4))                   # split over "data"
    >>> @brainx.transform.shard_map(mesh=mesh, in_specs=P("data"), out_specs=P(),
    ...                             state_in_specs={h: P("data")})
    ... def step(x):
    ...     h.value = h.value + w.value * x
    ...     return jax.lax.psum(h.value.sum(), "data")
    >>> float(step(jnp.arange(4.0))), h.value.tolist()
    (12.0, [0.0, 2.0, 4.0, 6.0])
    """
    if mesh is None:
        raise TypeError("shard_map: pass mesh= (a jax.sharding.Mesh).")
    options = dict(state_in_specs=state_in_specs, state_out_specs=state_out_specs,
                   check_vma=check_vma)
    if no_function(fun):
        return lambda f: ShardMappedFunction(f, mesh, in_specs, out_specs, **options)
    return ShardMappedFunction(fun, mesh, in_specs, out_specs, **options)
