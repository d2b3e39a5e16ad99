"""Helpers shared by the event-layer tests: a layer's synapses as a dense matrix, spike trains."""

import brainunit as u
import jax.numpy as jnp
import numpy as np


def dense_of(layer) -> np.ndarray:
    """The layer's ``(in, out)`` matrix, from its stored targets (mantissa of the weights)."""
    n_pre, n_post = layer.in_size[-1], layer.out_size[-1]
    idx = np.asarray(layer.indices)                         # (rows with synapses, conn_num)
    rows = np.broadcast_to(np.flatnonzero(layer.row_selected)[:, None], idx.shape)
    w = np.broadcast_to(np.asarray(u.get_mantissa(layer.weight.value), np.float64), idx.shape)
    D = np.zeros((n_pre, n_post))
    pre, post = (rows, idx) if layer.efferent_target == "post" else (idx, rows)
    np.add.at(D, (pre.ravel(), post.ravel()), w.ravel())
    return D


def spikes(shape, rate=0.3, seed=0):
    """Bernoulli spikes (bools) of ``shape``."""
    return jnp.asarray(np.random.RandomState(seed).rand(*shape) < rate)
