"""vmap2 / StatefulMapping / vmap2_new_states against per-lane eager runs."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.errors import BatchAxisError
from brainx.transform import StatefulMapping, jit, vmap2, vmap2_new_states


def test_filters_select_batched_states_like_per_lane_eager_runs():
    h0 = jnp.arange(6.0).reshape(3, 2)
    h = brainx.HiddenState(h0)
    w = brainx.ParamState(jnp.array([2.0, 3.0]))
    xs = jnp.array([1.0, -1.0, 0.5])

    def step(x):
        h.value = jnp.tanh(h.value * w.value + x)
        return h.value.sum()

    out = vmap2(step, state_in_axes=brainx.HiddenState)(xs)
    ref_h = jnp.stack([jnp.tanh(h0[i] * w.value + xs[i]) for i in range(3)])
    np.testing.assert_allclose(h.value, ref_h, rtol=1e-6)
    np.testing.assert_allclose(out, ref_h.sum(1), rtol=1e-6)
    assert w.value.tolist() == [2.0, 3.0]
    # the same under jit, with the state on axis 1 and a tag filter
    q = brainx.State(jnp.arange(6.0).reshape(2, 3), tag="lanes")
    got = jit(vmap2(lambda x: q.value.sum() * x, state_in_axes={1: "lanes"}))(jnp.ones(3))
    assert got.tolist() == [3.0, 5.0, 7.0]


def test_state_out_axes_and_no_mapped_argument():
    c = brainx.State(jnp.zeros(()))
    out = vmap2(lambda x: c.__setattr__("value", c.value + x), state_out_axes={1: c})
    out(jnp.ones((2, 3)))
    assert c.value.shape == (3, 2)  # the lanes along axis 1
    s = brainx.HiddenState(jnp.arange(4.0))
    assert vmap2(lambda: s.value * 2, state_in_axes=s)().tolist() == [0.0, 2.0, 4.0, 6.0]
    with pytest.raises(ValueError, match="nothing is mapped"):
        vmap2(lambda: s.value)()


def test_undeclared_per_lane_writes_follow_the_policy():
    total = brainx.State(jnp.zeros(()))

    def acc(x):
        total.value = total.value + x
        return total.value

    with pytest.raises(BatchAxisError, match="unexpected_out_state_mapping='raise'"):
        vmap2(acc, unexpected_out_state_mapping="raise")(jnp.ones(3))
    assert float(total.value) == 0.0
    mapped = vmap2(acc)  # 'auto': scattered along axis 0, then read per lane
    mapped(jnp.ones(3))
    assert total.value.tolist() == [1.0, 1.0, 1.0]
    mapped(jnp.array([1.0, 2.0, 3.0]))
    assert total.value.tolist() == [2.0, 3.0, 4.0]  # not (3, 3): per lane on later calls
    total.value = jnp.zeros(())  # reset to one value: shared again
    mapped(jnp.ones(3))
    assert total.value.tolist() == [1.0, 1.0, 1.0]
    other = brainx.State(jnp.zeros(3))  # leading size 3, never scattered: stays shared
    vmap2(lambda x: other.__setattr__("value", other.value + x))(jnp.ones(3))
    assert other.value.shape == (3, 3)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        t = brainx.State(jnp.zeros(()))
        vmap2(lambda x: t.__setattr__("value", x), unexpected_out_state_mapping="warn")(
            jnp.ones(2))
    assert t.value.tolist() == [1.0, 1.0] and "state_out_axes" in str(seen[0].message)
    with pytest.raises(ValueError, match="unexpected_out_state_mapping"):
        vmap2(acc, unexpected_out_state_mapping="sometimes")


def test_static_arguments_random_states_and_collectives():
    scale = StatefulMapping(lambda x, k: x * k, in_axes=(0, None), static_argnums=1)
    assert scale(jnp.arange(3.0), 2).tolist() == [0.0, 2.0, 4.0]
    brainx.random.seed(0)
    draws = vmap2(lambda x: brainx.random.normal() + x)(jnp.zeros(4))
    assert len(set(np.asarray(draws).tolist())) == 4
    centred = vmap2(lambda x: x - jax.lax.pmean(x, "i"), axis_name="i")(jnp.arange(4.0))
    assert centred.tolist() == [-1.5, -0.5, 0.5, 1.5]


def test_vmap2_new_states_axes():
    class Net(brainx.nn.Module):
        def init_state(self, n=2):
            self.count = brainx.ShortTermState(jnp.zeros(n))
            self.noise = brainx.HiddenState(brainx.random.normal(size=(3,)))
            self.shared = brainx.State(jnp.ones(4), tag="INIT_NO_BATCHING")

    net = Net()
    groups = vmap2_new_states(net, {"n": 3}, axis_size=5, state_out_axes={1: brainx.HiddenState})
    assert groups == {0: [net.count], 1: [net.noise], None: [net.shared]}
    assert net.count.value.shape == (5, 3) and net.noise.value.shape == (3, 5)
    assert net.shared.value.shape == (4,)
    assert len(set(np.asarray(net.noise.value[0]).tolist())) == 5  # each lane its own draw
    with pytest.raises(ValueError, match="axis_size"):
        vmap2_new_states(net, {})


def test_new_states_are_the_objects_built_in_the_one_trace_and_no_probe_runs():
    made, asked = [], []

    def init():
        asked.append(brainx.transform.in_new_state_probe())
        made.append(brainx.ParamState(brainx.random.normal(size=2)))
        return made[-1]

    w = brainx.transform.vmap_new_states(init, axis_size=4)()
    assert asked == [False] and len(made) == 1 and w is made[0]
    assert w.value.shape == (4, 2) and not bool((w.value[0] == w.value[1]).all())


def test_vmap2_new_states_shares_nonbatch_states():
    from brainx.state import NonBatchState
    brainx.random.seed(0)

    class MLP(brainx.nn.Module):
        def init_state(self):
            self.w = brainx.ParamState(brainx.random.randn(4, 3))
            self.b = brainx.ParamState(self.w.value.mean(axis=0))   # from another new state
            self.scale = NonBatchState(jnp.array(2.0))

    m = MLP()
    groups = vmap2_new_states(m, {}, axis_size=5)
    assert m.w.value.shape == (5, 4, 3) and m.scale.value.shape == ()
    np.testing.assert_allclose(m.b.value, m.w.value.mean(axis=1), rtol=1e-6)
    assert groups[None] == [m.scale] and set(map(id, groups[0])) == {id(m.w), id(m.b)}

    class Bad(brainx.nn.Module):
        def init_state(self):
            self.w = brainx.ParamState(brainx.random.randn(3))
            self.nb = NonBatchState(self.w.value * 2.0)

    key = brainx.random.get_key()
    with pytest.raises(ValueError, match="shared by all lanes"):
        vmap2_new_states(Bad(), {}, axis_size=4)
    np.testing.assert_array_equal(brainx.random.get_key_data(), jax.random.key_data(key))


def test_stateful_mapping_keeps_static_arguments_as_tuples():
    sm = StatefulMapping(lambda x, mode, flag=None: x, static_argnums=1,
                         static_argnames=["flag"])
    assert sm.static_argnums == (1,) and sm.static_argnames == ("flag",)
    assert StatefulMapping(lambda x: x, static_argnums=None).static_argnums == ()
    out = StatefulMapping(lambda x, k: x * k, in_axes=(0, None), static_argnums=1)(
        jnp.arange(3.0), 2.0)
    np.testing.assert_allclose(out, jnp.arange(3.0) * 2.0)
    with pytest.raises(ValueError, match="out of range"):   # checked when built, as jax.jit does
        StatefulMapping(lambda x: x, static_argnums=2)


def test_a_generator_selected_with_one_key_gets_a_key_per_lane_and_keeps_one():
    from brainx.util.filter import OfType
    rng_type = OfType(brainx.random.RandomState)

    def draw(seed):
        brainx.random.seed(seed)
        mapped = vmap2(lambda scale: brainx.random.normal(0.0, scale),
                       state_in_axes={0: rng_type}, state_out_axes={0: rng_type})
        return mapped(jnp.linspace(1.0, 2.0, 4)), brainx.random.get_key_data()

    (x, key), (y, key_again) = draw(3), draw(3)
    np.testing.assert_array_equal(x, y)                       # reproducible
    np.testing.assert_array_equal(key, key_again)
    assert len(set(np.asarray(x).tolist())) == 4              # each lane its own draw
    assert brainx.random.DEFAULT.value.shape == ()            # still one key
    brainx.random.seed(3)
    assert not np.array_equal(key, brainx.random.get_key_data())   # and it moved on


def test_a_generator_with_per_lane_keys_sets_the_lane_count_or_must_agree():
    r = brainx.random.RandomState(0)
    r.self_assign_multi_keys(4)
    lanes = vmap2(lambda: r.normal(), state_in_axes={0: brainx.random.RandomState})()
    assert lanes.shape == (4,) and len(set(np.asarray(lanes).tolist())) == 4
    assert r.value.shape == (4,)                 # still one key per lane
    with pytest.raises(ValueError, match="different sizes"):
        vmap2(lambda x: x + r.normal(), state_in_axes={0: brainx.random.RandomState})(jnp.ones(3))
