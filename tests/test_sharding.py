"""Sharding metadata, jit shardings and donate_states on one device (the fake-device tests
are in tests/multidevice/)."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import brainx


def mesh():
    return brainx.distributed.make_mesh((1,), ("data",))


def test_spec_at_creation_is_placed_with_the_model():
    class Net(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = brainx.ParamState(jnp.ones((2, 4)), sharding=P(None, "data"))
            self.h = brainx.HiddenState(jnp.zeros(4))

    net = Net()
    placed = brainx.distributed.shard_states(net, mesh=mesh())
    assert set(placed) == {("w",), ("h",)}
    assert net.w.value.sharding.spec == P(None, "data") and net.h.sharding.spec == P()
    assert brainx.distributed.state_sharding(net.w) == NamedSharding(mesh(), P(None, "data"))


def test_a_spec_without_mesh_is_an_error_naming_the_state():
    s = brainx.State(jnp.zeros(3), name="s", sharding=P("data"))
    with pytest.raises(ValueError, match=r"name='s'.*pass mesh="):
        brainx.distributed.shard_states([s])


def test_jit_with_state_shardings_equals_plain_jit():
    h = brainx.HiddenState(jnp.arange(4.0))
    brainx.distributed.shard_states([h], {brainx.HiddenState: P("data")}, mesh())
    step = brainx.transform.jit(lambda x: (h.__setattr__("value", h.value * x), h.value.sum())[1])
    assert float(step(2.0)) == 12.0 and float(step(2.0)) == 24.0
    np.testing.assert_allclose(np.asarray(h.value), np.arange(4.0) * 4)
    assert h.value.sharding.spec == P("data")


def test_donate_states_updates_and_deletes_the_old_buffer():
    h = brainx.HiddenState(jnp.ones(3), name="h")
    w = brainx.ParamState(jnp.full(3, 2.0))

    @brainx.transform.jit(donate_states=brainx.HiddenState)
    def step(x):
        h.value = h.value * w.value + x
        return h.value.sum()

    old, old_w = h.value, w.value
    assert float(step(1.0)) == 9.0
    assert old.is_deleted() and not old_w.is_deleted()   # only written, selected states
    np.testing.assert_allclose(np.asarray(h.value), 3.0)
    with pytest.raises((RuntimeError, ValueError), match="deleted"):  # the fast path says ValueError
        old + 1                                          # the old value is gone
    h.value = old
    with pytest.raises(ValueError, match=r"HiddenState\(.*name='h'.*donated to an earlier call"):
        step(1.0)
    h.value = w.value                                    # the same buffer as a read state
    with pytest.raises(ValueError, match=r"name='h'.*also another state's value"):
        step(1.0)
    h.value = jnp.ones(3)
    assert float(step.lower(1.0).compile()(1.0)) == 9.0  # lower/compile keep the donation


def test_donate_states_by_list_and_eval_shape():
    a, b = brainx.State(jnp.ones(2)), brainx.State(jnp.ones(2))
    f = brainx.transform.jit(lambda: (a.__setattr__("value", a.value + 1),
                                      b.__setattr__("value", b.value + 1)), donate_states=[a])
    old_a, old_b = a.value, b.value
    f()
    assert old_a.is_deleted() and not old_b.is_deleted()
    assert f.eval_shape() == (None, None)


def test_jit_shardings_without_states_still_compile_plainly():
    f = brainx.transform.jit(lambda x: x + 1, in_shardings=NamedSharding(mesh(), P()))
    assert float(f(jnp.float32(1.0))) == 2.0
