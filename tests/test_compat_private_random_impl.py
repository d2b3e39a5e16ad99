"""``brainx.compat.private.random_impl``: brainstate's key-first samplers (``random._impl``).

Each sampler draws what brainx's own ``RandomState`` method draws with the same key, and
leaves every generator as it was; the helpers beside them follow brainstate's meaning.
"""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.compat.private import random_impl as impl


def test_key_first_samplers_draw_as_the_methods_with_that_key():
    key = jax.random.key(3)
    rs = brainx.random.RandomState(0)
    before = jax.random.key_data(brainx.random.DEFAULT.value)
    pairs = [(impl.logseries(key, 0.5, shape=4), rs.logseries(0.5, size=4, key=key)),
             (impl.zipf(key, 2.0, shape=(2,)), rs.zipf(2.0, size=(2,), key=key)),
             (impl.f(key, 3.0, 5.0, shape=3), rs.f(3.0, 5.0, size=3, key=key))]
    for got, want in pairs:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(jax.random.key_data(brainx.random.DEFAULT.value), before)
    assert impl.power(key, 2.0, shape=None).shape == ()


def test_multinomial_batches_over_p_and_n():
    counts = impl.multinomial(jax.random.key(0), jnp.array([[0.2, 0.8], [0.5, 0.5]]),
                              jnp.array([10, 4]), n_max=10)
    assert counts.shape == (2, 2) and jnp.issubdtype(counts.dtype, jnp.integer)
    np.testing.assert_array_equal(np.asarray(counts.sum(-1)), [10, 4])


def test_logseries_at_p_zero_is_one_as_numpy():
    out = brainx.random.RandomState(0).logseries(jnp.array([0.0, 0.0]))
    assert np.asarray(out).tolist() == [1, 1] == np.random.default_rng(0).logseries(0.0, 2).tolist()


def test_von_mises_centered_shape_and_dtype():
    out = impl.von_mises_centered(jax.random.key(1), jnp.array([0.5, 4.0]), (), jnp.float32)
    assert out.shape == (2,) and bool(jnp.all(jnp.abs(out) <= jnp.pi))
    with pytest.raises(ValueError, match="float dtype"):
        impl.von_mises_centered(jax.random.key(1), 1.0, (2,), jnp.int32)


def test_array_and_dtype_helpers():
    assert isinstance(impl._reshape(5, (1,)), np.ndarray)
    assert [a.shape for a in impl._promote_shapes(jnp.ones(2), jnp.ones((3, 2)))] == [(1, 2), (3, 2)]
    assert impl._dtype(int) == np.dtype("int64") and impl._dtype("float32") == np.float32
    with pytest.raises(ValueError):
        impl._dtype(None)
    assert impl._is_python_scalar(5) and not impl._is_python_scalar(np.ones(2))
    assert np.asarray(impl.const(jnp.ones(2, jnp.float32), 7)).dtype == np.float32
    impl._check_shape("x", (3,), (3,))
    with pytest.raises(ValueError):
        impl._check_shape("x", (3,), (1, 3))
    assert impl._loc_scale(1.0, 2.0, 5.0) == 11.0 and impl._loc_scale(None, None, 5.0) == 5.0


def test_unit_and_key_helpers():
    assert float(impl._remove_unit_param("x", 3.0 * u.UNITLESS)) == 3.0
    with pytest.raises(ValueError, match="dimensionless"):
        impl._remove_unit_param("rate", 3.0 * u.mV)
    loc, scale, unit = impl._loc_scale_unit(1.0 * u.mV, 2.0 * u.volt)
    assert unit == u.mV and float(scale) == pytest.approx(2000.0)
    assert impl._loc_scale_unit(1.0, 2.0 * u.mV)[2] == u.mV
    with pytest.raises(u.UnitMismatchError):
        impl._loc_scale_unit(1.0 * u.mV, 2.0 * u.mA)
    impl._validate_raw_key_data(np.array([1, 2], np.uint32))
    for bad in (123, np.array([1, 2], np.int32), np.array([1, 2, 3], np.uint32)):
        with pytest.raises(TypeError):
            impl._validate_raw_key_data(bad)
    assert impl.formalize_key(np.array([42], np.int32)).shape == ()
