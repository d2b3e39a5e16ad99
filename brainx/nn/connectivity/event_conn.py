"""Fixed-number sparse connectivity: `FixedNumConn`, `EventFixedNumConn` (= `EventFixedProb`).

A spiking network's synapses are sparse and its inputs are sparser: at a 2 %
connection probability and a 5 % firing rate, a dense ``spikes @ W`` spends
more than 99.9 % of its multiply-adds on zeros. These layers store only the
synapses and add up the weights of the rows whose presynaptic neuron fired: on CPU
with brainx's native kernel (an XLA FFI custom call, :mod:`brainx.nn.connectivity.native`),
elsewhere with brainevent's (:mod:`brainx.nn.connectivity.event_backend`).

Each presynaptic neuron (``efferent_target="post"``) projects to ``conn_num``
postsynaptic neurons drawn at random (or each postsynaptic neuron receives
from ``conn_num`` presynaptic ones, ``efferent_target="pre"``). The targets
are drawn once, on the host, from ``seed`` (or from :mod:`brainx.random`
when no seed is given), and are constants of the compiled step; the weights
are one trainable :class:`~brainx.ParamState`, ``self.weight``, of shape
``(rows, conn_num)`` (or a scalar: one weight shared by every synapse).

=====================  ==============================  ========================================
layer                  input                           product
=====================  ==============================  ========================================
``FixedNumConn``       floats (or bools, as 0/1)       ``x @ W``, exactly, over stored synapses
``EventFixedNumConn``  spikes: bool, or 0/1 floats     sum of the rows of ``W`` that fired
=====================  ==============================  ========================================

For ``EventFixedNumConn`` an input entry is an event when it is ``True``
(or ``> 0``); its value does not scale the weights. The gradient with
respect to a float input is that of ``x @ W`` (what a surrogate spike
function needs), and with respect to the weights that of the dense layer
restricted to the stored synapses.

Saving (:mod:`brainx.io`): the layers implement :class:`brainx.io.SavesArrays`.
A seeded layer saves its seed (a file stays the size of its weights) and a
load into a layer of another seed draws the saved one's synapses again; an
unseeded layer saves its synapses (``indices`` int32, ``row_selected``),
streamed to the file from memory, and a load puts them in place of its own.
A file that holds no synapses for an unseeded layer (written before
2026-12-07) is refused unless loaded with ``strict=False``.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx import random as brainx_random
from brainx.nn.connectivity.event_backend import layer_kernel, load_brainevent
from brainx.nn.connectivity.matmul_jvp import with_matmul_derivative
from brainx.nn.connectivity.native import product as native
from brainx.nn.connectivity.native.rows import SynapseRows
from brainx.nn.connectivity.traced_events import events_of
from brainx.nn.init import param
from brainx.nn.plain_arrays import as_array
from brainx.nn.modules.module import Module
from brainx.state.state import ParamState

__all__ = ["FixedNumConn", "EventFixedNumConn", "EventFixedProb", "fixed_num_indices"]


def fixed_num_indices(n_rows: int, n_cols: int, conn_num: int, allow_multi_conn: bool = True,
                      seed: Optional[int] = None) -> np.ndarray:
    """For each of ``n_rows`` rows, ``conn_num`` column indices drawn from ``range(n_cols)``.

    Parameters
    ----------
    n_rows, n_cols : int
        Rows (the neurons that own the connections) and candidate columns.
    conn_num : int
        Connections per row.
    allow_multi_conn : bool
        Draw with replacement (a pair may repeat: its weights add up).
        ``False``: distinct columns in each row (needs ``conn_num <= n_cols``).
    seed : int, optional
        NumPy seed; ``None``: a seed drawn from :mod:`brainx.random`.

    Returns
    -------
    numpy.ndarray
        ``int32`` array of shape ``(n_rows, conn_num)``.

    Examples
    --------
    >>> from brainx.nn.connectivity.event_conn import fixed_num_indices
    >>> idx = fixed_num_indices(4, 10, 3, allow_multi_conn=False, seed=0)
    >>> idx.shape, all(len(set(row)) == 3 for row in idx.tolist())
    ((4, 3), True)
    """
    return _draw_indices(_host_rng(seed), n_rows, n_cols, conn_num, allow_multi_conn)


def _host_rng(seed: Optional[int]) -> np.random.RandomState:
    """A NumPy generator from ``seed``, or from a key of :mod:`brainx.random` when ``None``."""
    if seed is None:
        seed = int(jax.random.randint(brainx_random.split_key(), (), 0, np.iinfo(np.int32).max))
    return np.random.RandomState(seed)


def _draw_indices(rng, n_rows, n_cols, conn_num, allow_multi_conn) -> np.ndarray:
    if conn_num > 0 and n_cols < 1:
        raise ValueError(f"cannot draw {conn_num} columns per row out of n_cols={n_cols}; give "
                         "n_cols >= 1, or conn_num=0.")
    if allow_multi_conn:  # drawn as int32 directly: the same numbers as int64, no copy
        return rng.randint(0, n_cols, size=(n_rows, conn_num), dtype=np.int32)
    if conn_num > n_cols:
        raise ValueError(f"allow_multi_conn=False: cannot draw {conn_num} distinct targets out of "
                         f"{n_cols}; lower conn_num or allow repeated connections.")
    # argpartition of uniform keys: a uniform draw without replacement per row.
    keys = rng.random_sample((n_rows, n_cols))
    return np.argpartition(keys, conn_num - 1, axis=1)[:, :conn_num].astype(np.int32)


class FixedNumConn(Module):
    """Sparse layer ``y = x @ W`` where every row of ``W`` has ``conn_num`` random synapses.

    Parameters
    ----------
    in_size, out_size : int or tuple of int
        Presynaptic and postsynaptic sizes (their last axes count).
    conn_num : int or float
        Synapses per presynaptic neuron (``efferent_target="post"``) or per
        postsynaptic neuron (``"pre"``); a float in ``[0, 1]`` is a connection
        probability (``int(p * n)`` synapses per neuron).
    conn_weight : float, array, Quantity or initialiser
        A scalar (one weight shared by every synapse) or an initialiser /
        array of shape ``(rows, conn_num)``. Its unit is the output's.
    efferent_target : {"post", "pre"}
        Whose connection count is fixed.
    afferent_ratio : float
        The fraction of rows that have connections at all (the others have
        none); below 1 the synapses are stored as CSR (``"post"``) or CSC.
    allow_multi_conn : bool
        Whether a pair may be drawn twice (its weights add).
    seed : int, optional
        Seed of the connectivity (``None``: from :mod:`brainx.random`).
    name : str, optional
        A label for ``repr``.
    conn_init : {"vmap", "for_loop"}
        Accepted for brainstate's signature: brainx always draws the
        connectivity on the host with NumPy, at once.
    param_type : type
        The State class of the weights (``ParamState``: trainable).
    backend : str, optional
        The kernel: ``"native"`` (brainx's C++ kernel, CPU), or a brainevent
        backend (``"numba"`` or ``"jax_raw"`` on CPU); ``None``: the global
        choice when the layer is built (:func:`set_event_backend`; on CPU
        ``"native"`` where it can be built).

    Examples
    --------
    >>> import jax.numpy as jnp, brainunit as u, brainx
    >>> layer = brainx.nn.FixedNumConn(6, 4, conn_num=2, conn_weight=0.5 * u.mS, seed=0)
    >>> layer.conn_num, layer.indices.shape
    (2, (6, 2))
    >>> y = layer(jnp.ones(6))            # every synapse once: 6 * 2 * 0.5 mS in all
    >>> float(u.math.sum(y).to_decimal(u.mS))
    6.0
    """

    def __init__(self, in_size, out_size, conn_num: Union[int, float], conn_weight: Any,
                 efferent_target: str = "post", afferent_ratio: float = 1.0,
                 allow_multi_conn: bool = True, seed: Optional[int] = None,
                 name: Optional[str] = None, conn_init: str = "vmap",
                 param_type: type = ParamState, backend: Optional[str] = None):
        super().__init__(name=name)
        self.in_size = in_size
        self.out_size = out_size
        if efferent_target not in ("pre", "post"):
            raise ValueError(f"{type(self).__name__}: efferent_target must be 'pre' or 'post', "
                             f"got {efferent_target!r}.")
        if conn_init not in ("vmap", "for_loop"):
            raise ValueError(f"{type(self).__name__}: conn_init must be 'vmap' or 'for_loop', "
                             f"got {conn_init!r}.")
        if not 0.0 <= afferent_ratio <= 1.0:
            raise ValueError(f"{type(self).__name__}: afferent_ratio must be in [0, 1], "
                             f"got {afferent_ratio}.")
        self.efferent_target = efferent_target
        self.afferent_ratio = afferent_ratio
        self.allow_multi_conn = allow_multi_conn
        self.seed = seed
        self.backend = backend
        _, n_cols = self._rows_and_columns()
        self.conn_num = _conn_number(conn_num, n_cols, type(self).__name__)
        if self.conn_num >= 1 and n_cols == 0:
            side = "out_size" if efferent_target == "post" else "in_size"
            raise ValueError(f"{type(self).__name__}: conn_num={conn_num} synapses per neuron, but "
                             f"{side} is {n_cols}: no neuron to connect to. Give a nonzero "
                             f"{side}, or conn_num=0.")

        self.kernel = None     # "native", a brainevent backend, or None (brainevent's choice)
        self.rows: Optional[SynapseRows] = None   # the native kernel's layout
        if self.conn_num < 1:   # no synapse: the output is a zero of the weight's unit
            self.weight = as_array(param(conn_weight, (), allow_none=False))
            return
        self.kernel = layer_kernel(backend, type(self).__name__)
        indices, row_selected = self._drawn(seed)
        self.weight = param_type(_weight(conn_weight, indices.shape))
        self._install_synapses(seed, indices, row_selected)

    @property
    def _compressed(self) -> bool:
        return not (self.efferent_target == "post" and self.afferent_ratio == 1.0)

    def update(self, x):
        """``x @ W`` over the stored synapses (``x``: ``(..., in)``)."""
        return self._product(x, event=False)

    # -- helpers -------------------------------------------------------------------
    def _product(self, x, event: bool):
        who, n_in = type(self).__name__, self.in_size[-1]
        if self.conn_num < 1:     # no synapse: zeros in the weight's unit
            _check_input(x, n_in, who)
            shape = tuple(jnp.shape(x))[:-1] + (self.out_size[-1],)
            dtype = jax.dtypes.canonicalize_dtype(float)     # what a layer with synapses gives
            if not event:
                dtype = jnp.result_type(as_array(x).dtype, dtype)       # that of x @ W
            zeros = u.math.zeros(shape, dtype=dtype)
            return u.maybe_decimal(zeros * u.get_unit(self.weight))
        weight = self.weight.value
        if self.rows is not None:
            return _native_product(x, weight, self.rows, event, who, n_in)
        return _matmul_last_axis(x, self._matrix(weight), event, who, n_in)

    def _matrix(self, weight):
        """brainevent's matrix of the synapses with these weights."""
        return self.conn.with_data(_flat(weight) if self._compressed else weight)

    def _brainevent_matrix(self, weight):
        be = load_brainevent(type(self).__name__)
        shape = (self.in_size[-1], self.out_size[-1])
        backend = None if self.backend == "native" else self.backend
        if not self._compressed:
            return be.FixedNumPerPre(weight, self.indices, shape=shape, backend=backend)
        # compressed rows (CSR, rows = pre) or columns (CSC, columns = post): brainevent
        # reads both in their favourable direction for ``x @ W``
        counts = np.where(self.row_selected, self.conn_num, 0)
        indptr = jax.device_put(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
        kind = be.CSR if self.efferent_target == "post" else be.CSC
        return kind((_flat(weight), self.indices.ravel(), indptr), shape=shape, backend=backend)

    # -- saving: the brainx.io.SavesArrays protocol -----------------------------------
    def saved_arrays(self) -> dict:
        """What :func:`brainx.io.save` keeps of the synapses: the seed that draws them, or,
        drawn from an unseeded generator, the synapses (``indices``, ``row_selected``)."""
        if self.conn_num < 1:
            return {}
        if self.seed is not None:
            return {"seed": int(self.seed)}
        return {"indices": self.indices, "row_selected": self.row_selected}

    def prepare_arrays(self, arrays: Optional[dict]):
        """Check the synapses a file holds for this layer; return what installs them
        (``None``: they are the layer's own)."""
        if self.conn_num < 1:
            return None
        if arrays is None:
            # a file of before brainx saved synapses: a seeded layer draws them from its seed
            if self.seed is not None:
                return None
            raise ValueError(
                "the file holds no synapses for this layer, and it was built with seed=None, so "
                "its own synapses are another draw (the file was written before brainx saved "
                "them): the loaded network would not be the saved one. Build the layer with "
                "the seed it was saved with, or load with strict=False to keep this layer's own "
                "synapses with the file's weights.")
        if set(arrays) == {"seed"}:
            seed = int(arrays["seed"])
            if seed == self.seed:
                return None
            indices, row_selected = self._drawn(seed)
        else:
            seed, (indices, row_selected) = None, self._checked_synapses(arrays)
        return lambda: self._install_synapses(seed, indices, row_selected)

    def _drawn(self, seed: Optional[int]):
        """``(indices, row_selected)`` drawn from ``seed`` as ``__init__`` draws them."""
        n_rows, n_cols = self._rows_and_columns()
        rng = _host_rng(seed)
        indices = _draw_indices(rng, n_rows, n_cols, self.conn_num, self.allow_multi_conn)
        if self.afferent_ratio == 1.0:
            return indices, np.ones(n_rows, bool)
        row_selected = rng.random_sample(n_rows) < self.afferent_ratio
        return indices[row_selected], row_selected

    def _rows_and_columns(self):
        n_pre, n_post = self.in_size[-1], self.out_size[-1]
        return (n_pre, n_post) if self.efferent_target == "post" else (n_post, n_pre)

    def _checked_synapses(self, arrays: dict):
        n_rows, n_cols = self._rows_and_columns()
        if set(arrays) != {"indices", "row_selected"}:
            raise ValueError(f"the file holds {sorted(arrays)} for this layer, not its synapses "
                             "('indices', 'row_selected', or a 'seed').")
        indices, row_selected = np.asarray(arrays["indices"]), np.asarray(arrays["row_selected"])
        if row_selected.dtype != np.bool_ or row_selected.shape != (n_rows,):
            raise ValueError(f"the file's row_selected is {row_selected.dtype}"
                             f"{list(row_selected.shape)}, this layer has {n_rows} rows: build "
                             "it with the sizes it was saved with.")
        rows = (int(row_selected.sum()), self.conn_num)
        if indices.shape != rows or not np.issubdtype(indices.dtype, np.integer):
            raise ValueError(f"the file's synapses are {indices.dtype}{list(indices.shape)}, this "
                             f"layer holds int32{list(rows)} (conn_num={self.conn_num}): build it "
                             "with the sizes, conn_num and afferent_ratio it was saved with.")
        if indices.size and (indices.min() < 0 or indices.max() >= n_cols):
            raise ValueError(f"the file's synapses have targets outside [0, {n_cols}): the file "
                             "does not belong to this layer.")
        return indices.astype(np.int32, copy=False), row_selected

    def _install_synapses(self, seed: Optional[int], indices: np.ndarray,
                          row_selected: np.ndarray) -> None:
        """The synapses and their kernel's layout: built by ``__init__``, again by a load."""
        n_pre, n_post = self.in_size[-1], self.out_size[-1]
        self.seed, self.row_selected = seed, row_selected
        self.indices = jax.device_put(indices)          # a copy to the device, nothing compiled
        if self.kernel == "native":
            self.rows = (SynapseRows.fixed(indices, n_post) if not self._compressed else
                         SynapseRows.compressed(indices, np.flatnonzero(row_selected),
                                                "pre" if self.efferent_target == "post" else "post",
                                                n_pre, n_post))
            if not self._compressed:
                self.indices = self.rows.post     # the kernel's own checked copy: one, not two
        self.conn = None if self.kernel == "native" else self._brainevent_matrix(self.weight.value)


class EventFixedNumConn(FixedNumConn):
    """:class:`FixedNumConn` driven by spikes: only the rows of active neurons are summed.

    An input entry is an event when it is ``True`` (or ``> 0``); every
    synapse of an active neuron adds its weight once. Parameters as
    :class:`FixedNumConn`. ``EventFixedProb`` is the same class.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> layer = brainx.nn.EventFixedProb(5, 3, conn_num=3, conn_weight=1.0, seed=0,
    ...                                  allow_multi_conn=False)
    >>> spikes = jnp.array([True, False, False, True, False])
    >>> layer(spikes).sum().item()        # two neurons fired, three synapses each
    6.0
    """

    def update(self, spikes):
        """Sum the weights of the synapses whose presynaptic neuron spiked."""
        return self._product(spikes, event=True)


EventFixedProb = EventFixedNumConn


def _conn_number(conn_num, n_cols: int, who: str) -> int:
    if isinstance(conn_num, (float, np.floating)):
        if not 0.0 <= conn_num <= 1.0:
            raise ValueError(f"{who}: a float conn_num is a probability in [0, 1], got {conn_num}.")
        return int(n_cols * conn_num)
    if not isinstance(conn_num, (int, np.integer)) or conn_num < 0:
        raise ValueError(f"{who}: conn_num must be a non-negative int or a probability, "
                         f"got {conn_num!r}.")
    return int(conn_num)


def _flat(weight):
    """Compressed formats keep one weight per synapse in a flat vector (a shared one stays)."""
    return weight if u.math.size(weight) == 1 else u.math.reshape(weight, (-1,))


def _weight(conn_weight, shape):
    """The initial synapse weights: a scalar stays one shared weight."""
    w = param(conn_weight, shape, allow_none=False)
    return as_array(w, dtype=float)   # (brainunit's asarray imports torch to rule it out)


def _check_input(x, n_in: int, who: str) -> tuple:
    shape = tuple(jnp.shape(x))
    if not shape or shape[-1] != n_in:
        raise ValueError(f"{who}: the input's last axis must have {n_in} entries "
                         f"(the presynaptic size), got shape {shape}.")
    return shape


def _native_product(x, weight, rows: SynapseRows, event: bool, who: str, n_in: int):
    """``x @ W`` (events of ``x`` when ``event``) on the native kernel, in the right unit."""
    _check_input(x, n_in, who)
    y = native.sparse_product(u.get_mantissa(x), u.get_mantissa(weight), rows, event)
    unit = u.get_unit(weight) if event else u.get_unit(x) * u.get_unit(weight)
    return u.maybe_decimal(u.Quantity(y, unit=unit))


def _matmul_last_axis(x, conn, event: bool, who: str, n_in: int):
    """``x @ conn`` for ``x`` of shape ``(n_in,)`` or ``(..., n_in)`` (brainevent's kernels)."""
    shape = _check_input(x, n_in, who)
    flat = x if len(shape) <= 2 else u.math.reshape(x, (-1, n_in))
    if event:
        y = _event_product(u.get_mantissa(flat), conn)
    else:
        y = flat @ conn
    return y if len(shape) <= 2 else u.math.reshape(y, shape[:-1] + (y.shape[-1],))


def _event_product(x, conn):
    """``conn``'s product with the events of ``x`` (entries ``True`` or ``> 0``).

    The kernel gets booleans (given float spikes, it would scan four times the bytes):
    the ones the spikes were made from when the trace shows them
    (:func:`~brainx.nn.connectivity.traced_events.bools_behind`, so the step compiles
    to no conversion back), else ``x > 0``. The derivative is that of ``x @ W``, as for
    :func:`~brainx.nn.connectivity.event_backend.as_events`.
    """
    be = load_brainevent("EventFixedProb")
    x = jnp.asarray(x)
    if x.dtype == jnp.bool_ or not jnp.issubdtype(x.dtype, jnp.floating):
        return _binary_product(be, x, conn)
    unit = u.get_unit(conn.data)
    events = events_of(x)

    def matrix(weights):
        return conn.with_data(u.maybe_decimal(u.Quantity(weights, unit=unit)))

    return with_matmul_derivative(
        lambda e, w: _binary_product(be, e, matrix(w)),
        lambda tx, w: tx @ matrix(w),                               # d(x @ W) / dx
        lambda e, tw: _binary_product(be, e, matrix(tw)),           # d / dW: the same events
    )(x, events, u.get_mantissa(conn.data))


def _binary_product(be, events, conn):
    """``events @ conn`` for boolean ``events`` of shape ``(n_pre,)`` or ``(batch, n_pre)``.

    brainevent 0.2.1 (both backends) returns a wrong product of a fixed-number
    matrix (``FixedNumPerPre``, ``FixedNumPerPost``) with a batch of as many
    spike vectors as the matrix has columns (``batch == n_post``: its kernel's
    ``(n_post, batch)`` result is transposed only when that shape differs from
    the expected one); one vector at a time (``jax.vmap``) is right, so such a
    batch goes that way.
    """
    fixed = (be.FixedNumPerPre, be.FixedNumPerPost)
    if events.ndim == 2 and isinstance(conn, fixed) and events.shape[0] == conn.shape[1]:
        return jax.vmap(lambda row: be.BinaryArray(row) @ conn)(events)
    return be.BinaryArray(events) @ conn
