"""The booleans behind float spikes (``bools_behind``) and the event products that use them.

Every result is checked against ``x > 0`` on the same floats, and the event product
against the same product with the lookup switched off (the comparison it replaces).
"""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brainevent")

import brainx  # noqa: E402
from brainx import nn  # noqa: E402
from brainx.nn.connectivity import traced_events  # noqa: E402
from brainx.nn.connectivity.traced_events import bools_behind  # noqa: E402


def _found(make_floats, x):
    """Trace ``make_floats`` at ``x``; return ``(floats > 0, bools_behind(floats) or None)``."""
    seen = {}

    def f(x):
        floats = make_floats(x)
        bools = bools_behind(floats)
        seen["found"] = bools is not None
        return floats > 0, (floats > 0) if bools is None else bools

    expected, got = jax.jit(f)(x)
    return seen["found"], np.asarray(expected), np.asarray(got)


@pytest.mark.parametrize("make_floats", [
    lambda v: (v >= 0.5).astype(jnp.float32),
    lambda v: (v >= 0.5).astype(jnp.float32)[2:7],
    lambda v: jnp.reshape((v >= 0.5).astype(jnp.float32), (2, 5))[1],
    lambda v: jax.jit(lambda w: (w < 0.2).astype(jnp.float32))(v)[::2],
    lambda v: nn.surrogate.Sigmoid()(v - 0.5),                  # a custom_jvp spike
], ids=["convert", "slice", "reshape", "nested-jit", "surrogate"])
def test_found_booleans_are_the_events_of_the_floats(make_floats):
    x = jnp.asarray(np.random.RandomState(0).rand(10), jnp.float32)
    found, expected, got = _found(make_floats, x)
    assert found
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("make_floats", [
    lambda v: v * 1.0,                                          # not made from booleans
    lambda v: jax.nn.sigmoid(v),
    lambda v: (v * 10).astype(jnp.int32).astype(jnp.float32),   # made from integers
    lambda v: (v >= 0.5).astype(jnp.float32) * 2.0,             # scaled after the conversion
], ids=["mul", "sigmoid", "int", "scaled"])
def test_other_floats_have_no_booleans_behind_them(make_floats):
    x = jnp.asarray(np.random.RandomState(1).rand(10), jnp.float32)
    assert not _found(make_floats, x)[0]


def test_concrete_and_integer_arrays_have_none():
    assert bools_behind(jnp.ones(3)) is None
    assert bools_behind(np.ones(3)) is None
    assert jax.jit(lambda v: jnp.float32(bools_behind(v) is None))(jnp.ones(3, jnp.int32)) == 1


def _network(seed=3, n=60):
    """LIF spikes into an EventFixedProb (the COBA pattern), as a jitted step and its gradient."""
    lif = nn.init_all_states(nn.LIF(n, R=1.0, tau=5.0, V_th=1.0, V_reset=0.0, V_rest=0.0,
                                    V_initializer=nn.init.Uniform(0.0, 1.2)))
    syn = nn.EventFixedProb(n // 2, n, conn_num=8, conn_weight=0.7, seed=seed)
    drive = jnp.asarray(1.5 + np.random.RandomState(seed).rand(n), jnp.float32)

    def step():
        return lif(drive + syn(lif.get_spike()[: n // 2]))

    def loss(w):
        syn.weight.value = w
        return jnp.sum(brainx.transform.for_loop(lambda i: step(), jnp.arange(5)) ** 2)

    return lif, syn, step, loss


@pytest.mark.parametrize("backend", ["jax_raw", "numba"])
def test_event_product_is_unchanged_and_smaller(backend, monkeypatch):
    if backend == "numba" and not nn.event_backend.has_numba():
        pytest.skip("numba is not installed")

    def run():
        brainx.random.seed(0)
        with nn.use_event_backend(backend), brainx.environ.context(dt=1.0):
            lif, syn, step, loss = _network()
            jitted = brainx.transform.jit(step)
            text = jitted.lower().compile().as_text()
            outs = [jitted() for _ in range(4)]
            V = lif.V.value
            w0 = syn.weight.value
            g = jax.grad(lambda w: brainx.transform.jit(loss)(w))(w0)
        return np.asarray(outs), np.asarray(V), np.asarray(g), text

    ours = run()
    monkeypatch.setattr(traced_events, "bools_behind", lambda x: None)   # compare x > 0 instead
    theirs = run()
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6)
    assert ours[0].sum() > 0                                        # the network spikes
    count = lambda text: sum(" = " in line for line in text.splitlines())  # noqa: E731
    assert count(ours[3]) < count(theirs[3])
