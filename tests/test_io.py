"""brainx.io: a resumed run is bit-identical; units, dtypes, keys, environ; clear errors; atomic writes."""

import os

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import ParamState, State, environ, nn
from brainx.io import CheckpointError, load, save


class NoisyNet(nn.Module):
    """A linear layer in mA whose input is jittered by its own generator (a typed key)."""

    def __init__(self, seed):
        super().__init__()
        self.lin = nn.Linear(3, 2, w_init=nn.init.KaimingNormal(unit=u.mA),
                             b_init=nn.init.ZeroInit(unit=u.mA))
        self.rng = brainx.random.RandomState(jax.random.key(seed))

    def update(self, x):
        return self.lin(x + 0.1 * self.rng.normal(size=x.shape))


def _build(seed):
    brainx.random.seed(seed)                      # initial weights and the DEFAULT generator
    net = NoisyNet(seed)
    params = net.states(ParamState)
    opt = brainx.optim.Adam(lr=brainx.optim.StepLR(0.05, step_size=2, gamma=0.5))
    opt.register_trainable_weights(params)

    def loss(x):
        target = brainx.random.uniform(size=(4, 2))                  # noise from DEFAULT
        return ((net(x).to_decimal(u.mA) - target) ** 2).mean()

    @brainx.transform.jit
    def step(x):
        grads, value = brainx.transform.grad(loss, grad_states=params, return_value=True)(x)
        opt.update(grads)
        return value

    return net, opt, step


def _everything(net, opt):
    tree = {"net": net, "opt": opt, "rng": brainx.random.DEFAULT}
    leaves = []
    for s in brainx.nn.modules.module.iter_tree(tree):
        if isinstance(s[1], State):
            value = s[1].value
            for x in jax.tree.leaves(value, is_leaf=lambda v: isinstance(v, u.Quantity)):
                if isinstance(x, u.Quantity):
                    x = x.mantissa
                if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
                    x = jax.random.key_data(x)
                leaves.append(np.asarray(x))
    return leaves


def test_a_resumed_run_is_bit_identical_to_one_that_never_stopped(tmp_path):
    x = jnp.asarray(np.random.RandomState(0).rand(4, 3).astype(np.float32))
    net, opt, step = _build(0)
    straight = [float(step(x)) for _ in range(5)]
    expected = _everything(net, opt)

    net, opt, step = _build(0)
    first = [float(step(x)) for _ in range(2)]
    path = tmp_path / "run.msgpack"
    save(path, {"net": net, "opt": opt, "rng": brainx.random.DEFAULT})

    net, opt, step = _build(1)                     # fresh: other weights, other keys
    assert not all(np.array_equal(a, b) for a, b in zip(_everything(net, opt), expected))
    load(path, {"net": net, "opt": opt, "rng": brainx.random.DEFAULT})
    rest = [float(step(x)) for _ in range(3)]

    assert first + rest == straight
    got = _everything(net, opt)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert net.lin.weight.value["weight"].unit == u.mA
    assert int(opt.step_count.value) == 5


def test_units_dtypes_keys_and_python_values_come_back_exactly(tmp_path):
    def make(k):
        return {
            "v": State(jnp.arange(3.0, dtype=jnp.float16) * k * (u.mV / u.ms)),
            "half": State(jnp.ones(2, jnp.bfloat16) * k),
            "mixed": State({"n": np.arange(4, dtype=np.int8) * k, "flag": np.bool_(k > 1),
                            "count": 3 * k, "rate": 0.5 * k, "label": None,
                            "g": u.Quantity(jnp.full((2, 2), k, jnp.float32), unit=u.nS)}),
            "typed_key": brainx.random.RandomState(jax.random.key(k)),
            "raw_key": brainx.random.RandomState(k),
        }

    saved, target = make(2), make(5)
    save(tmp_path / "a.msgpack", saved)
    load(tmp_path / "a.msgpack", target)
    for name in saved:
        a, b = saved[name].value, target[name].value
        la, ta = jax.tree.flatten(a, is_leaf=lambda v: isinstance(v, u.Quantity))
        lb, tb = jax.tree.flatten(b, is_leaf=lambda v: isinstance(v, u.Quantity))
        assert ta == tb
        for x, y in zip(la, lb):
            assert type(x) is type(y), name
            if isinstance(x, u.Quantity):
                assert x.unit == y.unit and str(x.unit) == str(y.unit)
                x, y = x.mantissa, y.mantissa
            if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
                assert x.dtype == y.dtype
                x, y = jax.random.key_data(x), jax.random.key_data(y)
            assert np.asarray(x).dtype == np.asarray(y).dtype
            assert np.array_equal(np.asarray(x), np.asarray(y))
    assert target["v"].value.unit == u.mV / u.ms
    # the restored generators continue the saved streams
    assert np.array_equal(saved["typed_key"].normal(size=3), target["typed_key"].normal(size=3))
    assert np.array_equal(saved["raw_key"].normal(size=3), target["raw_key"].normal(size=3))


def test_environ_is_kept_when_asked(tmp_path):
    before = environ.all()
    try:
        environ.set(dt=0.1 * u.ms, trial="pilot", repeats=3)
        save(tmp_path / "env.msgpack", State(jnp.zeros(2)), environ=True)
        save(tmp_path / "plain.msgpack", State(jnp.zeros(2)))
        environ.set(dt=0.5 * u.ms, trial="other", repeats=1)
        load(tmp_path / "env.msgpack", State(jnp.ones(2)))            # not asked: unchanged
        assert environ.get("trial") == "other"
        load(tmp_path / "env.msgpack", State(jnp.ones(2)), environ=True)
        assert environ.get_dt() == 0.1 * u.ms and environ.get_dt().unit == u.ms
        assert environ.get("trial") == "pilot" and environ.get("repeats") == 3
        with pytest.raises(CheckpointError, match="saved without environ=True"):
            load(tmp_path / "plain.msgpack", State(jnp.ones(2)), environ=True)
    finally:
        for key in ("trial", "repeats", "dt"):
            environ.pop(key, None)
        environ.set(**{k: v for k, v in before.items() if k in ("trial", "repeats", "dt")})


def test_mismatches_name_the_state_and_change_nothing(tmp_path):
    path = tmp_path / "net.msgpack"
    save(path, {"net": nn.Linear(3, 2, w_init=jnp.ones((3, 2)) * u.mA)})

    def unchanged_after(target, match, **kw):
        before = [np.asarray(u.get_mantissa(x)) for x in jax.tree.leaves(
            [s.value for _, s in brainx.nn.modules.module.iter_tree(target) if isinstance(s, State)],
            is_leaf=lambda v: isinstance(v, u.Quantity))]
        with pytest.raises(CheckpointError, match=match):
            load(path, target, **kw)
        after = [np.asarray(u.get_mantissa(x)) for x in jax.tree.leaves(
            [s.value for _, s in brainx.nn.modules.module.iter_tree(target) if isinstance(s, State)],
            is_leaf=lambda v: isinstance(v, u.Quantity))]
        assert all(np.array_equal(a, b) for a, b in zip(before, after))

    unchanged_after({"net": nn.Linear(4, 2, w_init=jnp.zeros((4, 2)) * u.mA)},
                    r"state 'net.weight', leaf \['weight'\]: the file has float32\[3, 2\] "
                    r"mA, the target holds float32\[4, 2\] mA. Build the model with the sizes")
    unchanged_after({"net": nn.Linear(3, 2, w_init=jnp.zeros((3, 2)) * u.mV)},
                    r"'net.weight', leaf \['bias'\]: the file has float32\[2\] mA, the target holds float32\[2\] mV\.")
    unchanged_after({"net": nn.Linear(3, 2, w_init=jnp.zeros((3, 2), jnp.float16) * u.mA)},
                    r"the file has float32\[3, 2\].*holds float16\[3, 2\]")
    unchanged_after({"net": nn.Linear(3, 2, w_init=jnp.zeros((3, 2)) * u.mA, b_init=None)},
                    r"state 'net.weight' has a different structure.*only in the file: \[\"\['bias'\]\"\]")
    extra = {"net": nn.Linear(3, 2, w_init=jnp.zeros((3, 2)) * u.mA), "count": State(jnp.zeros(()))}
    unchanged_after(extra, r"In the target only: \['count'\]; in the file only: \[\]")
    load(path, extra, strict=False)                                   # the states both hold
    assert float(extra["net"].weight.value["weight"].mantissa.sum()) == 6.0
    unchanged_after({"other": nn.Linear(3, 2, w_init=jnp.zeros((3, 2)) * u.mA)},
                    r"In the target only: \['other.weight'\]; in the file only: \['net.weight'\]")
    (tmp_path / "junk.msgpack").write_bytes(b"\x93not a checkpoint")
    with pytest.raises(CheckpointError, match="is not a brainx checkpoint"):
        load(tmp_path / "junk.msgpack", extra)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 5, w_init=nn.init.KaimingNormal(unit=u.mA))
        self.lif = nn.LIF(5)


@pytest.mark.parametrize("saved_batch, target_batch, why", [
    (16, None, "the saved model was initialised with batch_size=16, the target without a batch "
               "axis. Initialise the target as the saved model was "
               "(brainx.nn.init_all_states(model, batch_size=16))"),
    (None, 4, "the target was initialised with batch_size=4, the saved model without a batch axis"
              ". Initialise the target as the saved model was (brainx.nn.init_all_states(model) "
              "with no batch_size)"),
    (16, 4, "the saved model has batch_size=16, the target 4"),
])
def test_another_batch_size_names_the_fix_and_the_fix_works(tmp_path, saved_batch, target_batch, why):
    path = tmp_path / "net.msgpack"
    saved = _Net()
    brainx.nn.init_all_states(saved, batch_size=saved_batch)
    save(path, saved)
    target = _Net()
    brainx.nn.init_all_states(target, batch_size=target_batch)
    v_before = np.asarray(target.lif.V.value.mantissa)
    with pytest.raises(CheckpointError) as info:
        load(path, target)
    message = str(info.value)
    assert "state 'lif.V'" in message and "mV, the target holds" in message
    assert "Only the batch axis differs: " + why in message
    assert "brainx.io.load(path, model.states(brainx.ParamState), strict=False)" in message
    np.testing.assert_array_equal(target.lif.V.value.mantissa, v_before)   # nothing written
    # the suggested fix: load only the parameters, whatever the batch sizes
    load(path, target.states(brainx.ParamState), strict=False)
    np.testing.assert_array_equal(target.lin.weight.value["weight"].mantissa,
                                  saved.lin.weight.value["weight"].mantissa)
    # and the other: a target initialised as the saved model was loads whole
    again = _Net()
    brainx.nn.init_all_states(again, batch_size=saved_batch)
    load(path, again)
    np.testing.assert_array_equal(again.lif.V.value.mantissa, saved.lif.V.value.mantissa)


def test_a_parameter_of_another_shape_gets_no_batch_advice(tmp_path):
    path = tmp_path / "w.msgpack"
    save(path, {"w": brainx.ParamState(jnp.zeros((4, 3)) * u.mV)})
    with pytest.raises(CheckpointError, match=r"float32\[4, 3\] mV, the target holds float32\[3\] "
                                              r"mV\. Build the model with the sizes") as info:
        load(path, {"w": brainx.ParamState(jnp.zeros(3) * u.mV)})
    assert "batch" not in str(info.value)


def test_a_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "w.msgpack"
    w = ParamState(jnp.arange(3.0) * u.mV, name="w")
    save(path, {"w": w})
    good = path.read_bytes()
    w.value = w.value * 10

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", disk_full)
        with pytest.raises(OSError, match="No space left"):
            save(path, {"w": w})
    with pytest.raises(TypeError, match=r"state 'f', leaf value: cannot save a function"):
        save(path, {"w": w, "f": State(lambda x: x)})
    assert path.read_bytes() == good and os.listdir(tmp_path) == ["w.msgpack"]
    load(path, {"w": w})
    assert w.value.tolist() == (jnp.arange(3.0) * u.mV).tolist()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save(path, {"w": w}, overwrite=False)


def test_save_inside_a_transform_is_refused(tmp_path):
    w = ParamState(jnp.ones(2), name="w")

    @brainx.transform.jit
    def bad():
        w.value = w.value + 1
        save(tmp_path / "x.msgpack", {"w": w})

    with pytest.raises(RuntimeError, match="state 'w' holds a JAX tracer.*outside jit"):
        bad()
    assert not (tmp_path / "x.msgpack").exists()


def test_a_generator_saved_with_a_raw_key_loads_into_a_typed_key_bit_for_bit(tmp_path):
    # brainx before 2026-11-26 kept raw uint32[2] keys: such a file still loads
    old = brainx.random.RandomState(7)
    raw = jax.random.key_data(old.value)
    brainx.io.save(tmp_path / "old.bx", {"rng": brainx.State(raw)})
    fresh = brainx.random.RandomState(0)
    brainx.io.load(tmp_path / "old.bx", {"rng": fresh})
    np.testing.assert_array_equal(jax.random.key_data(fresh.value), raw)
    np.testing.assert_array_equal(fresh.normal(size=3), brainx.random.RandomState(7).normal(size=3))
