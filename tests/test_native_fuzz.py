"""The native kernels' fuzzer (tests/native_fuzz.py) in a subprocess: a crash fails this test only.

80 random cases here (200 with ``--long``, 10 000 in ``make fuzz``): every public
``SynapseRows`` constructor, ``sparse_product`` and ``dense_event_product`` against NumPy, bad
indices refused, the caller's arrays changed after the build, and the kernel called on random
out-of-bounds layouts directly. Seed 1's first 80 have every kind of case (the test checks
it), 4 to 39 of each.
"""

import os
import subprocess
import sys

import pytest

from brainx import nn
from brainx.nn.connectivity.native import build

pytestmark = pytest.mark.skipif(not nn.event_backend.has_native(),
                                reason=f"native kernels unavailable: {build.unavailable_reason()}")

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("seed", [1])
def test_random_layouts_and_products_equal_numpy_and_never_crash(seed, request):
    cases = 200 if request.config.getoption("--long") else 80
    run = subprocess.run([sys.executable, os.path.join(HERE, "native_fuzz.py"), "--cases",
                          str(cases), "--seed", str(seed)], capture_output=True, text=True,
                         timeout=900,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert run.returncode == 0, (f"exit {run.returncode} (a negative one is a signal: "
                                 f"{-run.returncode if run.returncode < 0 else 'none'})\n"
                                 f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    assert f"{cases} cases, 0 failures" in run.stdout, run.stdout
    counts = dict(part.rsplit(" ", 1) for part in run.stdout.split(": ", 1)[1].split(", "))
    # every kind of case ran, refusals included (a fuzzer that refuses nothing tests little)
    for kind in ("product", "dense", "kernel", "kernel-refused", "refused"):
        assert int(counts.get(kind, 0)) > 0, run.stdout
