"""examples/ei_delay_network.py runs short and small, writes its plots, and its delay is 1.5 ms."""

import importlib
import pathlib
import sys

import numpy as np
import pytest

from brainx import environ

pytest.importorskip("brainevent")      # the example's projections are nn.EventFixedProb

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"


@pytest.fixture
def example():
    sys.path.insert(0, str(EXAMPLES))
    saved = dict(environ.env_state.GLOBAL_ENV.settings)
    yield importlib.import_module("ei_delay_network")
    sys.path.remove(str(EXAMPLES))
    environ.env_state.GLOBAL_ENV.settings.clear()
    environ.env_state.GLOBAL_ENV.settings.update(saved)


def test_ei_delay_network_short_run_writes_both_plots(example, tmp_path, capsys):
    args = example.parse(["--duration", "40", "--n-exc", "400", "--n-inh", "100", "--p", "0.1",
                          "--quiet", "--plot-dir", str(tmp_path)])
    rate, rate_e, rate_i = example.simulate(args)
    assert 0.0 < rate < 200.0 and np.isfinite([rate_e, rate_i]).all()
    assert "mean firing rate" in capsys.readouterr().out
    for name in ("ei_delay_raster.png", "ei_delay_rate.png"):
        assert (tmp_path / name).stat().st_size > 1000


def test_ei_delay_network_delays_spikes_by_15_steps(example):
    import brainunit as u
    from brainx import nn

    with environ.context(dt=0.1 * u.ms):
        net = nn.init_all_states(example.COBANet(40, 10, 0.2))
    delay = net.neurons.get_after_update("output-delay-None")
    assert delay.max_length == 16 and delay.history.value.shape == (16, 50)
    assert isinstance(net.exc, nn.EventFixedProb) and isinstance(net.inh, nn.EventFixedProb)
    assert net.exc.indices.shape == (40, 10) and net.inh.indices.shape == (10, 10)  # int(0.2 * 50)


def _dense(layer, n_post):
    """The projection's synapses as a dense (pre, post) matrix; repeated pairs add."""
    D = np.zeros((layer.indices.shape[0], n_post))
    rows = np.repeat(np.arange(D.shape[0]), layer.conn_num)
    np.add.at(D, (rows, np.asarray(layer.indices).ravel()), 1.0)
    return D


def test_ei_delay_network_conductances_follow_the_delayed_events(example):
    """g_exc / g_inh decay and jump by W^T s(t - 16 steps): the event projections, checked in numpy."""
    import brainunit as u
    import brainx
    from brainx import nn

    n_exc, n = 40, 50
    with environ.context(dt=0.1 * u.ms):
        brainx.random.seed(3)
        net = nn.init_all_states(example.COBANet(n_exc, n - n_exc, 0.2, backend="jax_raw"))

        def step(i):
            spikes = net.update(0.5 * u.nA)
            return spikes, net.g_exc.g.value.to_decimal(u.nS), net.g_inh.g.value.to_decimal(u.nS)

        spikes, g_exc, g_inh = brainx.transform.for_loop(step, np.arange(80))
    spikes = np.asarray(spikes) > 0
    assert 0 < spikes[:60].sum() < spikes.size                  # some, not all, neurons fire early
    W_exc, W_inh = _dense(net.exc, n) * 6.0, _dense(net.inh, n) * 67.0
    for g, W, part, tau in ((g_exc, W_exc, slice(0, n_exc), 5.0), (g_inh, W_inh, slice(n_exc, n), 10.0)):
        ref, expected = np.zeros(n), []
        for t in range(80):
            late = spikes[t - 16, part] if t >= 16 else np.zeros(W.shape[0], bool)
            ref = ref * np.exp(-0.1 / tau) + late @ W
            expected.append(ref)
        np.testing.assert_allclose(np.asarray(g), np.array(expected), rtol=1e-4, atol=1e-3)
        assert np.asarray(g).max() > 0                          # the check is not all zeros
