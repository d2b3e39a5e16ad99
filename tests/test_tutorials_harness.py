"""tests/compat/run_tutorials.py: its source edits, and one brainstate notebook end to end
(when the brainstate snapshot is on this machine)."""

import importlib.util
import os
import pathlib
import sys

import pytest

HARNESS = pathlib.Path(__file__).parent / "compat" / "run_tutorials.py"


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("run_tutorials", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_imports_point_at_brainx_and_ipython_lines_go(harness):
    src = ("%matplotlib inline\nimport brainstate\nimport brainstate.nn as nn\n"
           "from brainstate.nn import Linear\nfrom brainstate import random\n!pip install x\nx = 1")
    out = harness.to_brainx(src).splitlines()
    assert out == ["import brainx as brainstate", "import brainx.nn as nn",
                   "from brainx.nn import Linear", "from brainx import random", "x = 1"]


def test_missing_packages_become_placeholders_that_fail_where_used(harness):
    missing = [p for p in harness.OTHERS if not harness._installed(p)]
    if not missing:
        pytest.skip("every package the harness stubs is installed here")
    pkg = missing[0]
    src = harness.to_brainx(f"import {pkg}\nfrom {pkg}.sub import a, b as c\nimport numpy as np")
    ns = {"_tutorial_missing": harness.Missing}
    exec(src, ns)                                   # the imports themselves run
    assert "np" in ns and isinstance(ns["c"], harness.Missing)
    with pytest.raises(ModuleNotFoundError) as info:
        getattr(ns[pkg], "anything")
    assert harness.classify(info.value, set()) == f"needs {pkg}"


def test_classify_tells_blocked_from_errors(harness):
    assert harness.classify(NameError("name 'net' is not defined"), {"net"}) == "blocked"
    assert harness.classify(NameError("name 'other' is not defined"), {"net"}) == "error"
    assert harness.classify(TypeError("bad argument"), set()) == "error"
    assert harness._assigned_names("def f(): pass\nclass A: pass\nx, y = 1, 2\nimport a.b") == \
        {"f", "A", "x", "y", "a"}


def test_shrink_reports_substitutions_that_match_nothing(harness, monkeypatch):
    monkeypatch.setattr(harness, "SHRINK", {"demo": [("n = 100", "n = 2"), ("absent", "x")]})
    cells, unmatched = harness.shrink("nb/demo.ipynb", ["n = 100\nm = n"])
    assert cells == ["n = 2\nm = n"] and unmatched == ["absent"]


@pytest.mark.skipif(not os.path.isdir(os.path.join(
    "/work/.mirror/chaobrain+brainstate/repo")), reason="no brainstate snapshot here")
def test_the_event_driven_notebook_runs_completely(harness):
    pytest.importorskip("brainevent")
    path = "docs/tutorials/brain_dynamics/03_event_driven_operators.ipynb"
    result = harness.run_notebook(harness.DEFAULT_REPO, path, 240, sys.executable, harness.ROOT)
    failed = [r for r in result["records"] if not r["ok"]]
    assert result["ok"] == result["cells"] and not failed, failed
