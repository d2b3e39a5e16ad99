"""`nn.Map`: copies of a module's states made per lane, the module run over them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform


class Leaky(brainx.nn.Module):
    """A readout with a leaky trace: a parameter, a hidden state, two methods."""

    def init_state(self, n_in, tau=2.0):
        self.w = brainx.ParamState(brainx.random.randn(n_in))
        self.h = brainx.HiddenState(jnp.zeros(()))
        self.tau = tau

    def update(self, x):
        self.h.value = self.h.value + (x @ self.w.value - self.h.value) / self.tau
        return self.h.value

    def energy(self, scale):
        return scale * (self.w.value ** 2).sum()


def _lane_by_lane(ws, xs, tau=2.0, steps=1):
    """Each copy run on its own, in NumPy: (outputs of the last step, final traces)."""
    h = np.zeros(len(ws))
    for _ in range(steps):
        h = h + (np.einsum("li,li->l", xs, ws) - h) / tau
    return h


def test_copies_are_made_apart_and_run_as_each_would_alone():
    brainx.random.seed(0)
    ensemble = brainx.nn.Map(Leaky(), init_map_size=5)
    ensemble.init_all_states(n_in=3)
    ws = np.asarray(ensemble.module.w.value)
    assert ws.shape == (5, 3) and ensemble.module.h.value.shape == (5,)
    assert len({tuple(w) for w in ws}) == 5                  # each copy drew its own weights
    xs = np.asarray(brainx.random.randn(5, 3))
    for step in (1, 2):
        out = ensemble.update(jnp.asarray(xs))
        np.testing.assert_allclose(out, _lane_by_lane(ws, xs, steps=step), rtol=1e-5)
    np.testing.assert_allclose(ensemble.module.h.value, out, rtol=1e-6)
    assert ensemble.dict_vmap_states[0] == [ensemble.module.w, ensemble.module.h]


def test_map_runs_another_method_and_shares_unmapped_arguments():
    ensemble = brainx.nn.Map(Leaky(), init_map_size=3)
    ensemble.init_all_states(n_in=2)
    ws = np.asarray(ensemble.module.w.value)
    energy = ensemble.map("energy", in_axes=None)(2.0)       # the same scale for every copy
    np.testing.assert_allclose(energy, 2.0 * (ws ** 2).sum(axis=1), rtol=1e-6)
    by_function = ensemble.map(lambda s: ensemble.module.energy(s), in_axes=0)(
        jnp.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(by_function, [1.0, 2.0, 3.0] * (ws ** 2).sum(axis=1), rtol=1e-6)


def test_gradient_through_the_copies_is_each_copys_own():
    ensemble = brainx.nn.Map(Leaky(), init_map_size=4)
    ensemble.init_all_states(n_in=3)
    xs = brainx.random.randn(4, 3)
    w0 = ensemble.module.w.value

    def loss():
        return (ensemble.update(xs) ** 2).sum()

    grads = transform.grad(loss, grad_states=ensemble.module.w)()

    def pure(w):  # the same step for all copies at once, with h = 0
        return (((jnp.einsum("li,li->l", xs, w)) / 2.0) ** 2).sum()

    np.testing.assert_allclose(grads, jax.grad(pure)(w0), rtol=1e-5)


def test_call_state_axes_maps_states_made_outside():
    class Shifted(brainx.nn.Module):
        def __init__(self, offset):
            super().__init__()
            self.offset = offset

        def init_state(self):
            self.w = brainx.ParamState(jnp.ones(2))

        def update(self, x):
            return x @ self.w.value + self.offset.value

    offsets = brainx.ShortTermState(jnp.array([0.0, 10.0, 20.0]))  # one per copy, made here
    ensemble = brainx.nn.Map(Shifted(offsets), init_map_size=3, call_state_axes={0: offsets})
    ensemble.init_all_states()
    np.testing.assert_allclose(ensemble.update(jnp.ones((3, 2))), [2.0, 12.0, 22.0])


def test_init_state_axes_keeps_selected_states_shared():
    class WithShared(brainx.nn.Module):
        def init_state(self):
            self.w = brainx.ParamState(jnp.ones(2))
            self.scale = brainx.ShortTermState(jnp.array(3.0))

        def update(self, x):
            return self.scale.value * (x @ self.w.value)

    ensemble = brainx.nn.Map(WithShared(), init_map_size=2,
                             init_state_axes={0: brainx.ParamState, None: brainx.ShortTermState})
    ensemble.init_all_states()
    assert ensemble.module.w.value.shape == (2, 2) and ensemble.module.scale.value.shape == ()
    np.testing.assert_allclose(ensemble.update(jnp.ones((2, 2))), [6.0, 6.0])


def test_bad_inputs_are_named_and_change_nothing():
    with pytest.raises(TypeError, match="brainx.nn.Module"):
        brainx.nn.Map(lambda x: x, init_map_size=2)
    with pytest.raises(ValueError, match="init_map_size"):
        brainx.nn.Map(Leaky(), init_map_size=0)
    with pytest.raises(ValueError, match="behavior"):
        brainx.nn.Map(Leaky(), init_map_size=2, behavior="scan")
    ensemble = brainx.nn.Map(Leaky(), init_map_size=2)
    with pytest.raises(ValueError, match="init_all_states"):
        ensemble.update(jnp.ones((2, 3)))
    ensemble.init_all_states(n_in=3)
    before = np.asarray(ensemble.module.h.value)
    with pytest.raises(AttributeError, match="no method 'predict'"):
        ensemble.map("predict")
    with pytest.raises(Exception):
        ensemble.update(jnp.ones((3, 3)))                    # three inputs for two copies
    np.testing.assert_array_equal(ensemble.module.h.value, before)


def test_map_returns_a_map_caller_and_its_repr_leaves_out_the_bookkeeping():
    from brainx.nn.modules.map_module import MapCaller
    ensemble = brainx.nn.Map(Leaky(), init_map_size=3)
    assert ensemble._init is False and "=None" not in repr(ensemble)
    ensemble.init_all_states(n_in=2)
    assert ensemble._init is True and 0 in ensemble._call_state_axes
    caller = ensemble.map("energy", in_axes=None)
    assert isinstance(caller, MapCaller) and caller.behavior == "vmap" and caller.in_axes is None
    ws = np.asarray(ensemble.module.w.value)
    np.testing.assert_allclose(caller(2.0), 2.0 * (ws ** 2).sum(axis=1), rtol=1e-6)
    text = repr(ensemble)
    for hidden in ("_init", "dict_vmap_states", "call_state_axes", "_update", "=None"):
        assert hidden not in text, hidden
    assert "init_map_size=3" in text and "behavior='vmap'" in text
    # Module's rules still hold under Map's: None hidden, a leading underscore stripped
    assert ensemble.__pretty_repr_item__("spmd_axis_name", None) is None
    assert ensemble.__pretty_repr_item__("_in_size", (3,)) == ("in_size", (3,))
    assert ensemble.__pretty_repr_item__("_init", True) is None
    # a MapCaller on its own: a plain function per lane, and only vmap or pmap
    np.testing.assert_allclose(MapCaller(lambda x: x * 2.0, "vmap")(jnp.arange(4.0)),
                               np.arange(4.0) * 2.0)
    with pytest.raises(ValueError, match="behavior"):
        MapCaller(lambda x: x, "scan")
    ensemble.behavior = "scan"                          # a corrupted behaviour is named
    with pytest.raises(ValueError, match="behavior"):
        ensemble.init_all_states(n_in=2)
