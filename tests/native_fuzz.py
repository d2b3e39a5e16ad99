"""Random cases for the native event kernels, each checked against NumPy; run as a script.

``python tests/native_fuzz.py --cases N [--seed S] [--x64]`` draws ``N`` cases: layouts
built by every public constructor of ``SynapseRows`` (``fixed``, ``compressed``,
``coordinates``, the constructor itself) from random shapes and index dtypes, with bad
indices now and then (which must be refused with ``ValueError``/``TypeError``) and the
caller's arrays overwritten after the build (which must change nothing); products by
``sparse_product`` (events and ``x @ W``, bool/int/float/complex inputs and weights, shared
or per-synapse, inf and nan among them, leading axes, ``jax.vmap``) and
``dense_event_product``; and the kernel called directly with random offsets, targets and
slots, bypassing ``SynapseRows`` (it must refuse what is out of bounds, or give the product of
what it read). The reference is NumPy, synapse by synapse in float64/complex128: ``y[j]`` is
the sum over the stored synapses ``p`` into ``j`` of ``x[pre[p]] * w[p]`` (events: of
``w[p]`` where ``pre[p]`` fired), which is ``x @ D`` of the dense matrix where all is finite.

A crash (a signal) ends the process: ``tests/test_native_fuzz.py`` runs this in a subprocess,
so one fails a test, not the test run. Prints ``<cases> cases, <refused> refused, 0 failures``
and exits 0, or prints the failing case's seed and exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

INDEX_TYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32)
REFUSED = (ValueError, TypeError)


class Refused(Exception):
    """The case was refused as it should be."""


def _weights_dtype(rng, event: bool):
    choices = ["float32", "float32", "float16", "bfloat16", "int32", "complex64"]
    if jax.config.jax_enable_x64:
        choices += ["float64", "float64"]
    return jnp.dtype(choices[rng.randint(len(choices))])


def _input_dtype(rng, event: bool):
    choices = ["bool", "bool", "int32", "float32", "float32", "float16"]
    if not event:
        choices += ["complex64", "bfloat16"]
    if jax.config.jax_enable_x64:
        choices += ["float64"]
    return jnp.dtype(choices[rng.randint(len(choices))])


def _values(rng, shape, dtype, special: bool):
    """Small numbers of ``dtype`` (a few zeros; inf and nan when ``special``, floats only)."""
    if dtype == jnp.bool_:
        return rng.rand(*shape) < 0.5
    if jnp.issubdtype(dtype, jnp.integer):
        return rng.randint(-3, 4, size=shape)
    v = np.round(rng.randn(*shape) * 2, 1) * (rng.rand(*shape) < 0.7)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        v = v + 1j * np.round(rng.randn(*shape), 1)
    elif special and v.size:
        flat = v.reshape(-1)
        for _ in range(rng.randint(1, 3)):
            flat[rng.randint(flat.size)] = rng.choice([np.inf, -np.inf, np.nan])
    return v


def _as(values, dtype):
    """``values`` rounded to ``dtype`` and back to float64/complex128 (the reference's input)."""
    arr = jnp.asarray(values, dtype)
    ref = np.asarray(arr.astype(jnp.complex64) if jnp.issubdtype(dtype, jnp.complexfloating)
                     else arr.astype(jnp.float32) if dtype == jnp.bfloat16 else arr)
    return arr, ref.astype(np.complex128 if np.iscomplexobj(ref) else np.float64)


def _reference(x, w, pre, post, slot, n_post, event):
    """Synapse by synapse: ``y[..., post[p]] += x[..., pre[p]] * w[slot[p]]`` (events: the
    weight where ``pre[p]`` fired); one weight (``w.size == 1``) is every synapse's."""
    y = np.zeros(x.shape[:-1] + (n_post,), np.result_type(x, w, np.float64))
    w_syn = np.broadcast_to(w.reshape(-1), pre.shape) if w.size == 1 else w.reshape(-1)[slot]
    with np.errstate(invalid="ignore", over="ignore"):
        for p in range(pre.size):
            if event:
                y[..., post[p]] += np.where(x[..., pre[p]] > 0, w_syn[p], 0)
            else:
                y[..., post[p]] += x[..., pre[p]] * w_syn[p]
    return y


def _compare(got, want, dtype, what: str):
    got = np.asarray(got.astype(jnp.float32) if got.dtype == jnp.bfloat16 else got)
    got = got.astype(np.complex128 if np.iscomplexobj(got) else np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    tol = {2: 2e-2, 4: 1e-5, 8: 1e-12}.get(jnp.dtype(dtype).itemsize, 1e-5)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        tol = 1e-5
    if jnp.issubdtype(dtype, jnp.integer):
        tol = 0.0
    scale = np.nanmax(np.abs(np.where(np.isfinite(want), want, 0)), initial=1.0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, equal_nan=True,
                               err_msg=what)


def _targets(rng, n_rows, k, bound, bad: bool):
    """Random indices in ``range(bound)`` of a random integer dtype (one out of range if bad);
    and whether they must be refused."""
    dtype = INDEX_TYPES[rng.randint(len(INDEX_TYPES))]
    values = rng.randint(0, max(bound, 1), size=(n_rows, k)).astype(np.int64)
    if bad and values.size:
        values.flat[rng.randint(values.size)] = rng.choice([-1, bound, bound + 7, 2 ** 32 + 1])
    refused = bool(values.size) and (bad or bound == 0)
    info = np.iinfo(dtype)
    if values.size and (values.min() < info.min or values.max() > info.max):
        dtype = np.int64
    if rng.rand() < 0.05:
        return values.astype(np.float32), bool(values.size)      # float indices: refused
    return values.astype(dtype), refused


def _source(rng, host):
    """The caller's array: NumPy, or a jax array that may share NumPy's memory (CPU)."""
    fits = host.dtype.kind in "iu" and (not host.size or (host.min() >= -2 ** 31
                                                          and host.max() < 2 ** 31))
    return jnp.asarray(host) if fits and rng.rand() < 0.3 else host


def _layout(rng):
    """A random ``SynapseRows``; its synapses ``(pre, post, slot)`` (slot: the weight's place),
    read from the arrays given; and those arrays, which the caller keeps and may change."""
    from brainx.nn.connectivity.native.rows import SynapseRows
    n_pre, n_post, k = rng.randint(0, 9), rng.randint(0, 8), rng.randint(0, 5)
    bad = rng.rand() < 0.15
    kind = rng.choice(["fixed", "compressed", "coordinates", "constructor"])
    if kind == "fixed":
        targets, refused = _targets(rng, n_pre, k, n_post, bad)
        src = _source(rng, targets)
        rows = _built(refused, lambda: SynapseRows.fixed(src, n_post))
        pre, post = np.repeat(np.arange(n_pre), k), targets.astype(np.int64).ravel()
        return rows, pre, post, np.arange(pre.size), [targets]
    if kind == "compressed":
        owner = rng.choice(["pre", "post"])
        n_own, n_other = (n_pre, n_post) if owner == "pre" else (n_post, n_pre)
        owners = np.sort(rng.permutation(n_own)[:rng.randint(0, n_own + 1)])
        indices, refused = _targets(rng, owners.size, k, n_other, bad)
        rows = _built(refused,
                      lambda: SynapseRows.compressed(indices, owners, owner, n_pre, n_post))
        own, other = np.repeat(owners, k), indices.astype(np.int64).ravel()
        pre, post = (own, other) if owner == "pre" else (other, own)
        return rows, pre, post, np.arange(pre.size), [indices, owners]
    if kind == "coordinates":
        nnz = rng.randint(0, 12)
        pre, bad_pre = _targets(rng, 1, nnz, n_pre, bad and rng.rand() < 0.5)
        post, bad_post = _targets(rng, 1, nnz, n_post, bad and rng.rand() < 0.5)
        pre, post = pre.ravel(), post.ravel()
        rows = _built(bad_pre or bad_post,
                      lambda: SynapseRows.coordinates(_source(rng, pre), _source(rng, post),
                                                      n_pre, n_post))
        return (rows, pre.astype(np.int64), post.astype(np.int64), np.arange(pre.size),
                [pre, post])
    # the constructor, from the kernel's own layout (synapses by row, a weight slot each)
    nnz = rng.randint(0, 12) if n_pre and n_post else 0
    counts = np.bincount(rng.randint(0, max(n_pre, 1), size=nnz), minlength=n_pre)[:n_pre]
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    post = rng.randint(0, max(n_post, 1), size=nnz)
    syn = rng.permutation(nnz) if rng.rand() < 0.6 else np.zeros(0, np.int64)
    width = None
    if rng.rand() < 0.3:                                   # something broken
        which = rng.randint(4)
        if which == 0:
            indptr[rng.randint(indptr.size)] += rng.choice([-2, -1, 1, 5])
        elif which == 1 and nnz:
            post[rng.randint(nnz)] = rng.choice([-1, n_post, 2 ** 31])
        elif which == 2 and syn.size:
            syn[rng.randint(nnz)] = rng.choice([-1, nnz, 2 ** 40])
        else:
            width = rng.randint(0, 4)
    elif not syn.size and n_pre and rng.rand() < 0.3:      # equal rows: a width
        width = rng.randint(0, 3)
        indptr = np.arange(n_pre + 1) * width
        post = rng.randint(0, max(n_post, 1), size=n_pre * width)
    nnz = post.size
    valid = (indptr[0] == 0 and indptr[-1] == nnz and np.all(np.diff(indptr) >= 0)
             and np.all((post >= 0) & (post < n_post))
             and (not syn.size or np.all((syn >= 0) & (syn < nnz)))
             and (width is None or (not syn.size and np.all(np.diff(indptr) == width))))
    kept = [indptr, post, syn]
    rows = _built(not valid, lambda: SynapseRows(n_pre, n_post, *(_source(rng, a) for a in kept),
                                                 width))
    pre = np.repeat(np.arange(n_pre), np.diff(indptr))
    return rows, pre, post.copy(), (syn.copy() if syn.size else np.arange(nnz)), kept


def _built(refused: bool, make):
    """``make()``, which must raise ValueError or TypeError exactly when ``refused``."""
    try:
        rows = make()
    except REFUSED:
        if refused:
            raise Refused from None
        raise
    assert not refused, "a bad layout was accepted"
    return rows


def _mutate(rng, arrays):
    for a in arrays:
        if isinstance(a, np.ndarray) and a.size and a.flags.writeable:
            a[...] = np.array(rng.choice([-1, 127, 10 ** 6 % 120])).astype(a.dtype)


def product_case(rng) -> str:
    from brainx.nn.connectivity.native.product import sparse_product
    rows, pre, post, slot, kept = _layout(rng)
    _mutate(rng, kept)                                    # the layout must not see this
    event = bool(rng.rand() < 0.5)
    wdt, xdt = _weights_dtype(rng, event), _input_dtype(rng, event)
    shared = rng.rand() < 0.25
    lead = tuple(rng.randint(1, 3, size=rng.randint(0, 3)))
    w, w_ref = _as(_values(rng, (1,) if shared else (rows.nnz,), wdt, rng.rand() < 0.3), wdt)
    x, x_ref = _as(_values(rng, lead + (rows.n_pre,), xdt, not event and rng.rand() < 0.2), xdt)
    if event and x.dtype == jnp.bool_:
        x_ref = np.asarray(x, np.float64)
    want = _reference(x_ref, w_ref, pre, post, slot, rows.n_post, event)
    expect = w.dtype if event else jnp.result_type(x, w)
    # one compiled program a case (compiling dominates: eager calls compile each op)
    if rng.rand() < 0.2 and lead:                          # jax.vmap over x's first axis
        got = jax.jit(jax.vmap(lambda xb, w: sparse_product(xb, w, rows, event),
                               in_axes=(0, None)))(x, w)
    elif rng.rand() < 0.1:
        got = sparse_product(x, w, rows, event)            # eager
    else:
        got = jax.jit(lambda x, w: sparse_product(x, w, rows, event))(x, w)
    assert got.dtype == expect, f"dtype {got.dtype}, want {expect}"
    _compare(got, want, expect, f"sparse_product(event={event}, x {x.dtype}, w {w.dtype})")
    return "product"


def dense_case(rng) -> str:
    from brainx.nn.connectivity.native.product import dense_event_product
    n_pre, n_post = rng.randint(1, 9), rng.randint(0, 7)
    wdt, xdt = _weights_dtype(rng, True), _input_dtype(rng, True)
    lead = tuple(rng.randint(1, 3, size=rng.randint(0, 3)))
    W, W_ref = _as(_values(rng, (n_pre, n_post), wdt, rng.rand() < 0.3), wdt)
    x, x_ref = _as(_values(rng, lead + (n_pre,), xdt, False), xdt)
    fired = np.asarray(x > 0) if x.dtype != jnp.bool_ else np.asarray(x)
    want = np.where(fired[..., :, None], W_ref, 0).sum(-2)
    got = jax.jit(dense_event_product)(x, W) if rng.rand() < 0.9 else dense_event_product(x, W)
    assert got.dtype == W.dtype, f"dtype {got.dtype}, want {W.dtype}"
    _compare(got, want, W.dtype, f"dense_event_product(x {x.dtype}, W {W.dtype})")
    return "dense"


class _RawRows:
    """Kernel operands as a hostile caller could pass them, without ``SynapseRows``'s checks."""

    def __init__(self, n_pre, n_post, indptr, post, syn):
        self.n_pre, self.n_post = n_pre, n_post
        self.indptr, self.post, self.syn = (jnp.asarray(a, jnp.int32) for a in (indptr, post, syn))


def kernel_case(rng) -> str:
    """The FFI call on random offsets, targets and slots: refused, or the product it read."""
    from brainx.nn.connectivity.native import product
    n_pre, n_post, nnz = rng.randint(0, 7), rng.randint(0, 6), rng.randint(0, 10)
    indptr = np.sort(rng.randint(0, nnz + 1, size=n_pre + 1))
    indptr[0] = 0
    if n_pre:
        indptr[-1] = nnz
    post = rng.randint(0, max(n_post, 1), size=nnz)
    syn = rng.permutation(nnz) if rng.rand() < 0.5 else np.zeros(0, int)
    for _ in range(rng.randint(0, 3)):                   # garbage
        which = rng.randint(3)
        big = int(rng.choice([-1, -(2 ** 31), 2 ** 31 - 1, 7, 1000]))
        if which == 0:
            indptr[rng.randint(indptr.size)] = big
        elif which == 1 and nnz:
            post[rng.randint(nnz)] = big
        elif syn.size:
            syn[rng.randint(nnz)] = big
    event = bool(rng.rand() < 0.5)
    x = rng.rand(n_pre) < 0.5
    xk = jnp.asarray(x) if event else jnp.asarray(x * rng.randn(n_pre), jnp.float32)
    w = jnp.asarray(rng.randn(nnz), jnp.float32)
    rows = _RawRows(n_pre, n_post, indptr, post, syn)
    offsets_ok = indptr[0] == 0 and np.all(np.diff(indptr) >= 0) and indptr[-1] <= nnz \
        if indptr.size == n_pre + 1 else False
    call = jax.jit(lambda x, w: product._call(x, w, rows))
    if not offsets_ok:
        try:
            np.asarray(call(xk, w))
        except Exception as e:                              # noqa: BLE001 (the call's error)
            assert "out of bounds" in str(e) or "indptr" in str(e), str(e)
            return "kernel-refused"
        if n_post == 0:                 # an empty output: XLA need not call the kernel
            return "kernel-empty"
        raise AssertionError(f"offsets {indptr.tolist()} for {nnz} synapses were accepted")
    active = [i for i in range(n_pre) if (x[i] if event else float(xk[i]) != 0.0)]
    slots = syn if syn.size and nnz > 1 else np.zeros(nnz, int) if nnz == 1 else np.arange(nnz)
    bad = any(not 0 <= post[p] < n_post or not 0 <= slots[p] < nnz
              for i in active for p in range(indptr[i], indptr[i + 1]))
    try:
        got = np.asarray(call(xk, w))
    except Exception as e:                                  # noqa: BLE001
        assert bad and "out of bounds" in str(e), f"refused a good layout: {e}"
        return "kernel-refused"
    if n_post == 0:
        assert got.shape == (0,), got.shape
        return "kernel-empty"
    assert not bad, "an out-of-bounds synapse of an active row was used"
    want = np.zeros(n_post)
    wn, xn = np.asarray(w, np.float64), np.asarray(xk, np.float64)
    for i in active:
        for p in range(indptr[i], indptr[i + 1]):
            want[post[p]] += wn[slots[p]] * (1.0 if event else xn[i])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return "kernel"


def run(cases: int, seed: int, first: int = 0, progress: int = 0) -> int:
    from brainx.nn.connectivity.native import build
    if build.load() is None:
        print(f"native kernels unavailable: {build.unavailable_reason()}")
        return 0
    counts: dict = {}
    for c in range(first, first + cases):
        rng = np.random.RandomState([seed, c])
        kind = ("product", "product", "product", "dense", "kernel")[c % 5]
        try:
            done = {"product": product_case, "dense": dense_case, "kernel": kernel_case}[kind](rng)
        except Refused:
            done = "refused"
        except Exception:                                   # noqa: BLE001 (reported below)
            traceback.print_exc()
            print(f"FAILED: case {c} ({kind}) of seed {seed}: rerun with "
                  f"--seed {seed} --first {c} --cases 1")
            return 1
        counts[done] = counts.get(done, 0) + 1
        if progress and (c - first + 1) % progress == 0:
            print(f"{c - first + 1} cases so far (up to case {c}), 0 failures", flush=True)
    print(f"{cases} cases, 0 failures: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first", type=int, default=0, help="the first case's number")
    parser.add_argument("--x64", action="store_true", help="with jax_enable_x64 (float64 too)")
    parser.add_argument("--progress", type=int, default=0, help="a line every N cases")
    args = parser.parse_args(argv)
    if args.x64:
        jax.config.update("jax_enable_x64", True)
    return run(args.cases, args.seed, args.first, args.progress)


if __name__ == "__main__":
    sys.exit(main())
