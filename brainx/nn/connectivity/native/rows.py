"""`SynapseRows`: a sparse matrix by presynaptic row, in the native kernels' layout.

The native kernel (``event_kernels.cc``) reads the synapses of one presynaptic
neuron as one contiguous run: ``indptr[i] .. indptr[i + 1]`` index ``post``
(each synapse's postsynaptic neuron) and, when the weights are stored in
another order, ``syn`` (each synapse's place in the weights). The layers keep
their weights in their own order (``(rows, conn_num)``, a row per presynaptic
neuron or per postsynaptic one); :class:`SynapseRows` is the map from that order
to the kernel's, built once on the host from the layer's target indices.

Examples
--------
Three presynaptic neurons, two synapses each (``EventFixedProb``'s layout):

>>> import numpy as np
>>> from brainx.nn.connectivity.native.rows import SynapseRows
>>> rows = SynapseRows.fixed(np.array([[0, 2], [1, 1], [3, 0]], np.int32), n_post=4)
>>> rows.indptr.tolist(), rows.width, rows.syn.shape
([0, 2, 4, 6], 2, (0,))

The same synapses stored by postsynaptic neuron (``efferent_target="pre"``):
each postsynaptic row lists its presynaptic sources, and ``syn`` says where each
synapse's weight is.

>>> by_post = SynapseRows.compressed(np.array([[0, 2], [1, 1]], np.int32),
...                                  owners=np.array([0, 3]), owner="post", n_pre=3, n_post=4)
>>> by_post.indptr.tolist(), np.asarray(by_post.post).tolist(), np.asarray(by_post.syn).tolist()
([0, 1, 3, 4], [0, 3, 3, 0], [0, 2, 3, 1])
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["SynapseRows"]


_MAX_SYNAPSES = np.iinfo(np.int32).max    # the kernel's offsets are int32


def _check_size(nnz: int) -> None:
    if nnz > _MAX_SYNAPSES:
        raise ValueError(f"SynapseRows: {nnz} synapses; the native kernel indexes them with "
                         f"int32, at most {_MAX_SYNAPSES}. Split the projection, or use "
                         "brainevent's kernels (backend='jax_raw' or 'numba').")


class SynapseRows:
    """The synapses of a sparse ``(n_pre, n_post)`` matrix, by presynaptic row.

    Build one with :meth:`fixed` or :meth:`compressed`; the arrays are on the
    device, constants of every step that uses them.

    Attributes
    ----------
    n_pre, n_post : int
        The matrix's shape.
    indptr : jax.Array
        ``int32 (n_pre + 1,)``: row ``i``'s synapses are ``indptr[i]:indptr[i + 1]``.
    post : jax.Array
        ``int32``, one entry per synapse (any shape; read flat): the target.
    syn : jax.Array
        ``int32 (nnz,)``: each synapse's index in the flat weights, or ``(0,)``
        when the weights are in row order already.
    width : int or None
        Synapses per row when every row has the same number and the weights are
        in row order (the derivative then works on ``(n_pre, width)`` blocks).
    """

    def __init__(self, n_pre: int, n_post: int, indptr, post, syn, width: Optional[int]):
        self.n_pre, self.n_post = int(n_pre), int(n_post)
        self.indptr, self.post, self.syn, self.width = indptr, post, syn, width
        self.nnz = int(np.size(post))
        self._counts = None

    @classmethod
    def fixed(cls, targets: Any, n_post: int) -> "SynapseRows":
        """Every presynaptic neuron ``i`` projects to ``targets[i]`` (``(n_pre, k)``).

        ``targets`` is kept as given (a device array is not copied): the kernel
        reads it flat.
        """
        n_pre, k = np.shape(targets)
        _check_size(n_pre * k)
        host = np.asarray(targets)
        if host.size and (host.min() < 0 or host.max() >= n_post):
            raise ValueError(f"SynapseRows: a target lies outside range({n_post}).")
        indptr = np.arange(n_pre + 1, dtype=np.int32) * k
        return cls(n_pre, n_post, jax.device_put(indptr), targets,
                   jax.device_put(np.zeros(0, np.int32)), k)

    @classmethod
    def compressed(cls, indices: np.ndarray, owners: np.ndarray, owner: str, n_pre: int,
                   n_post: int) -> "SynapseRows":
        """Row ``r`` of ``indices`` lists the synapses of neuron ``owners[r]``.

        Parameters
        ----------
        indices : numpy.ndarray
            ``(rows, k)``: the other end of each synapse.
        owners : numpy.ndarray
            ``(rows,)``: whose row each is (presynaptic or postsynaptic neurons).
        owner : {"pre", "post"}
            ``"pre"``: rows are presynaptic neurons, ``indices`` their targets;
            ``"post"``: rows are postsynaptic neurons, ``indices`` their sources.
        n_pre, n_post : int
            The matrix's shape.
        """
        indices = np.asarray(indices, np.int32)
        rows, k = indices.shape
        owner_of = np.repeat(np.asarray(owners, np.int64), k)     # per synapse, in weight order
        if owner == "pre":
            return cls.coordinates(owner_of, indices.ravel(), n_pre, n_post)
        return cls.coordinates(indices.ravel(), owner_of, n_pre, n_post)

    @classmethod
    def coordinates(cls, pre: np.ndarray, post: np.ndarray, n_pre: int,
                    n_post: int) -> "SynapseRows":
        """Synapse ``s`` joins ``pre[s]`` to ``post[s]``; the weights are in this order.

        Examples
        --------
        >>> import numpy as np
        >>> from brainx.nn.connectivity.native.rows import SynapseRows
        >>> rows = SynapseRows.coordinates(np.array([2, 0, 2]), np.array([1, 1, 0]), 3, 2)
        >>> rows.indptr.tolist(), rows.post.tolist(), rows.syn.tolist()
        ([0, 1, 1, 3], [1, 1, 0], [1, 0, 2])
        """
        pre = np.asarray(pre, np.int64)
        post = np.asarray(post, np.int64)
        _check_size(pre.size)
        if pre.size and (pre.min() < 0 or pre.max() >= n_pre or post.min() < 0
                         or post.max() >= n_post):
            raise ValueError(f"SynapseRows: a synapse lies outside the ({n_pre}, {n_post}) matrix.")
        order = np.argsort(pre, kind="stable")                   # row order, ties as stored
        in_order = bool(np.all(order == np.arange(order.size)))
        counts = np.bincount(pre, minlength=n_pre)
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        syn = np.zeros(0, np.int32) if in_order else order.astype(np.int32)
        return cls(n_pre, n_post, jax.device_put(indptr),
                   jax.device_put(post[order].astype(np.int32)), jax.device_put(syn), None)

    def row_of_each_synapse(self):
        """``int32 (nnz,)``: each synapse's presynaptic neuron, in the kernel's order (traced)."""
        if self._counts is None:
            self._counts = np.diff(np.asarray(self.indptr))
        return jnp.repeat(jnp.arange(self.n_pre, dtype=jnp.int32), self._counts,
                          total_repeat_length=self.nnz)
