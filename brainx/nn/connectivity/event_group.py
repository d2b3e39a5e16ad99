"""Several event projections from one spike vector, run as one kernel call.

A spiking network's projections often read one spike vector: a COBA network's
excitatory neurons ``spikes[:n_exc]`` drive one conductance and its inhibitory
ones ``spikes[n_exc:]`` another; in a four-projection E/I network each
population projects to both. Written as separate :class:`EventFixedProb`
layers, each step makes one brainevent call per projection, and at a few
thousand neurons the fixed cost of a call (tens of microseconds on CPU) is
most of the step. :class:`EventFixedProbGroup` makes them one: each neuron's
row of one matrix holds the synapses of every layer that reads it, the
layers' targets side by side in column blocks; the kernel counts the events
reaching each target once, and each block is scaled by its layer's weight.

That scaling is exact only for a weight shared by every synapse of a layer
(``conn_weight`` a scalar), which is what the group takes; the weights stay
the layers' own trainable :class:`~brainx.ParamState` s, read at every call.
"""

from __future__ import annotations

from typing import Tuple

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx.nn.connectivity.event_backend import layer_kernel, load_brainevent
from brainx.nn.connectivity.event_conn import EventFixedNumConn, _matmul_last_axis, _native_product
from brainx.nn.connectivity.native.rows import SynapseRows
from brainx.nn.modules.module import Module

__all__ = ["EventFixedProbGroup"]


class EventFixedProbGroup(Module):
    """Event projections from one spike vector, in one kernel call.

    Parameters
    ----------
    *layers : EventFixedProb
        The projections. Each must store one weight shared by every synapse (a
        scalar ``conn_weight``), with ``efferent_target="post"`` and
        ``afferent_ratio=1``.
    pre : sequence of slices, optional
        The part of the spike vector each layer reads (``slice`` or
        ``(start, stop)``), one per layer, each as long as its layer's input.
        Layers may read the same part (two projections of one population) or
        different ones. ``None``: consecutive parts, the first layer reading the
        first ``layers[0].in_size[-1]`` entries, the next the entries after them.
    backend : str, optional
        The kernel of the fused call, as an :class:`EventFixedProb`'s ``backend``
        (``None``: the first layer's).
    name : str, optional
        A label for ``repr``.

    Calling the group with spikes of shape ``(..., n)``, ``n`` the end of the
    last part, returns one output per layer, as ``layer(spikes[..., its part])``
    would give it (the same sum over the same synapses, as one product
    ``weight * count`` instead of ``count`` additions of ``weight``), with one
    brainevent call. Gradients with respect to float spikes (a surrogate) and
    to each layer's weight are those of the separate layers.

    Each neuron's row of the fused matrix holds the synapses of every layer that
    reads it; rows with fewer than the most are padded with synapses to a column
    nobody reads (what a spike of theirs costs the kernel). The group keeps its
    own copy of the layers' target indices (the layers keep theirs, and still
    work alone): the connectivity's memory doubles while both are alive.

    Examples
    --------
    Two populations, each projecting to one target (consecutive parts):

    >>> import jax.numpy as jnp, brainx
    >>> exc = brainx.nn.EventFixedProb(3, 5, conn_num=2, conn_weight=0.5, seed=0)
    >>> inh = brainx.nn.EventFixedProb(2, 5, conn_num=2, conn_weight=-2.0, seed=1)
    >>> both = brainx.nn.EventFixedProbGroup(exc, inh)
    >>> spikes = jnp.array([True, False, True, False, True])
    >>> g_exc, g_inh = both(spikes)
    >>> bool(jnp.allclose(g_exc, exc(spikes[:3]))), bool(jnp.allclose(g_inh, inh(spikes[3:])))
    (True, True)

    One population projecting to two targets (the same part):

    >>> to_a = brainx.nn.EventFixedProb(3, 4, conn_num=2, conn_weight=1.0, seed=2)
    >>> to_b = brainx.nn.EventFixedProb(3, 6, conn_num=3, conn_weight=0.1, seed=3)
    >>> fan = brainx.nn.EventFixedProbGroup(to_a, to_b, pre=[(0, 3), (0, 3)])
    >>> [o.shape for o in fan(spikes[:3])]
    [(4,), (6,)]
    """

    def __init__(self, *layers: EventFixedNumConn, pre=None, backend=None, name=None):
        super().__init__(name=name)
        if not layers:
            raise ValueError("EventFixedProbGroup: give at least one EventFixedProb layer.")
        for k, layer in enumerate(layers):
            _check_groupable(k, layer)
        self.layers = list(layers)
        self.pre = _parts(layers, pre)
        self.n_pre = max(part.stop for part in self.pre)
        posts = [layer.out_size[-1] for layer in layers]
        self.bounds: Tuple[int, ...] = tuple(np.cumsum([0] + posts).tolist())
        self.backend = layers[0].backend if backend is None else backend
        self.kernel = layer_kernel(self.backend, type(self).__name__)
        self._fuse()

    def _fuse(self) -> None:
        """The fused matrix of the layers' synapses (built again when a load replaces them)."""
        indices = _fused_rows(self.layers, self.pre, self.bounds, self.n_pre)
        # weight 1: the kernel counts the events reaching each target; the last column is
        # the padding's, read by no layer
        width = self.bounds[-1] + 1
        if self.kernel == "native":
            self.rows, self.conn = SynapseRows.fixed(jax.device_put(indices), width), None
        else:
            be = load_brainevent(type(self).__name__)
            self.rows = None
            backend = None if self.backend == "native" else self.backend
            self.conn = be.FixedNumPerPre(jnp.float32(1.0), jax.device_put(indices),
                                          shape=(self.n_pre, width), backend=backend)

    # -- saving: brainx.io.SavesArrays ------------------------------------------------
    def saved_arrays(self) -> dict:
        """Nothing: the fused matrix is the layers' synapses, which they save themselves."""
        return {}

    def prepare_arrays(self, arrays):
        """Fuse again once the layers hold their loaded synapses (brainx.io runs it last)."""
        return self._fuse

    def update(self, spikes) -> Tuple:
        """One output per layer, from one kernel call over the whole spike vector."""
        who = type(self).__name__
        if self.rows is not None:
            counts = _native_product(spikes, jnp.ones((1,), jnp.float32), self.rows, True, who,
                                     self.n_pre)
        else:
            counts = _matmul_last_axis(spikes, self.conn, True, who, self.n_pre)
        outs = []
        for layer, start, stop in zip(self.layers, self.bounds, self.bounds[1:]):
            weight = u.math.reshape(layer.weight.value, ())   # one weight, stored (), (1,), ...
            part = counts[..., start:stop]
            outs.append(u.maybe_decimal(part.astype(u.get_mantissa(weight).dtype) * weight))
        return tuple(outs)


def _parts(layers, pre) -> Tuple[slice, ...]:
    """Each layer's part of the spike vector, checked against its input size."""
    sizes = [layer.in_size[-1] for layer in layers]
    if pre is None:
        stops = np.cumsum(sizes).tolist()
        return tuple(slice(b - n, b) for n, b in zip(sizes, stops))
    pre = list(pre)
    if len(pre) != len(layers):
        raise ValueError(f"EventFixedProbGroup: pre gives {len(pre)} parts for {len(layers)} "
                         "layers; give one part (a slice or (start, stop)) per layer.")
    parts = []
    for k, (part, n) in enumerate(zip(pre, sizes)):
        if isinstance(part, slice) and part.step in (None, 1):
            start, stop = part.start, part.stop
        elif isinstance(part, (tuple, list)) and len(part) == 2:
            start, stop = part
        else:                                   # stepped, or not a pair: refused below
            start, stop = None, None
        start = 0 if start is None else int(start)
        if stop is None or int(stop) - start != n or start < 0:
            raise ValueError(f"EventFixedProbGroup: layer {k} reads {n} neurons, but its part "
                             f"of the spike vector is {part!r}; give a contiguous part, "
                             f"(start, start + {n}) or slice(start, start + {n}).")
        parts.append(slice(start, int(stop)))
    return tuple(parts)


def _fused_rows(layers, parts, bounds, n_pre) -> np.ndarray:
    """``(n_pre, width)`` targets: for each neuron, the synapses of every layer reading it,
    each layer's targets shifted into its column block; short rows padded with the
    unread column ``bounds[-1]``."""
    cuts = sorted({0, n_pre, *(p.start for p in parts), *(p.stop for p in parts)})
    targets = [np.asarray(layer.indices) for layer in layers]   # one host copy each
    segments = []
    for a, b in zip(cuts, cuts[1:]):   # neurons [a, b) are read by the same layers
        blocks = [idx[a - part.start:b - part.start] + offset
                  for idx, part, offset in zip(targets, parts, bounds)
                  if part.start <= a and b <= part.stop]
        segments.append(np.concatenate(blocks, axis=1) if blocks
                        else np.zeros((b - a, 0), np.int32))
    width = max(1, max(seg.shape[1] for seg in segments))
    rows = np.full((n_pre, width), bounds[-1], np.int32)
    for (a, b), seg in zip(zip(cuts, cuts[1:]), segments):
        rows[a:b, :seg.shape[1]] = seg
    return rows


def _check_groupable(k: int, layer) -> None:
    who = f"EventFixedProbGroup: layer {k} ({type(layer).__name__})"  # (a repr spans lines)
    if not isinstance(layer, EventFixedNumConn):
        raise TypeError(f"{who} is not an EventFixedProb; only event projections can be grouped.")
    if layer.conn_num < 1:
        raise ValueError(f"{who} has no synapse (conn_num 0); leave it out of the group.")
    if layer._compressed:
        raise ValueError(f"{who} stores its synapses compressed (efferent_target='pre' or "
                         "afferent_ratio < 1); only fixed-number-per-presynaptic-neuron layers "
                         "can be grouped.")
    if u.math.size(layer.weight.value) != 1:
        raise ValueError(f"{who} has one weight per synapse; a group scales each layer's event "
                         "counts by one shared weight (give the layer a scalar conn_weight).")

