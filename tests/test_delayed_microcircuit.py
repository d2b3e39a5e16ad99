"""examples/microcircuit_model.py against the numbers of the model's specification (its tables,
computed there from NEST's example), and a short run of
examples/microcircuit.py at a tiny scale (it builds, steps and writes its JSON)."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
import microcircuit_model as model  # noqa: E402

# the specification's full-scale synapse counts Q_yx [target, source]
SPEC_Q = np.array([
    [45499805, 22323577, 20253647, 9670918, 3293578, 0, 2271404, 0],
    [17443694, 5018763, 4105338, 1690074, 2221213, 0, 353461, 0],
    [3503670, 756561, 24482849, 17413576, 714524, 7003, 14624432, 0],
    [8114254, 92832, 9933538, 5223272, 87836, 0, 8810905, 0],
    [10613575, 1817058, 5507804, 151900, 2040738, 2407889, 1438969, 0],
    [1241436, 169424, 607667, 12851, 319602, 430444, 132414, 0],
    [4681225, 556108, 6727570, 1320234, 4112225, 305029, 8372649, 10827677],
    [2260836, 17207, 220033, 8078, 401638, 25218, 2888426, 1354320]])
SPEC_I_E = {("poisson", 0.1): [29.0, 112.4, 113.0, 115.0, 125.4, 151.7, 43.8, 153.7],
            ("poisson", 0.25): [21.2, 82.2, 82.6, 84.1, 91.7, 110.9, 32.1, 112.4],
            ("dc", 0.1): [206.7, 279.0, 346.2, 326.0, 347.6, 362.7, 365.9, 387.0],
            ("dc", 1.0): [562.0, 526.9, 737.6, 667.3, 702.5, 667.3, 1018.6, 737.6]}


def test_full_scale_counts_and_sizes_match_the_specification():
    p = model.network_parameters(1.0)
    np.testing.assert_array_equal(p["counts"], SPEC_Q)
    assert p["sizes"].sum() == 77169
    assert model.network_parameters(0.1)["counts"].sum() == 2988807
    assert model.network_parameters(0.5)["sizes"][5] == 532           # 532.5 -> 532 (to even)


@pytest.mark.parametrize("background,scale", list(SPEC_I_E))
def test_dc_currents_match_the_specification(background, scale):
    p = model.network_parameters(scale, background)
    np.testing.assert_allclose(p["I_e"], SPEC_I_E[background, scale], atol=0.051)


def test_weights_and_psc_factor():
    assert abs(model.psc_per_psp() - 585.38996) < 1e-4
    p = model.network_parameters(0.1)
    w = p["weight_mean"]
    np.testing.assert_allclose([w[1, 0], w[0, 2], w[0, 1], p["w_ext"]],
                               [277.675, 555.350, -1110.699, 277.675], atol=1e-3)


def test_example_runs_at_a_tiny_scale(tmp_path):
    import microcircuit
    out = tmp_path / "mc.json"
    result = microcircuit.main(["--scale", "0.02", "--t-presim", "20", "--t-sim", "30",
                                "--json", str(out), "--plot", "none"])
    saved = json.loads(out.read_text())
    for key in ("rates_hz", "cv_isi", "build_s", "sim_s", "rtf", "peak_rss_mib", "neurons",
                "synapses"):
        assert key in saved
    assert set(saved["rates_hz"]) == set(model.POPULATIONS)
    assert saved["synapses"] == int(model.network_parameters(0.02)["counts"].sum())
    assert result["spikes"] > 0                                        # the network is active


def test_cached_build_saves_then_loads_the_same_synapses(tmp_path):
    p = model.network_parameters(0.02)
    path = str(tmp_path / "conn.msgpack")
    built, loaded = model.cached_build(p, 3, path)
    again, loaded_again = model.cached_build(p, 3, path)
    assert not loaded and loaded_again
    for name in ("indptr", "targets", "delays", "weights"):
        np.testing.assert_array_equal(getattr(built, name), getattr(again, name))
    assert again.unit == built.unit and again.n_post == built.n_post
