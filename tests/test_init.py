"""brainx.nn.init against jax.nn.initializers and jax.random: values, fans, units, keys, param()."""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.nn import init

KEY = jax.random.key(3)
JI = jax.nn.initializers


@pytest.mark.parametrize("ours, theirs", [
    (init.KaimingNormal(), JI.variance_scaling(2.0, "fan_in", "normal")),
    (init.KaimingNormal(0.5, mode="fan_out"), JI.variance_scaling(0.5, "fan_out", "normal")),
    (init.KaimingUniform(), JI.variance_scaling(2.0, "fan_in", "uniform")),
    (init.XavierNormal(), JI.variance_scaling(1.0, "fan_avg", "normal")),
    (init.XavierUniform(), JI.glorot_uniform()),
    (init.LecunNormal(), JI.variance_scaling(1.0, "fan_in", "normal")),
    (init.LecunUniform(), JI.lecun_uniform()),
    (init.VarianceScaling(1.0, "fan_in", "truncated_normal"), JI.lecun_normal()),
    (init.Orthogonal(2.0), JI.orthogonal(2.0)),
], ids=lambda x: type(x).__name__ if isinstance(x, init.Initializer) else "")
def test_random_initialisers_are_jaxs(ours, theirs):
    shape = (3, 4, 6)                        # fans with a receptive field: in 4 * 3, out 6 * 3
    np.testing.assert_array_equal(ours(shape, key=KEY), theirs(KEY, shape, jnp.float32))


def test_fans_of_vectors_and_scalars_are_their_size():
    # JAX refuses fans below two axes; a vector (n,) has fan_in = fan_out = n, a scalar 1
    np.testing.assert_allclose(init.KaimingNormal()((5,), key=KEY),
                               jax.random.normal(KEY, (5,)) * np.sqrt(2 / 5), rtol=1e-6)
    np.testing.assert_allclose(init.XavierNormal(3.0)((), key=KEY),
                               jax.random.normal(KEY, ()) * np.sqrt(3.0), rtol=1e-6)
    lim = np.sqrt(3 * 2 / 8)
    x = init.KaimingUniform()((8,), key=KEY)
    assert np.all(np.abs(x) <= lim)


def test_variance_of_a_large_sample():
    w = init.KaimingUniform(mode="fan_out")((300, 400), key=KEY)
    assert np.var(np.asarray(w)) == pytest.approx(2 / 400, rel=0.03)
    w = init.XavierNormal()((300, 400), key=KEY)
    assert np.var(np.asarray(w)) == pytest.approx(1 / 350, rel=0.03)


def test_normal_and_uniform_follow_jax_random():
    np.testing.assert_allclose(init.Normal(1.0, 2.0)((4, 3), key=KEY),
                               1.0 + 2.0 * jax.random.normal(KEY, (4, 3)), rtol=1e-6)
    np.testing.assert_allclose(init.Uniform(-2.0, 3.0)((4, 3), key=KEY),
                               jax.random.uniform(KEY, (4, 3), minval=-2.0, maxval=3.0),
                               rtol=1e-6, atol=1e-6)


def test_units_dtype_and_the_default_key():
    w = init.KaimingNormal(unit=u.mA, dtype=jnp.float16)((4, 5), key=KEY)
    assert w.unit == u.mA and w.dtype == jnp.float16
    np.testing.assert_array_equal(w.mantissa, init.KaimingNormal(dtype=jnp.float16)((4, 5), key=KEY))
    wrapped = init.JaxInit(JI.he_normal(), unit=u.nS)((3, 3), key=KEY)
    np.testing.assert_array_equal(wrapped.mantissa, JI.he_normal()(KEY, (3, 3)))
    init.seed(0)
    a, b = init.Normal()((3,)), init.Normal()((3,))
    assert not np.array_equal(a, b)                              # the key advanced
    brainx.random.seed(0)
    np.testing.assert_array_equal(init.Normal()((3,)), a)         # brainx.random's key
    z = init.ZeroInit(unit=u.mV)((2,))
    assert z.unit == u.mV and np.all(z.mantissa == 0)


def test_errors():
    with pytest.raises(ValueError, match="mode must be one of"):
        init.KaimingNormal(mode="fan_sideways")
    with pytest.raises(ValueError, match="distribution must be one of"):
        init.VarianceScaling(distribution="cauchy")
    with pytest.raises(ValueError, match="at least 2 axes"):
        init.Orthogonal()((3,), key=KEY)
    with pytest.raises(TypeError, match="JaxInit needs"):
        init.JaxInit(3.0)


def test_param_from_initialisers_and_values():
    assert init.param(init.Constant(-65.0 * u.mV), (3,), batch_size=2).shape == (2, 3)
    assert init.param(init.KaimingNormal(), (4, 2), key=KEY).shape == (4, 2)
    tau = 5.0 * u.ms
    assert init.param(tau, (3,)) is tau                              # a scalar value stays
    full = init.param(jnp.arange(3.0), (3,), batch_size=2)
    np.testing.assert_array_equal(full, np.tile(np.arange(3.0), (2, 1)))
    assert init.param(None, 3) is None
    with pytest.raises(ValueError, match=r"shape \(2,\) does not broadcast to the size \(3,\)"):
        init.param(jnp.ones(2), (3,))
