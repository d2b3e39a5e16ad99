"""Modules' arrays that are no State (an event layer's synapses) are saved and restored by brainx.io."""

import os

import brainunit as u
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn
from brainx.io import CheckpointError, load, save

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "io_files")
SPIKES = jnp.asarray(np.random.RandomState(0).rand(4, 60) < 0.3)


def _dense(layer):
    """The layer's synapses as a dense (n_pre, n_post) matrix of its weights (NumPy)."""
    n_pre, n_post = layer.in_size[-1], layer.out_size[-1]
    idx = np.asarray(layer.indices)
    w = np.broadcast_to(np.asarray(u.get_mantissa(layer.weight.value)), idx.shape)
    owners = np.flatnonzero(layer.row_selected)
    dense = np.zeros((n_pre, n_post))
    for r, owner in enumerate(owners):
        for k in range(idx.shape[1]):
            pre, post = (owner, idx[r, k]) if layer.efferent_target == "post" else (idx[r, k], owner)
            dense[pre, post] += w[r, k]
    return dense


def _layer(seed, generator_seed, **kw):
    brainx.random.seed(generator_seed)
    args = dict(conn_num=6, conn_weight=nn.init.Normal(1.0))
    args.update(kw)
    return nn.EventFixedProb(60, 40, seed=seed, **args)


@pytest.mark.parametrize("kw", [{}, {"efferent_target": "pre"},
                                {"afferent_ratio": 0.5, "conn_weight": 0.5}],
                         ids=["post", "pre", "afferent_ratio"])
def test_an_unseeded_layer_loads_as_the_network_that_was_saved(tmp_path, kw):
    saved = _layer(None, 1, **kw)
    path = tmp_path / "net.msgpack"
    save(path, {"conn": saved})
    fresh = _layer(None, 2, **kw)                              # another draw
    assert not np.array_equal(_dense(fresh), _dense(saved))
    load(path, {"conn": fresh})
    np.testing.assert_array_equal(_dense(fresh), _dense(saved))
    expected = np.asarray(SPIKES, float) @ _dense(saved)       # dense NumPy reference
    np.testing.assert_allclose(np.asarray(fresh(SPIKES)), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(fresh(SPIKES)), np.asarray(saved(SPIKES)), rtol=1e-6)


def test_the_resume_recipe_with_an_unseeded_layer_continues_bit_for_bit(tmp_path):
    def build(generator_seed):
        brainx.random.seed(generator_seed)
        conn = nn.EventFixedProb(60, 40, conn_num=6, conn_weight=nn.init.Normal(0.5))
        params = conn.states(brainx.ParamState)
        opt = brainx.optim.Adam(lr=0.05)
        opt.register_trainable_weights(params)

        @brainx.transform.jit
        def step(x):
            loss = lambda: (conn(x) ** 2).mean()  # noqa: E731
            opt.update(brainx.transform.grad(loss, grad_states=params)())
            return loss()
        return conn, opt, step

    x = SPIKES.astype(jnp.float32)
    conn, opt, step = build(0)
    straight = [float(step(x)) for _ in range(4)]
    conn, opt, step = build(0)
    first = [float(step(x)) for _ in range(2)]
    save(tmp_path / "run.msgpack", {"conn": conn, "opt": opt})
    conn, opt, step = build(123)                               # a new process would start here
    load(tmp_path / "run.msgpack", {"conn": conn, "opt": opt})
    assert first + [float(step(x)) for _ in range(2)] == straight


def test_a_seeded_layer_saves_its_seed_only_and_a_load_draws_the_saved_synapses(tmp_path):
    big = dict(conn_num=50, conn_weight=0.1)
    seeded, unseeded = tmp_path / "seeded.msgpack", tmp_path / "unseeded.msgpack"
    save(seeded, {"conn": nn.EventFixedProb(2000, 2000, seed=3, **big)})
    save(unseeded, {"conn": nn.EventFixedProb(2000, 2000, seed=None, **big)})
    assert os.path.getsize(seeded) < 1000                          # no synapse in it
    assert os.path.getsize(unseeded) > 2000 * 50 * 4               # int32 targets, saved
    saved = _layer(7, 1)
    save(tmp_path / "s.msgpack", {"conn": saved})
    other = _layer(8, 1)                                            # built with another seed
    load(tmp_path / "s.msgpack", {"conn": other})
    assert other.seed == 7
    np.testing.assert_array_equal(_dense(other), _dense(saved))
    same = _layer(None, 5)                                          # unseeded: takes the draw too
    load(tmp_path / "s.msgpack", {"conn": same})
    np.testing.assert_array_equal(_dense(same), _dense(saved))


def test_an_unseeded_file_loads_into_a_seeded_layer_which_then_has_no_seed(tmp_path):
    saved = _layer(None, 1)
    save(tmp_path / "u.msgpack", {"conn": saved})
    target = _layer(4, 1)
    load(tmp_path / "u.msgpack", {"conn": target})
    assert target.seed is None
    np.testing.assert_array_equal(_dense(target), _dense(saved))


def test_a_step_compiled_before_the_load_uses_the_loaded_synapses(tmp_path):
    saved = _layer(None, 1)
    save(tmp_path / "n.msgpack", {"conn": saved})
    target = _layer(None, 2)
    step = brainx.transform.jit(lambda s: target(s))
    for _ in range(3):                                  # the later calls take jit's fast path
        before = np.asarray(step(SPIKES))
    load(tmp_path / "n.msgpack", {"conn": target})
    after = np.asarray(step(SPIKES))
    np.testing.assert_allclose(after, np.asarray(saved(SPIKES)), rtol=1e-6)
    assert not np.allclose(before, after)


def test_synapses_that_do_not_fit_name_the_layer_and_change_nothing(tmp_path):
    save(tmp_path / "n.msgpack", {"conn": _layer(None, 1, conn_weight=0.5)})
    target = _layer(None, 2, conn_num=7, conn_weight=0.25)
    dense = _dense(target)
    with pytest.raises(CheckpointError, match=r"EventFixedNumConn 'conn'.*conn_num=7"):
        load(tmp_path / "n.msgpack", {"conn": target})
    np.testing.assert_array_equal(_dense(target), dense)
    assert float(target.weight.value) == 0.25


def test_a_file_without_the_synapses_of_an_unseeded_layer_is_refused_unless_not_strict():
    path = os.path.join(HERE, "v1_conn_unseeded.msgpack")          # brainx before this change
    target = nn.EventFixedProb(20, 10, conn_num=3, conn_weight=0.5)
    dense = _dense(target)
    with pytest.raises(CheckpointError, match=r"(?s)EventFixedNumConn 'conn'.*seed=None.*strict=False"):
        load(path, {"conn": target})
    assert float(target.weight.value) == 0.5
    load(path, {"conn": target}, strict=False)                      # its own synapses, the weights
    assert float(target.weight.value) == 0.25
    np.testing.assert_array_equal(_dense(target) * 2, dense)


class Table(nn.Module):
    """A module with a constant table (no State) and a weight, refusing tables of other sizes."""

    def __init__(self, n):
        super().__init__()
        self.table = np.random.permutation(n)
        self.w = brainx.ParamState(jnp.zeros(2))

    def saved_arrays(self):
        return {"table": self.table}

    def prepare_arrays(self, arrays):
        if arrays is None:
            return None
        table = np.asarray(arrays["table"])
        if table.shape != self.table.shape:
            raise ValueError(f"the file's table has {table.size} entries, this one "
                             f"{self.table.size}.")
        return lambda: setattr(self, "table", table)


def test_a_module_of_its_own_takes_part_in_an_all_or_nothing_load(tmp_path, monkeypatch):
    saved = Table(5)
    saved.w.value = jnp.ones(2)
    save(tmp_path / "t.msgpack", {"t": saved}, environ=True)
    fresh = Table(5)
    table = fresh.table.copy()
    real_set = brainx.environ.set

    def refused(**kw):
        raise RuntimeError("refused")

    monkeypatch.setattr(brainx.environ, "set", refused)     # the last step of the load fails
    with pytest.raises(CheckpointError, match="undone"):
        load(tmp_path / "t.msgpack", {"t": fresh}, environ=True)
    monkeypatch.setattr(brainx.environ, "set", real_set)
    np.testing.assert_array_equal(fresh.table, table)
    assert float(fresh.w.value.sum()) == 0.0
    load(tmp_path / "t.msgpack", {"t": fresh})
    np.testing.assert_array_equal(fresh.table, saved.table)
    assert float(fresh.w.value.sum()) == 2.0

    small = Table(4)
    with pytest.raises(CheckpointError, match=r"Table 't'.*this one 4. Nothing was loaded"):
        load(tmp_path / "t.msgpack", {"t": small})
    assert float(small.w.value.sum()) == 0.0


def test_arrays_only_in_the_file_are_refused_when_strict(tmp_path):
    saved = Table(3)
    saved.w.value = jnp.ones(2)
    save(tmp_path / "t.msgpack", {"t": saved})
    w = brainx.ParamState(jnp.zeros(2))
    with pytest.raises(CheckpointError, match=r"modules the target does not have: \['t'\]"):
        load(tmp_path / "t.msgpack", {"t": {"w": w}})          # the same state path, no module
    assert float(w.value.sum()) == 0.0
    load(tmp_path / "t.msgpack", {"t": {"w": w}}, strict=False)
    assert float(w.value.sum()) == 2.0


def test_a_group_of_unseeded_layers_fuses_the_loaded_synapses(tmp_path):
    def model(generator_seed):
        brainx.random.seed(generator_seed)
        exc = nn.EventFixedProb(30, 20, conn_num=4, conn_weight=0.5)
        inh = nn.EventFixedProb(30, 20, conn_num=3, conn_weight=-2.0)
        # the layers first, the group after them in the walk, and the group before them
        return ({"exc": exc, "inh": inh, "group": nn.EventFixedProbGroup(exc, inh)},
                {"group": nn.EventFixedProbGroup(exc, inh), "exc": exc, "inh": inh})

    spikes = SPIKES[:, :60]
    for order in (0, 1):
        saved = model(1)[order]
        save(tmp_path / "g.msgpack", saved)
        fresh = model(2)[order]
        load(tmp_path / "g.msgpack", fresh)
        for got, layer in zip(fresh["group"](spikes), (saved["exc"], saved["inh"])):
            part = spikes[:, :30] if layer is saved["exc"] else spikes[:, 30:]
            expected = np.asarray(part, float) @ _dense(layer)          # dense NumPy reference
            np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-5)


def test_an_undone_load_leaves_a_group_computing_its_own_network(tmp_path, monkeypatch):
    def model(generator_seed):
        brainx.random.seed(generator_seed)
        exc = nn.EventFixedProb(30, 20, conn_num=4, conn_weight=0.5)
        inh = nn.EventFixedProb(30, 20, conn_num=3, conn_weight=-2.0)
        return {"exc": exc, "inh": inh, "group": nn.EventFixedProbGroup(exc, inh)}

    spikes = SPIKES[:, :60]
    save(tmp_path / "g.msgpack", model(1), environ=True)
    fresh = model(2)
    before = [np.asarray(o) for o in fresh["group"](spikes)]

    def refused(**kw):
        raise RuntimeError("refused")

    monkeypatch.setattr(brainx.environ, "set", refused)
    with pytest.raises(CheckpointError, match="undone"):
        load(tmp_path / "g.msgpack", fresh, environ=True)
    monkeypatch.undo()
    for got, want, layer, part in zip(fresh["group"](spikes), before, (fresh["exc"], fresh["inh"]),
                                      (spikes[:, :30], spikes[:, 30:])):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(got), np.asarray(part, float) @ _dense(layer),
                                   rtol=1e-5, atol=1e-5)
