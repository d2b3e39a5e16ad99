"""brainx.nn deep-learning layers, part 3: normalisation (with BatchNorm's running statistics)
and recurrent cells, against hand-written JAX."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import BatchState, HiddenState, environ, nn
from brainx.transform import grad

RNG = np.random.RandomState(1)


def rand(*shape):
    return jnp.asarray(RNG.normal(size=shape).astype(np.float32))


def bn_ref(x, axes, scale, bias, eps=1e-5):
    mean, var = x.mean(axes), x.var(axes)
    return (x - mean) / jnp.sqrt(var + eps) * scale + bias, mean, var


# -- BatchNorm -----------------------------------------------------------------------------------
def test_batchnorm_training_uses_batch_stats_and_updates_running_stats():
    bn = nn.BatchNorm2d((4, 4, 3), momentum=0.9)
    bn.weight.value = {"scale": rand(1, 1, 3), "bias": rand(1, 1, 3)}
    x = rand(5, 4, 4, 3) * 2 + 1
    with environ.context(fit=True):
        y = bn(x)
    want, mean, var = bn_ref(x, (0, 1, 2), bn.weight.value["scale"], bn.weight.value["bias"])
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    assert isinstance(bn.running_mean, BatchState) and bn.running_mean.value.shape == (1, 1, 3)
    np.testing.assert_allclose(bn.running_mean.value.ravel(), 0.1 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.value.ravel(), 0.9 + 0.1 * var, rtol=1e-5)


def test_batchnorm_evaluation_uses_running_stats_and_changes_nothing():
    bn = nn.BatchNorm1d((6, 2))
    bn.running_mean.value = jnp.array([[1.0, -1.0]])
    bn.running_var.value = jnp.array([[4.0, 0.25]])
    x = rand(3, 6, 2)
    with environ.context(fit=False):
        y = bn(x)
        y1 = bn(x[0])                                   # unbatched
    want = (x - jnp.array([1.0, -1.0])) / jnp.sqrt(jnp.array([4.0, 0.25]) + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y1, want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(bn.running_mean.value, [[1.0, -1.0]])
    with pytest.raises(KeyError, match="fit"):
        bn(x)
    with pytest.raises(ValueError, match=r"\(6, 2\) or \(batch"):
        with environ.context(fit=False):
            bn(jnp.ones((3, 5, 2)))


def test_batchnorm_gradients_match_hand_written_batchnorm():
    bn = nn.BatchNorm0d(4)
    x = rand(8, 4)
    w = rand(8, 4)

    def ref(p):
        return jnp.sum(bn_ref(x, 0, p["scale"], p["bias"])[0] * w)

    with environ.context(fit=True):
        g = grad(lambda: jnp.sum(bn(x) * w), grad_states=bn.weight)()
    g_ref = jax.grad(ref)(bn.weight.value)
    for k in ("scale", "bias"):
        np.testing.assert_allclose(g[k], g_ref[k], rtol=1e-4, atol=1e-5)


def test_batchnorm_under_vmap_with_axis_name_equals_the_batched_call():
    x = rand(6, 5, 3)
    batched, lanes = nn.BatchNorm1d((5, 3)), nn.BatchNorm1d((5, 3), axis_name="batch")
    with environ.context(fit=True):
        want = batched(x)
        got = brainx.transform.vmap(lanes, axis_name="batch")(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lanes.running_mean.value, batched.running_mean.value, rtol=1e-5)
    np.testing.assert_allclose(lanes.running_var.value, batched.running_var.value, rtol=1e-5)


def test_batchnorm_without_running_stats_always_uses_batch_stats():
    bn = nn.BatchNorm0d(3, track_running_stats=False, affine=False)
    x = rand(10, 3)
    with environ.context(fit=False):
        np.testing.assert_allclose(bn(x), bn_ref(x, 0, 1.0, 0.0)[0], rtol=1e-4, atol=1e-5)
    assert bn.states() == {}


# -- LayerNorm / RMSNorm / GroupNorm ------------------------------------------------------------
def test_layernorm_and_rmsnorm_match_references_with_gradients():
    x = rand(3, 5, 4)
    ln = nn.LayerNorm((5, 4), scale_init=nn.init.Normal(1.0, 0.1), bias_init=nn.init.Normal())
    p = ln.weight.value

    def ln_ref(p):
        return jax.nn.standardize(x, axis=-1, epsilon=1e-6) * p["scale"] + p["bias"]

    np.testing.assert_allclose(ln(x), ln_ref(p), rtol=1e-4, atol=1e-5)
    g = grad(lambda: jnp.sum(ln(x) ** 3), grad_states=ln.weight)()
    g_ref = jax.grad(lambda q: jnp.sum(ln_ref(q) ** 3))(p)
    np.testing.assert_allclose(g["scale"], g_ref["scale"], rtol=1e-3, atol=1e-4)
    ln2 = nn.LayerNorm((5, 4), reduction_axes=(-2, -1), feature_axes=(-2, -1))
    np.testing.assert_allclose(ln2(x), jax.nn.standardize(x, axis=(1, 2), epsilon=1e-6),
                               rtol=1e-4, atol=1e-4)
    rms = nn.RMSNorm(4)
    rms.scale.value = {"scale": jnp.array([1.0, 2.0, 3.0, 4.0])}
    want = x / jnp.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * jnp.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(rms(x), want, rtol=1e-5, atol=1e-5)
    assert list(rms.states()) == ["scale"]


def test_groupnorm_normalises_each_sample_per_group():
    x = rand(2, 3, 6)
    gn = nn.GroupNorm((3, 6), num_groups=3, bias_init=nn.init.Normal())
    p = gn.weight.value
    g = x.reshape(2, 3, 3, 2)
    want = ((g - g.mean((1, 3), keepdims=True)) / jnp.sqrt(g.var((1, 3), keepdims=True) + 1e-6))
    want = want.reshape(2, 3, 6) * p["scale"] + p["bias"]
    np.testing.assert_allclose(gn(x), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gn(x[1]), want[1], rtol=1e-4, atol=1e-4)      # unbatched
    assert nn.GroupNorm((3, 6), num_groups=None, group_size=3).num_groups == 2
    with pytest.raises(ValueError, match="equal groups"):
        nn.GroupNorm((3, 6), num_groups=4)
    with pytest.raises(ValueError, match="exactly one"):
        nn.GroupNorm((3, 6), num_groups=2, group_size=3)


# -- recurrent cells -------------------------------------------------------------------------------
def lstm_step(p, h, c, x):
    z = jnp.concatenate([x, h], -1) @ p["weight"] + p["bias"]
    i, g, f, o = jnp.split(z, 4, -1)
    c = jax.nn.sigmoid(f + 1.0) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    return jax.nn.sigmoid(o) * jnp.tanh(c), c


def gru_step(prz, ph, h, x):
    xh = jnp.concatenate([x, h], -1)
    r, z = jnp.split(jax.nn.sigmoid(xh @ prz["weight"] + prz["bias"]), 2, -1)
    cand = jnp.tanh(jnp.concatenate([x, r * h], -1) @ ph["weight"] + ph["bias"])
    return (1 - z) * h + z * cand


XS = rand(5, 2, 3)   # time, batch, features


def test_lstm_cell_matches_a_jnp_lstm_step_over_a_sequence_with_gradients():
    brainx.random.seed(0)
    cell = nn.init_all_states(nn.LSTMCell(3, 4, b_init=nn.init.Normal()), batch_size=2)
    assert isinstance(cell.h, HiddenState) and cell.h.value.shape == (2, 4)
    p = cell.W.weight.value

    def ref(p):
        h = c = jnp.zeros((2, 4))
        outs = []
        for x in XS:
            h, c = lstm_step(p, h, c, x)
            outs.append(h)
        return jnp.stack(outs)

    def run():
        nn.reset_all_states(cell, batch_size=2)
        return brainx.transform.for_loop(cell, XS)

    np.testing.assert_allclose(run(), ref(p), rtol=1e-5, atol=1e-5)
    g = grad(lambda: jnp.sum(run() ** 2), grad_states=cell.W.weight)()
    g_ref = jax.grad(lambda q: jnp.sum(ref(q) ** 2))(p)
    for k in ("weight", "bias"):
        np.testing.assert_allclose(g[k], g_ref[k], rtol=1e-4, atol=1e-5)


def test_gru_and_vanilla_cells_match_jnp_steps():
    cell = nn.init_all_states(nn.GRUCell(3, 4, b_init=nn.init.Normal()), batch_size=2)
    h = jnp.zeros((2, 4))
    for x in XS:
        h = gru_step(cell.Wrz.weight.value, cell.Wh.weight.value, h, x)
        np.testing.assert_allclose(cell(x), h, rtol=1e-5, atol=1e-5)
    w = nn.init.Orthogonal()((7, 8), key=jax.random.key(0))
    np.testing.assert_allclose(w @ w.T, np.eye(7), atol=1e-5)   # orthonormal rows
    rnn = nn.init_all_states(nn.ValinaRNNCell(3, 4, activation="tanh"))
    p = rnn.W.weight.value
    h = jnp.zeros(4)
    for x in XS[:, 0]:                                  # unbatched
        h = jnp.tanh(jnp.concatenate([x, h]) @ p["weight"] + p["bias"])
        np.testing.assert_allclose(rnn(x), h, rtol=1e-5, atol=1e-6)


def test_rnn_cell_lifecycle_and_errors():
    cell = nn.LSTMCell(2, 3, state_init=nn.init.Constant(0.5))
    with pytest.raises(RuntimeError, match="init_state"):
        cell(jnp.ones(2))
    nn.init_all_states(cell)
    assert cell.h.value.shape == (3,) and float(cell.c.value[0]) == 0.5
    cell(jnp.ones(2))
    h = cell.h
    nn.reset_all_states(cell, batch_size=4)
    assert cell.h is h and h.value.shape == (4, 3) and np.all(np.asarray(h.value) == 0.5)
    with pytest.raises(ValueError, match="Unknown activation"):
        nn.GRUCell(2, 3, activation="nope")


def test_normalisation_statistics_of_a_complex_input_use_its_squared_modulus():
    """The variance of a complex input is E|x - E x|^2 (real), in both variance formulas."""
    from brainx.nn.layers.normalization import _stats
    rng = np.random.RandomState(3)
    x = (rng.randn(6, 4) + 1j * rng.randn(6, 4)).astype(np.complex64)
    for fast in (True, False):
        mean, var = _stats(jnp.asarray(x), (0,), use_fast_variance=fast)
        np.testing.assert_allclose(mean[0], x.mean(axis=0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(var[0], np.var(x, axis=0), rtol=1e-5, atol=1e-6)
        assert not jnp.iscomplexobj(var)
    _, second_moment = _stats(jnp.asarray(x), (0,), use_mean=False)
    np.testing.assert_allclose(second_moment[0], (np.abs(x) ** 2).mean(axis=0), rtol=1e-5)


def test_groupnorm_of_channels_only_reads_batch_spatial_channels_as_brainstate():
    """``GroupNorm((C,))`` on ``(N, H, W, C)``: per sample and group, over H, W and the
    group's channels (brainstate's reading), against NumPy."""
    rng = np.random.RandomState(4)
    x = rng.randn(3, 5, 6, 8).astype(np.float32)
    gn = nn.GroupNorm((8,), feature_axis=0, num_groups=4, use_bias=False, use_scale=False)
    grouped = x.reshape(3, 5, 6, 4, 2)
    mean = grouped.mean(axis=(1, 2, 4), keepdims=True)
    var = grouped.var(axis=(1, 2, 4), keepdims=True)
    want = ((grouped - mean) / np.sqrt(var + 1e-6)).reshape(x.shape)
    np.testing.assert_allclose(gn(jnp.asarray(x)), want, rtol=1e-4, atol=1e-4)
    # explicit reduction axes of the grouped array: here H only, and the group's channels
    per_row = nn.GroupNorm((8,), num_groups=4, reduction_axes=(1, -1), use_bias=False,
                           use_scale=False)
    mean = grouped.mean(axis=(1, 4), keepdims=True)
    var = grouped.var(axis=(1, 4), keepdims=True)
    np.testing.assert_allclose(per_row(jnp.asarray(x)),
                               ((grouped - mean) / np.sqrt(var + 1e-6)).reshape(x.shape),
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="channels last"):
        gn(jnp.zeros((3, 5, 7)))
