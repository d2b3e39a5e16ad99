"""`DelayedCSR`: synapses by presynaptic neuron, each with its own weight and delay, on the host.

A projection with per-synapse delays needs, for each presynaptic neuron, the
list of its synapses: their targets, their delays in steps and their weights.
:class:`DelayedCSR` holds that list compactly in NumPy (CSR by source: targets
``int32``, delays in the smallest unsigned integer type that holds them, weights
``float32`` or one shared scalar) until a
:class:`~brainx.nn.DelayedEventConn` copies it to the device. It is the one
layout the delayed kernel reads; the other layouts convert to it:

===================  ==========================================  ===========================
layout               given as                                    constructor
===================  ==========================================  ===========================
CSR                  ``indptr``, ``targets``, ``delays``         ``DelayedCSR(...)``
COO                  ``pre``, ``post``, ``delays`` (any order)   :meth:`DelayedCSR.from_coo`
fixed number         ``targets (n_pre, k)``, ``delays (n_pre, k)``  :meth:`DelayedCSR.from_fixed`
fixed total number   ``n_pre, n_post, total`` and a seed         :func:`~brainx.nn.fixed_total_number`
===================  ==========================================  ===========================

Delays are whole steps (at least one: a spike cannot arrive in the step it is
emitted); :func:`delay_steps` rounds times to steps as NEST does (to the
nearest, halves up). :meth:`DelayedCSR.as_states` hands the arrays to
:func:`brainx.io.save`, and :meth:`DelayedCSR.from_states` takes them back from
:func:`brainx.io.load`, so a large network is drawn once.

Examples
--------
>>> import numpy as np, brainunit as u
>>> from brainx.nn import DelayedCSR
>>> conn = DelayedCSR.from_coo(pre=[1, 0, 1], post=[0, 2, 1], delays=[2, 1, 3],
...                            weights=[0.5, 1.0, 2.0], n_pre=2, n_post=3, unit=u.pA)
>>> conn.indptr.tolist(), conn.targets.tolist(), conn.delays.tolist(), conn.delays.dtype
([0, 1, 3], [2, 0, 1], [1, 2, 3], dtype('uint8'))
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import brainunit as u
import numpy as np

from brainx.nn.connectivity.native.delivery import delay_dtype as smallest_delay_dtype
from brainx.state.state import State

__all__ = ["DelayedCSR", "delay_steps", "smallest_delay_dtype"]


def delay_steps(delays: Any, dt: Any) -> np.ndarray:
    """Delays (times, or numbers in ``dt``'s unit) as whole steps of ``dt``, halves rounded up.

    Examples
    --------
    >>> import brainunit as u
    >>> from brainx.nn import delay_steps
    >>> delay_steps([0.05, 0.14, 1.5] * u.ms, 0.1 * u.ms).tolist()
    [1, 1, 15]
    """
    if isinstance(delays, u.Quantity) or isinstance(dt, u.Quantity):
        unit = u.get_unit(dt)
        delays, dt = u.Quantity(delays).to_decimal(unit), u.Quantity(dt).to_decimal(unit)
    # NEST's order: the delay times the steps per unit time (0.15 ms * 10 = 1.5 -> 2 steps)
    ratio = np.asarray(delays, np.float64) * (1.0 / float(dt))
    steps = np.floor(np.asarray(ratio, np.float64) + 0.5)
    return steps.astype(smallest_delay_dtype(int(steps.max())) if steps.size else np.uint8)


class DelayedCSR:
    """Synapses grouped by presynaptic neuron: targets, delays (steps) and weights.

    Parameters
    ----------
    indptr : array
        ``(n_pre + 1,)``: neuron ``i``'s synapses are ``indptr[i]:indptr[i + 1]``.
    targets : array
        ``(nnz,)`` postsynaptic neurons (stored ``int32``).
    delays : array
        ``(nnz,)`` delays in steps, each at least 1 (stored in the smallest unsigned type).
    weights : array or float
        ``(nnz,)`` (stored ``float32``) or one weight shared by every synapse.
    n_post : int
        The postsynaptic size.
    unit : brainunit.Unit, optional
        The weights' unit (e.g. ``u.pA``).

    Arrays already of the stored type are kept, not copied (a large build hands
    over its arrays).
    """

    def __init__(self, indptr: Any, targets: Any, delays: Any, weights: Any, n_post: int,
                 unit: Optional[u.Unit] = None):
        self.indptr = np.asarray(indptr, np.int64)
        self.targets = np.asarray(targets, np.int32)
        delays = np.asarray(delays)
        if delays.dtype.kind not in "ui":
            raise TypeError(f"DelayedCSR: delays must be whole steps (integers), got "
                            f"{delays.dtype}; convert times with delay_steps(delays, dt).")
        top = int(delays.max()) if delays.size else 1
        self.delays = delays.astype(smallest_delay_dtype(top), copy=False)
        w = np.asarray(weights, np.float32)
        self.weights = w if w.size != 1 or w.ndim else w.reshape(())
        self.n_pre, self.n_post = self.indptr.size - 1, int(n_post)
        self.unit = u.UNITLESS if unit is None else unit
        self._check()

    @property
    def nnz(self) -> int:
        return int(self.targets.size)

    @property
    def max_delay(self) -> int:
        """The largest delay in steps (the ring buffer has one slot more)."""
        return int(self.delays.max()) if self.nnz else 1

    def _check(self) -> None:
        if self.delays.shape != self.targets.shape or self.targets.ndim != 1:
            raise ValueError(f"DelayedCSR: targets {self.targets.shape} and delays "
                             f"{self.delays.shape} must be 1-d and of one length.")
        if self.nnz > np.iinfo(np.int32).max:
            raise ValueError(f"DelayedCSR: {self.nnz} synapses; the kernel's offsets are int32 "
                             f"(at most {np.iinfo(np.int32).max}): split the projection.")
        if self.weights.ndim and self.weights.shape != self.targets.shape:
            raise ValueError(f"DelayedCSR: {self.weights.size} weights for {self.nnz} synapses; "
                             "give one per synapse or one shared scalar.")
        if (self.n_pre < 0 or self.indptr[0] != 0 or self.indptr[-1] != self.nnz
                or np.any(self.indptr[1:] < self.indptr[:-1])):
            raise ValueError(f"DelayedCSR: indptr must rise from 0 to the synapse count {self.nnz}.")
        if self.nnz and (int(self.targets.min()) < 0 or int(self.targets.max()) >= self.n_post):
            raise ValueError(f"DelayedCSR: targets span {int(self.targets.min())}.."
                             f"{int(self.targets.max())}, outside range({self.n_post}).")
        if self.nnz and int(self.delays.min()) < 1:
            raise ValueError("DelayedCSR: a delay of 0 steps; every delay must be at least one "
                             "step (a spike arrives in a later step than it is emitted).")

    @classmethod
    def from_coo(cls, pre: Any, post: Any, delays: Any, weights: Any, n_pre: int, n_post: int,
                 unit: Optional[u.Unit] = None) -> "DelayedCSR":
        """Synapse ``s`` joins ``pre[s]`` to ``post[s]`` (any order; sorted here, ties kept)."""
        pre = np.asarray(pre, np.int64)
        if pre.size and (pre.min() < 0 or pre.max() >= n_pre):
            raise ValueError(f"DelayedCSR.from_coo: a source lies outside range({n_pre}).")
        order = np.argsort(pre, kind="stable")
        w = np.asarray(weights, np.float32)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(pre, minlength=n_pre))])
        return cls(indptr, np.asarray(post)[order], np.asarray(delays)[order],
                   w[order] if w.ndim else w, n_post, unit)

    @classmethod
    def from_fixed(cls, targets: Any, delays: Any, weights: Any, n_post: int,
                   unit: Optional[u.Unit] = None) -> "DelayedCSR":
        """Neuron ``i`` projects to ``targets[i]`` (``(n_pre, k)``, e.g. ``EventFixedProb.indices``)."""
        targets = np.asarray(targets)
        n_pre, k = targets.shape
        w = np.asarray(weights, np.float32)
        return cls(np.arange(n_pre + 1, dtype=np.int64) * k, targets.ravel(),
                   np.asarray(delays).reshape(-1), w.reshape(-1) if w.ndim else w, n_post, unit)

    def dense(self, n_slots: Optional[int] = None) -> np.ndarray:
        """``(max_delay + 1, n_pre, n_post)`` float64: entry ``[d, i, j]`` sums the weights of
        synapses ``i -> j`` of delay ``d`` (a reference for small networks)."""
        out = np.zeros((n_slots or self.max_delay + 1, self.n_pre, self.n_post))
        pre = np.repeat(np.arange(self.n_pre), np.diff(self.indptr))
        w = np.broadcast_to(self.weights, (self.nnz,))
        np.add.at(out, (self.delays.astype(np.int64), pre, self.targets), w)
        return out

    # -- files ---------------------------------------------------------------------
    def as_states(self) -> Dict[str, State]:
        """The arrays as plain :class:`~brainx.State` s, for :func:`brainx.io.save`.

        Examples
        --------
        >>> import os, tempfile, brainx
        >>> from brainx.nn import DelayedCSR
        >>> conn = DelayedCSR([0, 2], [1, 0], [3, 1], 0.5, n_post=2)
        >>> path = os.path.join(tempfile.mkdtemp(), "conn.msgpack")
        >>> brainx.io.save(path, conn.as_states())
        >>> like = DelayedCSR.placeholder(n_pre=1, n_post=2, nnz=2, shared_weight=True)
        >>> back = DelayedCSR.from_states(brainx.io.load(path, like.as_states()))
        >>> back.targets.tolist(), back.delays.tolist(), float(back.weights)
        ([1, 0], [3, 1], 0.5)
        """
        arrays = {"indptr": self.indptr, "targets": self.targets, "delays": self.delays,
                  "weights": u.Quantity(self.weights, unit=self.unit),
                  "n_post": np.int64(self.n_post)}
        return {k: State(v, name=k) for k, v in arrays.items()}

    @classmethod
    def placeholder(cls, n_pre: int, n_post: int, nnz: int, shared_weight: bool = False,
                    delay_dtype: Any = np.uint8, unit: Optional[u.Unit] = None) -> "DelayedCSR":
        """Zeros of the given size, whose :meth:`as_states` a saved file is loaded into
        (:func:`brainx.io.load` checks shapes, dtypes and units against them)."""
        conn = cls.__new__(cls)
        conn.indptr = np.zeros(n_pre + 1, np.int64)
        conn.targets = np.zeros(nnz, np.int32)
        conn.delays = np.zeros(nnz, delay_dtype)
        conn.weights = np.zeros(() if shared_weight else nnz, np.float32)
        conn.n_pre, conn.n_post, conn.unit = n_pre, n_post, u.UNITLESS if unit is None else unit
        return conn

    @classmethod
    def from_states(cls, states: Dict[str, State]) -> "DelayedCSR":
        """The inverse of :meth:`as_states` (e.g. after :func:`brainx.io.load`)."""
        w = states["weights"].value
        return cls(*(np.asarray(states[k].value) for k in ("indptr", "targets", "delays")),
                   np.asarray(u.get_mantissa(w)), int(states["n_post"].value), u.get_unit(w))
