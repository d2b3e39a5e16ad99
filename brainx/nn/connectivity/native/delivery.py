"""Per-synapse delays: spikes delivered into a postsynaptic ring buffer, NEST's way.

Every postsynaptic neuron has a ring buffer of ``slots = max_delay + 1`` entries
(an array ``(..., slots, n_post)``). In step ``k`` the neuron receives the slot
``k mod slots``; a spike of step ``k`` over a synapse of delay ``d`` steps
(``1 <= d <= max_delay``) adds its weight into slot ``(k + d) mod slots``, so it
arrives in step ``k + d``. :func:`deliver` does one step's writing: it clears slot
``k mod slots`` (read already), adds the active rows, and returns the new buffer
with slot ``(k + 1) mod slots``, the input of the next step (read in the same call:
a read of the buffer beside the in-place kernel would make XLA copy the buffer).

=========================  ==========================================================
path                       what runs
=========================  ==========================================================
native (CPU, the default)  one XLA FFI call, ``brainx_delayed_csr``
                           (``delayed_kernels.cc``): only the rows of the neurons that
                           fired are read; the buffer is aliased to the output, so in
                           a compiled loop it is updated in place
fallback (no compiler,     the same in plain JAX: a gather of the weights of every
other platforms)           synapse and one scatter-add (cost: all synapses)
=========================  ==========================================================

The derivative is that of the linear map the step is in the buffer, the spikes
and the weights (a scatter-add, which JAX transposes into a gather), so BPTT
through per-synapse delays works on either path.

Examples
--------
>>> import numpy as np, jax.numpy as jnp
>>> from brainx.nn.connectivity.native.delivery import DelayedRows, deliver
>>> rows = DelayedRows.from_csr(np.array([0, 2, 3]), np.array([0, 1, 1]),
...                             np.array([1, 3, 2], np.uint8), n_post=2)
>>> buf = jnp.zeros((rows.slots, 2))
>>> buf, arriving = deliver(buf, jnp.array([True, True]), jnp.array([1.0, 2.0, 4.0]), rows,
...                         step=0)
>>> np.asarray(buf).tolist()        # slot 1: synapse 0; slot 2: synapse 2; slot 3: synapse 1
[[0.0, 0.0], [1.0, 0.0], [0.0, 4.0], [0.0, 2.0]]
>>> np.asarray(arriving).tolist()   # what step 1 receives
[1.0, 0.0]
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from brainx.nn.connectivity.native import build
from brainx.nn.connectivity.traced_events import events_of

__all__ = ["DelayedRows", "deliver", "delay_dtype", "DELAYED_TARGET"]

#: The FFI target of the delayed delivery (the handler ``BrainxDelayedCsr``).
DELAYED_TARGET = "brainx_delayed_csr"
_KERNEL_TYPES = (jnp.float32, jnp.float64)


def delay_dtype(max_delay: int) -> np.dtype:
    """The smallest type the kernel reads that holds ``max_delay``: uint8, uint16 or int32."""
    for dt in (np.uint8, np.uint16, np.int32):
        if max_delay <= np.iinfo(dt).max:
            return np.dtype(dt)
    raise ValueError(f"a delay of {max_delay} steps does not fit int32.")


class DelayedRows:
    """Synapses by presynaptic row, each with its delay in steps, on the device.

    The arrays are copies owned by this object (never the caller's NumPy buffers),
    checked once on the host; the kernel checks them again on every write.

    Attributes
    ----------
    n_pre, n_post, nnz : int
        Sizes.
    indptr : jax.Array
        ``int32 (n_pre + 1,)``.
    post : jax.Array
        ``int32 (nnz,)``: each synapse's target.
    delay : jax.Array
        ``(nnz,)``, the smallest of uint8/uint16/int32 that holds the largest: steps.
    max_delay : int
        The largest delay (``slots - 1``); ``slots``: the ring buffer's length.
    """

    def __init__(self, n_pre: int, n_post: int, indptr, post, delay, max_delay: int):
        self.n_pre, self.n_post, self.max_delay = int(n_pre), int(n_post), int(max_delay)
        self.indptr, self.post, self.delay = indptr, post, delay
        self.nnz = int(post.shape[0])
        self._pre = None
        self._counts = None if isinstance(indptr, jax.core.Tracer) else np.diff(np.asarray(indptr))

    def with_arrays(self, indptr, post, delay) -> "DelayedRows":
        """The same layout over other (e.g. traced) arrays of the same contents: a layer passes
        its arrays into the compiled step as states, so they are not compiled in as constants."""
        other = DelayedRows.__new__(DelayedRows)
        other.__dict__.update(self.__dict__)
        other.indptr, other.post, other.delay = indptr, post, delay
        return other

    @property
    def slots(self) -> int:
        return self.max_delay + 1

    @classmethod
    def from_csr(cls, indptr: Any, post: Any, delay: Any, n_post: int,
                 max_delay: Optional[int] = None) -> "DelayedRows":
        """From host arrays: ``indptr (n_pre + 1,)``, ``post`` and ``delay`` ``(nnz,)`` (steps).

        ``max_delay`` (default: the largest delay) sets the buffer's length; every
        delay must be in ``[1, max_delay]`` and every target in ``[0, n_post)``.
        """
        indptr, post, delay = np.asarray(indptr), np.asarray(post), np.asarray(delay)
        if indptr.ndim != 1 or post.ndim != 1 or delay.shape != post.shape:
            raise ValueError("DelayedRows: indptr, post and delay must be 1-d, post and delay of "
                             f"one length; got {indptr.shape}, {post.shape}, {delay.shape}.")
        nnz = post.size
        if nnz > np.iinfo(np.int32).max:
            raise ValueError(f"DelayedRows: {nnz} synapses; the kernel's offsets are int32 "
                             f"(at most {np.iinfo(np.int32).max}): split the projection.")
        if indptr.size < 1 or indptr[0] != 0 or indptr[-1] != nnz or np.any(np.diff(indptr) < 0):
            raise ValueError(f"DelayedRows: indptr must rise from 0 to the synapse count {nnz}.")
        if nnz and (int(post.min()) < 0 or int(post.max()) >= n_post):
            raise ValueError(f"DelayedRows: a target lies outside range({n_post}) "
                             f"(targets span {int(post.min())}..{int(post.max())}).")
        top = int(delay.max()) if nnz else 1
        max_delay = top if max_delay is None else int(max_delay)
        if nnz and (int(delay.min()) < 1 or top > max_delay):
            raise ValueError(f"DelayedRows: delays must be whole steps in [1, {max_delay}]; they "
                             f"span {int(delay.min())}..{top}. A delay of 0 steps cannot be "
                             "delivered by a ring buffer: use at least one step.")
        max_delay = max(max_delay, 1)
        dt = delay_dtype(max_delay)
        # device copies (jax.device_put copies; the caller's buffers stay the caller's)
        return cls(indptr.size - 1, n_post, jax.device_put(indptr.astype(np.int32)),
                   jax.device_put(post.astype(np.int32)), jax.device_put(delay.astype(dt)),
                   max_delay)

    def pre_of_synapse(self) -> jax.Array:
        """``int32 (nnz,)``: each synapse's presynaptic neuron (made on first use, for the
        fallback and the derivative)."""
        if self._pre is None:
            with jax.ensure_compile_time_eval():     # a constant, even when asked in a trace
                self._pre = jnp.asarray(np.repeat(np.arange(self.n_pre, dtype=np.int32),
                                                  self._counts))
        return self._pre


def deliver(buffer: Any, x: Any, weights: Any, rows: DelayedRows, step: Any, *,
            event: bool = True, native: Optional[bool] = None) -> Tuple[jax.Array, jax.Array]:
    """One step of delivery: clear slot ``step mod slots``, add the spikes ``x`` at their delays.

    Parameters
    ----------
    buffer : array
        ``(..., slots, n_post)``, float; its slot ``step mod slots`` was this step's input.
    x : array
        ``(..., n_pre)``: spikes of step ``step`` (bool, or floats whose ``> 0`` entries are
        events) when ``event``; else values that scale their rows' weights.
    weights : array
        One per synapse (``nnz``, in row order) or one shared by all (size 1).
    rows : DelayedRows
        Targets and delays.
    step : int or array
        The step ``k`` (int32 scalar, traced or not).
    event : bool
        Events (``True``) or the float product (``False``).
    native : bool, optional
        Force (``True``) or refuse (``False``) the native kernel; default: native on CPU
        where it can be built, else the plain-JAX path.

    Returns
    -------
    (jax.Array, jax.Array)
        The new buffer (same shape, the weights' dtype) and its slot ``(step + 1) mod slots``
        (``(..., n_post)``): what arrives in the next step.
    """
    w = jnp.asarray(weights)
    if w.dtype not in _KERNEL_TYPES:
        out = deliver(buffer, x, w.astype(jnp.float32), rows, step, event=event, native=native)
        return tuple(o.astype(w.dtype) for o in out)
    if w.size not in (1, rows.nnz):
        raise ValueError(f"deliver: {w.size} weights for {rows.nnz} synapses; give one weight "
                         "per synapse, or one shared by all.")
    w = jnp.reshape(w, (1,) if w.size == 1 else (-1,))
    x = jnp.asarray(x)
    buffer = jnp.asarray(buffer, w.dtype)
    if x.ndim == 0 or x.shape[-1] != rows.n_pre:
        raise ValueError(f"deliver: the spikes' last axis must have {rows.n_pre} entries (the "
                         f"presynaptic size), got shape {tuple(x.shape)}.")
    if buffer.ndim < 2 or buffer.shape[-2:] != (rows.slots, rows.n_post):
        raise ValueError(f"deliver: the buffer must be (..., {rows.slots}, {rows.n_post}) "
                         f"(slots = max_delay + 1, n_post), got {tuple(buffer.shape)}.")
    step = jnp.reshape(jnp.asarray(step, jnp.int32), (1,))
    if event:
        carrier, events = (x, events_of(x)) if jnp.issubdtype(x.dtype, jnp.floating) else (
            (x, x) if x.dtype == jnp.bool_ else (x > 0, x > 0))
    else:
        carrier = events = x.astype(w.dtype)
    use_native = _native_ok() if native is None else native
    return _delivery(rows, use_native)(buffer, carrier, events, w, step, rows.indptr, rows.post,
                                       rows.delay)


def _native_ok() -> bool:
    return jax.default_backend() == "cpu" and build.load() is not None


def _delivery(layout: DelayedRows, use_native: bool):
    """``(buffer, x, events, w, step, indptr, post, delay) -> (buffer', next)``, with the
    derivative of its linear map."""
    def forward(buffer, events, w, step, rows):
        if use_native:
            return _kernel(buffer, events, w, rows, step)
        new = _cleared(buffer, step, rows) + _scatter(events.astype(w.dtype), w, rows, step,
                                                      buffer.shape)
        return new, _slot_after(new, step, rows)

    # the layout's arrays are arguments, not closed over: they may be traced (a layer's states)
    @jax.custom_jvp
    def delivery(buffer, x, events, w, step, indptr, post, delay):
        return forward(buffer, events, w, step, layout.with_arrays(indptr, post, delay))

    def delivery_jvp(primals, tangents):
        buffer, x, events, w, step, indptr, post, delay = primals
        tb, tx, _, tw = tangents[:4]
        rows = layout.with_arrays(indptr, post, delay)
        out = delivery(*primals)
        shape = out[0].shape
        terms = []
        if type(tb) is not SymbolicZero:
            terms.append(_cleared(tb, step, rows))
        if type(tx) is not SymbolicZero:
            terms.append(_scatter(tx.astype(w.dtype), w, rows, step, shape))
        if type(tw) is not SymbolicZero:
            terms.append(_scatter(events.astype(tw.dtype), tw, rows, step, shape))
        if not terms:
            return out, tuple(jnp.zeros_like(o) for o in out)
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        total = jnp.broadcast_to(total, shape).astype(out[0].dtype)
        return out, (total, _slot_after(total, step, rows))

    delivery.defjvp(delivery_jvp, symbolic_zeros=True)
    return delivery


def _kernel(buffer, events, w, rows: DelayedRows, step):
    if build.load() is None:
        raise RuntimeError("the native delay kernel is not available here: "
                           f"{build.unavailable_reason()}. Pass native=False for the plain-JAX "
                           "path.")
    shapes = (jax.ShapeDtypeStruct(buffer.shape, buffer.dtype),
              jax.ShapeDtypeStruct(buffer.shape[:-2] + buffer.shape[-1:], buffer.dtype))
    call = jax.ffi.ffi_call(DELAYED_TARGET, shapes, vmap_method="expand_dims",
                            input_output_aliases={0: 0})
    return call(buffer, events, w, rows.indptr, rows.post, rows.delay, step)


def _slot_after(buffer, step, rows: DelayedRows):
    """Slot ``(step + 1) mod slots`` of ``buffer``: the next step's input."""
    return jax.lax.dynamic_index_in_dim(buffer, (step[0] + 1) % rows.slots, axis=buffer.ndim - 2,
                                        keepdims=False)


def _cleared(buffer, step, rows: DelayedRows):
    """``buffer`` with slot ``step mod slots`` set to zero (a mask: linear, transposable)."""
    keep = jnp.arange(rows.slots, dtype=jnp.int32) != (step[0] % rows.slots)
    return buffer * keep[:, None].astype(buffer.dtype)


def _scatter(x, w, rows: DelayedRows, step, shape):
    """The added part: ``x[pre] * w`` of each synapse into slot ``(step + d) mod slots``."""
    slot = (step[0] % rows.slots + rows.delay.astype(jnp.int32)) % rows.slots
    values = x[..., rows.pre_of_synapse()] * w
    zeros = jnp.zeros(x.shape[:-1] + tuple(shape[-2:]), jnp.result_type(x, w))
    return zeros.at[..., slot, rows.post].add(values)
