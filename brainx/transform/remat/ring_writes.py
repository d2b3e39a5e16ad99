"""How one step's write into a ring buffer is undone: the kinds of write, and what each keeps.

:mod:`~brainx.transform.remat.ring_buffers` finds, in a step's jaxpr, the
carried buffers whose new value is the old one changed in a known way. For
each it builds one of the objects here, which says what the forward pass keeps
per step (``record``) and how the reverse pass, walking the loop backwards,
rebuilds the buffer before a step from the buffer after it (``restore``):

===================  ===============================  ===========================================
write (how found)    kept per step                    the buffer before the step
===================  ===============================  ===========================================
:class:`Overwrite`   the row written (``bool`` when   the buffer after it with the slot's earlier
one row,             it is provably 0/1: spikes),     row put back: the row a step of this run
``.at[i].set(row)``  its index, the step that wrote   wrote last, or the slot at the run's start
                     the slot before (int32)
:class:`Window`      the window overwritten, its      the buffer after it with that window
rows of             index                            written back
``dynamic_update_
slice``, or a one-
row scatter whose
index may lie out
of range
:class:`Accumulate`  the slot consumed, the step's    the buffer after it, minus what the step
declared by          inputs to the write that vary    added (the write run again on a zero
:func:`accumulating` per step (the spikes)            buffer), with the consumed slot put back
===================  ===============================  ===========================================

Every restore is exact but :class:`Accumulate`'s: there ``(b + a) - a`` is
``b`` up to float rounding (a few ulps of the slot's largest partial sum; a
slot is put back exactly each time it is consumed, so the error never outlives
one trip round the buffer). The declaration is the caller's promise that the
added values do not read the write's ``buffer`` argument; its other arguments
may have been computed from the buffer (they are kept, not recomputed). An
undeclared accumulating write (``.at[i].add``) is not restored: the buffer is
then kept whole, as before.

:class:`Overwrite` keeps the row *written*, not the one overwritten, so that a
spike row is kept as ``bool`` (a quarter of ``float32``): the row a step
overwrites is one an earlier step of the same run wrote, or a row of the
buffer at the run's start, which the loop keeps anyway.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jex_core
from jax.extend import source_info_util

from brainx.transform.remat.remat_loops import take

__all__ = ["Overwrite", "Window", "Accumulate", "accumulating", "accumulating_axis",
           "write_kind", "bind"]

_SHAPE_OPS = frozenset({"broadcast_in_dim", "reshape", "squeeze", "transpose", "copy",
                        "expand_dims", "slice", "dynamic_slice", "rev", "copy_p"})
_CUSTOM = {"custom_jvp_call": ("call_jaxpr",), "custom_vjp_call": ("call_jaxpr", "fun_jaxpr"),
           "custom_vjp_call_jaxpr": ("fun_jaxpr", "call_jaxpr")}
_MARK = re.compile(r"^brainx_accumulating_ring_write_axis(\d+)$")


def bind(eqn, invals) -> list:
    """The outputs of ``eqn`` applied to ``invals`` (its source line kept for messages)."""
    params = eqn.primitive.get_bind_params(eqn.params)
    subfuns, params = params if isinstance(params, tuple) else ((), params)  # jax < 0.9: a pair
    with source_info_util.user_context(eqn.source_info.traceback), eqn.ctx.manager:
        outs = eqn.primitive.bind(*subfuns, *invals, **params)
    return outs if eqn.primitive.multiple_results else [outs]


def _inner(eqn):
    for key in _CUSTOM.get(eqn.primitive.name, ()):
        inner = eqn.params.get(key)
        if inner is not None:
            return inner.jaxpr if isinstance(inner, jex_core.ClosedJaxpr) else inner
    return None


def _is_binary(var, producers, depth: int = 0) -> bool:
    """Whether ``var`` provably holds only 0 and 1: a bool converted to a number, maybe
    reshaped or sliced after, maybe the output of a surrogate spike's ``custom_jvp``."""
    eqn = producers.get(var) if isinstance(var, jex_core.Var) else None
    if eqn is None or depth > 16:
        return False
    name = eqn.primitive.name
    if name == "convert_element_type":
        src = eqn.invars[0]
        return src.aval.dtype == jnp.bool_ or _is_binary(src, producers, depth + 1)
    if name in _SHAPE_OPS:
        return _is_binary(eqn.invars[0], producers, depth + 1)
    inner = _inner(eqn)
    if inner is None:
        return False
    out = inner.outvars[eqn.outvars.index(var)]
    if out in inner.invars:     # passed through: ask the outer argument
        return _is_binary(eqn.invars[inner.invars.index(out)], producers, depth + 1)
    return _is_binary(out, {v: e for e in inner.eqns for v in e.outvars}, depth + 1)


def _mode(eqn) -> str:
    return str(eqn.params.get("mode", "")).rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Window:
    """A write of one window (``dynamic_update_slice``, or a one-row scatter): keep the window
    it overwrote and its index."""

    leaf: int            # position among the carry leaves
    eqn: Any             # the writing equation
    window: Tuple[int, ...]

    def _index(self, invals) -> list:
        return [invals[1]] if self.eqn.primitive.name == "scatter" else list(invals[2:])

    def old_window(self, buf, index):
        """The window of ``buf`` the write at ``index`` covers (out of range: clamped)."""
        if self.eqn.primitive.name == "scatter":
            return lax.dynamic_index_in_dim(buf, jnp.reshape(index[0], ())[()], 0,
                                            keepdims=False)
        return lax.dynamic_slice(buf, index, self.window)

    def write_back(self, buf, window, index):
        """``buf`` with ``window`` written as the step wrote its own (same mode, same clamping)."""
        if self.eqn.primitive.name == "scatter":
            return bind(self.eqn, [buf, index[0], window])[0]
        return lax.dynamic_update_slice(buf, window, index)

    def start(self, buf):
        return ()

    def record(self, invals, j, aux, const_env):
        index = self._index(invals)
        return (self.old_window(invals[0], index), index), aux

    def restore(self, buf_after, saved, j, buf_start, const_env):
        window, index = take(saved, j)
        return self.write_back(buf_after, window, index)


@dataclass(frozen=True)
class Overwrite(Window):
    """``buffer.at[i].set(row)`` with the index dropped or clipped when out of range: keep
    the row written (as ``bool`` when it is provably 0/1) and which earlier step wrote the slot."""

    binary: bool = False

    def _slot(self, buf, index):
        """``(slot, written)``: where the write lands (clamped) and whether it lands at all."""
        i = jnp.reshape(index[0], ())
        n = buf.shape[0]
        written = True if _mode(self.eqn) == "CLIP" else (i >= 0) & (i < n)
        return jnp.clip(i, 0, n - 1), written

    def start(self, buf):
        return jnp.full((buf.shape[0],), -1, jnp.int32)   # per slot: the step that wrote it

    def record(self, invals, j, last, const_env):
        buf, index, row = invals[0], self._index(invals), invals[2]
        slot, written = self._slot(buf, index)
        src = jnp.where(written, last[slot], -1)
        last = jnp.where(written, last.at[slot].set(j), last)
        return (row.astype(jnp.bool_) if self.binary else row, index, src), last

    def restore(self, buf_after, saved, j, buf_start, const_env):
        rows, index, src = saved
        index, src = take(index, j), take(src, j)
        earlier = take(rows, jnp.maximum(src, 0)).astype(buf_after.dtype)
        old = jnp.where(src >= 0, earlier, self.old_window(buf_start, index))
        return self.write_back(buf_after, old, index)


@dataclass(frozen=True)
class Accumulate:
    """A declared accumulating write (:func:`accumulating`): ``new = old`` with one slot
    cleared, plus what the write adds, which does not depend on ``old``."""

    leaf: int
    eqn: Any             # the marked call: (buffer, slot, *args) -> (new buffer, *outs)
    axis: int
    varying: Tuple[bool, ...]   # per arg after (buffer, slot): computed per step (kept)
    binary: Tuple[bool, ...]    # per arg: provably 0/1 (kept as bool)

    def start(self, buf):
        return ()

    def record(self, invals, j, aux, const_env):
        buf, slot, args = invals[0], invals[1], invals[2:]
        consumed = lax.dynamic_index_in_dim(buf, slot, self.axis, keepdims=False)
        kept = [a.astype(jnp.bool_) if b else a
                for a, v, b in zip(args, self.varying, self.binary) if v]
        return (consumed, slot, kept), aux

    def restore(self, buf_after, saved, j, buf_start, const_env):
        consumed, slot, kept = take(saved, j)
        it = iter(kept)
        args = [next(it).astype(var.aval.dtype) if vary else const_env(var)
                for var, vary in zip(self.eqn.invars[2:], self.varying)]
        added = bind(self.eqn, [jnp.zeros_like(buf_after), slot] + args)[0]
        before = buf_after - added
        return lax.dynamic_update_index_in_dim(before, consumed.astype(before.dtype), slot,
                                               self.axis)


def accumulating_axis(eqn) -> Optional[int]:
    """The slot axis of a call marked by :func:`accumulating` (``None``: not marked)."""
    if eqn.primitive.name not in ("jit", "pjit"):
        return None
    found = _MARK.match(str(eqn.params.get("name", "")))
    return None if found is None else int(found.group(1))


def accumulating(write: Callable, buffer, slot, *args, axis: int = 0):
    """``write(buffer, slot, *args)``, declared an accumulating ring-buffer write.

    The declaration: the first output is ``buffer`` with slot ``slot`` (along
    ``axis``) set to zero, plus values that depend on ``args`` only (not on
    ``buffer``): ``write(zeros, slot, *args)[0]``. A checkpointed loop then keeps,
    per step, the consumed slot and the ``args`` computed in the step, not the
    whole buffer (see the module's table). The write itself is unchanged (a
    native kernel updating the buffer in place stays one).

    Arguments:
        write: ``(buffer, slot, *args) -> new_buffer`` or a tuple starting with it.
        buffer: the ring buffer, slots along ``axis``.
        slot: the int32 scalar index of the slot this step consumes and clears.
        args: the rest of the write's inputs (spikes, weights, layout).
        axis: the slot axis of ``buffer`` (``>= 0``).

    Returns:
        What ``write`` returns.

    Example:

    >>> import jax.numpy as jnp
    >>> def deliver(buf, slot, spikes):            # spikes arrive 2 slots later
    ...     buf = buf.at[slot].set(0.0)
    ...     return buf.at[(slot + 2) % buf.shape[0]].add(spikes)
    >>> accumulating(deliver, jnp.ones((4, 3)), jnp.int32(1), jnp.ones(3)).tolist()[3]
    [2.0, 2.0, 2.0]
    """
    axis = int(axis)
    if axis < 0:
        raise ValueError(f"accumulating: axis must be >= 0 (count from the front), got {axis}.")

    def marked(buffer, slot, *args):
        return write(buffer, slot, *args)

    marked.__name__ = f"brainx_accumulating_ring_write_axis{axis}"
    return jax.jit(marked, inline=False)(buffer, jnp.asarray(slot, jnp.int32), *args)


def _depends(jaxpr, start) -> set:
    """The vars of ``jaxpr`` that depend on any var in ``start``."""
    dep = set(start)
    for e in jaxpr.eqns:
        if any(isinstance(v, jex_core.Var) and v in dep for v in e.invars):
            dep.update(e.outvars)
    return dep


def write_kind(leaf: int, eqn, invar, jaxpr, varying_inputs, producers):
    """The write kind of carried leaf ``leaf`` (input ``invar``) written by ``eqn``, or ``None``.

    ``varying_inputs``: the jaxpr's inputs that change from step to step (carry and xs).
    """
    axis = accumulating_axis(eqn)
    if axis is not None:
        if eqn.invars[0] is not invar:
            return None
        args = eqn.invars[2:]      # those computed in the step are kept, whatever they read
        vary = _depends(jaxpr, varying_inputs)
        return Accumulate(leaf, eqn, axis,
                          tuple(isinstance(a, jex_core.Var) and a in vary for a in args),
                          tuple(_is_binary(a, producers) for a in args))
    if eqn.invars[0] is not invar:
        return None
    window = _one_window(eqn, invar.aval)
    if window is None:
        return None
    if eqn.primitive.name == "scatter" and _mode(eqn) in ("CLIP", "FILL_OR_DROP"):
        return Overwrite(leaf, eqn, window, _is_binary(eqn.invars[2], producers))
    return Window(leaf, eqn, window)


def _one_window(eqn, operand_aval) -> Optional[Tuple[int, ...]]:
    """The window's shape if ``eqn`` writes one window of a buffer worth restoring."""
    shape = tuple(operand_aval.shape)
    if not shape or shape[0] < 2:
        return None
    name = eqn.primitive.name
    if name == "dynamic_update_slice":
        window = tuple(eqn.invars[1].aval.shape)
        return window if math.prod(window) * 2 <= math.prod(shape) else None
    if name != "scatter" or eqn.params.get("update_jaxpr") is not None:
        return None
    dn = eqn.params["dimension_numbers"]
    idx_shape = tuple(eqn.invars[1].aval.shape)
    upd_shape = tuple(eqn.invars[2].aval.shape)
    if (idx_shape == (1,) and tuple(dn.inserted_window_dims) == (0,)
            and tuple(dn.scatter_dims_to_operand_dims) == (0,)
            and tuple(dn.update_window_dims) == tuple(range(len(shape) - 1))
            and not tuple(dn.operand_batching_dims) and upd_shape == shape[1:]):
        return upd_shape
    return None
