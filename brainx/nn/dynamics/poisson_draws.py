"""Poisson counts, one per neuron and step, cheap on CPU: Philox numbers and a table of the CDF.

A Poisson background draws a count for every neuron in every step: for the cortical
microcircuit, 77 169 numbers a step. On CPU, XLA's own generators cost about 60 ns a number
(jax's threefry, 4.7-5 ms a step there: two thirds of the whole step). This module draws
them with Philox4x32-10 (Salmon et al., SC 2011; the generator of cuRAND and of NumPy's
``Philox``), a counter-based generator: number ``j`` of a key is word ``j mod 4`` of Philox
at the counter ``(j div 4, 0, 0, 0)``, its top 24 bits times ``2**-24``. Each count is then
read off a table of the distribution function: ``#{k < cap : U >= F(k)}``.

=========================  ==========================================================
path                       what runs
=========================  ==========================================================
native (CPU, the default)  one XLA FFI call, ``brainx_poisson_counts``
                           (``poisson_kernels.cc``): about 5 ns a count
plain JAX (other           the same Philox and the same table in ``jax.numpy``: the
platforms, no compiler)    same counts bit for bit (slow on CPU, fast on GPU)
=========================  ==========================================================

The table has one row per distinct rate (a population's neurons share one), ``F(k)`` in
float64 rounded to float32, and ``cap`` columns: the smallest count whose upper tail is
below ``2**-30``, far below what a 24-bit uniform number resolves.

Examples
--------
>>> import numpy as np, jax.numpy as jnp
>>> from brainx.nn.dynamics.poisson_draws import poisson_table, poisson_counts
>>> table, group = poisson_table(np.array([1.6, 1.6, 0.2]))
>>> table.shape, group.tolist()           # two distinct means (rows in sorted order), capped at 15
((2, 15), [1, 1, 0])
>>> n = poisson_counts(jnp.array([7, 11], jnp.uint32), table, group, (3,))
>>> n.shape, str(n.dtype)
((3,), 'int32')
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from brainx.nn.connectivity.native import build

__all__ = ["poisson_table", "poisson_counts", "philox_uniform", "POISSON_TARGET"]

#: The FFI target of the native counts (the handler ``BrainxPoissonCounts``).
POISSON_TARGET = "brainx_poisson_counts"
_TAIL = 2.0 ** -30
_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


def poisson_table(lam: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(table, group)`` for Poisson means ``lam`` (one per neuron, ``>= 0``).

    ``table`` is ``float32 (groups, cap)``: row ``g`` is ``F(0), ..., F(cap - 1)`` of the
    ``g``-th distinct mean; ``group`` is ``int32`` (each neuron's row).
    """
    lam = np.asarray(lam, np.float64).ravel()
    means, group = np.unique(lam, return_inverse=True)
    top = float(means.max(initial=0.0))
    cap = max(int(scipy.stats.poisson.isf(_TAIL, top)) + 1 if top > 0 else 0, 1)
    table = scipy.stats.poisson.cdf(np.arange(cap)[None, :], means[:, None])
    table[means == 0] = 1.0                      # a zero mean: every U < 1 counts 0
    return table.astype(np.float32), group.astype(np.int32)


def poisson_counts(key: jax.Array, table: np.ndarray, group: np.ndarray, shape: Sequence[int],
                   native: Optional[bool] = None, start: Any = 0) -> jax.Array:
    """Counts of ``shape`` (its last axis the ``n`` neurons of ``group``), from a ``uint32
    (2,)`` key; ``native``: force (``True``) or refuse (``False``) the native kernel.

    ``start`` (an int, or a traced int32) is the index of the first number: a device's block
    of a partitioned network (neurons ``start .. start + n``) draws the very numbers those
    neurons draw on one device."""
    shape = tuple(int(s) for s in shape)
    n = int(np.size(group))
    if not shape or shape[-1] != n:
        raise ValueError(f"poisson_counts: the last axis of {shape} must be the {n} neurons.")
    m = int(np.prod(shape))
    use_native = (jax.default_backend() == "cpu" and build.load() is not None
                  if native is None else native)
    if use_native:
        if build.load() is None:
            raise RuntimeError("the native Poisson kernel is not available here: "
                               f"{build.unavailable_reason()}. Pass native=False.")
        call = jax.ffi.ffi_call(POISSON_TARGET, jax.ShapeDtypeStruct((m,), jnp.int32),
                                vmap_method="expand_dims")
        flat = call(key, jnp.asarray(table), jnp.asarray(group),
                    jnp.reshape(jnp.asarray(start, jnp.int32), (1,)))
    else:
        u = philox_uniform(key, m, start)
        per_neuron = jnp.asarray(table)[jnp.tile(jnp.asarray(group), m // n)]       # (m, cap)
        flat = jnp.sum(u[:, None] >= per_neuron, axis=1, dtype=jnp.int32)
    return flat.reshape(flat.shape[:-1] + shape)


def philox_uniform(key: jax.Array, m: int, start: Any = 0) -> jax.Array:
    """Numbers ``start .. start + m - 1`` of ``key`` (``uint32 (2,)``), float32 in ``[0, 1)``:
    number ``i`` is word ``i mod 4`` of Philox4x32-10 at the counter ``i div 4``, its top 24
    bits times ``2**-24``."""
    start = jnp.asarray(start, jnp.uint32)
    first = start // 4
    blocks = first + jnp.arange(-(-m // 4) + 1, dtype=jnp.uint32)     # one more: start mod 4
    zero = jnp.zeros_like(blocks)
    key = jnp.asarray(key, jnp.uint32)
    words = _philox4x32(blocks, zero, zero, zero, key[..., 0, None], key[..., 1, None])
    bits = jnp.stack(words, axis=-1).reshape(words[0].shape[:-1] + (-1,))
    bits = jax.lax.dynamic_slice_in_dim(bits, (start % 4).astype(jnp.int32), m, axis=-1)
    return (bits >> 8).astype(jnp.float32) * np.float32(2.0 ** -24)


def _mulhilo(a: jax.Array, b: int) -> Tuple[jax.Array, jax.Array]:
    """The high and low 32 bits of ``a * b`` in uint32 arithmetic (no uint64 without x64)."""
    u32 = jnp.uint32
    al, ah = a & u32(0xFFFF), a >> 16
    bl, bh = u32(b & 0xFFFF), u32(b >> 16)
    ll, lh, hl = al * bl, al * bh, ah * bl
    carry = ((ll >> 16) + (lh & u32(0xFFFF)) + (hl & u32(0xFFFF))) >> 16
    return ah * bh + (lh >> 16) + (hl >> 16) + carry, a * u32(b)


def _philox4x32(c0, c1, c2, c3, k0, k1):
    for _ in range(10):
        hi0, lo0 = _mulhilo(c0, _M0)
        hi1, lo1 = _mulhilo(c2, _M1)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = k0 + jnp.uint32(_W0), k1 + jnp.uint32(_W1)
    return c0, c1, c2, c3
