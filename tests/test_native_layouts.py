"""The native kernel's layouts are owned and checked; its products have the dense product's
dtypes and IEEE results (issue 42). References: NumPy's dense ``x @ D`` and plain JAX.
"""

import subprocess
import sys
import textwrap

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brainx import nn
from brainx.nn.connectivity.event_conn import fixed_num_indices
from brainx.nn.connectivity.native import build
from brainx.nn.connectivity.native.product import dense_event_product, sparse_product
from brainx.nn.connectivity.native.rows import SynapseRows
from event_support import dense_of

pytestmark = pytest.mark.skipif(not nn.event_backend.has_native(),
                                reason=f"native kernels unavailable: {build.unavailable_reason()}")


def dense(pre, post, w, shape):
    D = np.zeros(shape, np.result_type(w, np.float64))
    np.add.at(D, (np.ravel(pre), np.ravel(post)), np.ravel(w))
    return D


@pytest.mark.parametrize("as_jax", [False, True])
def test_changing_the_callers_arrays_after_the_build_changes_nothing(as_jax):
    targets = np.array([[0, 2], [1, 1], [3, 0]], np.int32)
    pre, post = np.array([2, 0, 2, 1]), np.array([1, 3, 0, 0])
    src = jnp.asarray(targets) if as_jax else targets      # jnp.asarray may share the memory
    made = {"fixed": SynapseRows.fixed(src, 4),
            "coordinates": SynapseRows.coordinates(pre, post, 3, 4),
            "compressed": SynapseRows.compressed(targets[:2], np.array([0, 2]), "pre", 3, 4)}
    want = {"fixed": dense(np.repeat(np.arange(3), 2), targets.copy(), np.arange(1., 7.), (3, 4)),
            "coordinates": dense(pre, post, np.arange(1., 5.), (3, 4)),
            "compressed": dense([0, 0, 2, 2], targets[:2].copy(), np.arange(1., 5.), (3, 4))}
    targets[...] = 10 ** 6 % 127 + 100        # out of range now: the kernel must not see it
    pre[...], post[...] = -1, 99
    x = jnp.array([1.0, 0.5, 2.0])
    for name, rows in made.items():
        got = sparse_product(x, jnp.arange(1.0, rows.nnz + 1), rows, event=False)
        np.testing.assert_allclose(got, np.asarray(x) @ want[name], rtol=1e-6, err_msg=name)
        assert not np.asarray(rows.post).flags.writeable


def test_bad_layouts_are_refused_naming_the_array():
    with pytest.raises(ValueError, match=r"post \(the targets\)\[1\] = 4294967297"):
        SynapseRows.fixed(np.array([[0, 2 ** 32 + 1]], np.int64), 3)   # would wrap to 1 in int32
    with pytest.raises(TypeError, match="must be integers, got dtype float"):
        SynapseRows.fixed(np.array([[0.0, 1.5]]), 3)
    with pytest.raises(ValueError, match="targets must be \\(n_pre, k\\)"):
        SynapseRows.fixed(np.array([0, 1]), 3)
    with pytest.raises(ValueError, match=r"pre \(the sources\)\[0\] = 5 lies outside range\(2\)"):
        SynapseRows.coordinates(np.array([5]), np.array([0]), 2, 3)
    with pytest.raises(ValueError, match="indptr must not decrease"):
        SynapseRows(3, 3, [0, 2, 1, 3], [0, 1, 2], [], None)
    with pytest.raises(ValueError, match="indptr must be 3 offsets from 0 to the 2 synapses"):
        SynapseRows(2, 3, [1, 1, 2], [0, 1], [], None)
    with pytest.raises(ValueError, match="syn \\(the weight slots\\)\\[1\\] = 2"):
        SynapseRows(2, 3, [0, 1, 2], [0, 1], [0, 2], None)
    with pytest.raises(ValueError, match="width=2 needs 2 synapses in every row"):
        SynapseRows(2, 3, [0, 1, 2], [0, 1], [], 2)
    with pytest.raises(ValueError, match="n_post must be >= 0"):
        SynapseRows(0, -1, [0], [], [], None)
    with pytest.raises(ValueError, match="owner must be 'pre' or 'post'"):
        SynapseRows.compressed(np.zeros((1, 1), int), np.array([0]), "both", 1, 1)


def test_the_kernel_refuses_an_out_of_bounds_layout_given_directly():
    # bypassing SynapseRows (its checks), in a subprocess: were the kernel to write out of
    # bounds, this test would fail, not the test run
    run = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import jax.numpy as jnp
        from brainx.nn.connectivity.native import product
        class Raw:
            n_pre, n_post = 2, 3
        cases = {"post": ([0, 1, 2], [0, 7], []), "indptr": ([0, 5, 2], [0, 1], []),
                 "syn": ([0, 1, 2], [0, 1], [0, 9]), "negative": ([0, 1, 2], [-3, 1], [])}
        for name, (indptr, post, syn) in cases.items():
            raw = Raw()
            raw.indptr, raw.post, raw.syn = (jnp.asarray(a, jnp.int32) for a in (indptr, post, syn))
            try:
                product._call(jnp.array([True, True]), jnp.ones(2), raw).block_until_ready()
                print(name, "accepted")
            except Exception as e:
                print(name, "out of bounds" in str(e), str(e).split("bounds: ")[1].split(" (")[0])
    """)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines() == ["post True post[1] = 7", "indptr True indptr[1] = 5",
                                       "syn True syn[1] = 9", "negative True post[0] = -3"]


def test_sparse_linear_keeps_integer_and_complex_data_as_the_dense_product_does():
    ints = np.array([[1, 0, 2], [0, 3, 0]], np.int32)
    layer = nn.SparseLinear(u.sparse.CSR.fromdense(jnp.asarray(ints)))
    assert layer.rows is not None                           # the native path
    x = jnp.array([0.5, 0.25])
    np.testing.assert_allclose(layer(x), np.asarray(x) @ ints)        # [0.5, 0.75, 1.0]
    np.testing.assert_array_equal(layer(jnp.array([2, 1])), np.array([2, 1]) @ ints)
    assert layer(jnp.array([2, 1])).dtype == jnp.result_type(jnp.int32, ints.dtype)
    cplx = np.array([[1 + 1j, 0, 2], [0, 3j, 0]], np.complex64)
    c_layer = nn.SparseLinear(u.sparse.COO.fromdense(jnp.asarray(cplx)))
    np.testing.assert_allclose(c_layer(x), np.asarray(x) @ cplx, rtol=1e-6)
    g = jax.grad(lambda d: jnp.abs(sparse_product(x, d, c_layer.rows, False)).sum())(
        c_layer.weight.value["weight"])
    rows, cols = (np.asarray(c) for c in c_layer._coords)
    g_ref = jax.grad(lambda d: jnp.abs(x @ jnp.zeros((2, 3), d.dtype).at[rows, cols].add(d))
                     .sum())(c_layer.weight.value["weight"])
    np.testing.assert_allclose(g, g_ref, rtol=1e-5)


@pytest.mark.parametrize("target,ratio", [("post", 1.0), ("post", 0.7), ("pre", 1.0)])
def test_inf_and_nan_weights_behind_zero_inputs_give_nan_as_the_dense_product(target, ratio):
    layer = nn.FixedNumConn(6, 5, 2, nn.init.Normal(), efferent_target=target,
                            afferent_ratio=ratio, seed=1)
    w = np.asarray(layer.weight.value).copy()
    w.flat[0], w.flat[3] = np.inf, np.nan
    layer.weight.value = jnp.asarray(w)
    x = jnp.asarray(np.array([[0.0, 1.0, 0.0, 2.0, 0.0, 0.0], [1.0] * 6, [0.0] * 6], np.float32))
    D = dense_of(layer)
    with np.errstate(invalid="ignore"):
        # the stored synapses only (a structural zero is not a stored 0.0): that is D where
        # the rows' nonfinite entries are
        want = np.stack([(np.asarray(xr)[:, None] * D).sum(0, where=(D != 0) | ~np.isfinite(D))
                         for xr in x])
    got = np.asarray(layer(x))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.isnan(got[2]).any()                 # all-zero input, yet nan where inf/nan is
    shared = nn.FixedNumConn(4, 3, 1, 1.0, seed=0)
    shared.weight.value = jnp.asarray(np.inf)
    with np.errstate(invalid="ignore"):
        want = np.zeros(4) @ dense_of(shared)
    np.testing.assert_array_equal(np.isnan(np.asarray(shared(jnp.zeros(4)))), np.isnan(want))


def test_event_layers_add_only_the_rows_that_fired():
    layer = nn.EventFixedProb(3, 3, 1, 1.0, seed=0)
    layer.weight.value = jnp.array([[jnp.inf], [1.0], [jnp.nan]])
    spikes = jnp.array([False, True, False])
    D = dense_of(layer)
    np.testing.assert_array_equal(layer(spikes), np.where(np.asarray(spikes)[:, None], D, 0).sum(0))


def test_integer_and_complex_weights_of_the_dense_event_product():
    W = np.arange(12).reshape(4, 3) - 5
    x = jnp.array([True, False, True, True])
    got = dense_event_product(x, jnp.asarray(W, jnp.int32))
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(got, W[np.asarray(x)].sum(0))
    Wc = (W + 1j * W[::-1]).astype(np.complex64)
    np.testing.assert_allclose(dense_event_product(x, jnp.asarray(Wc)), Wc[np.asarray(x)].sum(0))
    with pytest.raises(TypeError, match="spikes are complex"):
        dense_event_product(jnp.ones(4, jnp.complex64), jnp.asarray(W, jnp.float32))
    with pytest.raises(TypeError, match="W is bool"):
        dense_event_product(x, jnp.ones((4, 3), bool))


@pytest.mark.parametrize("cls", [nn.FixedNumConn, nn.EventFixedProb])
def test_a_layer_without_synapses_gives_the_dtype_of_one_with_synapses(cls):
    for x in (jnp.ones(5, bool), jnp.ones(5, jnp.int32), jnp.ones(5, jnp.float32)):
        empty, full = cls(5, 4, 0, 1.0), cls(5, 4, 2, 1.0, seed=0)
        y_empty, y_full = empty(x), full(x)
        assert y_empty.dtype == y_full.dtype, (x.dtype, y_empty.dtype, y_full.dtype)
        np.testing.assert_array_equal(y_empty, np.zeros(4))


def test_no_neuron_to_connect_to_is_a_clear_error():
    with pytest.raises(ValueError, match="out_size is 0: no neuron to connect to"):
        nn.FixedNumConn(3, 0, 2, 1.0)
    with pytest.raises(ValueError, match="in_size is 0"):
        nn.EventFixedProb(0, 3, 2, 1.0, efferent_target="pre")
    with pytest.raises(ValueError, match="n_cols=0"):
        fixed_num_indices(3, 0, 2)
    assert nn.FixedNumConn(3, 0, 0.5, 1.0)(jnp.ones(3)).shape == (0,)   # int(0.5 * 0) = 0
    assert fixed_num_indices(0, 4, 2).shape == (0, 2)
