"""tests/cpu_cost.py: each test's CPU seconds (its own and its subprocesses'), summed per file."""

import json

from cpu_cost import CpuReport, summary

pytest_plugins = ["pytester"]

SPIN = """
import subprocess, sys, time

def _spin(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass

def test_spins():
    _spin(0.3)

def test_sleeps():
    time.sleep(0.3)

def test_a_child_spins():
    code = "import time\\ns = time.process_time()\\nwhile time.process_time() - s < 0.3: pass"
    subprocess.run([sys.executable, "-c", code], check=True)
"""


def test_the_report_counts_cpu_not_waiting_and_includes_subprocesses(pytester, tmp_path):
    pytester.makepyfile(test_costs=SPIN)
    report = tmp_path / "cost.jsonl"
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", plugins=[CpuReport(str(report))])
    result.assert_outcomes(passed=3)
    rows = {json.loads(line)[0].split("::")[1]: json.loads(line)[1:]
            for line in report.read_text().splitlines()}
    (spin_cpu, spin_child, _), (sleep_cpu, _, sleep_wall) = rows["test_spins"], rows["test_sleeps"]
    assert spin_cpu >= 0.3 and spin_child == 0.0
    assert sleep_wall >= 0.3 and sleep_cpu < 0.15          # waiting costs no CPU
    assert rows["test_a_child_spins"][1] >= 0.3            # the subprocess's CPU is counted


def test_the_summary_sums_per_file_dearest_first(tmp_path):
    report = tmp_path / "cost.jsonl"
    rows = [["tests/test_a.py::t1", 1.0, 0.5, 9.0], ["tests/test_b.py::t1", 4.0, 0.0, 20.0],
            ["tests/test_a.py::t2", 2.0, 0.0, 3.0]]
    report.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = summary(str(report), tests=1).splitlines()
    assert lines[0] == "7.5 CPU s in 3 tests"
    assert lines[2].split() == ["4.0", "(", "0.0)", "20.0", "1", "tests/test_b.py"]
    assert lines[3].split() == ["3.5", "(", "0.5)", "12.0", "2", "tests/test_a.py"]
    assert lines[4].split() == ["4.0", "20.0", "tests/test_b.py::t1"]
