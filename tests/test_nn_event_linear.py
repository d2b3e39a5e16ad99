"""EventLinear (dense weights, spike input) and SparseLinear (a given sparse structure)
against plain JAX on the equivalent dense matrix, on the pure-JAX backend and on numba."""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brainevent")

import brainx  # noqa: E402
from brainx import nn  # noqa: E402

needs_numba = pytest.mark.skipif(not nn.event_backend.has_numba(), reason="numba is not installed")


@pytest.fixture(scope="module", autouse=True)
def backend():
    """The pure-JAX kernels for the file; the numba test at the end repeats the main cases."""
    with nn.use_event_backend("jax_raw"):
        yield "jax_raw"


RNG = np.random.RandomState(0)
W = RNG.randn(16, 5).astype(np.float32)
S = RNG.rand(3, 16) < 0.3


def loss_through(y):
    return jnp.sum(jnp.cos(y) * jnp.arange(1.0, y.shape[-1] + 1))


def test_event_linear_sums_the_rows_of_active_inputs():
    layer = nn.EventLinear(16, 5, W * u.mA, backend="jax_raw")
    y = layer(jnp.asarray(S[0]))
    assert y.unit == u.mA
    np.testing.assert_allclose(y.to_decimal(u.mA), S[0] @ W, rtol=1e-5, atol=1e-6)
    batched = layer(jnp.asarray(S).reshape(3, 1, 16))       # any leading axes
    assert batched.shape == (3, 1, 5)
    np.testing.assert_allclose(batched.to_decimal(u.mA)[:, 0], S @ W, rtol=1e-5, atol=1e-6)
    # float spikes count as events; float_as_event=False multiplies densely
    x = jnp.asarray(S[1] * 2.5, jnp.float32)
    np.testing.assert_allclose(nn.EventLinear(16, 5, W, backend="jax_raw")(x), S[1] @ W, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(nn.EventLinear(16, 5, W, float_as_event=False)(x),
                               np.asarray(x) @ W, rtol=1e-5, atol=1e-5)


def test_event_linear_gradients_match_the_dense_layer():
    layer = nn.EventLinear(16, 5, W, backend="jax_raw")
    x = jnp.asarray(S[2], jnp.float32)
    gw, gx = brainx.transform.grad(lambda x: loss_through(layer(x)), grad_states=layer.weight,
                                   argnums=0)(x)
    gw_ref, gx_ref = jax.grad(lambda w, x: loss_through(x @ w), argnums=(0, 1))(jnp.asarray(W), x)
    np.testing.assert_allclose(gw, gw_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gx, gx_ref, rtol=1e-5, atol=1e-6)
    vm = brainx.transform.jit(brainx.transform.vmap(layer))(jnp.asarray(S))
    np.testing.assert_allclose(vm, S @ W, rtol=1e-5, atol=1e-6)


def test_event_linear_with_one_shared_weight():
    layer = nn.EventLinear(16, 5, 0.5)
    np.testing.assert_allclose(layer(jnp.asarray(S[0] * 3.0 - 1.0, jnp.float32)),
                               np.full(5, 0.5 * S[0].sum()))          # entries > 0 are events
    # at a spike-valued input the gradient is that of x @ (0.5 * ones)
    x = jnp.asarray(S[0], jnp.float32)
    gx = jax.grad(lambda x: loss_through(layer(x)))(x)
    gx_ref = jax.grad(lambda x: loss_through(x @ jnp.full((16, 5), 0.5)))(x)
    np.testing.assert_allclose(gx, gx_ref, rtol=1e-5)


def test_event_linear_rejects_a_wrong_input_size():
    with pytest.raises(ValueError, match="last axis must have 16"):
        nn.EventLinear(16, 5, W)(jnp.ones(15, bool))


def csr_pair(rng, shape=(16, 5), density=0.3):
    dense = (rng.rand(*shape) < density) * rng.randn(*shape)
    return dense.astype(np.float32)


@pytest.mark.parametrize("kind", ["brainunit", "brainevent"])
def test_sparse_linear_matches_its_dense_matrix(kind):
    import brainevent
    D = csr_pair(np.random.RandomState(1))
    mat = (u.sparse.CSR if kind == "brainunit" else brainevent.CSR).fromdense(jnp.asarray(D))
    b = np.arange(5, dtype=np.float32)
    layer = nn.SparseLinear(mat, b_init=b)
    assert set(layer.weight.value) == {"weight", "bias"}
    x = np.random.RandomState(2).randn(4, 16).astype(np.float32)
    np.testing.assert_allclose(layer(jnp.asarray(x)), x @ D + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(layer(jnp.asarray(S[0])), S[0] @ D + b, rtol=1e-5, atol=1e-5)

    def loss(x):
        return loss_through(layer(x))
    g, gx = brainx.transform.grad(loss, grad_states=layer.weight, argnums=0)(jnp.asarray(x[0]))
    gD, gb, gx_ref = jax.grad(lambda D, b, x: loss_through(x @ D + b), argnums=(0, 1, 2))(
        jnp.asarray(D), jnp.asarray(b), jnp.asarray(x[0]))
    rows, cols = np.nonzero(D)                 # CSR stores the non-zeros row by row
    np.testing.assert_allclose(g["weight"], np.asarray(gD)[rows, cols], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g["bias"], gb, rtol=1e-5)
    np.testing.assert_allclose(gx, gx_ref, rtol=1e-5, atol=1e-6)


def test_sparse_linear_wants_a_sparse_matrix():
    with pytest.raises(TypeError, match="nn.Linear"):
        nn.SparseLinear(jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="in_size"):
        nn.SparseLinear(u.sparse.CSR.fromdense(jnp.eye(3)), in_size=4)


@needs_numba
def test_numba_backend_matches_the_dense_layers():
    import brainevent
    with nn.use_event_backend("numba"):
        layer = nn.EventLinear(16, 5, W)
        x = jnp.asarray(S, jnp.float32)
        np.testing.assert_allclose(layer(jnp.asarray(S)), S @ W, rtol=1e-5, atol=1e-6)
        gw, gx = brainx.transform.grad(lambda x: loss_through(layer(x)),
                                       grad_states=layer.weight, argnums=0)(x[0])
        gw_ref, gx_ref = jax.grad(lambda w, x: loss_through(x @ w), argnums=(0, 1))(
            jnp.asarray(W), x[0])
        np.testing.assert_allclose(gw, gw_ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gx, gx_ref, rtol=1e-5, atol=1e-6)
        D = csr_pair(np.random.RandomState(1))
        sparse = nn.SparseLinear(brainevent.CSR.fromdense(jnp.asarray(D)))
        np.testing.assert_allclose(sparse(jnp.asarray(S[0])), S[0] @ D, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fmt", ["FixedNumPerPre", "FixedNumPerPost"])
@pytest.mark.parametrize("batch", [2, 3])
def test_sparse_linear_with_a_fixed_number_matrix_and_a_batch_of_its_width(fmt, batch):
    """brainevent 0.2.1 gets bool spikes @ a fixed-number matrix wrong when the batch has as
    many rows as the matrix has columns (3 here); SparseLinear must not."""
    import brainevent
    rng = np.random.RandomState(0)
    n_pre, n_post, k = 5, 3, 2
    if fmt == "FixedNumPerPre":
        idx = rng.randint(0, n_post, (n_pre, k)).astype(np.int32)
        pairs = (np.repeat(np.arange(n_pre), k), idx.ravel())
    else:
        idx = rng.randint(0, n_pre, (n_post, k)).astype(np.int32)
        pairs = (idx.ravel(), np.repeat(np.arange(n_post), k))
    mat = getattr(brainevent, fmt)(jnp.float32(2.0), jnp.asarray(idx), shape=(n_pre, n_post))
    D = np.zeros((n_pre, n_post))
    np.add.at(D, pairs, 2.0)
    spikes = jnp.asarray(rng.rand(batch, n_pre) < 0.5)
    layer = nn.SparseLinear(mat)
    np.testing.assert_allclose(layer(spikes), np.asarray(spikes, float) @ D, rtol=1e-6)
    np.testing.assert_allclose(layer(spikes.astype(jnp.float32)), np.asarray(spikes, float) @ D,
                               rtol=1e-6)



@pytest.mark.parametrize("dtype", [bool, np.float32])
def test_sparse_linear_with_a_brainevent_matrix_takes_several_batch_axes(dtype):
    import brainevent
    D = np.where(np.random.RandomState(2).rand(6, 4) < 0.5, 1.5, 0.0).astype(np.float32)
    layer = nn.SparseLinear(brainevent.CSR.fromdense(jnp.asarray(D)))
    x = (np.random.RandomState(3).rand(2, 3, 6) < 0.5).astype(dtype)
    y = layer(jnp.asarray(x))
    assert y.shape == (2, 3, 4)
    np.testing.assert_allclose(y, np.asarray(x, float) @ D, rtol=1e-6)
