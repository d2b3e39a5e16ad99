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

import operator
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


def _size(value: Any, name: str) -> int:
    """A matrix dimension: a non-negative Python or NumPy integer."""
    try:
        size = operator.index(value)
    except TypeError:
        raise TypeError(f"SynapseRows: {name} must be an int, got {value!r}.") from None
    if size < 0:
        raise ValueError(f"SynapseRows: {name} must be >= 0, got {size}.")
    return size


def _indices(values: Any, name: str, bound: int, what: str) -> np.ndarray:
    """A private read-only ``int32`` copy of integer ``values``, each in ``range(bound)``.

    Checked in the caller's dtype before the cast (an int64 of 2**32 must not wrap into range),
    copied before the check (a caller's array changed afterwards changes nothing here).
    """
    host = np.array(values, copy=True)
    if host.dtype == np.bool_ or not np.issubdtype(host.dtype, np.integer):
        if host.size or not np.issubdtype(host.dtype, np.floating):
            raise TypeError(f"SynapseRows: {name} must be integers, got dtype {host.dtype}.")
    if host.size and (host.min() < 0 or host.max() >= bound):
        bad = int(np.flatnonzero((host.ravel() < 0) | (host.ravel() >= bound))[0])
        raise ValueError(f"SynapseRows: {name}[{bad}] = {host.ravel()[bad]} lies outside "
                         f"range({bound}) ({what}); every entry must be in range.")
    host = host.astype(np.int32)
    host.flags.writeable = False
    return host


class SynapseRows:
    """The synapses of a sparse ``(n_pre, n_post)`` matrix, by presynaptic row.

    Build one with :meth:`fixed`, :meth:`compressed` or :meth:`coordinates` (or the
    constructor, from the kernel's layout itself). Every array is checked once and
    copied to the device: the kernel reads only that copy, so changing the arrays
    given afterwards changes nothing, and no layout can make the kernel read or
    write out of bounds (it checks again where it reads).

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

    Raises
    ------
    ValueError
        ``indptr`` does not rise from 0 to the number of synapses, a target is
        outside ``range(n_post)``, ``syn`` is not one slot in ``range(nnz)`` per
        synapse, or ``width`` does not describe the rows.
    TypeError
        An index array is not of an integer type.
    """

    def __init__(self, n_pre: int, n_post: int, indptr: Any, post: Any, syn: Any,
                 width: Optional[int]):
        self.n_pre, self.n_post = _size(n_pre, "n_pre"), _size(n_post, "n_post")
        post = _indices(post, "post (the targets)", self.n_post, f"n_post = {self.n_post}")
        nnz = post.size
        _check_size(nnz)
        indptr = _indices(indptr, "indptr", nnz + 1, f"{nnz} synapses")
        if indptr.shape != (self.n_pre + 1,) or indptr[0] != 0 or indptr[-1] != nnz:
            raise ValueError(f"SynapseRows: indptr must be {self.n_pre + 1} offsets from 0 to the "
                             f"{nnz} synapses, got shape {indptr.shape}"
                             + (f", from {indptr[0]} to {indptr[-1]}" if indptr.size else "") + ".")
        if np.any(np.diff(indptr) < 0):
            row = int(np.flatnonzero(np.diff(indptr) < 0)[0])
            raise ValueError(f"SynapseRows: indptr must not decrease (row {row}: "
                             f"{indptr[row]} then {indptr[row + 1]}).")
        syn = _indices(syn, "syn (the weight slots)", max(nnz, 1), f"{nnz} weights")
        if syn.size not in (0, nnz) or syn.ndim != 1:
            raise ValueError(f"SynapseRows: syn must be empty or one weight slot per synapse "
                             f"({nnz}), got shape {syn.shape}.")
        if width is not None:
            width = _size(width, "width")
            if syn.size or nnz != self.n_pre * width or np.any(np.diff(indptr) != width):
                raise ValueError(f"SynapseRows: width={width} needs {width} synapses in every "
                                 "row, in weight order (an empty syn).")
        self.indptr, self.post, self.syn = (jax.device_put(a) for a in (indptr, post, syn))
        self.width = width
        self.nnz = int(nnz)
        self._counts = None

    @classmethod
    def fixed(cls, targets: Any, n_post: int) -> "SynapseRows":
        """Every presynaptic neuron ``i`` projects to ``targets[i]`` (``(n_pre, k)``).

        ``targets`` is checked and copied: the layout does not change when the caller's
        array does. :attr:`post` keeps its ``(n_pre, k)`` shape.
        """
        if np.ndim(targets) != 2:
            raise ValueError(f"SynapseRows.fixed: targets must be (n_pre, k), got shape "
                             f"{np.shape(targets)}.")
        n_pre, k = np.shape(targets)
        _check_size(n_pre * k)
        indptr = np.arange(n_pre + 1, dtype=np.int64) * k
        return cls(n_pre, n_post, indptr, targets, np.zeros(0, np.int32), k)

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
        if owner not in ("pre", "post"):
            raise ValueError(f"SynapseRows.compressed: owner must be 'pre' or 'post', "
                             f"got {owner!r}.")
        indices, owners = np.asarray(indices), np.asarray(owners)
        if indices.ndim != 2 or owners.shape != indices.shape[:1]:
            raise ValueError(f"SynapseRows.compressed: indices must be (rows, k) and owners "
                             f"(rows,), got {indices.shape} and {owners.shape}.")
        rows, k = indices.shape
        owner_of = np.repeat(owners, k)                           # per synapse, in weight order
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
        n_pre, n_post = _size(n_pre, "n_pre"), _size(n_post, "n_post")
        pre = _indices(np.ravel(pre), "pre (the sources)", n_pre, f"n_pre = {n_pre}")
        post = _indices(np.ravel(post), "post (the targets)", n_post, f"n_post = {n_post}")
        if pre.shape != post.shape:
            raise ValueError(f"SynapseRows.coordinates: {pre.size} sources for {post.size} "
                             "targets; give one of each per synapse.")
        _check_size(pre.size)
        order = np.argsort(pre, kind="stable")                   # row order, ties as stored
        in_order = bool(np.all(order == np.arange(order.size)))
        counts = np.bincount(pre, minlength=n_pre)
        indptr = np.concatenate([[0], np.cumsum(counts)])
        syn = np.zeros(0, np.int32) if in_order else order
        return cls(n_pre, n_post, indptr, post[order], syn, None)

    def row_of_each_synapse(self):
        """``int32 (nnz,)``: each synapse's presynaptic neuron, in the kernel's order (traced)."""
        if self._counts is None:
            self._counts = np.diff(np.asarray(self.indptr))
        return jnp.repeat(jnp.arange(self.n_pre, dtype=jnp.int32), self._counts,
                          total_repeat_length=self.nnz)
