"""Spike exchange between devices: one all-gather of packed bits, and what the compiled step sends.

Every device of a partitioned network (:class:`~brainx.distributed.NeuronPartition`)
updates its own neurons, but its synapses come from all of them: each needs every
spike of the network. A spike is one bit, so the exchange is

1. ``jnp.packbits`` of the device's ``n / P`` spikes: ``n / (8 P)`` bytes;
2. one ``jax.lax.all_gather`` (tiled) over the neuron axis: ``n / 8`` bytes on every
   device, the whole network's spikes in neuron order;
3. ``jnp.unpackbits`` back to the spikes' dtype.

:func:`exchange_spikes` does it inside ``shard_map``. Its derivative is that of the
plain all-gather (whose transpose is a ``psum_scatter`` of the cotangents), so BPTT
runs through it although the forward pass sends bits.

The exchange can also batch ``D`` steps (a leading axis): one all-gather of
``D n / 8`` bytes every ``D`` steps, exact when every synaptic delay is at least
``D`` steps (NEST's min-delay communication interval).

:func:`hlo_collectives` lists the collectives of a compiled program (from
``jax.stages.Compiled.as_text()``), with their bytes, and whether each sits in a
conditional branch (a batched exchange runs once every ``D`` steps).

Examples
--------
>>> import jax, jax.numpy as jnp, brainx
>>> from jax.sharding import PartitionSpec as P
>>> mesh = brainx.distributed.make_mesh((1,), ("neurons",))
>>> gather = jax.shard_map(lambda s: brainx.distributed.exchange_spikes(s, "neurons"),
...                        mesh=mesh, in_specs=P("neurons"), out_specs=P(), check_vma=False)
>>> spikes = jnp.zeros(16).at[3].set(1.0)
>>> bool((gather(spikes) == spikes).all())
True
>>> ops = brainx.distributed.hlo_collectives(jax.jit(gather).lower(spikes).compile())
>>> [(op.kind, op.shape, op.bytes) for op in ops]   # the one collective: 16 spikes in 2 bytes
[('all-gather', 'u8[2]', 2)]
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Dict, Hashable, List

import jax
import jax.numpy as jnp

__all__ = ["exchange_spikes", "hlo_collectives", "collectives_per_step", "Collective"]

_KINDS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
          "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8}


def exchange_spikes(spikes: Any, axis_name: Hashable) -> jax.Array:
    """All devices' spikes from each device's block, sent as bits (inside ``shard_map``).

    Parameters
    ----------
    spikes : array
        ``(..., m)``: this device's neurons (bool, or numbers where nonzero is a spike and
        the value is 0 or 1); ``m`` a multiple of 8.
    axis_name : hashable
        The mesh axis the neurons are split over.

    Returns
    -------
    jax.Array
        ``(..., m * P)``, ``spikes``' dtype: every device's block, in the axis' order.
        Differentiable (floats): the cotangent is summed back onto each block.

    Examples
    --------
    See the module's docstring.
    """
    spikes = jnp.asarray(spikes)
    if spikes.ndim == 0 or spikes.shape[-1] % 8:
        raise ValueError(f"exchange_spikes: the neurons' axis has {spikes.shape[-1:]} entries; "
                         "it must be a multiple of 8 (whole bytes; pad the network, see "
                         "NeuronPartition.padded_size).")
    if jnp.issubdtype(spikes.dtype, jnp.floating):
        return _gather_float(spikes, axis_name)
    return _gather_bits(spikes, axis_name).astype(spikes.dtype)


def _gather_bits(spikes, axis_name) -> jax.Array:
    packed = jnp.packbits(spikes != 0, axis=-1)
    gathered = jax.lax.all_gather(packed, axis_name, axis=packed.ndim - 1, tiled=True)
    return jnp.unpackbits(gathered, axis=-1).astype(jnp.bool_)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _gather_float(spikes, axis_name):
    return _gather_bits(spikes, axis_name).astype(spikes.dtype)


def _gather_float_fwd(spikes, axis_name):
    return _gather_float(spikes, axis_name), None


def _gather_float_bwd(axis_name, _, cotangent):
    # the transpose of a tiled all-gather: each device gets the sum of its block's cotangents
    return (jax.lax.psum_scatter(cotangent, axis_name, scatter_dimension=cotangent.ndim - 1,
                                 tiled=True),)


_gather_float.defvjp(_gather_float_fwd, _gather_float_bwd)


@dataclass(frozen=True)
class Collective:
    """One collective of a compiled program: its kind, result type, bytes and placement."""

    kind: str
    shape: str
    bytes: int
    in_conditional: bool


def hlo_collectives(compiled: Any) -> List[Collective]:
    """The collectives of a compiled program, in the order of its HLO text.

    Parameters
    ----------
    compiled : jax.stages.Compiled or str
        ``jax.jit(f).lower(...).compile()`` (or its ``as_text()``).

    Returns
    -------
    list of Collective
        ``kind`` (``"all-gather"``, ``"all-reduce"``, ...), the result ``shape`` as HLO
        writes it (``"u8[968]"``), its ``bytes`` (what each device holds after it) and
        ``in_conditional``: inside a branch of a conditional (runs only when taken).

    Examples
    --------
    See the module's docstring.
    """
    text = compiled if isinstance(compiled, str) else compiled.as_text()
    branches = _branch_computations(text)
    found, current = [], None
    for line in text.splitlines():
        head = _header(line)
        if head:
            current = head
            continue
        m = re.search(r"=\s*([a-z0-9]+\[[0-9,]*\])\S*\s+(" + "|".join(_KINDS) +
                      r")(?:-start)?\(", line)
        if m:
            shape, kind = m.group(1), m.group(2)
            found.append(Collective(kind, shape, _nbytes(shape), current in branches))
    return found


def collectives_per_step(compiled: Any, exchange_every: int = 1) -> Dict[str, float]:
    """How many collectives of each kind one simulated step runs, from its compiled program.

    Parameters
    ----------
    compiled : jax.stages.Compiled or str
        The compiled step (one step of the network, e.g.
        ``brainx.transform.jit(net.update).lower().compile()``).
    exchange_every : int
        The steps between exchanges: a collective in a conditional branch (the batched
        exchange) runs once every this many steps.

    Returns
    -------
    dict
        ``{kind: count per step}``, e.g. ``{"all-gather": 0.2}`` for an exchange every 5 steps.

    Examples
    --------
    >>> import brainx
    >>> brainx.distributed.collectives_per_step('  %ag = u8[968]{0} all-gather(%x), dimensions={0}')
    {'all-gather': 1.0}
    """
    counts: Dict[str, float] = {}
    for op in hlo_collectives(compiled):
        counts[op.kind] = counts.get(op.kind, 0.0) + (1.0 / exchange_every if op.in_conditional
                                                      else 1.0)
    return counts


def _branch_computations(text: str) -> set:
    """Names of the computations a conditional calls, and what those call in turn."""
    names = set(re.findall(r"branch_computations=\{([^}]*)\}", text))
    names |= set(re.findall(r"(?:true|false)_computation=%?([\w.\-]+)", text))
    found = {n.strip().lstrip("%") for group in names for n in group.split(",")}
    calls = {}
    current = None
    for line in text.splitlines():
        head = _header(line)
        if head:
            current = head
            continue
        for callee in re.findall(r"(?:to_apply|calls|body|condition)=%?([\w.\-]+)", line):
            calls.setdefault(current, set()).add(callee)
    todo = list(found)
    while todo:
        for callee in calls.get(todo.pop(), ()):
            if callee not in found:
                found.add(callee)
                todo.append(callee)
    return found


def _header(line: str):
    """The name of the computation a line of HLO text opens (unindented, ending in ``{``)."""
    if line[:1].isspace() or not line.rstrip().endswith("{"):
        return None
    m = re.match(r"^(?:ENTRY\s+)?%?([\w.\-]+)", line)
    return m.group(1) if m else None


def _nbytes(shape: str) -> int:
    dtype, dims = shape.split("[")
    size = 1
    for d in dims.rstrip("]").split(","):
        if d:
            size *= int(d)
    return size * _BYTES.get(dtype, 4)
