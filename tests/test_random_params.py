"""Sampler parameters as numpy takes them, key counts and seeds, threads, and compiled code.

- A list or tuple parameter is an array: the draw equals the draw with the array
  (same key), and the columns follow scipy's distributions with the listed parameters.
- ``size`` must fit the parameters' shapes, as in numpy (a ``ValueError``, the key
  unchanged).
- ``choice`` picks strings, with the probabilities ``p`` (chi-square test).
- A seed or key that is neither raises ``TypeError``; a non-integer key count raises
  an error that is both a ``TypeError`` and a ``ValueError``.
- Threads splitting one shared generator eagerly never get the same key.
- An integer seed gives a constant key, also inside a raw ``jax.jit``.
- Eager sampler calls reuse compiled code: a second call with the same shapes
  compiles nothing.
"""

import logging
import threading

import brainunit as u
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.stats as st

import brainx.random as br

N = 10000
P_MIN = 1e-3

# (sampler, args with lists, the same args as arrays)
LISTED = {
    "normal": ([[0.0, 2.0, 4.0], [1.0, 2.0, 3.0]], None),
    "uniform": ([[-1.0, 5.0, 2.0], [2.0, 6.0, 10.0]], None),
    "exponential": ([[1.0, 2.0, 5.0]], None),
    "lognormal": ([[2.0, 0.0], [[2.0, 1.0], [3.0, 1.2]]], None),
    "truncated_normal": ([[-1.0, 0.0], (1.0, 2.0)], None),
    "laplace": ([[0.0, 1.0], [1.0, 2.0]], None),
    "pareto": ([[1, 2, 2]], None),
    "weibull_min": ([[1.0, 2.0], [1.0, 3.0]], None),
    "vonmises": ([[0.0, 1.0], [1.0, 2.0]], None),
    "wald": ([[1.0, 2.0], [1.0, 3.0]], None),
    "triangular": ([[0.0, 1.0], [0.5, 2.0], [1.0, 3.0]], None),
    "gamma": ([[1.0, 2.0], [1.0, 0.5]], None),
    "standard_gamma": ([[1, 2, 3]], None),
    "beta": ([[2, 2, 3], 2], None),
    "chisquare": ([[2, 3, 4]], None),
    "noncentral_chisquare": ([[2.0, 3.0], [1.0, 2.0]], None),
    "standard_t": ([(1, 2, 4)], None),
    "f": ([[2.0, 3.0], [4.0, 5.0]], None),
    "bernoulli": ([[0.5, 0.6, 0.8]], None),
    "binomial": ([[5, 10], [0.2, 0.5]], None),
    "poisson": ([[1.0, 2.0, 2.0]], None),
    "geometric": ([[0.7, 0.5, 0.2]], None),
    "negative_binomial": ([[3.0, 10.0], 0.5], None),
    "hypergeometric": ([8, [10, 4], [[5, 2], [5, 5]]], None),
    "logseries": ([[0.7, 0.5, 0.2]], None),
    "zipf": ([[2.0, 3.0]], None),
    "randint": ([[1, 2, 3], [10, 7, 8]], None),
    "random_integers": ([[1, 2], [3, 4]], None),
}


def _as_arrays(args):
    return [jnp.asarray(a) if isinstance(a, (list, tuple)) else a for a in args]


def test_list_parameters_draw_what_the_arrays_draw():
    # With key=..., the generator is not touched, so one raw jax.jit compiles every call.
    @jax.jit
    def both(key):
        out = {}
        for name, (args, _) in LISTED.items():
            sampler = getattr(br.DEFAULT, name)
            out[name] = (sampler(*args, key=key), sampler(*_as_arrays(args), key=key))
        return out

    for name, (listed, arrays) in both(jr.PRNGKey(0)).items():
        assert listed.shape == arrays.shape, name
        np.testing.assert_array_equal(listed, arrays, err_msg=name)
    # the shapes numpy gives: the broadcast shape of the parameters
    draws = both(jr.PRNGKey(1))
    assert draws["lognormal"][0].shape == (2, 2)
    assert draws["hypergeometric"][0].shape == (2, 2)
    assert draws["randint"][0].shape == (3,)


def test_list_parameters_follow_scipy_column_by_column():
    rng = br.RandomState(0)
    x = np.asarray(rng.normal([0.0, 2.0, 4.0], [1.0, 2.0, 3.0], size=(N, 3)))
    for j, (m, s) in enumerate([(0.0, 1.0), (2.0, 2.0), (4.0, 3.0)]):
        assert st.kstest(x[:, j], st.norm(m, s).cdf).pvalue > P_MIN, j
    x = np.asarray(rng.uniform([-1.0, 5.0], (2.0, 6.0), size=(N, 2)))
    for j, (lo, hi) in enumerate([(-1.0, 2.0), (5.0, 6.0)]):
        assert st.kstest(x[:, j], st.uniform(lo, hi - lo).cdf).pvalue > P_MIN, j
    k = np.asarray(rng.poisson([1.0, 5.0], size=(N, 2)))
    for j, lam in enumerate([1.0, 5.0]):
        _chi_square(k[:, j], st.poisson(lam))
    k = np.asarray(rng.hypergeometric([7, 3], [3, 9], [5, 6], size=(N, 2)))
    for j, (good, bad, n) in enumerate([(7, 3, 5), (3, 9, 6)]):
        _chi_square(k[:, j], st.hypergeom(good + bad, good, n))


def _chi_square(sample, dist):
    support = np.arange(sample.min(), sample.max() + 1)
    expected = dist.pmf(support) * sample.size
    keep = expected >= 5
    observed = np.array([(sample == v).sum() for v in support])[keep]
    expected = expected[keep]
    p = st.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue
    assert p > P_MIN, f"chi-square test against {dist.dist.name}{dist.args}: p = {p:.2e}"


def test_listed_quantities_carry_their_unit():
    v = br.RandomState(0).uniform([-70 * u.mV, -60 * u.mV], [-50 * u.mV, -40 * u.mV], size=(N, 2))
    assert v.unit == u.mV
    assert np.all(v.mantissa[:, 0] < -50) and np.all(v.mantissa[:, 1] >= -60)
    with pytest.raises(u.UnitMismatchError):
        br.RandomState(0).normal([1 * u.mV, 2 * u.second])


@pytest.mark.parametrize("size,params", [((3,), [0.0, 1.0]), ((2,), np.zeros((3, 2))),
                                         ((2, 3), [0.0, 1.0])])
def test_a_size_that_does_not_fit_the_parameters_is_refused_as_in_numpy(size, params):
    with pytest.raises(ValueError):
        np.random.default_rng(0).normal(params, size=size)
    rng = br.RandomState(0)
    before = rng.value
    with pytest.raises(ValueError, match="does not fit the parameters"):
        rng.normal(params, size=size)
    with pytest.raises(ValueError, match="does not fit the parameters"):
        rng.weibull_min(jnp.asarray(params), size=size)
    assert (rng.value == before).all()
    assert rng.normal([0.0, 1.0], size=(4, 2)).shape == (4, 2)   # a fitting size


def test_choice_picks_strings_with_the_given_probabilities():
    names = ["pooh", "rabbit", "piglet", "Christopher"]
    p = [0.5, 0.1, 0.1, 0.3]
    rng = br.RandomState(0)
    for a in (names, np.array(names), np.array(names, dtype=object)):
        out = rng.choice(a, 5, p=p)
        assert isinstance(out, np.ndarray) and out.shape == (5,)
        assert set(out.tolist()) <= set(names)
    out = rng.choice(names, N, p=p)
    counts = np.array([(out == n).sum() for n in names])
    assert st.chisquare(counts, np.array(p) * N).pvalue > P_MIN
    picked = rng.choice(names, 4, replace=False)
    assert sorted(picked.tolist()) == sorted(names)
    # the same key picks the same entries as the integer draw
    np.testing.assert_array_equal(rng.choice(names, 6, key=3),
                                  np.array(names)[np.asarray(rng.choice(4, 6, key=3))])
    with pytest.raises(ValueError, match="one-dimensional"):
        rng.choice(np.array([names, names]), 2)
    with pytest.raises(TypeError, match="outside"):
        jax.jit(lambda k: rng.choice(names, 2, key=k))(jr.PRNGKey(0))


@pytest.mark.parametrize("bad", [1.5, "seed", np.array([1.0, 2.0], np.float32),
                                 np.array([1, 2, 3, 4, 5], np.uint32), (5, 9),
                                 np.array([5, 9], np.int64)])
def test_what_is_not_a_seed_or_key_raises_type_error(bad):
    rng = br.RandomState(0)
    before = rng.value
    with pytest.raises(TypeError, match="integer seed, a typed key"):
        rng.set_key(bad)
    with pytest.raises(TypeError):
        rng.seed(bad)
    assert (rng.value == before).all()


@pytest.mark.parametrize("call", ["split_key", "split_keys", "self_assign_multi_keys"])
def test_key_counts_must_be_positive_integers(call):
    rng = br.RandomState(0)
    before = rng.value
    for bad in (1.5, "x", None, [1, 2], True):
        if bad is None and call == "split_key":
            continue                             # split_key() is one key
        with pytest.raises(TypeError, match="positive integer, got") as info:
            getattr(rng, call)(bad)
        assert isinstance(info.value, ValueError)   # brainstate's split_keys raises ValueError
    for bad in (0, -2):
        with pytest.raises(ValueError, match="positive integer"):
            getattr(rng, call)(bad)
    assert (rng.value == before).all()
    out = getattr(rng, call)(np.int64(2))        # a numpy integer is a count
    assert (rng.value if out is None else out).shape == (2,)     # two typed keys


def test_threads_splitting_one_generator_never_get_the_same_key():
    rng = br.RandomState(0)
    rng.split_key()                              # compile split before the race
    start = threading.Barrier(16)
    keys, lock = [], threading.Lock()

    def worker():
        start.wait()
        for _ in range(5):
            k = rng.split_key()
            with lock:
                keys.append(tuple(np.asarray(jr.key_data(k)).tolist()))

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 80 and len(set(keys)) == 80


def test_a_generator_made_inside_a_raw_jit_draws_with_a_given_key():
    # an integer seed gives a constant key, so the state holds no tracer
    draw = jax.jit(lambda k: br.RandomState(0).normal(size=2, key=k))
    np.testing.assert_array_equal(draw(jr.PRNGKey(1)), jr.normal(jr.PRNGKey(1), (2,)))


# Samplers brainx builds itself (or whose jax function is not compiled): an eager call
# must run compiled code, so a second call with the same shapes compiles nothing.
EAGER = {
    "multinomial": lambda r: r.multinomial(10, [0.2, 0.3, 0.5], size=(4,)),
    "hypergeometric": lambda r: r.hypergeometric(7, 3, 5, size=(4, 3)),
    "logseries": lambda r: r.logseries(0.5, size=(4, 3)),
    "zipf": lambda r: r.zipf(2.0, size=(4, 3)),
    "vonmises": lambda r: r.vonmises(0.0, 2.0, size=(4, 3)),
    "noncentral_chisquare": lambda r: r.noncentral_chisquare(3.0, 2.0, size=(4, 3)),
    "negative_binomial": lambda r: r.negative_binomial(3.0, 0.5, size=(4, 3)),
    "normal (lists)": lambda r: r.normal([0.0, 1.0], [1.0, 2.0], size=(4, 2)),
    "choice": lambda r: r.choice(5, 3, p=[0.1, 0.4, 0.2, 0.0, 0.3]),
}


@pytest.mark.parametrize("name", list(EAGER))
def test_eager_calls_reuse_compiled_code(name, caplog):
    rng = br.RandomState(0)
    jax.block_until_ready(EAGER[name](rng))     # the first call compiles
    caplog.clear()
    with caplog.at_level(logging.WARNING), jax.log_compiles(True):
        first = EAGER[name](rng)
        second = EAGER[name](rng)
    compiled = [r.getMessage()[:80] for r in caplog.records if "Compiling" in r.getMessage()]
    assert not compiled, f"{name}: an eager call compiled again: {compiled}"
    assert not np.array_equal(np.asarray(first), np.asarray(second))   # new numbers
