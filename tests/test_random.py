"""Random numbers as state, against jax.random with explicit keys."""

import brainunit as u
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import brainx
import brainx.random as br
from brainx import transform as bt
from brainx.errors import BatchAxisError, TracerLeakError


def raw(x):
    """An array as numpy; a typed key as its raw ``uint32`` data (the bits it draws with)."""
    if jnp.issubdtype(getattr(x, "dtype", np.float32), jax.dtypes.prng_key):
        x = jr.key_data(x)
    return np.asarray(x)


def same(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(raw(x), raw(y)), a, b)


def draw_key(key):
    """(next key, key used by one draw): what one sampler call does to the key."""
    nxt, used = jr.split(key)
    return nxt, used


SAMPLERS = {
    "rand": (lambda r, **k: r.rand(2, 3, **k), lambda key: jr.uniform(key, (2, 3))),
    "randn": (lambda r, **k: r.randn(4, **k), lambda key: jr.normal(key, (4,))),
    "random": (lambda r, **k: r.random((2,), **k), lambda key: jr.uniform(key, (2,))),
    "uniform": (lambda r, **k: r.uniform(1.0, 3.0, size=4, **k),
                lambda key: jr.uniform(key, (4,), minval=1.0, maxval=3.0)),
    "normal": (lambda r, **k: r.normal(1.0, 2.0, size=3, **k),
               lambda key: jr.normal(key, (3,)) * 2.0 + 1.0),
    "truncated_normal": (lambda r, **k: r.truncated_normal(-1.0, 1.0, size=3, **k),
                         lambda key: jr.truncated_normal(key, -1.0, 1.0, (3,))),
    "bernoulli": (lambda r, **k: r.bernoulli(0.3, size=5, **k),
                  lambda key: jr.bernoulli(key, 0.3, (5,))),
    "randint": (lambda r, **k: r.randint(5, size=4, **k), lambda key: jr.randint(key, (4,), 0, 5)),
    "choice": (lambda r, **k: r.choice(5, size=3, **k), lambda key: jr.choice(key, 5, (3,))),
    "permutation": (lambda r, **k: r.permutation(6, **k), lambda key: jr.permutation(key, 6)),
    "shuffle": (lambda r, **k: r.shuffle(jnp.arange(6), **k),
                lambda key: jr.permutation(key, jnp.arange(6))),
    "exponential": (lambda r, **k: r.exponential(2.0, size=3, **k),
                    lambda key: jr.exponential(key, (3,)) * 2.0),
    "gamma": (lambda r, **k: r.gamma(2.0, size=3, **k), lambda key: jr.gamma(key, 2.0, (3,))),
    "beta": (lambda r, **k: r.beta(2.0, 3.0, size=3, **k),
             lambda key: jr.beta(key, 2.0, 3.0, (3,))),
    "poisson": (lambda r, **k: r.poisson(3.0, size=3, **k), lambda key: jr.poisson(key, 3.0, (3,))),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_each_sampler_matches_jax_and_advances_the_key_once(name):
    call, want = SAMPLERS[name]
    rng = br.RandomState(11)
    key = jr.PRNGKey(11)
    same(rng.value, key)
    for _ in range(2):
        key, used = draw_key(key)
        same(call(rng), want(used))
        same(rng.value, key)


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_key_argument_leaves_the_state_alone(name):
    call, want = SAMPLERS[name]
    rng = br.RandomState(2)
    before = rng.value
    same(call(rng, key=jr.PRNGKey(5)), want(jr.PRNGKey(5)))
    same(call(rng, key=5), want(jr.PRNGKey(5)))
    same(rng.value, before)


def test_module_functions_draw_from_default():
    br.seed(3)
    key = jr.PRNGKey(3)
    for name in sorted(SAMPLERS):
        key, used = draw_key(key)
        call, want = SAMPLERS[name]
        same(call(br), want(used))
    same(br.get_key(), key)
    same(br.DEFAULT.value, key)


def test_seed_forms_and_errors():
    rng = br.RandomState(0)
    rng.seed(4)
    same(rng.value, jr.PRNGKey(4))
    rng.seed(jr.PRNGKey(9))
    same(rng.value, jr.PRNGKey(9))
    rng.seed(np.int64(9))
    same(rng.value, jr.PRNGKey(9))
    rng.seed()
    assert rng.value.shape == () and jnp.issubdtype(rng.value.dtype, jax.dtypes.prng_key)
    for bad in (1.5, jnp.zeros(3, jnp.uint32), "seed", True):
        with pytest.raises((ValueError, TypeError), match="seed"):
            rng.seed(bad)
    typed = br.RandomState(jr.key(1))
    same(jr.key_data(jr.split(jr.key(1))[0]), jr.key_data(
        (typed.normal(), typed.value)[1]))
    with pytest.raises(ValueError, match="positive"):
        rng.split_key(0)


def test_unseeded_generators_come_from_default():
    br.seed(5)
    rng = br.RandomState()
    nxt, used = draw_key(jr.PRNGKey(5))
    same(rng.value, used)
    same(br.DEFAULT.value, nxt)
    assert br.default_rng() is br.DEFAULT
    same(br.default_rng(3).value, jr.PRNGKey(3))


def test_seed_context_restores_the_key():
    br.seed(1)
    before = br.get_key()
    with br.seed_context(42):
        a = br.randn(2)
    with br.seed_context(42):
        b = br.randn(2)
    same(a, b)
    same(br.get_key(), before)


def test_split_key_n():
    rng = br.RandomState(8)
    keys = rng.split_key(3)
    want = jr.split(jr.PRNGKey(8), 4)
    same(keys, want[1:])
    same(rng.value, want[0])


def test_units():
    rng = br.RandomState(0)
    v = rng.uniform(-70 * u.mV, -50 * u.mV, size=100)
    assert v.unit == u.mV and bool(((v >= -70 * u.mV) & (v < -50 * u.mV)).all())
    n = rng.normal(-60 * u.mV, 2 * u.mV, size=3)
    key = jr.split(jr.split(jr.PRNGKey(0))[0])[1]
    np.testing.assert_allclose(n.to(u.mV).mantissa, jr.normal(key, (3,)) * 2 - 60, rtol=1e-6)
    t = rng.truncated_normal(-1 * u.volt, 1 * u.volt, size=50, loc=0 * u.mV, scale=400 * u.mV)
    assert t.unit == u.volt and bool((u.math.abs(t) <= 1 * u.volt).all())
    assert rng.exponential(3 * u.ms, size=2).unit == u.ms
    assert rng.choice(jnp.arange(4.0) * u.mV, size=2).unit == u.mV


def test_invalid_parameters_leave_the_key_alone():
    rng = br.RandomState(0)
    before = rng.value
    with pytest.raises(ValueError, match="p must be"):
        rng.bernoulli(1.5)
    with pytest.raises(ValueError, match="lam"):
        rng.poisson(-1.0)
    with pytest.raises(ValueError, match="lower"):
        rng.truncated_normal(1.0, -1.0)
    same(rng.value, before)


# --- through the transforms -------------------------------------------------------------

def test_successive_jit_calls_draw_new_numbers():
    rng = br.RandomState(0)
    f = bt.jit(lambda x: x + rng.normal(size=2))
    key = jr.PRNGKey(0)
    for _ in range(3):
        key, used = draw_key(key)
        same(f(jnp.zeros(2)), jr.normal(used, (2,)))
    same(rng.value, key)


def test_loop_steps_draw_new_numbers():
    rng = br.RandomState(1)
    out = bt.jit(lambda: bt.map(lambda x: x + rng.normal(), jnp.zeros(4)))()

    def pure(key, x):
        key, used = draw_key(key)
        return key, x + jr.normal(used)
    key, want = jax.lax.scan(pure, jr.PRNGKey(1), jnp.zeros(4))
    same(out, want)
    same(rng.value, key)


def test_checkpoint_reuses_the_same_numbers():
    """Gradients with and without checkpoint agree, and the key advances equally."""
    w = brainx.ParamState(jnp.array([0.5, -1.0]))

    def step():
        return jnp.sum(jnp.sin(w.value * rng.normal(size=2)) ** 2)

    results = []
    for wrap in (lambda f: f, bt.checkpoint):
        rng = br.RandomState(3)
        g = bt.jit(bt.grad(wrap(step), grad_states=w))()
        results.append((g, rng.value))
    same(results[0], results[1])
    used = draw_key(jr.PRNGKey(3))[1]
    noise = jr.normal(used, (2,))
    want = jax.grad(lambda w_: jnp.sum(jnp.sin(w_ * noise) ** 2))(w.value)
    np.testing.assert_allclose(results[0][0], want, rtol=1e-6)


def test_checkpointed_scan_key_count():
    rng = br.RandomState(4)
    step = bt.checkpoint(lambda x: x * rng.uniform())
    bt.jit(lambda: bt.map(step, jnp.ones(5)))()
    key = jr.PRNGKey(4)
    for _ in range(5):
        key, _ = draw_key(key)
    same(rng.value, key)


def test_vmap_gives_each_lane_its_own_stream():
    rng = br.RandomState(6)
    out = bt.vmap(lambda x: x + rng.normal(size=2))(jnp.zeros((3, 2)))
    nxt, lanes = jr.split(jr.PRNGKey(6))
    want = jax.vmap(lambda k: jr.normal(draw_key(k)[1], (2,)))(jr.split(lanes, 3))
    same(out, want)
    same(rng.value, nxt)
    assert not np.allclose(out[0], out[1])


def test_raw_jax_vmap_over_a_sampler_is_an_error():
    rng = br.RandomState(0)
    before = rng.value
    with pytest.raises(BatchAxisError, match="brainx.transform.vmap"):
        jax.vmap(lambda x: x + rng.normal())(jnp.zeros(3))
    same(rng.value, before)
    with pytest.raises(BatchAxisError, match="brainx.transform.vmap"):
        jax.vmap(bt.jit(lambda x: x + rng.normal()))(jnp.zeros(3))
    same(rng.value, before)
    inner_raw = bt.vmap(lambda x: jax.vmap(lambda y: y + rng.normal())(x))
    with pytest.raises(BatchAxisError):
        inner_raw(jnp.zeros((2, 3)))
    same(rng.value, before)


def test_raw_jax_jit_over_a_sampler_is_a_tracer_leak():
    # the draw under raw jax.jit lends the key to jit's trace; it ends holding a tracer,
    # so the next draw refuses it and the generator gets its key back
    rng = br.RandomState(0)
    before = rng.value
    jax.jit(lambda: rng.normal())()
    with pytest.raises(TracerLeakError, match="has ended"):
        rng.normal()
    same(rng.value, before)


def test_nested_vmap_and_chunked_map_draw_distinct_numbers():
    rng = br.RandomState(9)
    inner = bt.vmap(lambda x: x + rng.normal())
    grid = bt.jit(bt.vmap(lambda xs: inner(xs)))(jnp.zeros((2, 3)))
    assert len(set(np.asarray(grid).ravel().tolist())) == 6
    key = rng.value
    chunked = bt.jit(lambda: bt.map(lambda x: x + rng.normal(), jnp.zeros(7), batch_size=3))()
    assert len(set(np.asarray(chunked).tolist())) == 7
    assert not (rng.value == key).all()


def test_vmap_new_states_inside_jit_draws_new_weights_each_call():
    rng = br.RandomState(2)

    @bt.jit
    def init_and_sum():
        w = bt.vmap_new_states(lambda: brainx.ParamState(rng.normal(size=2)), axis_size=3)()
        return w.value.sum(1)

    a, b = init_and_sum(), init_and_sum()
    assert a.shape == (3,) and not np.allclose(a, b)


def test_a_batch_of_generators_declared_in_states():
    br.seed(4)
    rngs = bt.vmap_new_states(lambda: br.RandomState(), axis_size=3)()
    assert rngs.value.shape == (3,)
    keys = rngs.value
    draw = bt.vmap(lambda: rngs.normal(), in_states=rngs)
    out = draw()
    want = jax.vmap(lambda k: jr.normal(draw_key(k)[1]))(keys)
    same(out, want)
    same(rngs.value, jax.vmap(lambda k: draw_key(k)[0])(keys))
    assert len(set(np.asarray(out).tolist())) == 3


def test_generator_in_out_states_forks_into_lanes():
    rng = br.RandomState(12)
    out = bt.vmap(lambda: rng.normal(), out_states=rng, axis_size=3)()
    _, lanes = jr.split(jr.PRNGKey(12))
    lane_keys = jr.split(lanes, 3)
    same(out, jax.vmap(lambda k: jr.normal(draw_key(k)[1]))(lane_keys))
    same(rng.value, jax.vmap(lambda k: draw_key(k)[0])(lane_keys))
