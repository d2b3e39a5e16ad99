"""A jitted write keeps a state's sharding (8 fake devices; tests/test_data_parallel_example.py has
the one-device case).

A state whose value is spread over devices, with no ``sharding`` attribute of its own, is
written inside ``brainx.transform.jit`` with a value that does not depend on the old one
(``jnp.zeros_like(s.value)``): the new value must keep the old value's sharding, not land on one
device. Values are compared with plain JAX.
"""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import brainx

N = 8


def mesh2():
    return brainx.distributed.make_mesh((4, 2), ("data", "model"))


def test_reset_to_a_fresh_value_keeps_the_sharding():
    mesh = mesh2()
    rows = NamedSharding(mesh, P("data"))
    x = jnp.arange(8 * 6, dtype=jnp.float32).reshape(8, 6)
    h = brainx.HiddenState(jax.device_put(x, rows))
    assert getattr(h, "sharding", None) is None          # no sharding attribute: only the value's
    before = h.value.sharding

    @brainx.transform.jit
    def reset():
        h.value = jnp.zeros_like(h.value)

    reset()
    assert h.value.sharding == before
    np.testing.assert_array_equal(h.value, jax.jit(jnp.zeros_like)(x))

    @brainx.transform.jit
    def fill(c):                                          # reads nothing of the state at all
        h.value = jnp.full((8, 6), c)

    fill(2.0)
    assert h.value.sharding == before
    np.testing.assert_array_equal(h.value, jnp.full((8, 6), 2.0))

    @brainx.transform.jit(donate_states=True)
    def reset_donated():
        h.value = jnp.zeros((8, 6))

    reset_donated()
    assert h.value.sharding == before


def test_every_leaf_of_a_tree_and_a_quantity_keeps_its_own_sharding():
    mesh = mesh2()
    a_sh, b_sh = NamedSharding(mesh, P("data", "model")), NamedSharding(mesh, P(None, "model"))
    s = brainx.State({"a": jax.device_put(jnp.ones((8, 4)), a_sh),
                      "b": jax.device_put(jnp.ones((3, 4)), b_sh) * u.mV,
                      "c": jnp.ones(5)})                   # one device: left as JAX places it
    before = {k: leaf.sharding for k, leaf in
              zip("abc", jax.tree.leaves(s.value))}

    @brainx.transform.jit
    def reset():
        s.value = {"a": jnp.zeros((8, 4)), "b": jnp.zeros((3, 4)) * u.mV, "c": jnp.zeros(5)}

    reset()
    after = dict(zip("abc", jax.tree.leaves(s.value)))
    assert after["a"].sharding == before["a"] and after["b"].sharding == before["b"]
    assert s.value["b"].unit == u.mV
    for leaf in after.values():
        np.testing.assert_array_equal(leaf, np.zeros(leaf.shape))


def test_a_value_placed_elsewhere_between_calls_keeps_its_new_place():
    mesh = mesh2()
    h = brainx.HiddenState(jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P("data"))))

    @brainx.transform.jit
    def reset():
        h.value = jnp.zeros((8, 4))

    reset()
    assert h.value.sharding.spec == P("data")
    cols = NamedSharding(mesh, P(None, "model"))
    h.value = jax.device_put(h.value + 1, cols)           # the user gives another sharding
    reset()
    assert h.value.sharding == cols
    h.value = jnp.ones((8, 4))                            # one device again: JAX places it
    reset()
    assert len(h.value.sharding.device_set) == 1


def test_a_sharding_attribute_still_decides():
    mesh = mesh2()
    h = brainx.HiddenState(jnp.ones((8, 4)))
    brainx.distributed.shard_states({"h": h}, {brainx.HiddenState: P("data")}, mesh)

    @brainx.transform.jit
    def reset():
        h.value = jnp.zeros((8, 4))

    reset()
    assert h.value.sharding == NamedSharding(mesh, P("data"))


def test_kept_placement_matches_plain_jax_over_several_steps():
    """A step that runs on a sharded hidden state, then resets it: plain JAX's numbers, and the
    state stays where it was from one step to the next."""
    mesh = mesh2()
    rng = np.random.RandomState(0)
    w0 = rng.randn(6, 6).astype(np.float32) * 0.3
    xs = rng.randn(3, 8, 6).astype(np.float32)
    h0 = rng.randn(8, 6).astype(np.float32)
    w = brainx.ParamState(jnp.asarray(w0))
    h = brainx.HiddenState(jax.device_put(jnp.asarray(h0), NamedSharding(mesh, P("data"))))
    before = h.value.sharding

    @brainx.transform.jit
    def step(x):
        y = jnp.tanh(x @ w.value + h.value)
        h.value = jnp.zeros_like(h.value)                 # the end of a trial
        return y.sum()

    hp = h0
    for x in xs:
        expected = jnp.tanh(x @ w0 + hp).sum()
        hp = np.zeros_like(hp)
        got = step(jax.device_put(x, NamedSharding(mesh, P("data"))))
        np.testing.assert_allclose(got, expected, rtol=1e-5)
        assert h.value.sharding == before


def test_the_sharding_is_kept_as_spelled_and_a_new_shape_is_left_to_xla():
    mesh = mesh2()
    for spec in (P("data", None), P(None), P(("data", "model"))):
        sharding = NamedSharding(mesh, spec)
        h = brainx.HiddenState(jax.device_put(jnp.ones((8, 4)), sharding))

        @brainx.transform.jit
        def reset():
            h.value = jnp.zeros((8, 4))

        reset()
        assert h.value.sharding == sharding, spec     # the same object's spelling, not P(...)
    h = brainx.HiddenState(jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P("data"))))

    @brainx.transform.jit
    def grow():
        h.value = jnp.zeros((3, 5))                   # another shape: the old sharding cannot fit

    grow()
    np.testing.assert_array_equal(h.value, np.zeros((3, 5)))
