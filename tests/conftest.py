"""Test-suite options: ``make test`` runs a sample of the largest matrices, ``make test-long`` all of it.

Some test functions are parametrized over large matrices (every raw JAX helper
under every brainx transform, every convolution configuration, ...). In the
default run, for each such function, the first case and a fixed, spread-out
sample of the others run (about one in ``k``, chosen by a hash of the test id,
so the sample is the same on every machine and covers every axis of the
matrix); ``--long`` (``make test-long``) runs every case. This keeps
``make test`` under ten minutes on a 2-core CI machine.
"""

import os
import zlib

import pytest

from cpu_cost import CpuReport

#: Test file (or ``file::function``) -> keep about one parametrized case in k (per test function).
SAMPLED_FILES = {
    "test_nn_layers_conv.py": 4,
    "test_raw_jax_helpers.py": 3,
    "test_container_states.py": 3,
    "test_surrogate.py": 2,
    "test_random.py": 2,
    "test_checkpointed_loops.py": 2,
    "test_promotion_and_paths.py": 2,
    "test_transform_checks.py": 2,
    "test_nn_layers_basic.py": 2,
    "test_nn_event_group.py": 2,
    # one function of a file: its 8 event/dense equivalence cases (target x ratio x backend)
    # cost 2-3.5 CPU s each; the file's other matrices (drift kinds, surrogates) all run
    "test_nn_compiled_steps.py::"
    "test_float_inputs_are_events_where_positive_with_the_gradient_of_x_at_w": 2,
}


#: What the default run adds to ``XLA_FLAGS``. The suite compiles thousands of small programs
#: and runs each once or twice: most of its CPU time is LLVM optimizing machine code that then
#: runs for microseconds. Level 0 halves a compile (brainx.nn.init's doctests: 15 CPU s, 7.5)
#: and changes no HLO pass (the optimized HLO, buffer sizes and memory reports are the same;
#: a float may differ in its last bits, as between two programs fused differently). ``--long``
#: and the check-caches run keep XLA's default, so optimized code is tested on every
#: ``make test`` too; an ``XLA_FLAGS`` that already sets the level wins.
FAST_XLA_FLAGS = "--xla_backend_optimization_level=0"


def _compile_fast(config) -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    if config.getoption("--long") or _checking_caches() or "optimization_level" in flags:
        return
    # read when JAX starts its backend (no test has yet); subprocesses inherit it
    os.environ["XLA_FLAGS"] = f"{flags} {FAST_XLA_FLAGS}".strip()


def pytest_configure(config):
    _compile_fast(config)
    if config.getoption("--cpu-report"):
        config.pluginmanager.register(CpuReport(config.getoption("--cpu-report")), "cpu-report")
    config.addinivalue_line(
        "markers", "counts_traces: counts traces or compiles, or needs the fast call path; "
        "skipped under BRAINX_CHECK_CACHES=1, which traces once more at every cache reuse")


def _checking_caches() -> bool:
    from brainx.transform.core import cache_check
    return cache_check.enabled()


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true",
                     help="run every case of the sampled test matrices (make test-long)")
    parser.addoption("--cpu-report", metavar="FILE",
                     help="append each test's CPU seconds to FILE (tests/cpu_cost.py sums them)")


def _kept(item, seen: set) -> bool:
    k = SAMPLED_FILES.get(f"{item.path.name}::{item.originalname}",
                          SAMPLED_FILES.get(item.path.name))
    if k is None or getattr(item, "callspec", None) is None:
        return True
    function = (item.path.name, item.originalname)
    if function not in seen:  # the first case of every function always runs
        seen.add(function)
        return True
    return zlib.crc32(item.nodeid.encode()) % k == 0


def pytest_collection_modifyitems(config, items):
    if _checking_caches():
        skip = pytest.mark.skip(reason="BRAINX_CHECK_CACHES traces once more at every reuse")
        for item in items:
            if item.get_closest_marker("counts_traces"):
                item.add_marker(skip)
    if config.getoption("--long"):
        return
    seen: set = set()
    kept, dropped = [], []
    for item in items:
        (kept if _kept(item, seen) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


#: Files whose tests share nothing worth keeping on one worker (each runs a page, an example, a
#: subprocess): under ``--dist loadscope`` each of their tests is a unit of its own, so the two
#: workers split them instead of one worker running the whole file last.
SPLIT_FILES = ("test_docs.py", "test_docstrings.py", "test_examples.py", "test_distributed.py")


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.split("::", 1)[0].endswith(SPLIT_FILES):
                return nodeid
            return super()._split_scope(nodeid)

    return Scheduling(config, log)
