"""Several event projections from one spike vector, run as one kernel call.

A network whose neurons are one population often projects from consecutive
slices of its spike vector: a COBA network's excitatory neurons
``spikes[:n_exc]`` drive one conductance, its inhibitory ones
``spikes[n_exc:]`` another. Written as two :class:`EventFixedProb` layers,
each step makes two brainevent calls, and at a few thousand neurons the fixed
cost of a call (tens of microseconds on CPU) is most of the step.
:class:`EventFixedProbGroup` makes them one: the layers' synapses become the
rows of one matrix whose columns are their targets side by side, the kernel
counts the events reaching each target once, and each layer's share is scaled
by its own weight.

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

from brainx.nn.connectivity.event_backend import load_brainevent
from brainx.nn.connectivity.event_conn import EventFixedNumConn, _event_product
from brainx.nn.modules.module import Module

__all__ = ["EventFixedProbGroup"]


class EventFixedProbGroup(Module):
    """Event projections from consecutive slices of one spike vector, in one kernel call.

    Parameters
    ----------
    *layers : EventFixedProb
        The projections, in the order of the slices they read: the first reads
        the first ``layers[0].in_size[-1]`` entries of the spike vector, the next
        the entries after those, and so on; together they read all of it. Each
        must store one weight shared by every synapse (a scalar ``conn_weight``),
        ``efferent_target="post"`` and ``afferent_ratio=1``, and all the same
        ``conn_num``.
    backend : str, optional
        brainevent backend of the fused call (``None``: the first layer's).
    name : str, optional
        A label for ``repr``.

    The group keeps its own copy of the layers' target indices, as one
    ``(n, conn_num)`` array (the layers keep theirs, and still work alone): the
    connectivity's memory doubles while both are alive.

    Calling the group with spikes of shape ``(..., n)`` returns one output per
    layer, as ``layer(spikes[..., its slice])`` would give it (the same sum
    over the same synapses, as one product ``weight * count`` instead of
    ``count`` additions of ``weight``), with one brainevent call. Gradients
    with respect to float spikes (a surrogate) and to each layer's weight are
    those of the separate layers.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> exc = brainx.nn.EventFixedProb(3, 5, conn_num=2, conn_weight=0.5, seed=0)
    >>> inh = brainx.nn.EventFixedProb(2, 5, conn_num=2, conn_weight=-2.0, seed=1)
    >>> both = brainx.nn.EventFixedProbGroup(exc, inh)
    >>> spikes = jnp.array([True, False, True, False, True])
    >>> g_exc, g_inh = both(spikes)
    >>> bool(jnp.allclose(g_exc, exc(spikes[:3]))), bool(jnp.allclose(g_inh, inh(spikes[3:])))
    (True, True)
    """

    def __init__(self, *layers: EventFixedNumConn, backend=None, name=None):
        super().__init__(name=name)
        if not layers:
            raise ValueError("EventFixedProbGroup: give at least one EventFixedProb layer.")
        for k, layer in enumerate(layers):
            _check_groupable(k, layer)
        conn_nums = {layer.conn_num for layer in layers}
        if len(conn_nums) > 1:
            raise ValueError(
                "EventFixedProbGroup: the layers have different conn_num "
                f"({[layer.conn_num for layer in layers]}); one kernel call needs the same "
                "number of synapses in every row. Group only layers with equal conn_num.")
        self.layers = list(layers)
        self.n_pre = sum(layer.in_size[-1] for layer in layers)
        posts = [layer.out_size[-1] for layer in layers]
        self.bounds: Tuple[int, ...] = tuple(np.cumsum([0] + posts).tolist())
        # the synapses of every layer as rows of one matrix, each layer's targets shifted
        # into its own block of columns; weight 1: the kernel counts events per target
        indices = np.concatenate([np.asarray(layer.indices) + start
                                  for layer, start in zip(layers, self.bounds)])
        be = load_brainevent(type(self).__name__)
        backend = layers[0].backend if backend is None else backend
        self.conn = be.FixedNumPerPre(jnp.float32(1.0), jax.device_put(indices.astype(np.int32)),
                                      shape=(self.n_pre, self.bounds[-1]), backend=backend)

    def update(self, spikes) -> Tuple:
        """One output per layer, from one brainevent call over the whole spike vector."""
        shape = tuple(jnp.shape(spikes))
        if not shape or shape[-1] != self.n_pre:
            raise ValueError(f"EventFixedProbGroup: the spikes' last axis must have {self.n_pre} "
                             f"entries (the layers' presynaptic sizes together), got shape {shape}.")
        flat = spikes if len(shape) <= 2 else u.math.reshape(spikes, (-1, self.n_pre))
        counts = _event_product(u.get_mantissa(flat), self.conn)
        if len(shape) > 2:
            counts = jnp.reshape(counts, shape[:-1] + (self.bounds[-1],))
        outs = []
        for layer, start, stop in zip(self.layers, self.bounds, self.bounds[1:]):
            weight = layer.weight.value
            part = counts[..., start:stop]
            outs.append(u.maybe_decimal(part.astype(u.get_mantissa(weight).dtype) * weight))
        return tuple(outs)


def _check_groupable(k: int, layer) -> None:
    who = f"EventFixedProbGroup: layer {k} ({layer!r})"
    if not isinstance(layer, EventFixedNumConn):
        raise TypeError(f"{who} is not an EventFixedProb; only event projections can be grouped.")
    if layer.conn is None:
        raise ValueError(f"{who} has no synapse (conn_num 0); leave it out of the group.")
    if layer._compressed:
        raise ValueError(f"{who} stores its synapses compressed (efferent_target='pre' or "
                         "afferent_ratio < 1); only fixed-number-per-presynaptic-neuron layers "
                         "can be grouped.")
    if u.math.size(layer.weight.value) != 1:
        raise ValueError(f"{who} has one weight per synapse; a group scales each layer's event "
                         "counts by one shared weight (give the layer a scalar conn_weight).")

