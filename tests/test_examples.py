"""The examples run end to end in fast mode, and what they claim holds."""

import importlib
import pathlib
import sys

import brainunit as u
import jax
import numpy as np
import pytest

import brainx
from brainx import environ, nn

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"


@pytest.fixture(autouse=True)
def examples_on_path():
    sys.path.insert(0, str(EXAMPLES))
    saved = dict(environ.env_state.GLOBAL_ENV.settings)
    yield
    sys.path.remove(str(EXAMPLES))
    environ.env_state.GLOBAL_ENV.settings.clear()
    environ.env_state.GLOBAL_ENV.settings.update(saved)


def _load(name):
    return importlib.import_module(name)


def test_snn_bptt_fast_trains_and_plots(tmp_path, capsys):
    ex = _load("snn_bptt")
    png = tmp_path / "snn.png"
    ckpt = tmp_path / "snn.msgpack"
    losses, acc, reloaded_acc = ex.train(ex.parse(["--fast", "--quiet", "--plot", str(png),
                                                   "--checkpoint", str(ckpt)]))
    out = capsys.readouterr().out
    assert len(losses) == 6 and all(np.isfinite(losses))
    assert 0.0 <= acc <= 1.0
    assert reloaded_acc == acc and ckpt.exists()          # the reloaded model scores the same
    assert "equal to the trained model's" in out
    assert "gradient memory (XLA temp): no remat" in out and "checkpointed loop" in out
    assert png.exists() and png.stat().st_size > 1000


def test_snn_bptt_loop_variants_give_the_same_gradient():
    ex = _load("snn_bptt")
    environ.set(dt=1.0 * u.ms)
    brainx.random.seed(3)
    net = nn.init_all_states(ex.RecurrentSNN(12, 8, 3), batch_size=4)
    xs, labels = ex.make_batch(np.random.RandomState(3), 4, 12, 12, 3)
    params = net.states(brainx.ParamState)
    grads = {}
    for variant in ("none", "step", "loop"):
        g = brainx.transform.grad(ex.make_loss(net, variant, base=4), grad_states=params,
                                  has_aux=True)(xs, labels)[0]
        grads[variant] = [np.asarray(u.get_mantissa(x)) for x in jax.tree.leaves(
            g, is_leaf=lambda x: isinstance(x, u.Quantity))]
    assert any(np.any(a != 0) for a in grads["none"])
    for variant in ("step", "loop"):
        for a, b in zip(grads["none"], grads[variant]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_static_argnums_example_fast():
    ex = _load("static_argnums_train_eval")
    result = ex.main(["--fast"])
    assert result["same_eval"] and not result["same_train"]
    assert result["grad_diff"] < 1e-6            # the checkpoint recomputed the same noise
    assert result["later"] == {True: 0, False: 0}  # no retrace after the first calls


def test_ei_network_fast(tmp_path):
    ex = _load("ei_network")
    png = tmp_path / "ei.png"
    rate_e, rate_i = ex.simulate(ex.parse(["--fast", "--quiet", "--plot", str(png)]))
    assert 0.0 < rate_e < 200.0 and 0.0 < rate_i < 200.0
    assert png.exists()
