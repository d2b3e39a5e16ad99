"""The Poisson counts of `nn.PoissonBackground`: Philox against its published answers, the native
kernel against the plain-JAX path bit for bit, the table against scipy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from brainx.nn.connectivity.native import build
from brainx.nn.dynamics.poisson_draws import (POISSON_TARGET, philox_uniform, poisson_counts,
                                              poisson_table)

needs_native = pytest.mark.skipif(build.load() is None, reason="no native kernels here")

# Random123's known answers for Philox4x32-10: (counter, key) -> output words
KNOWN = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
         ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
         ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
          (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


@pytest.mark.parametrize("counter, key, words", KNOWN)
def test_philox_gives_the_published_answers(counter, key, words):
    from brainx.nn.dynamics.poisson_draws import _philox4x32
    c = [jnp.array([v], jnp.uint32) for v in counter]
    out = _philox4x32(*c, *(jnp.uint32(k) for k in key))
    assert [int(w[0]) for w in out] == list(words)


def test_uniform_numbers_are_the_top_24_bits_of_the_words_at_counters_0_1_2():
    u = np.asarray(philox_uniform(jnp.array([0, 0], jnp.uint32), 6))
    assert np.array_equal(u[:4] * 2 ** 24, np.array(KNOWN[0][2]) >> 8)
    assert u.dtype == np.float32 and 0 <= u.min() and u.max() < 1


def test_the_table_is_scipys_distribution_function():
    lam = np.array([1.6, 0.0, 1.6, 40.0])
    table, group = poisson_table(lam)
    assert group.tolist() == [1, 0, 1, 2]
    cap = table.shape[1]
    assert scipy.stats.poisson.sf(cap - 1, 40.0) < 2.0 ** -30 <= scipy.stats.poisson.sf(cap - 2, 40.0)
    np.testing.assert_array_equal(table[2], scipy.stats.poisson.cdf(np.arange(cap), 40.0)
                                  .astype(np.float32))
    assert np.all(table[0] == 1.0)              # a zero mean always counts 0


@needs_native
@pytest.mark.parametrize("lam", [[0.168, 1.68, 2.32], [40.0, 0.0, 3.0]])    # short and long rows
def test_native_counts_equal_the_plain_jax_counts(lam):
    table, group = poisson_table(np.repeat(lam, 333))
    key = jnp.array([12345, 678], jnp.uint32)
    run = jax.jit(lambda k, native: poisson_counts(k, table, group, (2, group.size), native),
                  static_argnums=1)
    a, b = run(key, True), run(key, False)
    assert a.shape == (2, group.size) and a.dtype == jnp.int32
    np.testing.assert_array_equal(a, b)
    keys = jnp.array([[1, 2], [3, 4], [5, 6]], jnp.uint32)
    va = jax.vmap(lambda k: poisson_counts(k, table, group, (group.size,), True))(keys)
    vb = jax.vmap(lambda k: poisson_counts(k, table, group, (group.size,), False))(keys)
    np.testing.assert_array_equal(va, vb)
    assert not np.array_equal(va[0], va[1])      # each key its own numbers


@needs_native
def test_large_means_follow_the_poisson_distribution():
    table, group = poisson_table(np.full(5000, 40.0))       # cap > 32: the search by halves
    keys = jax.random.split(jax.random.key(1), 20)
    c = np.asarray(jax.vmap(lambda k: poisson_counts(jax.random.bits(k, (2,), jnp.uint32), table,
                                                     group, (5000,)))(keys)).ravel()
    edges = np.arange(25, 57)
    observed = np.histogram(c, np.concatenate([[-1], edges, [1000]]))[0]
    cdf = scipy.stats.poisson.cdf(np.concatenate([[-1], edges, [1000]]) - 1, 40.0)
    chi2, p = scipy.stats.chisquare(observed, np.diff(cdf) * c.size / np.diff(cdf).sum())
    assert p > 1e-3, (chi2, p)


@needs_native
def test_the_kernel_refuses_a_group_outside_the_table():
    call = jax.ffi.ffi_call(POISSON_TARGET, jax.ShapeDtypeStruct((3,), jnp.int32))
    with pytest.raises(Exception, match="neuron 2 has group 5, outside"):
        jax.block_until_ready(call(jnp.array([1, 2], jnp.uint32), jnp.ones((2, 4), jnp.float32),
                                   jnp.array([0, 1, 5], jnp.int32), jnp.zeros(1, jnp.int32)))


def test_a_shape_that_is_not_whole_populations_is_refused():
    table, group = poisson_table(np.ones(4))
    with pytest.raises(ValueError, match="last axis of \\(3,\\) must be the 4 neurons"):
        poisson_counts(jnp.array([1, 2], jnp.uint32), table, group, (3,))


@pytest.mark.parametrize("native", [pytest.param(True, marks=needs_native), False])
def test_a_block_from_start_draws_the_numbers_of_those_neurons(native):
    """A device's block of a partitioned population (start = its first neuron) gets the counts
    those neurons get in the whole population, whatever start mod 4 is."""
    table, group = poisson_table(np.repeat([0.5, 1.6, 2.3], 40))
    key = jnp.array([99, 7], jnp.uint32)
    whole = np.asarray(poisson_counts(key, table, group, (120,), native))
    for start in (0, 3, 40, 77):
        part = jax.jit(lambda s: poisson_counts(key, table, group[start:start + 37], (37,), native,
                                                start=s))(start)
        np.testing.assert_array_equal(part, whole[start:start + 37])
