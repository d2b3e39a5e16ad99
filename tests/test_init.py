"""brainx.nn.init against independent references: jax.random / jax.nn.initializers draws with the
same key, SciPy's inverse normal CDF for the truncated normals, NumPy's QR for the orthogonal
ones; the seeded streams, units, dtypes, param() and the errors.

brainstate's own draws are compared with these bit for bit by ``tests/compat/compare_init_weights.py``
(needs a brainstate wheel; see docs/brainstate-compat.md).
"""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

import brainx
from brainx import nn
from brainx.nn import init

KEY = jax.random.key(3)
JI = jax.nn.initializers


def truncated_reference(key, shape, lower=-2.0, upper=2.0, loc=0.0, scale=1.0):
    """Inverse-CDF truncated normal in float64 (SciPy) from the uniform draw brainstate makes."""
    f32 = np.float32
    lo = f32(2 * stats.norm.cdf((lower - loc) / scale) - 1)
    hi = f32(2 * stats.norm.cdf((upper - loc) / scale) - 1)
    z = jax.random.uniform(key, shape, jnp.float32, minval=np.nextafter(lo, f32(np.inf)),
                           maxval=np.nextafter(hi, f32(-np.inf)))
    return special.erfinv(np.asarray(z, np.float64)) * np.sqrt(2) * scale + loc


@pytest.mark.parametrize("ours, theirs", [
    (init.KaimingNormal(distribution="normal"), JI.variance_scaling(2.0, "fan_in", "normal")),
    (init.KaimingNormal(0.5, mode="fan_out", distribution="normal"),
     JI.variance_scaling(0.5, "fan_out", "normal")),
    (init.KaimingUniform(), JI.variance_scaling(2.0, "fan_in", "uniform")),
    (init.XavierUniform(), JI.glorot_uniform()),
    (init.LecunUniform(), JI.lecun_uniform()),
    (init.VarianceScaling(1.0, "fan_avg", "uniform", in_axis=0, out_axis=2),
     JI.variance_scaling(1.0, "fan_avg", "uniform", in_axis=0, out_axis=2)),
], ids=lambda x: type(x).__name__ if isinstance(x, init.Initializer) else "")
def test_normal_and_uniform_schemes_are_jaxs(ours, theirs):
    shape = (3, 4, 6)                        # fans with a receptive field: in 4 * 3, out 6 * 3
    np.testing.assert_array_equal(ours(shape, key=KEY), theirs(KEY, shape, jnp.float32))


@pytest.mark.parametrize("ours, variance", [
    (init.KaimingNormal(), 2 / 12), (init.XavierNormal(), 2 / (12 + 18)),
    (init.LecunNormal(), 1 / 12), (init.KaimingNormal(mode="fan_out"), 2 / 18),
    (init.VarianceScaling(0.7, "fan_avg", "truncated_normal"), 0.7 / 15),
], ids=["kaiming", "xavier", "lecun", "kaiming_out", "vs"])
def test_normal_schemes_are_truncated_normals(ours, variance):
    # brainstate's defaults: a standard normal cut at +-2, its std corrected by 0.8796...
    shape = (3, 4, 6)
    std = np.sqrt(variance) / stats.truncnorm(-2, 2).std()
    w = np.asarray(ours(shape, key=KEY))
    np.testing.assert_allclose(w, truncated_reference(KEY, shape) * std, rtol=2e-6, atol=1e-7)
    assert np.abs(w).max() <= 2 * std
    big = np.asarray(ours((300, 400), key=KEY)) / np.sqrt(ours.scale)   # variance 1/fan
    fan = {"fan_in": 300, "fan_out": 400, "fan_avg": 350}[ours.mode]
    assert np.var(big) == pytest.approx(1 / fan, rel=0.03)


def test_linear_and_conv_draw_their_defaults_from_the_seeded_stream():
    brainx.random.seed(7)
    lin = nn.Linear(20, 30)
    conv = nn.Conv2d((8, 8, 3), 6, (3, 3))
    after = brainx.random.rand(2)
    brainx.random.seed(7)
    k_lin, k_conv = brainx.random.split_key(), brainx.random.split_key()
    std_lin = np.sqrt(2 / 20) / 0.87962566103423978                 # KaimingNormal, fan_in 20
    np.testing.assert_allclose(lin.weight.value["weight"],
                               truncated_reference(k_lin, (20, 30)) * std_lin, rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(lin.weight.value["bias"], np.zeros(30))
    fan_in, fan_out = 3 * 9, 6 * 9                                  # XavierNormal, 3x3 kernel
    std_conv = np.sqrt(2 / (fan_in + fan_out)) / 0.87962566103423978
    np.testing.assert_allclose(conv.weight.value["weight"],
                               truncated_reference(k_conv, (3, 3, 3, 6)) * std_conv,
                               rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(brainx.random.rand(2), after)     # two keys, no more


def test_truncated_normal_bounds_and_moments():
    w = init.TruncatedNormal(0.5, 2.0, lower=-1.0, upper=3.0)((4000,), key=KEY)
    np.testing.assert_allclose(w, truncated_reference(KEY, (4000,), -1.0, 3.0, 0.5, 2.0),
                               rtol=2e-5, atol=2e-6)
    w = np.asarray(w)
    assert -1.0 < w.min() and w.max() < 3.0
    ref = stats.truncnorm((-1.0 - 0.5) / 2, (3.0 - 0.5) / 2, loc=0.5, scale=2.0)
    assert w.mean() == pytest.approx(ref.mean(), abs=0.06)
    assert w.std() == pytest.approx(ref.std(), rel=0.04)


def test_normal_uniform_gamma_exponential_follow_jax_random():
    np.testing.assert_allclose(init.Normal(1.0, 2.0)((4, 3), key=KEY),
                               1.0 + 2.0 * jax.random.normal(KEY, (4, 3)), rtol=1e-6)
    np.testing.assert_array_equal(init.Uniform(-2.0, 3.0)((4, 3), key=KEY),
                                  jax.random.uniform(KEY, (4, 3), minval=-2.0, maxval=3.0))
    np.testing.assert_allclose(init.Gamma(2.0, scale=1.5)((5,), key=KEY),
                               1.5 * jax.random.gamma(KEY, 2.0, (5,)), rtol=1e-6)
    np.testing.assert_allclose(init.Exponential(3.0)((5,), key=KEY),
                               3.0 * jax.random.exponential(KEY, (5,)), rtol=1e-6)


def test_orthogonal_is_numpys_qr_of_the_same_draw():
    for shape, axis in [((8, 4), -1), ((4, 8), -1), ((4, 6), 0), ((2, 3, 5), -1), ((5,), -1)]:
        w = np.asarray(init.Orthogonal(2.0, axis=axis)(shape, key=KEY))
        rows = shape[axis]
        cols = int(np.prod(shape)) // rows
        a = np.asarray(jax.random.normal(KEY, (max(rows, cols), min(rows, cols))), np.float64)
        q, r = np.linalg.qr(a)
        q = q * np.sign(np.diag(r))
        q = q if rows > cols else q.T
        rest = tuple(np.delete(shape, axis))
        ref = np.moveaxis(q.reshape((rows,) + rest), 0, axis) * 2.0
        np.testing.assert_allclose(w, ref, atol=2e-5)
    w = np.asarray(init.Orthogonal()((8, 4), key=KEY))
    np.testing.assert_allclose(w.T @ w, np.eye(4), atol=1e-5)


def test_delta_orthogonal_identity_constant_zero():
    w = np.array(init.DeltaOrthogonal(1.5)((3, 3, 4, 6), key=KEY))
    centre = np.asarray(init.Orthogonal(1.5)((4, 6), key=KEY))
    np.testing.assert_array_equal(w[1, 1], centre)
    w[1, 1] = 0
    assert not w.any()                                              # zero off the centre
    with pytest.raises(ValueError, match="3-d, 4-d or 5-d"):
        init.DeltaOrthogonal()((3, 4))
    with pytest.raises(ValueError, match="in <= out"):
        init.DeltaOrthogonal()((3, 4, 2))
    np.testing.assert_array_equal(init.Identity(3.0)((3,)), 3.0 * np.eye(3))
    np.testing.assert_array_equal(init.Identity(-1.0)((2, 4)), -np.eye(2, 4))
    with pytest.raises(ValueError, match="1-d or 2-d"):
        init.Identity()((2, 2, 2))
    c = init.Constant(2)((2, 3))                                     # a number gives floats
    assert c.dtype == brainx.environ.dftype() and np.all(np.asarray(c) == 2)
    assert init.Constant(jnp.arange(3))((2, 3)).dtype == jnp.arange(3).dtype
    assert init.Constant()((2,)).tolist() == [1.0, 1.0]              # brainstate's default
    z = init.ZeroInit(unit=u.mV)((2,))
    assert z.unit == u.mV and np.all(z.mantissa == 0)


def test_seeds_keys_generators_dtypes_and_units():
    a, b = init.Normal(seed=3), init.Normal(seed=3)
    first, second = a((4,)), a((4,))
    rs = brainx.random.RandomState(3)
    np.testing.assert_array_equal(first, rs.normal(size=(4,)))      # its own generator
    np.testing.assert_array_equal(second, rs.normal(size=(4,)))     # which advances
    np.testing.assert_array_equal(b((4,)), first)
    brainx.random.seed(0)
    x = init.KaimingUniform()((4, 3))
    brainx.random.seed(0)
    np.testing.assert_array_equal(init.KaimingUniform()((4, 3)), x)  # the default, at call time
    key_before = brainx.random.get_key()
    init.KaimingUniform()((4, 3), key=KEY)                          # a key leaves it alone
    assert np.array_equal(jax.random.key_data(brainx.random.get_key()),
                          jax.random.key_data(key_before))
    other = brainx.random.RandomState(5)
    np.testing.assert_array_equal(init.Normal()((3,), rng=other),
                                  brainx.random.RandomState(5).normal(size=(3,)))
    w = init.KaimingNormal(unit=u.mA)((4, 5), key=KEY, dtype=jnp.float16)
    assert w.unit == u.mA and w.dtype == jnp.float16
    np.testing.assert_array_equal(w.mantissa, init.KaimingNormal(dtype=jnp.float16)((4, 5), key=KEY))
    assert not isinstance(init.Normal(unit=u.UNITLESS)((2,)), u.Quantity)
    wrapped = init.JaxInit(JI.he_normal(), unit=u.nS)((3, 3), key=KEY)
    np.testing.assert_array_equal(wrapped.mantissa, JI.he_normal()(KEY, (3, 3)))


def test_fans_of_vectors_and_scalars_are_their_size():
    # brainstate needs two axes for its fans; a vector (n,) has fan_in = fan_out = n, a scalar 1
    np.testing.assert_allclose(init.KaimingNormal(distribution="normal")((5,), key=KEY),
                               jax.random.normal(KEY, (5,)) * np.sqrt(2 / 5), rtol=1e-6)
    np.testing.assert_allclose(init.XavierNormal(3.0, distribution="normal")((), key=KEY),
                               jax.random.normal(KEY, ()) * np.sqrt(3.0), rtol=1e-6)
    assert np.all(np.abs(init.KaimingUniform()((8,), key=KEY)) <= np.sqrt(3 * 2 / 8))


def test_errors():
    for bad in (dict(mode="fan_sideways"), dict(distribution="cauchy")):
        with pytest.raises(init.InitializerArgumentError, match="must be one of"):
            init.KaimingNormal(**bad)
    err = init.InitializerArgumentError
    assert issubclass(err, ValueError) and issubclass(err, AssertionError)   # brainstate asserts
    with pytest.raises(ValueError, match="scale must be positive"):
        init.TruncatedNormal(scale=0.0)
    with pytest.raises(ValueError, match="at least one axis"):
        init.Orthogonal()((), key=KEY)
    with pytest.warns(UserWarning, match=r"ignores the keywords \['seed'\]"):
        assert init.Normal()((3,), seed=1).shape == (3,)              # brainstate ignores them
    with pytest.raises(TypeError, match="JaxInit needs"):
        init.JaxInit(3.0)
    with pytest.raises(NotImplementedError):
        init.Initializer()((3,))
    with pytest.raises(ValueError, match="A size is an int"):
        init.to_size("3")
    with pytest.raises(ValueError, match="unsupported nonlinearity 'swish'"):
        init.calculate_init_gain("swish")
    assert init.calculate_init_gain("leaky_relu", 0.2) == pytest.approx(np.sqrt(2 / 1.04))


def test_param_from_initialisers_values_and_states():
    assert init.param(init.Constant(-65.0 * u.mV), (3,), batch_size=2).shape == (2, 3)
    assert init.param(init.KaimingNormal(), (4, 2), key=KEY).shape == (4, 2)
    tau = 5.0 * u.ms
    assert init.param(tau, (3,)) is tau                              # a scalar value stays
    full = init.param(jnp.arange(3.0), (3,), batch_size=2)
    np.testing.assert_array_equal(full, np.tile(np.arange(3.0), (2, 1)))
    batched = jnp.arange(6.0).reshape(2, 3)                          # already has the batch axis
    np.testing.assert_array_equal(init.param(batched, (3,), batch_size=2), batched)
    s = init.param(brainx.ParamState(jnp.ones(3)), (3,), batch_size=2)
    assert type(s) is brainx.ParamState and s.value.shape == (2, 3)
    assert init.param(None, 3) is None
    with pytest.raises(ValueError, match="allow_none=False"):
        init.param(None, 3, allow_none=False)
    with pytest.raises(ValueError, match=r"shape \(2,\) does not broadcast to the size \(3,\)"):
        init.param(jnp.ones(2), (3,))
    with pytest.raises(ValueError, match="got object"):
        init.param(object(), (3,))
    assert init.to_size(None) is None and init.to_size([2, 3]) == (2, 3)
