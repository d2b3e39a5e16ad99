"""brainx.random's public API against brainstate 0.5.4's: names, signatures, key management,
unit rules and parameter errors (the distributions: test_random_distributions.py)."""

import inspect

import brainunit as u
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import brainx.random as br
from brainx import transform as bt


def raw(x):
    """An array as numpy; a typed key as its raw ``uint32`` data (the bits it draws with)."""
    if jnp.issubdtype(getattr(x, "dtype", np.float32), jax.dtypes.prng_key):
        x = jr.key_data(x)
    return np.asarray(x)


def same(a, b):
    np.testing.assert_array_equal(raw(a), raw(b))


# RandomState's sampler parameters in brainstate 0.5.4 (brainstate/random/_state.py)
BRAINSTATE = {
    "rand": ("*dn", "key", "dtype"), "randn": ("*dn", "key", "dtype"),
    "randint": ("low", "high", "size", "dtype", "key"),
    "random_integers": ("low", "high", "size", "key", "dtype"),
    "random": ("size", "key", "dtype"), "random_sample": ("size", "key", "dtype"),
    "ranf": ("size", "key", "dtype"), "sample": ("size", "key", "dtype"),
    "choice": ("a", "size", "replace", "p", "key"),
    "permutation": ("x", "axis", "independent", "key"), "shuffle": ("x", "axis", "key"),
    "beta": ("a", "b", "size", "key", "dtype"), "exponential": ("scale", "size", "key", "dtype"),
    "gamma": ("shape", "scale", "size", "key", "dtype"),
    "gumbel": ("loc", "scale", "size", "key", "dtype"),
    "laplace": ("loc", "scale", "size", "key", "dtype"),
    "logistic": ("loc", "scale", "size", "key", "dtype"),
    "normal": ("loc", "scale", "size", "key", "dtype"), "pareto": ("a", "size", "key", "dtype"),
    "poisson": ("lam", "size", "key", "dtype"), "standard_cauchy": ("size", "key", "dtype"),
    "standard_exponential": ("size", "key", "dtype"),
    "standard_gamma": ("shape", "size", "key", "dtype"),
    "standard_normal": ("size", "key", "dtype"), "standard_t": ("df", "size", "key", "dtype"),
    "uniform": ("low", "high", "size", "key", "dtype"),
    "truncated_normal": ("lower", "upper", "size", "loc", "scale", "key", "dtype",
                         "check_valid"),
    "bernoulli": ("p", "size", "key", "check_valid"),
    "lognormal": ("mean", "sigma", "size", "key", "dtype"),
    "binomial": ("n", "p", "size", "key", "dtype", "check_valid"),
    "chisquare": ("df", "size", "key", "dtype", "check_valid"),
    "dirichlet": ("alpha", "size", "key", "dtype"), "geometric": ("p", "size", "key", "dtype"),
    "multinomial": ("n", "pvals", "size", "key", "dtype", "check_valid"),
    "multivariate_normal": ("mean", "cov", "size", "method", "key", "dtype"),
    "rayleigh": ("scale", "size", "key", "dtype"),
    "triangular": ("left", "mode", "right", "size", "key", "dtype"),
    "vonmises": ("mu", "kappa", "size", "key", "dtype"), "weibull": ("a", "size", "key", "dtype"),
    "weibull_min": ("a", "scale", "size", "key", "dtype"), "maxwell": ("size", "key", "dtype"),
    "negative_binomial": ("n", "p", "size", "key", "dtype"),
    "wald": ("mean", "scale", "size", "key", "dtype"), "t": ("df", "size", "key", "dtype"),
    "orthogonal": ("n", "size", "key", "dtype"),
    "noncentral_chisquare": ("df", "nonc", "size", "key", "dtype"),
    "loggamma": ("a", "size", "key", "dtype"), "categorical": ("logits", "axis", "size", "key"),
    "zipf": ("a", "size", "key", "dtype"), "power": ("a", "size", "key", "dtype", "check_valid"),
    "f": ("dfnum", "dfden", "size", "key", "dtype"),
    "hypergeometric": ("ngood", "nbad", "nsample", "size", "key", "dtype"),
    "logseries": ("p", "size", "key", "dtype"),
    "noncentral_f": ("dfnum", "dfden", "nonc", "size", "key", "dtype"),
    "rand_like": ("input", "dtype", "key"), "randn_like": ("input", "dtype", "key"),
    "randint_like": ("input", "low", "high", "dtype", "key"),
}
KEY_FUNCTIONS = {   # brainstate/random/_seed.py
    "seed": ("seed_or_key",), "seed_context": ("seed_or_key",), "default_rng": ("seed_or_key",),
    "clone_rng": ("seed_or_key", "clone"), "set_key": ("seed_or_key",), "get_key": (),
    "get_key_data": (), "restore_key": (), "split_key": ("n", "backup"),
    "split_keys": ("n", "backup"), "self_assign_multi_keys": ("n", "backup"),
}


def params(fn):
    return tuple(("*" + p.name) if p.kind is p.VAR_POSITIONAL else p.name
                 for p in inspect.signature(fn).parameters.values() if p.name != "self")


def test_the_samplers_are_brainstates_with_its_parameter_names():
    assert set(br.SAMPLERS) == set(BRAINSTATE)
    for name, want in BRAINSTATE.items():
        assert params(getattr(br.RandomState, name)) == want, name
        assert params(getattr(br, name)) == want, name
        assert name in br.__all__


def test_the_key_functions_have_brainstates_parameter_names():
    for name, want in KEY_FUNCTIONS.items():
        assert params(getattr(br, name)) == want, name
        assert name in br.__all__
    for name in ("split_key", "self_assign_multi_keys", "restore_key", "backup_key", "clone",
                 "set_key", "seed"):
        assert callable(getattr(br.RandomState, name))


def test_module_functions_draw_from_default_like_a_generator_with_its_key():
    br.seed(7)
    got = [br.zipf(2.0, size=3), br.vonmises(0.0, 1.0, size=3), br.logseries(0.5, size=3)]
    rng = br.RandomState(7)
    want = [rng.zipf(2.0, size=3), rng.vonmises(0.0, 1.0, size=3), rng.logseries(0.5, size=3)]
    for a, b in zip(got, want):
        same(a, b)
    same(br.get_key(), rng.value)


def test_key_argument_leaves_the_generator_alone_and_is_reproducible():
    rng = br.RandomState(0)
    before = rng.value
    a = rng.hypergeometric(5, 5, 4, size=6, key=3)
    same(a, rng.hypergeometric(5, 5, 4, size=6, key=jr.PRNGKey(3)))
    same(rng.value, before)


# -- key management -------------------------------------------------------------------------

def test_split_key_backup_and_restore():
    rng = br.RandomState(1)
    k = rng.split_key(backup=True)
    same(k, jr.split(jr.PRNGKey(1))[1])
    with pytest.raises(ValueError, match="backed up already"):
        rng.split_key(backup=True)
    rng.restore_key()
    same(rng.value, jr.PRNGKey(1))
    with pytest.raises(ValueError, match="no key is backed up"):
        rng.restore_key()


def test_module_level_backup_and_restore():
    br.seed(2)
    keys = br.split_keys(3, backup=True)
    same(keys, jr.split(jr.PRNGKey(2), 4)[1:])
    br.restore_key()
    same(br.get_key(), jr.PRNGKey(2))
    same(br.get_key_data(), jr.PRNGKey(2))


def test_self_assign_multi_keys_gives_each_lane_its_key():
    rng = br.RandomState(3)
    rng.self_assign_multi_keys(4)
    lane_keys = jr.split(jr.PRNGKey(3), 4)
    same(rng.value, lane_keys)
    out = bt.vmap(lambda: rng.standard_normal(), in_states=rng)()
    same(out, [jr.normal(jr.split(k)[1]) for k in lane_keys])
    rng.restore_key()
    same(rng.value, jr.PRNGKey(3))
    with pytest.raises(ValueError, match="positive integer"):
        rng.self_assign_multi_keys(0)


def test_backup_inside_a_transform_is_refused():
    rng = br.RandomState(0)
    with pytest.raises(ValueError, match="inside a transform"):
        bt.jit(lambda: rng.split_key(backup=True))()


def test_clone_rng_and_set_key():
    br.seed(5)
    rng = br.clone_rng()
    nxt, used = jr.split(jr.PRNGKey(5))
    same(rng.value, used)
    same(br.get_key(), nxt)
    assert br.clone_rng(clone=False) is br.DEFAULT
    same(br.clone_rng(9).value, jr.PRNGKey(9))
    br.set_key(11)
    same(br.get_key(), jr.PRNGKey(11))
    br.set_key(jr.PRNGKey(12))
    same(br.get_key(), jr.PRNGKey(12))


# -- units and errors ------------------------------------------------------------------------

def test_shape_parameters_must_be_dimensionless():
    rng = br.RandomState(0)
    before = rng.value
    for call in (lambda: rng.gamma(2 * u.ms), lambda: rng.zipf(2 * u.mV),
                 lambda: rng.binomial(10, 0.5 * u.mV), lambda: rng.lognormal(1 * u.mV)):
        with pytest.raises(ValueError, match="dimensionless"):
            call()
    same(rng.value, before)
    x = rng.geometric(u.Quantity(0.5), size=2)    # a dimensionless Quantity is a number
    assert x.shape == (2,) and not isinstance(x, u.Quantity)


def test_quantity_parameters_share_a_unit():
    rng = br.RandomState(0)
    x = rng.laplace(1 * u.volt, 2 * u.mV, size=5)        # scale converted to loc's unit
    assert x.unit == u.volt
    w = rng.wald(2 * u.ms, 3.0, size=5)                  # a plain number is read in ms
    assert w.unit == u.ms
    with pytest.raises(u.UnitMismatchError):
        rng.gumbel(1 * u.mV, 2 * u.ms)
    with pytest.raises(u.UnitMismatchError, match="both carry a unit"):
        rng.multivariate_normal(jnp.zeros(2) * u.mV, jnp.eye(2))
    with pytest.raises(u.UnitMismatchError):
        rng.multivariate_normal(jnp.zeros(2) * u.mV, jnp.eye(2) * u.mV)


INVALID = [
    (lambda r: r.geometric(0.0), "geometric: p"),
    (lambda r: r.zipf(1.0), "zipf: a"),
    (lambda r: r.logseries(1.0), "logseries: p"),
    (lambda r: r.hypergeometric(3, 2, 6), "hypergeometric"),
    (lambda r: r.triangular(0.0, 2.0, 1.0), "triangular"),
    (lambda r: r.vonmises(0.0, -1.0), "vonmises: kappa"),
    (lambda r: r.wald(-1.0, 1.0), "wald"),
    (lambda r: r.binomial(5, 1.5), "binomial"),
    (lambda r: r.chisquare(0.0), "chisquare: df"),
    (lambda r: r.power(-1.0), "power: a"),
    (lambda r: r.pareto(0.0), "pareto: a"),
    (lambda r: r.negative_binomial(0.0, 0.5), "negative_binomial"),
    (lambda r: r.noncentral_chisquare(2.0, -1.0), "noncentral_chisquare"),
    (lambda r: r.multinomial(5, jnp.array([0.7, 0.6, 0.1])), "multinomial: pvals"),
    (lambda r: r.dirichlet(jnp.array([1.0, 0.0])), "dirichlet: alpha"),
    (lambda r: r.multivariate_normal(jnp.zeros(2), jnp.eye(3)), "multivariate_normal"),
    (lambda r: r.multivariate_normal(jnp.zeros(2), jnp.eye(2), method="qr"), "method"),
    (lambda r: r.rand_like(jnp.zeros(2), dtype=jnp.int32), "rand_like: dtype"),
]


@pytest.mark.parametrize("call,match", INVALID, ids=[m for _, m in INVALID])
def test_invalid_parameters_raise_and_leave_the_key_alone(call, match):
    rng = br.RandomState(0)
    before = rng.value
    with pytest.raises(ValueError, match=match):
        call(rng)
    same(rng.value, before)


def test_check_valid_false_skips_the_check():
    rng = br.RandomState(0)
    assert rng.bernoulli(1.5, size=3, check_valid=False).shape == (3,)
    assert rng.power(-1.0, size=3, check_valid=False).shape == (3,)


def test_like_samplers_follow_the_template():
    rng = br.RandomState(0)
    x = rng.randn_like(jnp.zeros((2, 3), jnp.int32))     # an int template: default float
    assert x.shape == (2, 3) and x.dtype == jnp.float32
    y = rng.randint_like(jnp.full((50,), 3.0))            # high = max(input), dtype of input
    assert y.dtype == jnp.float32 and set(np.asarray(y).tolist()) == {0.0, 1.0, 2.0}
    z = rng.rand_like(jnp.zeros(4) * u.mV)
    assert not isinstance(z, u.Quantity) and z.shape == (4,)


def test_check_if_deleted_raises_on_a_donated_key_and_seed_recovers():
    rng = br.RandomState(3)
    rng.check_if_deleted()
    jax.jit(lambda k: k, donate_argnums=0)(rng.value)
    if not rng.value.is_deleted():
        pytest.skip("this backend did not delete the donated buffer")
    with pytest.raises(RuntimeError, match="deleted"):
        rng.check_if_deleted()
    rng.seed(3)
    rng.check_if_deleted()
    assert np.array_equal(rng.normal(size=2), br.RandomState(3).normal(size=2))


# -- typed keys (brainstate 0.5.4 keeps jax.random.key keys) ---------------------------------

def test_keys_are_typed_and_raw_keys_are_wrapped_bit_for_bit():
    rng = br.RandomState(0)
    assert rng.value.shape == () and jnp.issubdtype(rng.value.dtype, jax.dtypes.prng_key)
    same(rng.value, jr.key(0))
    assert rng.split_key().shape == () and rng.split_key(3).shape == (3,)
    raw = br.RandomState(jr.PRNGKey(7))                 # a raw key: wrapped, same bits
    assert jnp.issubdtype(raw.value.dtype, jax.dtypes.prng_key)
    np.testing.assert_array_equal(jr.key_data(raw.value), jr.PRNGKey(7))
    same(raw.normal(size=3), br.RandomState(7).normal(size=3))
    typed = jr.key(9)
    rng.set_key(typed)
    assert rng.value is typed                           # a typed key is kept as given
    batch = br.RandomState(jr.split(jr.PRNGKey(1), 4))  # a batch of raw keys: 4 typed keys
    assert batch.value.shape == (4,)
    same(batch.value, jr.split(jr.key(1), 4))


def test_get_key_data_is_the_raw_view_of_get_key():
    br.seed(3)
    data = br.get_key_data()
    assert data.shape == (2,) and data.dtype == jnp.uint32
    np.testing.assert_array_equal(data, jr.PRNGKey(3))
    br.set_key(data)                                    # round trip through the raw bits
    same(br.get_key(), jr.key(3))


def test_a_typed_key_state_shows_its_dtype_and_flows_through_reports():
    from brainx.state.values import dtype_name
    from brainx.transform.remat.memory_budget import _nbytes
    from brainx.transform.remat.residual_report import Residual, _dtype
    rng = br.RandomState(0, name="noise")
    assert repr(rng) == "RandomState(key<fry>[], data=[0, 0], name='noise')"
    assert dtype_name(rng.value.dtype) == "key<fry>" and dtype_name(jnp.int8) == "int8"
    assert _nbytes({"k": jr.split(jr.key(0), 3), "x": jnp.zeros(2)}) == 3 * 8 + 2 * 4
    r = Residual((5,), _dtype(rng.value.dtype), "intermediate", "noise")
    assert r.nbytes == 40 and r.type_str == "key<fry>[5]"


def test_a_snapshot_of_a_generator_leaves_its_backed_up_key_behind():
    rng = br.RandomState(4)
    rng.split_key(backup=True)
    rebuilt = rng.to_state_ref().to_state()
    assert "_backup" not in rng.to_state_ref().get_metadata()
    with pytest.raises(ValueError, match="no key is backed up"):
        rebuilt.restore_key()
    rng.restore_key()


def test_a_generator_repr_shows_its_raw_key_bits_when_at_hand():
    """brainstate 0.6 prints the key's raw bits as ``data=``; brainx does for a concrete key
    of at most 16 keys, and leaves them out of a traced or a large batch of keys."""
    rng = br.RandomState(42)
    assert repr(rng) == str(rng) == "RandomState(key<fry>[], data=[0, 42])"
    rng.normal()                                           # the key moved: so do the bits
    assert f"data={np.asarray(jr.key_data(rng.value)).tolist()}" in repr(rng)
    lanes = br.RandomState(jr.split(jr.key(0), 3))
    assert f"data={np.asarray(jr.key_data(lanes.value)).tolist()}" in repr(lanes)
    assert "data=" not in repr(br.RandomState(jr.split(jr.key(0), 17)))
    seen = []

    @bt.jit
    def draw():
        x = rng.normal()
        seen.append(repr(rng))                             # the new key is traced here
        return x

    draw()
    assert seen == ["RandomState(key<fry>[])"]


def test_a_raw_key_assigned_to_the_value_is_split_as_its_typed_form():
    rng = br.RandomState(9)
    rng.value = np.array([1, 2], np.uint32)               # raw bits, not a typed key
    new = rng.split_key()
    want = jr.split(jr.wrap_key_data(jnp.array([1, 2], jnp.uint32)))
    assert new.shape == () and rng.value.shape == ()
    np.testing.assert_array_equal(jr.key_data(new), jr.key_data(want[1]))
    np.testing.assert_array_equal(jr.key_data(rng.value), jr.key_data(want[0]))
    rng.value = np.array([1, 2], np.uint32)
    rng.self_assign_multi_keys(3, backup=False)
    assert rng.value.shape == (3,) and jnp.issubdtype(rng.value.dtype, jax.dtypes.prng_key)
