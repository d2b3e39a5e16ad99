"""examples/ei_delay_network.py runs short and small, writes its plots, and its delay is 1.5 ms."""

import importlib
import pathlib
import sys

import numpy as np
import pytest

from brainx import environ

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"


@pytest.fixture
def example():
    sys.path.insert(0, str(EXAMPLES))
    saved = dict(environ._SETTINGS)
    yield importlib.import_module("ei_delay_network")
    sys.path.remove(str(EXAMPLES))
    environ._SETTINGS.clear()
    environ._SETTINGS.update(saved)


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
    pre = np.asarray(net.exc.pre)
    assert pre.shape == (50, 8) and all(len(set(row)) == 8 for row in pre)   # distinct sources
