"""Every sampler against scipy.stats: the distribution, the unit, the dtype, and jit.

Each family is drawn inside one ``brainx.transform.jit`` function (one compilation per
family), called twice: the first call's samples are tested against scipy (KS tests for
continuous distributions, chi-square tests for discrete ones), the second must give new
numbers, and the key must have been split exactly once per sampler and call. With
N = 10000 a wrong parameterisation (a rate for a scale, a shifted support) fails by
far; a correct one passes with the fixed seed (and would fail by chance with
probability P_MIN per test).
"""

import brainunit as u
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.stats as st

import brainx.random as br
from brainx import transform as bt

N = 10000
P_MIN = 1e-3


def ks(dist):
    """The sample follows the continuous scipy distribution ``dist`` (KS test)."""
    def check(x):
        p = st.kstest(np.asarray(x).ravel(), dist.cdf).pvalue
        assert p > P_MIN, f"KS test against {dist.dist.name}{dist.args}: p = {p:.2e}"
    return check


def pmf_test(pmf, support):
    """The integer sample follows ``pmf`` on ``support`` (chi-square test; the tail beyond
    ``support`` is one bin, bins expecting fewer than 5 are pooled into it)."""
    def check(x):
        x = np.asarray(x).ravel()
        p = np.asarray(pmf(support), float)
        observed = np.array([(x == k).sum() for k in support], float)
        expected = p * x.size
        small = expected < 5
        rest_obs = x.size - observed[~small].sum()
        rest_exp = x.size - expected[~small].sum()
        obs = np.append(observed[~small], rest_obs)
        exp = np.append(expected[~small], rest_exp)
        if exp[-1] < 1e-9 * x.size:              # the support covers everything
            assert obs[-1] == 0, f"{obs[-1]} samples outside the support"
            obs, exp = obs[:-1], exp[:-1]
        pvalue = st.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue
        assert pvalue > P_MIN, f"chi-square test: p = {pvalue:.2e}"
    return check


def wrapped(mu, dist):
    """Angles around ``mu`` wrapped to [-pi, pi): ``x - mu`` (wrapped) follows ``dist``."""
    def check(x):
        x = np.asarray(x)
        assert x.min() >= -np.pi and x.max() <= np.pi
        ks(dist)(np.mod(x - mu + np.pi, 2 * np.pi) - np.pi)
    return check


def multivariate_normal_check(mean, cov):
    def check(x):
        x = np.asarray(x)
        assert x.shape == (N, 2)
        for w in ([1.0, 0.0], [0.0, 1.0], [1.0, -1.0]):   # projections are normal
            w = np.array(w)
            ks(st.norm(w @ mean, np.sqrt(w @ cov @ w)))(x @ w)
    return check


def dirichlet_check(x):
    x = np.asarray(x)
    assert x.shape == (N, 3)
    np.testing.assert_allclose(x.sum(-1), 1, atol=1e-5)
    ks(st.beta(1, 5))(x[:, 0])          # marginals of Dirichlet(1, 2, 3) are beta
    ks(st.beta(3, 3))(x[:, 2])


def multinomial_check(x):
    x = np.asarray(x)
    assert x.shape == (N, 3) and (x.sum(-1) == 10).all()
    pmf_test(st.binom(10, 0.2).pmf, np.arange(11))(x[:, 0])
    pmf_test(st.binom(10, 0.5).pmf, np.arange(11))(x[:, 2])


def orthogonal_check(q):
    q = np.asarray(q, np.float64)
    assert q.shape == (N // 4, 3, 3)
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(3), q.shape),
                               atol=1e-5)
    # Haar measure on O(3): an entry is uniform on [-1, 1], det is +1 or -1 equally often
    ks(st.uniform(-1, 2))(q[:, 0, 0])
    positive = (np.linalg.det(q) > 0).sum()
    assert st.binomtest(int(positive), q.shape[0]).pvalue > P_MIN


MV_MEAN, MV_COV = np.array([1.0, -1.0]), np.array([[2.0, 0.5], [0.5, 1.0]])
LOGITS = np.log(np.array([0.2, 0.3, 0.5]))

# name: (draw from a generator, unit of the sample, dtype kind, check of the mantissa)
FAMILIES = {
    "basic": {
        "rand": (lambda r: r.rand(N), None, "f", ks(st.uniform())),
        "randn": (lambda r: r.randn(N), None, "f", ks(st.norm())),
        "random": (lambda r: r.random(N), None, "f", ks(st.uniform())),
        "random_sample": (lambda r: r.random_sample(N), None, "f", ks(st.uniform())),
        "ranf": (lambda r: r.ranf(N), None, "f", ks(st.uniform())),
        "sample": (lambda r: r.sample(N), None, "f", ks(st.uniform())),
        "randint": (lambda r: r.randint(2, 6, size=N), None, "i",
                    pmf_test(st.randint(2, 6).pmf, np.arange(2, 6))),
        "random_integers": (lambda r: r.random_integers(2, 5, size=N), None, "i",
                            pmf_test(st.randint(2, 6).pmf, np.arange(2, 6))),
        "rand_like": (lambda r: r.rand_like(jnp.zeros(N)), None, "f", ks(st.uniform())),
        "randn_like": (lambda r: r.randn_like(jnp.zeros(N)), None, "f", ks(st.norm())),
        "randint_like": (lambda r: r.randint_like(jnp.zeros(N, jnp.int32), 1, 4), None, "i",
                         pmf_test(st.randint(1, 4).pmf, np.arange(1, 4))),
        "choice": (lambda r: r.choice(jnp.array([1.0, 2.0, 3.0]) * u.mV, size=N,
                                      p=jnp.array([0.2, 0.3, 0.5])), u.mV, "f",
                   pmf_test(lambda k: np.array([0.2, 0.3, 0.5]), np.arange(1, 4))),
    },
    "continuous": {
        "uniform": (lambda r: r.uniform(-70 * u.mV, -50 * u.mV, size=N), u.mV, "f",
                    ks(st.uniform(-70, 20))),
        "normal": (lambda r: r.normal(-60 * u.mV, 2 * u.mV, size=N), u.mV, "f",
                   ks(st.norm(-60, 2))),
        "standard_normal": (lambda r: r.standard_normal(N), None, "f", ks(st.norm())),
        "truncated_normal": (lambda r: r.truncated_normal(-1 * u.ms, 2 * u.ms, N, 0.5 * u.ms,
                                                          2 * u.ms), u.ms, "f",
                             ks(st.truncnorm(-0.75, 0.75, 0.5, 2))),
        "lognormal": (lambda r: r.lognormal(0.5, 0.7, size=N), None, "f",
                      ks(st.lognorm(0.7, scale=np.exp(0.5)))),
        "standard_cauchy": (lambda r: r.standard_cauchy(N), None, "f", ks(st.cauchy())),
        "standard_exponential": (lambda r: r.standard_exponential(N), None, "f",
                                 ks(st.expon())),
        "exponential": (lambda r: r.exponential(10 * u.ms, size=N), u.ms, "f",
                        ks(st.expon(scale=10))),
        "gumbel": (lambda r: r.gumbel(1 * u.mV, 2 * u.mV, size=N), u.mV, "f",
                   ks(st.gumbel_r(1, 2))),
        "laplace": (lambda r: r.laplace(1 * u.mV, 2 * u.mV, size=N), u.mV, "f",
                    ks(st.laplace(1, 2))),
        "logistic": (lambda r: r.logistic(1 * u.mV, 2 * u.mV, size=N), u.mV, "f",
                     ks(st.logistic(1, 2))),
        "rayleigh": (lambda r: r.rayleigh(2 * u.mV, size=N), u.mV, "f",
                     ks(st.rayleigh(scale=2))),
        "maxwell": (lambda r: r.maxwell(N), None, "f", ks(st.maxwell())),
        "pareto": (lambda r: r.pareto(3.0, size=N), None, "f", ks(st.lomax(3))),
        "power": (lambda r: r.power(3.0, size=N), None, "f", ks(st.powerlaw(3))),
        "weibull": (lambda r: r.weibull(1.5, size=N), None, "f", ks(st.weibull_min(1.5))),
        "weibull_min": (lambda r: r.weibull_min(1.5, 2 * u.ms, size=N), u.ms, "f",
                        ks(st.weibull_min(1.5, scale=2))),
        "triangular": (lambda r: r.triangular(0 * u.ms, 1 * u.ms, 4 * u.ms, size=N), u.ms, "f",
                       ks(st.triang(0.25, 0, 4))),
        "vonmises": (lambda r: r.vonmises(2.5, 2.0, size=N), None, "f",
                     wrapped(2.5, st.vonmises(2.0))),
        "vonmises (flat)": (lambda r: r.vonmises(0.0, 0.01, size=N), None, "f",
                            wrapped(0.0, st.vonmises(0.01))),
        "vonmises (concentrated)": (lambda r: r.vonmises(-1.0, 1e5, size=N), None, "f",
                                    wrapped(-1.0, st.vonmises(1e5))),
        "wald": (lambda r: r.wald(2 * u.ms, 3 * u.ms, size=N), u.ms, "f",
                 ks(st.invgauss(2 / 3, scale=3))),
    },
    "gamma family": {
        "gamma": (lambda r: r.gamma(2.5, 2 * u.ms, size=N), u.ms, "f", ks(st.gamma(2.5, scale=2))),
        "standard_gamma": (lambda r: r.standard_gamma(0.5, size=N), None, "f",
                           ks(st.gamma(0.5))),
        "loggamma": (lambda r: r.loggamma(0.5, size=N), None, "f", ks(st.loggamma(0.5))),
        "beta": (lambda r: r.beta(2.0, 3.0, size=N), None, "f", ks(st.beta(2, 3))),
        "chisquare": (lambda r: r.chisquare(3.5, size=N), None, "f", ks(st.chi2(3.5))),
        "noncentral_chisquare": (lambda r: r.noncentral_chisquare(0.5, 2.0, size=N), None, "f",
                                 ks(st.ncx2(0.5, 2.0))),
        "f": (lambda r: r.f(4.0, 7.0, size=N), None, "f", ks(st.f(4, 7))),
        "noncentral_f": (lambda r: r.noncentral_f(4.0, 7.0, 2.0, size=N), None, "f",
                         ks(st.ncf(4, 7, 2))),
        "standard_t": (lambda r: r.standard_t(3.5, size=N), None, "f", ks(st.t(3.5))),
        "t": (lambda r: r.t(3.5, size=N), None, "f", ks(st.t(3.5))),
    },
    "discrete": {
        "bernoulli": (lambda r: r.bernoulli(0.3, size=N), None, "b",
                      pmf_test(st.bernoulli(0.3).pmf, np.arange(2))),
        "binomial": (lambda r: r.binomial(10, 0.3, size=N), None, "i",
                     pmf_test(st.binom(10, 0.3).pmf, np.arange(11))),
        "poisson": (lambda r: r.poisson(3.0, size=N), None, "i",
                    pmf_test(st.poisson(3).pmf, np.arange(20))),
        "geometric": (lambda r: r.geometric(0.3, size=N), None, "i",
                      pmf_test(st.geom(0.3).pmf, np.arange(40))),
        "negative_binomial": (lambda r: r.negative_binomial(2.5, 0.4, size=N), None, "i",
                              pmf_test(st.nbinom(2.5, 0.4).pmf, np.arange(40))),
        "hypergeometric": (lambda r: r.hypergeometric(7, 5, 6, size=N), None, "i",
                           pmf_test(st.hypergeom(12, 7, 6).pmf, np.arange(7))),
        "hypergeometric (most drawn)": (lambda r: r.hypergeometric(30, 20, 40, size=N), None,
                                        "i", pmf_test(st.hypergeom(50, 30, 40).pmf,
                                                      np.arange(41))),
        "logseries": (lambda r: r.logseries(0.8, size=N), None, "i",
                      pmf_test(st.logser(0.8).pmf, np.arange(60))),
        "zipf": (lambda r: r.zipf(2.0, size=N), None, "i",
                 pmf_test(st.zipf(2.0).pmf, np.arange(100))),
        "categorical": (lambda r: r.categorical(jnp.asarray(LOGITS), size=N), None, "i",
                        pmf_test(lambda k: np.exp(LOGITS), np.arange(3))),
    },
    "multivariate": {
        "dirichlet": (lambda r: r.dirichlet(jnp.array([1.0, 2.0, 3.0]), size=N), None, "f",
                      dirichlet_check),
        "multinomial": (lambda r: r.multinomial(10, jnp.array([0.2, 0.3, 0.5]), size=N), None,
                        "i", multinomial_check),
        "multivariate_normal": (lambda r: r.multivariate_normal(
            jnp.asarray(MV_MEAN) * u.mV, jnp.asarray(MV_COV) * u.mV ** 2, size=N), u.mV, "f",
            multivariate_normal_check(MV_MEAN, MV_COV)),
        "orthogonal": (lambda r: r.orthogonal(3, size=N // 4), None, "f", orthogonal_check),
    },
}
SEEDS = {"basic": 1, "continuous": 2, "gamma family": 3, "discrete": 4, "multivariate": 5}


def split_chain(key, n):
    for _ in range(n):
        key = jr.split(key)[0]
    return key


@pytest.fixture(scope="module")
def drawn():
    """Per family: the samples of two calls of one jit function, and the key checks."""
    out = {}
    for family, samplers in FAMILIES.items():
        rng = br.RandomState(SEEDS[family])
        draw = bt.jit(lambda: {name: call(rng) for name, (call, *_) in samplers.items()})
        first, second = draw(), draw()
        key_ok = bool((rng.value == split_chain(jr.key(SEEDS[family]),
                                                2 * len(samplers))).all())
        out[family] = (first, second, key_ok)
    return out


CASES = [(family, name) for family, samplers in FAMILIES.items() for name in samplers]


@pytest.mark.parametrize("family,name", CASES, ids=[n for _, n in CASES])
def test_distribution_unit_and_dtype(drawn, family, name):
    _, unit, kind, check = FAMILIES[family][name]
    x = drawn[family][0][name]
    if unit is None:
        assert not isinstance(x, u.Quantity)
    else:
        assert isinstance(x, u.Quantity) and x.unit == unit
        x = x.to(unit).mantissa
    want = {"f": jnp.float32, "i": jnp.int32, "b": jnp.bool_}[kind]
    assert x.dtype == want
    check(x)


@pytest.mark.parametrize("family", FAMILIES)
def test_jit_draws_new_numbers_and_splits_the_key_once_per_sampler(drawn, family):
    first, second, key_ok = drawn[family]
    assert key_ok
    for name in FAMILIES[family]:
        a = u.get_mantissa(first[name])
        b = u.get_mantissa(second[name])
        assert not np.array_equal(np.asarray(a), np.asarray(b)), name


def test_every_sampler_is_tested():
    tested = {name.split(" (")[0] for samplers in FAMILIES.values() for name in samplers}
    assert set(br.SAMPLERS) - tested == {"permutation", "shuffle"}  # exact tests: test_random.py


# -- shapes and dtypes, traced only (jax.eval_shape compiles nothing) -------------------------

R = br.RandomState(0)
A2, A31 = jnp.array([2.0, 3.0]), jnp.array([[2.0], [3.0], [4.0]])
SHAPES = [   # (call with key=..., shape for size=None with broadcasting parameters)
    (lambda k: R.gumbel(A31, A2, key=k), (3, 2)),
    (lambda k: R.laplace(A2, key=k), (2,)),
    (lambda k: R.logistic(scale=A31, key=k), (3, 1)),
    (lambda k: R.lognormal(A31, A2, key=k), (3, 2)),
    (lambda k: R.rayleigh(A2, key=k), (2,)),
    (lambda k: R.pareto(A2, key=k), (2,)),
    (lambda k: R.power(A2, key=k), (2,)),
    (lambda k: R.weibull(A2, key=k), (2,)),
    (lambda k: R.weibull_min(A31, A2, key=k), (3, 2)),
    (lambda k: R.triangular(0.0, A2 - 1, A31, key=k), (3, 2)),
    (lambda k: R.vonmises(A31, A2, key=k), (3, 2)),
    (lambda k: R.wald(A31, A2, key=k), (3, 2)),
    (lambda k: R.standard_gamma(A2, key=k), (2,)),
    (lambda k: R.loggamma(A2, key=k), (2,)),
    (lambda k: R.chisquare(A2, key=k), (2,)),
    (lambda k: R.noncentral_chisquare(A31, A2, key=k), (3, 2)),
    (lambda k: R.f(A31, A2, key=k), (3, 2)),
    (lambda k: R.noncentral_f(A31, A2, 1.0, key=k), (3, 2)),
    (lambda k: R.t(A2, key=k), (2,)),
    (lambda k: R.standard_t(A31, key=k), (3, 1)),
    (lambda k: R.binomial(A31.astype(int), A2 / 4, key=k), (3, 2)),
    (lambda k: R.geometric(A2 / 4, key=k), (2,)),
    (lambda k: R.negative_binomial(A31, A2 / 4, key=k), (3, 2)),
    (lambda k: R.hypergeometric(A31.astype(int), 3, A2.astype(int), key=k), (3, 2)),
    (lambda k: R.logseries(A2 / 4, key=k), (2,)),
    (lambda k: R.zipf(A31, key=k), (3, 1)),
    (lambda k: R.categorical(jnp.zeros((3, 2, 4)), key=k), (3, 2)),
    (lambda k: R.categorical(jnp.zeros((3, 4)), axis=0, key=k), (4,)),
    (lambda k: R.random_integers(A31.astype(int), 9, key=k), (3, 1)),
    (lambda k: R.randint_like(jnp.full((2, 3), 5), key=k), (2, 3)),
    (lambda k: R.dirichlet(jnp.ones((3, 4)), key=k), (3, 4)),
    (lambda k: R.multinomial(jnp.array([5, 6]), jnp.full((3, 1, 4), 0.25), key=k), (3, 2, 4)),
    (lambda k: R.multivariate_normal(jnp.zeros((3, 2)), jnp.eye(2), key=k), (3, 2)),
    (lambda k: R.orthogonal(4, size=(2,), key=k), (2, 4, 4)),
    (lambda k: R.maxwell(size=(2, 3), key=k), (2, 3)),
    (lambda k: R.standard_cauchy(size=4, key=k), (4,)),
]


def test_size_none_gives_the_broadcast_shape_of_the_parameters():
    key = jr.PRNGKey(0)
    for i, (call, shape) in enumerate(SHAPES):
        assert jax.eval_shape(call, key).shape == shape, i
    same_key = R.value
    assert (R.value == same_key).all()


def test_size_and_dtype_arguments():
    key = jr.PRNGKey(0)
    floats = [lambda k: R.gumbel(size=(2, 3), key=k, dtype=jnp.float16),
              lambda k: R.vonmises(0.0, 1.0, size=(2, 3), key=k, dtype=jnp.float16),
              lambda k: R.f(2.0, 3.0, size=(2, 3), key=k, dtype=jnp.float16),
              lambda k: R.rand_like(jnp.zeros((2, 3), jnp.float16), key=k)]
    for call in floats:
        out = jax.eval_shape(call, key)
        assert (out.shape, out.dtype) == ((2, 3), jnp.float16)
    ints = [lambda k: R.zipf(2.0, size=(2, 3), key=k, dtype=jnp.int16),
            lambda k: R.hypergeometric(5, 5, 3, size=(2, 3), key=k, dtype=jnp.int16),
            lambda k: R.binomial(5, 0.5, size=(2, 3), key=k, dtype=jnp.int16),
            lambda k: R.randint_like(jnp.zeros((2, 3), jnp.int16), high=3, key=k)]
    for call in ints:
        out = jax.eval_shape(call, key)
        assert (out.shape, out.dtype) == ((2, 3), jnp.int16)
