"""What each test costs in CPU seconds, a measure that a loaded machine does not inflate.

On a shared machine a test's wall time grows with the load (ten other processes on two cores:
ten times slower), so ``--durations`` cannot say which files make ``make test`` slow.
The CPU seconds a test spends (its process's, all threads, plus those of the
subprocesses it waited for) barely change with the load; on a quiet machine they are about
its wall time. ``pytest --cpu-report=FILE`` (tests/conftest.py) appends one JSON line per test,
``[nodeid, cpu_s, child_cpu_s, wall_s]``, from every xdist worker; ``python tests/cpu_cost.py
FILE`` sums them per file, the most expensive first::

    pytest -n 0 --cpu-report=/tmp/cost.jsonl tests/test_jit.py tests/test_loops.py
    python tests/cpu_cost.py /tmp/cost.jsonl --tests 10

A module-scoped fixture's cost goes to the first test that uses it.
"""

from __future__ import annotations

import argparse
import collections
import json
import resource
import time

import pytest


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class CpuReport:
    """A pytest plugin writing each test's CPU and wall seconds to ``path``."""

    def __init__(self, path: str):
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        own, children = _cpu()
        start = time.perf_counter()
        yield
        own_after, children_after = _cpu()
        row = [item.nodeid, round(own_after - own, 3), round(children_after - children, 3),
               round(time.perf_counter() - start, 3)]
        with open(self.path, "a") as f:   # one short line per write: workers do not interleave
            f.write(json.dumps(row) + "\n")


def summary(path: str, tests: int = 0) -> str:
    """Per-file totals of a report, the most expensive first (and the ``tests`` dearest tests)."""
    files: dict = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    rows = []
    with open(path) as f:
        for line in f:
            nodeid, cpu, child, wall = json.loads(line)
            total = files[nodeid.split("::")[0]]
            total[0] += 1
            total[1] += cpu + child
            total[2] += child
            total[3] += wall
            rows.append((cpu + child, wall, nodeid))
    lines = [f"{sum(t[1] for t in files.values()):.1f} CPU s in {len(rows)} tests",
             "   CPU s  (in subprocesses)   wall s  tests  file"]
    for name, (n, cpu, child, wall) in sorted(files.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"{cpu:8.1f}  ({child:8.1f})        {wall:8.1f}  {n:5d}  {name}")
    for cpu, wall, nodeid in sorted(rows, reverse=True)[:tests]:
        lines.append(f"{cpu:8.1f}  {wall:8.1f}  {nodeid}")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--tests", type=int, default=0, help="also list the N dearest tests")
    args = parser.parse_args()
    print(summary(args.report, args.tests))
