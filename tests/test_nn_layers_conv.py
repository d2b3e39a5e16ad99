"""brainx.nn deep-learning layers, part 2: convolutions and pooling against jax.lax."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn
from brainx.transform import grad

RNG = np.random.RandomState(0)


def rand(*shape):
    return jnp.asarray(RNG.normal(size=shape).astype(np.float32))


SPECS = {1: ("NWC", "WIO", "NWC"), 2: ("NHWC", "HWIO", "NHWC"), 3: ("NDHWC", "DHWIO", "NDHWC")}
CONVS = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
TCONVS = {1: nn.ConvTranspose1d, 2: nn.ConvTranspose2d, 3: nn.ConvTranspose3d}


def conv_ref(x, w, b, stride, padding, dilation=1, groups=1, n=2):
    y = jax.lax.conv_general_dilated(x, w, (stride,) * n, padding, rhs_dilation=(dilation,) * n,
                                     dimension_numbers=SPECS[n], feature_group_count=groups)
    return y + b


@pytest.mark.parametrize("n,stride,padding,dilation,groups", [
    (1, 2, "VALID", 2, 2), (2, 2, "SAME", 1, 1), (2, 1, 1, 1, 2), (3, 1, "SAME", 1, 1)])
def test_conv_matches_lax_values_gradients_and_shapes(n, stride, padding, dilation, groups):
    size = (6 if n < 3 else 3,) * n + (4,)
    conv = CONVS[n](size, 6, 3, stride=stride, padding=padding, rhs_dilation=dilation,
                    groups=groups, b_init=nn.init.Normal())
    p = conv.weight.value
    assert p["weight"].shape == (3,) * n + (4 // groups, 6)
    pads = padding if isinstance(padding, str) else [(padding, padding)] * n
    x = rand(2, *size)
    want = conv_ref(x, p["weight"], p["bias"], stride, pads, dilation, groups, n)
    np.testing.assert_allclose(conv(x), want, rtol=1e-5, atol=1e-5)
    assert conv.out_size == want.shape[1:]
    np.testing.assert_allclose(conv(x[1]), want[1], rtol=1e-5, atol=1e-5)   # unbatched
    g = grad(lambda: jnp.sum(jnp.sin(conv(x))), grad_states=conv.weight)()
    g_ref = jax.grad(lambda q: jnp.sum(jnp.sin(
        conv_ref(x, q["weight"], q["bias"], stride, pads, dilation, groups, n))))(p)
    for k in ("weight", "bias"):
        np.testing.assert_allclose(g[k], g_ref[k], rtol=1e-4, atol=1e-4)


def test_conv_channel_first_and_mask():
    mask = jnp.zeros((3, 3, 2, 5)).at[1, 1].set(1.0)   # only the centre tap
    conv = nn.Conv2d((2, 5, 5), 5, 3, channel_first=True, w_mask=mask)
    x = rand(1, 2, 5, 5)
    w = conv.weight.value["weight"] * mask
    want = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                        dimension_numbers=("NCHW", "HWIO", "NCHW"))
    np.testing.assert_allclose(conv(x), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(conv(x)[0, :, 2, 2], x[0, :, 2, 2] @ w[1, 1], rtol=1e-5)
    with pytest.raises(ValueError, match="in_size must have 3 entries"):
        nn.Conv2d((5, 5), 2, 3)
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv1d((5, 3), 4, 3, groups=2)
    with pytest.raises(ValueError, match=r"expected an input of shape \(2, 5, 5\)"):
        conv(jnp.ones((1, 5, 5, 2)))


@pytest.mark.parametrize("n,stride,padding", [(1, 2, "SAME"), (1, 3, "VALID"), (2, 2, "VALID"),
                                              (2, 1, "SAME"), (3, 2, "SAME")])
def test_conv_transpose_matches_lax_conv_transpose(n, stride, padding):
    size = (4,) * n + (3,)
    layer = TCONVS[n](size, 2, 3, stride=stride, padding=padding, b_init=nn.init.Normal())
    p = layer.weight.value
    assert p["weight"].shape == (3,) * n + (2, 3)
    x = rand(2, *size)
    spec = (SPECS[n][0], SPECS[n][1][:-2] + "OI", SPECS[n][0])

    def ref(q):
        w = jnp.flip(q["weight"], axis=tuple(range(n)))
        return jax.lax.conv_transpose(x, w, (stride,) * n, padding, dimension_numbers=spec) + q["bias"]

    want = ref(p)
    np.testing.assert_allclose(layer(x), want, rtol=1e-5, atol=1e-5)
    assert layer.out_size == want.shape[1:]
    expected_len = 4 * stride if padding == "SAME" else 4 * stride + max(3 - stride, 0)
    assert want.shape[1] == expected_len
    g = grad(lambda: jnp.sum(layer(x) ** 2), grad_states=layer.weight)()
    g_ref = jax.grad(lambda q: jnp.sum(ref(q) ** 2))(p)
    np.testing.assert_allclose(g["weight"], g_ref["weight"], rtol=1e-4, atol=1e-4)


def test_conv_transpose_is_the_adjoint_of_conv():
    # <conv(z), x> == <z, conv_transpose(x)> with the same kernel array (VALID, stride 2)
    kernel = rand(3, 2, 4)                      # (k, C_small, C_big)
    up = nn.ConvTranspose1d((5, 4), 2, 3, stride=2, padding="VALID", w_init=kernel)
    x = rand(1, 5, 4)
    z = rand(1, 11, 2)                          # (5 - 1) * 2 + 3 = 11
    y = jax.lax.conv_general_dilated(z, kernel, (2,), "VALID", dimension_numbers=SPECS[1])
    assert y.shape == x.shape
    np.testing.assert_allclose(jnp.vdot(y, x), jnp.vdot(z, up(x)), rtol=1e-4)


def test_conv_transpose_groups_are_independent_transposes():
    layer = nn.ConvTranspose1d((4, 4), 6, 3, stride=2, groups=2)
    w = layer.weight.value["weight"]           # (3, 6, 2)
    x = rand(1, 4, 4)
    spec = ("NWC", "WOI", "NWC")
    parts = [jax.lax.conv_transpose(x[..., 2 * g:2 * g + 2], jnp.flip(w[:, 3 * g:3 * g + 3], 0),
                                    (2,), "SAME", dimension_numbers=spec) for g in range(2)]
    np.testing.assert_allclose(layer(x), jnp.concatenate(parts, -1), rtol=1e-5, atol=1e-5)


# -- pooling -------------------------------------------------------------------------------------
def window_ref(x, op, init, window, strides, padding):
    return jax.lax.reduce_window(x, init, op, window, strides, padding)


def test_max_and_avg_pool_match_reduce_window():
    x = rand(2, 7, 6, 3)
    got = nn.MaxPool2d(3, stride=2)(x)
    np.testing.assert_allclose(got, window_ref(x, jax.lax.max, -jnp.inf, (1, 3, 3, 1),
                                               (1, 2, 2, 1), "VALID"))
    got = nn.AvgPool2d((2, 3), stride=(2, 1))(x)
    want = window_ref(x, jax.lax.add, 0.0, (1, 2, 3, 1), (1, 2, 1, 1), "VALID") / 6
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(nn.MaxPool1d(2)(x[0, 0]), jnp.maximum(x[0, 0, 0::2], x[0, 0, 1::2]))
    np.testing.assert_allclose(nn.AvgPool3d(2, 2, channel_axis=None)(x)[..., 0],
                               x[:, :6, :6, :2].reshape(2, 3, 2, 3, 2, 1, 2).mean((2, 4, 6))[..., 0],
                               rtol=1e-6)


def test_avg_pool_with_padding_averages_real_entries_only():
    x = jnp.arange(1.0, 6.0).reshape(5, 1)
    y = nn.AvgPool1d(3, stride=1, padding="SAME")(x)[:, 0]
    np.testing.assert_allclose(y, [1.5, 2.0, 3.0, 4.0, 4.5])
    y = nn.MaxPool1d(3, stride=2, padding=1)(-x)[:, 0]
    np.testing.assert_allclose(y, [-1.0, -2.0, -4.0])


def test_pool_gradients_match_plain_jax():
    x = brainx.ParamState(rand(2, 6, 6, 2))
    pool = nn.MaxPool2d(2)
    g = grad(lambda: jnp.sum(pool(x.value) ** 2), grad_states=x)()
    ref = jax.grad(lambda v: jnp.sum(window_ref(v, jax.lax.max, -jnp.inf, (1, 2, 2, 1),
                                                (1, 2, 2, 1), "VALID") ** 2))(x.value)
    np.testing.assert_allclose(g, ref, rtol=1e-6)


def test_pool_in_size_gives_out_size():
    assert nn.MaxPool2d(2, in_size=(8, 6, 3)).out_size == (4, 3, 3)
    assert nn.AvgPool1d(3, in_size=(10, 2)).out_size == (8, 2)
    assert nn.AdaptiveAvgPool2d((2, 3), in_size=(7, 9, 4)).out_size == (2, 3, 4)
    with pytest.raises(ValueError, match="at least 3 dimensions"):
        nn.MaxPool2d(2)(jnp.ones((4, 4)))


def test_adaptive_pools_tile_the_axis_larger_windows_first():
    x = jnp.arange(7.0)
    y = nn.AdaptiveAvgPool1d(3, channel_axis=None)(x)     # windows [0:3] [3:5] [5:7]
    np.testing.assert_allclose(y, [1.0, 3.5, 5.5])
    y = nn.AdaptiveMaxPool1d(3, channel_axis=None)(x)
    np.testing.assert_allclose(y, [2.0, 4.0, 6.0])
    img = rand(2, 6, 4, 3)
    y = nn.AdaptiveAvgPool2d((3, 2))(img)
    np.testing.assert_allclose(y, img.reshape(2, 3, 2, 2, 2, 3).mean((2, 4)), rtol=1e-5)
    y = nn.AdaptiveMaxPool2d((None, 1))(img)
    np.testing.assert_allclose(y, img.max(2, keepdims=True))
    with pytest.raises(ValueError, match="cannot grow"):
        nn.AdaptiveAvgPool1d(9, channel_axis=None)(x)
