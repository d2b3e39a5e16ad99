"""The distributed examples, small, on 8 fake devices."""

import pathlib
import sys

import numpy as np
from jax.sharding import PartitionSpec as P

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "examples"))

import brain_scale  # noqa: E402
import data_parallel_snn  # noqa: E402
import model_parallel_network  # noqa: E402
import partitioned_microcircuit  # noqa: E402


def test_data_parallel_snn_has_the_one_device_loss_curve_until_a_spike_flips(capsys):
    args = data_parallel_snn.parse(["--fast"])
    args.iters, args.T, args.base, args.n_in = 2, 6, 3, 8
    one, many, hlo, same = data_parallel_snn.main(args)
    assert len(one) == 2 and np.all(np.isfinite(one))
    assert same["grad_diff"] <= data_parallel_snn.GRAD_TOL
    first = same["first_flip"]                     # the steps before any spike count differs
    np.testing.assert_allclose(many[:first], one[:first], rtol=data_parallel_snn.LOSS_TOL)
    assert "all-reduce(" in hlo and "all-gather(" not in hlo
    out = capsys.readouterr().out
    assert "8 devices" in out and "step 1 gradients: largest difference" in out


def test_model_parallel_network_matches_one_device():
    one, many, net = model_parallel_network.main(model_parallel_network.parse(["--fast"]))
    assert one.sum() > 0                                   # the network fires
    assert np.mean(one != many) < 0.01                     # float order may flip a rare spike
    shard = net.w.value.addressable_shards[0].data
    assert shard.shape == (256, 32)                        # each device: 1/8 of W's columns
    assert net.v.value.sharding.spec == P("model")


def test_partitioned_microcircuit_fast_gives_one_devices_spikes(capsys):
    results = partitioned_microcircuit.main(partitioned_microcircuit.parse(["--fast"]))
    one, eight = results[1], results[8]
    assert one.sum() > 100 and np.array_equal(one, eight)
    assert "same spikes on 1 and 8 devices: True" in capsys.readouterr().out


def test_brain_scale_fast_reports_bits_exchanged_and_fires():
    out = brain_scale.main(brain_scale.parse(["--fast"]))
    assert out["neurons"] == 1 << 16 and out["exchanged"] == (1 << 16) / 8
    assert out["collectives"] == [("all-gather", "u8[8192]", False)]
    assert all(0.1 < r < 100 for r in out["rates"])
