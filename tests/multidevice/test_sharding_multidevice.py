"""Sharded states, jit shardings, donation, shard_map, pmap2 and collectives on 8 fake devices.

Every sharded result is compared with the same computation on one device.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import brainx
from dp_model import build, data, jit_step, shard_map_step, train

N = 8


def test_eight_devices():
    assert jax.device_count() == N


def mesh1():
    return brainx.distributed.make_mesh((N,), ("data",))


def batches(n=3, batch=16):
    return [data(batch, seed=i) for i in range(n)]


def single_device_run(bs):
    net, params, opt = build(16)
    losses = train(jit_step(net, params, opt), bs)
    return losses, {k: jax.tree.map(np.asarray, v.value) for k, v in params.items()}


def assert_tree_close(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(np.asarray(x), y, rtol=1e-5, atol=1e-6),
                 a, b)


@pytest.fixture(scope="module")
def reference():
    """Losses and parameters of the training run on one device."""
    return single_device_run(batches())


def test_jit_data_parallel_training_matches_one_device(reference):
    bs = batches()
    ref_losses, ref_params = reference
    net, params, opt = build(16)
    mesh = mesh1()
    brainx.distributed.shard_states(net, {brainx.HiddenState: P("data")}, mesh)
    brainx.distributed.shard_states(opt, {}, mesh)
    step = jit_step(net, params, opt)
    sharded = [(jax.device_put(xs, NamedSharding(mesh, P(None, "data"))),
                jax.device_put(y, NamedSharding(mesh, P("data")))) for xs, y in bs]
    losses = train(step, sharded)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    for k, v in params.items():
        assert_tree_close(v.value, ref_params[k])
        # the states stay where they were placed: no resharding between calls
        assert jax.tree.leaves(v.value)[0].sharding.spec == P()
    assert net.h.value.sharding.spec == P("data")
    # the compiled step all-reduces the gradients, and gathers nothing
    hlo = step.lower(*sharded[0]).compile().as_text()
    assert "all-reduce" in hlo
    assert "all-gather" not in hlo


def test_shard_map_pmean_training_matches_one_device(reference):
    bs = batches()
    ref_losses, ref_params = reference
    net, params, opt = build(16)
    step = shard_map_step(net, params, opt, mesh1())
    losses = train(step, bs)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    for k, v in params.items():
        assert_tree_close(v.value, ref_params[k])
    assert net.h.value.shape == (16, 16) and net.h.value.sharding.spec == P("data")


def test_state_shardings_are_jit_out_shardings():
    mesh = brainx.distributed.make_mesh((2, 4), ("data", "model"))
    w = brainx.ParamState(jnp.arange(32.0).reshape(4, 8), sharding=P(None, "model"))
    h = brainx.HiddenState(jnp.ones((6, 4)))
    brainx.distributed.shard_states({"w": w, "h": h}, {brainx.HiddenState: P("data")}, mesh)
    assert w.value.sharding.spec == P(None, "model")

    @brainx.transform.jit
    def step():
        h.value = h.value @ w.value[:, :4] * 0.01   # a result XLA would not keep split by itself
        w.value = w.value + 1.0
        return h.value.sum()

    ref_h = np.ones((6, 4)) @ (np.arange(32.0).reshape(4, 8)[:, :4]) * 0.01
    total = step()
    np.testing.assert_allclose(np.asarray(h.value), ref_h, rtol=1e-6)
    np.testing.assert_allclose(float(total), ref_h.sum(), rtol=1e-6)
    assert h.value.sharding.spec == P("data") and w.value.sharding.spec == P(None, "model")


def test_jit_in_and_out_shardings_of_arguments():
    mesh = mesh1()
    s = brainx.State(jnp.zeros(16))
    f = brainx.transform.jit(lambda x: (s.__setattr__("value", s.value + x), x * 2)[1],
                             in_shardings=NamedSharding(mesh, P("data")),
                             out_shardings=NamedSharding(mesh, P()))
    out = f(jnp.arange(16.0))
    np.testing.assert_allclose(np.asarray(out), np.arange(16.0) * 2)
    np.testing.assert_allclose(np.asarray(s.value), np.arange(16.0))
    assert out.sharding.spec == P()


def test_one_in_sharding_is_broadcast_over_every_argument_like_jax_jit():
    mesh = mesh1()
    sh = NamedSharding(mesh, P("data"))
    s = brainx.State(jnp.zeros(16))

    def body(x, y):
        s.value = s.value + x
        return x * y

    x, y = jnp.arange(16.0), jnp.full(16, 2.0)
    want = jax.jit(lambda x, y: x * y, in_shardings=sh)(x, y)
    for opts in ({}, {"donate_states": True}):
        s.value = jnp.zeros(16)
        f = brainx.transform.jit(body, in_shardings=sh, **opts)
        np.testing.assert_allclose(np.asarray(f(x, y)), np.asarray(want))
        np.testing.assert_allclose(np.asarray(s.value), np.arange(16.0))
        main = [l for l in f.lower(x, y).as_text().splitlines() if "@main(" in l][0]
        assert main.count('[{"data"}]') >= 2  # both arguments sharded
        # Another number of arguments gets its own compiled function.
        g = brainx.transform.jit(lambda *xs: sum(xs), in_shardings=sh, **opts)
        np.testing.assert_allclose(np.asarray(g(x)), np.asarray(x))
        np.testing.assert_allclose(np.asarray(g(x, y, y)), np.asarray(x + 4))


def test_spec_that_does_not_fit_names_the_state():
    mesh = mesh1()
    bad = brainx.HiddenState(jnp.zeros((6, 3)), name="v")
    with pytest.raises(ValueError, match=r"HiddenState\(f32\[6,3\], name='v'\).*size 6.*8 equal parts"):
        brainx.distributed.shard_states({"v": bad}, {brainx.HiddenState: P("data")}, mesh)
    with pytest.raises(ValueError, match=r"name='v'.*mesh axis 'model'"):
        brainx.distributed.shard_states([bad], {bad: P(None, "model")}, mesh)
    with pytest.raises(ValueError, match=r"name='v'.*shards 3 axes"):
        brainx.distributed.shard_states([bad], {bad: P(None, None, "data")}, mesh)
    # an unknown mesh axis is named before a dimension that would not split (docs/distributed.md)
    with pytest.raises(ValueError, match=r"name='v'.*mesh axis 'model'"):
        brainx.distributed.shard_states([bad], {bad: P("data", "model")}, mesh)


def test_donate_states_on_a_mesh():
    mesh = mesh1()
    h = brainx.HiddenState(jnp.ones(64))
    brainx.distributed.shard_states([h], {brainx.HiddenState: P("data")}, mesh)
    step = brainx.transform.jit(lambda: h.__setattr__("value", h.value * 2),
                                donate_states=True)
    old = h.value
    step()
    assert old.is_deleted()
    np.testing.assert_allclose(np.asarray(h.value), 2.0)
    assert h.value.sharding.spec == P("data")


def test_shard_map_split_and_replicated_states():
    mesh = mesh1()
    w = brainx.ParamState(jnp.array(3.0))
    acc = brainx.State(jnp.zeros(16), sharding=P("data"))    # its own spec: split
    total = brainx.State(jnp.zeros(()))

    @brainx.transform.shard_map(mesh=mesh, in_specs=P("data"), out_specs=P("data"))
    def f(x):
        acc.value = acc.value + w.value * x
        total.value = jax.lax.psum(x.sum(), "data")
        return x * jax.lax.axis_index("data")

    x = jnp.arange(16.0)
    out = f(x)
    np.testing.assert_allclose(np.asarray(out), np.arange(16.0) * np.repeat(np.arange(8), 2))
    np.testing.assert_allclose(np.asarray(acc.value), 3 * np.arange(16.0))
    np.testing.assert_allclose(float(total.value), np.arange(16.0).sum())
    assert acc.value.sharding.spec == P("data")
    out2 = brainx.transform.jit(f)(x)                      # the same inside jit
    np.testing.assert_allclose(np.asarray(out2), np.asarray(out))
    np.testing.assert_allclose(np.asarray(acc.value), 6 * np.arange(16.0))


def test_shard_map_shape_error_of_an_undeclared_per_device_state_points_to_state_in_specs():
    mesh = mesh1()
    buffer = brainx.State(jnp.zeros(16), name="buffer")      # no spec: enters whole

    def accumulate(x):
        buffer.value = buffer.value + x                     # (16,) + a (2,) block
        return x

    f = brainx.transform.shard_map(accumulate, mesh, in_specs=P("data"), out_specs=P("data"))
    with pytest.raises(TypeError, match=r"incompatible shapes.*name='buffer'.*state_in_specs"):
        f(jnp.arange(16.0))
    np.testing.assert_array_equal(np.asarray(buffer.value), np.zeros(16))
    declared = brainx.transform.shard_map(accumulate, mesh, in_specs=P("data"),
                                          out_specs=P("data"), state_in_specs={buffer: P("data")})
    declared(jnp.arange(16.0))
    np.testing.assert_allclose(np.asarray(buffer.value), np.arange(16.0))
    with pytest.raises(TypeError, match="incompatible shapes") as info:   # nothing split: as JAX says
        brainx.transform.shard_map(lambda x: x + jnp.ones(3), mesh, in_specs=P(),
                                   out_specs=P())(jnp.ones(2))
    assert "state_in_specs" not in str(info.value)


def test_pmean_states_keeps_a_replicated_state_equal():
    mesh = mesh1()
    rate = brainx.State(jnp.zeros(()))

    def count(spikes):
        rate.value = spikes.mean()
        brainx.distributed.pmean_states(rate, "data")

    spikes = (jnp.arange(32) % 3 == 0).astype(jnp.float32)
    brainx.transform.shard_map(count, mesh, in_specs=P("data"), out_specs=P())(spikes)
    np.testing.assert_allclose(float(rate.value), float(spikes.mean()), rtol=1e-6)


def test_pmap2_matches_vmap2():
    def run(mapping):
        h = brainx.HiddenState(jnp.arange(24.0).reshape(N, 3))
        w = brainx.ParamState(jnp.array(0.5))

        def step(x):
            h.value = h.value * w.value + x
            return h.value.sum()
        out = mapping(step, state_in_axes=brainx.HiddenState)(jnp.arange(float(N)))
        return np.asarray(out), np.asarray(h.value), h

    ref_out, ref_h, _ = run(lambda f, **kw: brainx.transform.vmap2(f, **kw))
    out, hv, h = run(lambda f, **kw: brainx.transform.pmap2(f, axis_name="i", **kw))
    np.testing.assert_allclose(out, ref_out)
    np.testing.assert_allclose(hv, ref_h)
    assert len(h.value.sharding.device_set) == N


def test_pmap2_collective_and_too_many_lanes():
    f = brainx.transform.pmap2(lambda x: jax.lax.psum(x, "i"), axis_name="i")
    np.testing.assert_allclose(np.asarray(f(jnp.arange(4.0))), [6.0] * 4)
    with pytest.raises(ValueError, match="only 8 devices"):
        f(jnp.arange(9.0))


def test_pmap2_new_states_places_one_slice_per_device():
    class Counter(brainx.nn.Module):
        def init_state(self):
            self.count = brainx.ShortTermState(brainx.random.rand(2))

    c = Counter()
    brainx.random.seed(1)
    groups = brainx.transform.pmap2_new_states(c, {})
    assert groups[0] == [c.count] and c.count.value.shape == (N, 2)
    assert len(c.count.value.sharding.device_set) == N
    assert len({tuple(np.asarray(r)) for r in c.count.value}) == N   # each device its own draw


def test_nn_map_with_pmap_runs_one_copy_per_device():
    class Readout(brainx.nn.Module):
        def init_state(self):
            self.w = brainx.ParamState(brainx.random.rand(3))

        def update(self, x):
            return x @ self.w.value

    brainx.random.seed(2)
    ensemble = brainx.nn.Map(Readout(), init_map_size=N, behavior="pmap")
    ensemble.init_all_states()
    w = np.asarray(ensemble.module.w.value)
    assert w.shape == (N, 3) and len(ensemble.module.w.value.sharding.device_set) == N
    xs = np.arange(N * 3, dtype=np.float32).reshape(N, 3)
    np.testing.assert_allclose(ensemble.update(jnp.asarray(xs)), (xs * w).sum(axis=1),
                               rtol=1e-5)
