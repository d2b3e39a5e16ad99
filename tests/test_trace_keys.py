"""A trace's key holds the whole tree: no cache replays a trace for another structure.

Each case calls a brainx transform twice with values whose leaves have the
same shapes and dtypes but whose trees differ (dict keys, node types, static
dataclass or equinox fields, brainunit units, a mutated NumPy constant, a
random-bits mode), and compares the second result with ``jax.jit`` (or the
same computation run eagerly): what ``jax.jit`` retraces for, brainx must too.
"""

import dataclasses

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn, transform

x1 = jnp.float32(1.0)


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def _keys_sum(d):
    return d.get("b", 0) * 10 + d.get("c", 0)


# -- arguments -------------------------------------------------------------------------------

def test_dict_argument_with_other_keys_retraces():
    f, ref = transform.jit(_keys_sum), jax.jit(_keys_sum)
    for d in ({"a": x1, "b": 2 * x1}, {"a": x1, "c": 3 * x1}):
        _close(f(d), ref(d))


def test_dict_output_follows_the_argument_s_keys():
    f = transform.jit(lambda d: {k: v + 1 for k, v in d.items()})
    f({"a": x1, "b": x1})
    out = f({"a": x1, "c": x1})
    assert sorted(out) == ["a", "c"]


def test_tuple_then_list_argument_retraces():
    def g(t):
        return t[0] - t[1] if isinstance(t, tuple) else t[1] - t[0]
    f, ref = transform.jit(g), jax.jit(g)
    for t in ((x1, 4 * x1), [x1, 4 * x1]):
        _close(f(t), ref(t))


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Config:
    w: jax.Array
    train: bool = dataclasses.field(metadata=dict(static=True))


def _scaled(c):
    return c.w * (0.5 if c.train else 1.0)


def test_static_dataclass_field_retraces():
    f, ref = transform.jit(_scaled), jax.jit(_scaled)
    for train in (True, False, True):
        c = Config(x1, train)
        _close(f(c), ref(c))


def test_static_dataclass_field_retraces_beside_a_static_argument():
    def h(c, k):
        return _scaled(c) * k
    f, ref = transform.jit(h, static_argnums=1), jax.jit(h, static_argnums=1)
    for train in (True, False):
        _close(f(Config(x1, train), 3), ref(Config(x1, train), 3))


def test_equinox_static_field_retraces():
    eqx = pytest.importorskip("equinox")

    class Act(eqx.Module):
        w: jax.Array
        kind: str = eqx.field(static=True)

        def __call__(self, x):
            return jnp.tanh(self.w * x) if self.kind == "tanh" else jax.nn.relu(self.w * x)

    f = transform.jit(lambda m, x: m(x))
    ref = jax.jit(lambda m, x: m(x))
    for kind in ("tanh", "relu"):
        m = Act(jnp.float32(1.0), kind)
        _close(f(m, 5.0), ref(m, 5.0))


def test_quantity_argument_with_another_unit_retraces():
    fn = lambda q: q.to_decimal(u.mV)
    f, ref = transform.jit(fn), jax.jit(fn)
    for q in (5.0 * u.mV, 2.0 * u.volt, 3.0 * u.mV):
        _close(f(q), ref(q))


# -- states ----------------------------------------------------------------------------------

def test_quantity_state_with_another_unit_is_read_in_its_unit():
    s = brainx.State(5.0 * u.mV)
    read = transform.jit(lambda: s.value.to_decimal(u.mV))
    _close(read(), 5.0)
    s.value = 2.0 * u.volt
    _close(read(), 2000.0)


def test_quantity_state_with_another_unit_is_written_in_its_unit():
    s = brainx.State(5.0 * u.mV)

    @transform.jit
    def halve():
        s.value = s.value / 2

    halve()
    s.value = 2.0 * u.volt
    halve()
    assert s.value.unit == u.volt
    _close(s.value.to_decimal(u.volt), 1.0)


def test_a_file_saved_in_mv_loaded_into_a_state_in_v(tmp_path):
    class Cell(nn.Module):
        def __init__(self, v):
            super().__init__()
            self.v = brainx.HiddenState(v)

    saved = Cell(jnp.array([5.0, 7.0]) * u.mV)
    brainx.io.save(tmp_path / "cell.msgpack", saved)
    cell = Cell(jnp.array([1.0, 1.0]) * u.volt)
    step = transform.jit(lambda: cell.v.value.to_decimal(u.mV))
    step()  # compiled with the state in volts
    brainx.io.load(tmp_path / "cell.msgpack", cell)
    _close(step(), cell.v.value.to_decimal(u.mV))
    _close(step(), [5.0, 7.0])


def test_dict_state_with_other_keys_is_read_and_written_with_them():
    d = brainx.State({"a": x1, "b": 2 * x1})
    read = transform.jit(lambda: _keys_sum(d.value))

    @transform.jit
    def write():
        d.value = {k: v + 1 for k, v in d.value.items()}

    read(), write()
    d.value = {"a": x1, "c": 3 * x1}
    _close(read(), 3.0)
    write()
    assert sorted(d.value) == ["a", "c"]
    _close(d.value["c"], 4.0)


# -- eager control flow (cached compiled loops and branches) ---------------------------------

def _body(xs):
    return _keys_sum(xs)


def test_eager_for_loop_over_a_dict_with_other_keys():
    for keys in (("a", "b"), ("a", "c")):
        xs = {k: jnp.arange(3.0) + i for i, k in enumerate(keys)}
        _close(transform.for_loop(_body, xs), jax.lax.map(_body, xs))


def _carry_step(c, _):
    return {k: v + 1 for k, v in c.items()}, _keys_sum(c)


def test_eager_scan_with_a_carry_of_other_keys():
    for keys in (("a", "b"), ("a", "c")):
        init = {k: x1 for k in keys}
        got = transform.scan(_carry_step, init, jnp.arange(2))
        want = jax.lax.scan(_carry_step, init, jnp.arange(2))
        assert sorted(got[0]) == sorted(want[0])
        jax.tree.map(_close, got, want)


def test_eager_cond_on_an_operand_with_other_keys():
    for keys in (("a", "b"), ("a", "c")):
        op = {k: x1 * (i + 1) for i, k in enumerate(keys)}
        _close(transform.cond(True, _keys_sum, _keys_sum, op), _keys_sum(op))


def test_shared_jit_method_called_again_with_another_structure():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = brainx.ParamState(jnp.float32(2.0))

        @transform.jit
        def __call__(self, d):
            return self.w.value * _keys_sum(d)

    nets = [Net(), Net()]
    for net in nets:  # the second instance shares the first's trace
        for d in ({"a": x1, "b": x1}, {"a": x1, "c": x1}):
            _close(net(d), 2.0 * _keys_sum(d))


# -- what a trace baked in besides its inputs ------------------------------------------------

def test_random_bits_mode_is_part_of_an_equal_jaxpr():
    key = jax.random.key(0)
    draw = lambda: jax.random.uniform(key, (4,))
    f = transform.jit(lambda: draw())
    ckpt = transform.checkpoint(lambda: draw())
    for mode in (True, False, True):
        with jax.threefry_partitionable(mode):
            want = jax.jit(draw)()
            _close(f(), want)
            _close(ckpt(), want)


def test_numpy_constant_mutated_in_place_then_states_made_anew():
    K = np.ones(3, np.float32)

    class Net(nn.Module):
        def init_state(self, *args, **kwargs):
            self.h = brainx.HiddenState(jnp.zeros(3, jnp.float32))

        def update(self):
            self.h.value = self.h.value + K
            return self.h.value.sum()

    net = Net()
    nn.init_all_states(net)
    step = transform.jit(net.update)
    _close(step(), 3.0)
    K[:] = 2
    nn.init_all_states(net)
    _close(step(), 6.0)


def test_a_state_that_gains_a_string_leaf_traces_again():
    s = brainx.State({"v": jnp.ones(2)})
    read = transform.jit(lambda: jnp.sum(s.value["v"]) * (2.0 if "tag" in s.value else 1.0))
    _close(read(), 2.0)
    s.value = {"v": jnp.ones(2), "tag": "sin"}  # was a TypeError from jax.jit
    _close(read(), 4.0)
    s.value = {"v": jnp.ones(2)}
    _close(read(), 2.0)
