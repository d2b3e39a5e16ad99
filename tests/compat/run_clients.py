"""Run the test suites of brainstate's client libraries against brainx.

braintools, brainpy, braintrace, braincell and brainspikes import
``brainstate`` in their own files. This runner measures how much of each one's
own test suite passes when ``import brainstate`` gives brainx
(:func:`brainx.compat.install_as_brainstate`), for one *stack* at a time
(``--stack``, ``stacks.py``): ``0.5.4`` (the default: brainstate 0.5.4's
clients on Python 3.11, brainx from ``.venv``) or ``0.6`` (brainstate 0.6.0's
clients on Python 3.12, brainx from ``.venv-python3.12``, which ``make install
PYTHON=python3.12`` makes). Nothing of the clients is stored in brainx: each run

1. downloads the client's source distribution with ``pip download --no-deps``
   (its wheel when there is none; the sdists carry the ``*_test.py`` files
   that some wheels leave out) into a temporary folder, and unpacks it; the
   stack's own interpreter downloads, since the 0.6 clients declare
   ``Requires-Python >= 3.12`` (``--wheels DIR``: wheels already at hand are
   used before the package index);
2. installs the clients, pinned, into a virtual environment kept under
   ``--venv`` (default: the stack's, ``/tmp/brainx-clients-venv`` or
   ``/tmp/brainx-clients-venv-0.6``, made once), which sees brainx's own
   environment through a ``.pth`` file. The clients and their brain*
   dependencies (brainpy 2.8.2 for brainpy-state; brainevent 0.3.0 on 0.6) go in
   with ``--no-deps``; their other requirements (from the wheels'
   ``Requires-Dist``) go in as usual. brainstate is never installed: the runner
   stops if it is.
   A ``.pth`` hook in that environment calls ``install_as_brainstate()`` when
   a fresh interpreter (a client test that starts one) imports brainstate;
3. runs each test file with pytest in that environment, in its own process
   under ``--timeout`` seconds, from the unpacked source next to a
   ``conftest.py`` that calls ``brainx.compat.install_as_brainstate()`` before
   anything else, and reads the results from ``--junitxml``;
4. prints a row per file, ``client: X of B passing`` with the seconds the
   files took, and the most common failure causes (an error's first line: a
   missing name, a wrong result).

``--on-brainstate`` runs the same files on the stack's brainstate itself, for
the figures to compare with: a separate environment (default
``/tmp/brainstate-clients-venv`` or ``/tmp/brainstate-clients-venv-0.6``) with
brainstate and its own pinned dependencies and no brainx, and no
``install_as_brainstate()``. Any environment that already holds the pinned
versions serves (``--venv /tmp/bs06-ref``): nothing is installed into it.

Usage::

    python tests/compat/run_clients.py                       # brainstate 0.5.4's four clients
    python tests/compat/run_clients.py --stack 0.6 --jobs 1  # brainstate 0.6.0's five, Python 3.12
    python tests/compat/run_clients.py --only braintools --max-files 20
    python tests/compat/run_clients.py --only braintrace --files _algorithm --verbose
    python tests/compat/run_clients.py --json clients.json --jobs 2
    python tests/compat/run_clients.py --only braincell --on-brainstate   # the reference

The runner itself runs on any Python (3.11's ``.venv`` is fine for ``--stack
0.6``): the clients run in the stack's environment. The reference figures
(``stacks.py``): on brainstate 0.5.4 (issue 20) braintools 497 of 498
brainstate-facing tests, brainpy-state 238, braintrace 604, braincell 1042; on
brainstate 0.6.0 (issue 32) brainpy's ``brainpy/state`` 291, braintools 1086,
braintrace 612, braincell 898, brainspikes 391.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import email.parser
import glob
import json
import os
import re
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile

from stacks import ROOT, STACKS, Stack, base_python, brainx_python

NEVER = {"brainstate"}

CONFTEST = '''\
# Written by brainx's tests/compat/run_clients.py: `import brainstate` gives brainx.
import brainx.compat

brainx.compat.install_as_brainstate()
'''
CONFTEST_BRAINSTATE = '''\
# Written by brainx's tests/compat/run_clients.py --on-brainstate: the real brainstate.
'''
PYTEST_INI = '''\
[pytest]
addopts = -p no:cacheprovider
filterwarnings = ignore::DeprecationWarning
'''
TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pip(python: str, *args: str, quiet: bool = True) -> subprocess.CompletedProcess:
    cmd = [python, "-m", "pip", *args, "--disable-pip-version-check"] + (["-q"] if quiet else [])
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    return run


# ----------------------------------------------------------------------------- downloading

def find_archive(folder: str, dist: str, version: str, binary: bool) -> str | None:
    """``dist==version``'s wheel (``binary``) or sdist in ``folder``, or None."""
    stem = canon(dist).replace("-", "_")
    for path in sorted(glob.glob(os.path.join(folder, "*"))):
        base = os.path.basename(path)
        if (canon(base.split("-")[0]).replace("-", "_") == stem
                and f"-{version}" in base and base.endswith(".whl") == binary):
            return path
    return None


def download(python: str, dist: str, version: str, folder: str, binary: bool,
             local: str | None = None) -> str | None:
    """The path of ``dist==version``'s wheel (``binary``) or sdist, or None.

    Taken from ``local`` when it holds it, else downloaded into ``folder`` by
    ``python``'s pip (the stack's interpreter: the index offers a client only
    to the Pythons it supports).
    """
    if local and find_archive(local, dist, version, binary):
        return find_archive(local, dist, version, binary)
    os.makedirs(folder, exist_ok=True)
    kind = ["--only-binary", ":all:"] if binary else ["--no-binary", ":all:"]
    try:
        pip(python, "download", "--no-deps", *kind, "-d", folder, f"{dist}=={version}")
    except RuntimeError:
        return None
    return find_archive(folder, dist, version, binary)


def requirements(wheel: str) -> list:
    """The wheel's ``Requires-Dist`` lines without extras and markers that do not apply."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        message = email.parser.Parser().parsestr(z.read(meta).decode())
    out = []
    for line in message.get_all("Requires-Dist") or []:
        if "extra ==" in line:
            continue
        requirement, _, marker = line.partition(";")
        if marker.strip():
            try:
                from packaging.markers import Marker
                if not Marker(marker).evaluate():
                    continue
            except ImportError:
                pass
        out.append(requirement.strip())
    return out


def req_name(requirement: str) -> str:
    return canon(re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0))


def unpack(archive: str, folder: str) -> str:
    """Unpack a wheel or sdist into ``folder``; the folder that holds the package."""
    if archive.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            z.extractall(folder)
        return folder
    with tarfile.open(archive) as t:
        t.extractall(folder, filter="data")
    tops = [os.path.join(folder, n) for n in os.listdir(folder)]
    return tops[0] if len(tops) == 1 and os.path.isdir(tops[0]) else folder


def test_files(source: str, package: str, tests: str | None = None) -> list:
    """The test files inside ``tests``, or the package or a tests/ folder, relative to ``source``."""
    found = []
    for top in ((tests,) if tests else (package, "tests", "test")):
        for dirpath, dirnames, filenames in os.walk(os.path.join(source, top)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
            for name in filenames:
                rel = os.path.relpath(os.path.join(dirpath, name), source)
                if TEST_FILE.search(rel.replace(os.sep, "/")):
                    found.append(rel)
    return sorted(found)


# ----------------------------------------------------------------------------- environment

def venv_python(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def site_packages(python: str) -> str:
    """The ``site-packages`` folder of ``python``'s environment."""
    return subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def installed(python: str, names) -> dict:
    """``{name: version}`` of the distributions ``names`` installed in ``python``'s environment."""
    code = ("import json, sys, importlib.metadata as m\n"
            "out = {}\n"
            "for n in sys.argv[1:]:\n"
            "    try: out[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: pass\n"
            "print(json.dumps(out))")
    run = subprocess.run([python, "-c", code, *names], capture_output=True, text=True)
    return json.loads(run.stdout) if run.returncode == 0 else {}


def make_venv(stack: Stack, venv: str, wheels: dict, cache: str,
              on_brainstate: bool = False) -> str:
    """Create (once) the clients' environment; install the family's wheels and their deps.

    ``on_brainstate``: with brainstate itself (and its dependencies), without brainx;
    an environment that holds the pinned versions already is used as it is.
    """
    python = venv_python(venv)
    wanted = {canon(d): v for d, v in stack.family.items()}
    if on_brainstate:
        wanted["brainstate"] = stack.brainstate
        if os.path.exists(python) and installed(python, wanted) == wanted:
            return python
    if not os.path.exists(python):
        # beside brainx: brainx's own interpreter (its site-packages are shared through a .pth)
        base = base_python(stack) if on_brainstate else subprocess.run(
            [brainx_python(stack), "-c", "import sys; print(sys._base_executable)"],
            capture_output=True, text=True, check=True).stdout.strip()
        subprocess.run([base, "-m", "venv", venv], check=True)
        if not on_brainstate:
            # brainx (editable) and its dependencies come from brainx's own environment
            theirs = site_packages(brainx_python(stack))
            with open(os.path.join(site_packages(python), "brainx-venv.pth"), "w") as f:
                f.write(theirs + "\n" + ROOT + "\n")
    if not on_brainstate:
        install_import_hook(python)
    stamp = os.path.join(venv, "brainx-clients.json")
    done = json.load(open(stamp)) if os.path.exists(stamp) else {}
    if done == wanted:
        return python
    if on_brainstate:
        # numba: brainx's environment has it (brainevent's kernels); some client tests need it
        pip(python, "install", f"brainstate=={stack.brainstate}", "numba")
    # the family, pinned and without dependencies (each requires brainstate) ...
    family_wheels = []
    others = set()
    for dist, version in stack.family.items():
        wheel = wheels.get(canon(dist)) or download(python, dist, version,
                                                    os.path.join(cache, "wheels"), True)
        if wheel is None:
            raise RuntimeError(f"no wheel of {dist}=={version} on the package index")
        family_wheels.append(wheel)
        for r in requirements(wheel):
            if req_name(r) not in wanted and req_name(r) not in NEVER:
                others.add(r)
    pip(python, "install", "--no-deps", *family_wheels)
    # ... then their other requirements, resolved as usual (none of them is brainstate)
    if others:
        pip(python, "install", *sorted(others), "pytest", "hypothesis")
    if not on_brainstate:
        check_no_brainstate(python)
    with open(stamp, "w") as f:
        json.dump(wanted, f)
    return python


IMPORT_HOOK = '''\
"""Written by brainx's tests/compat/run_clients.py: `import brainstate` in any interpreter of
this environment (a client test that starts a fresh one) calls
brainx.compat.install_as_brainstate() first. Nothing is imported before that import."""
import importlib.abc
import importlib.util
import sys


class _BrainxAsBrainstate(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "brainstate":
            return None
        sys.meta_path.remove(self)
        import brainx.compat
        brainx.compat.install_as_brainstate()       # sys.modules["brainstate"] is brainx now
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return sys.modules[spec.name]

    def exec_module(self, module):
        pass


sys.meta_path.append(_BrainxAsBrainstate())
'''


def install_import_hook(python: str) -> None:
    """Serve ``import brainstate`` with brainx in fresh interpreters of the clients' environment."""
    site = site_packages(python)
    with open(os.path.join(site, "brainx_as_brainstate.py"), "w") as f:
        f.write(IMPORT_HOOK)
    with open(os.path.join(site, "brainx-as-brainstate.pth"), "w") as f:
        f.write("import brainx_as_brainstate\n")


def check_no_brainstate(python: str) -> None:
    run = subprocess.run([python, "-c", "import sys, importlib.util as u; "
                          "sys.meta_path[:] = [f for f in sys.meta_path "
                          "if type(f).__name__ != '_BrainxAsBrainstate']; "
                          "print(u.find_spec('brainstate') is not None)"],
                         capture_output=True, text=True)
    if run.stdout.strip() == "True":
        raise RuntimeError(f"brainstate is installed in {python}'s environment; the runner "
                           "measures brainx alone: uninstall it (pip uninstall brainstate)")


# ----------------------------------------------------------------------------- running

def first_line(text: str) -> str:
    """An error's first line, with addresses and long reprs shortened."""
    lines = [l for l in (text or "").splitlines() if l.strip()]
    e_lines = [l[1:].strip() for l in lines if l.startswith("E ")]
    line = e_lines[0] if e_lines else (lines[0].strip() if lines else "")
    # for a collection error the last E line is the exception, the first its context
    if e_lines and not re.match(r"\w+(\.\w+)*(Error|Exception|Exit)\b", line):
        for l in e_lines:
            if re.match(r"\w+(\.\w+)*(Error|Exception|Exit|Warning)\b", l):
                line = l
                break
    line = re.sub(r"0x[0-9a-fA-F]+", "0x..", line)
    return line[:160]


def parse_junit(path: str) -> dict:
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "causes": [],
              "passed_ids": []}
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "error"
                message = child.get("message") or ""
                if not message or message in ("collection failure",) or len(message) > 300 \
                        or "\n" in message:
                    message = first_line(child.text or message) or message
                counts["causes"].append(first_line(message) if "\n" in message else message[:160])
                break
            if child.tag == "skipped":
                outcome = "skipped"
        counts[outcome] += 1
        if outcome == "passed":
            counts["passed_ids"].append(f"{case.get('classname', '')}::{case.get('name', '')}")
    return counts


def test_env(brainx: str | None = None) -> dict:
    """The test processes' environment; ``brainx``: a brainx source tree put before the installed one."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    if brainx:
        env["PYTHONPATH"] = brainx
    return env


def children_cpu() -> float:
    """CPU seconds (user and system) of the finished child processes so far.

    Around one test process at a time (``--jobs 1``) it is that process's: on a
    loaded machine a steadier measure than wall time for comparing two runs.
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_file(python: str, source: str, rel: str, timeout: int, verbose: bool,
             brainx: str | None = None) -> dict:
    start, cpu = time.perf_counter(), children_cpu()
    fd, xml = tempfile.mkstemp(suffix=".xml")
    os.close(fd)
    env = test_env(brainx)
    cmd = [python, "-m", "pytest", "-q", "-rf", "--tb=short", "-c", "pytest.ini",
           "--rootdir", source, f"--junitxml={xml}", rel]
    timed_out = False
    try:
        run = subprocess.run(cmd, cwd=source, env=env, capture_output=True, text=True,
                             timeout=timeout)
        text, rc = run.stdout + run.stderr, run.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout or ""
        text = out.decode(errors="replace") if isinstance(out, bytes) else out
        text, rc, timed_out = text + "\nTIMEOUT", None, True
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "causes": [], "passed_ids": []}
    if os.path.getsize(xml):
        try:
            counts = parse_junit(xml)
        except ET.ParseError:
            pass
    os.remove(xml)
    if not timed_out and rc not in (0, 1, 5) and not any(counts[k] for k in ("passed", "failed", "error")):
        # pytest could not even start (a conftest failed, ...): one error for the file
        counts["error"] = 1
        counts["causes"].append(first_line("\n".join(
            l for l in text.splitlines() if l.startswith("E ")) or text.strip().splitlines()[-1]))
    if timed_out:
        counts["causes"].append(f"TIMEOUT after {timeout} s")
    counts["timeout"] = timed_out
    counts["seconds"] = round(time.perf_counter() - start, 1)
    counts["cpu_seconds"] = round(children_cpu() - cpu, 1)
    if verbose:
        print(text[-6000:], flush=True)
    return counts


def prepare(stack: Stack, client: str, cache: str, wheels: dict, python: str,
            on_brainstate: bool = False, local: str | None = None) -> tuple:
    """Download and unpack the client; the source folder and its test files."""
    c = stack.clients[client]
    dist, version = c.dist, c.version
    archive = download(python, dist, version, os.path.join(cache, "sdist"), False, local) \
        or wheels.get(canon(dist)) \
        or download(python, dist, version, os.path.join(cache, "wheels"), True, local)
    if archive is None:
        raise RuntimeError(f"{dist}=={version}: nothing to download")
    source = unpack(archive, os.path.join(cache, "src", client))
    with open(os.path.join(source, "conftest.py"), "w") as f:
        f.write(CONFTEST_BRAINSTATE if on_brainstate else CONFTEST)
    with open(os.path.join(source, "pytest.ini"), "w") as f:
        f.write(PYTEST_INI)
    return source, test_files(source, c.package, c.tests), os.path.basename(archive)


def import_check(python: str, package: str, on_brainstate: bool = False,
                 brainx: str | None = None) -> str | None:
    code = (f"import {package}" if on_brainstate else
            f"import brainx.compat; brainx.compat.install_as_brainstate(); import {package}")
    run = subprocess.run([python, "-c", code], capture_output=True, text=True,
                         env=test_env(brainx), cwd="/")
    if run.returncode:
        return run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"rc {run.returncode}"
    return None


def summarize(results: dict, top: int) -> None:
    """Print each client's totals and most common failure causes (and add them to ``results``)."""
    print()
    for client, r in results.items():
        rows = r["files"].values()
        passed = sum(c["passed"] for c in rows)
        total = sum(c["passed"] + c["failed"] + c["error"] for c in rows)
        skipped = sum(c["skipped"] for c in rows)
        timeouts = sum(c["timeout"] for c in rows)
        seconds = round(sum(c.get("seconds", 0) for c in rows), 1)
        cpu = round(sum(c.get("cpu_seconds", 0) for c in rows), 1)
        r.update(passed=passed, total=total, skipped=skipped, seconds=seconds, cpu_seconds=cpu)
        print(f"{client}: {passed} of {total} passing ({len(r['files'])} files, {seconds:.0f} s,"
              f" {cpu:.0f} s CPU"
              + (f", {skipped} skipped" if skipped else "")
              + (f", {timeouts} timed out" if timeouts else "") + ")"
              + (f"; on brainstate (reference): {r['reference']}" if r.get("reference") else ""))
        causes = collections.Counter(x for c in rows for x in c["causes"])
        r["causes"] = causes.most_common()
        for cause, n in causes.most_common(top):
            print(f"    {n:5d}  {cause}")


def compare(results: dict, reference: dict) -> None:
    """Beside a ``--json`` of ``--on-brainstate``: of the tests that pass there, how many here.

    The time ratio is over the files both runs ran (each file's process, start-up included),
    in CPU seconds (steadier than wall time on a shared machine; ``--jobs 1`` runs only).
    """
    print("\ncompared with the reference run:")
    for client, r in results.items():
        ref = reference.get(client)
        if not ref:
            continue
        common = [f for f in r["files"] if f in ref["files"]]
        theirs = {(f, t) for f in common for t in ref["files"][f].get("passed_ids", [])}
        ours = {(f, t) for f in common for t in r["files"][f].get("passed_ids", [])}
        ours_s = sum(r["files"][f].get("cpu_seconds", 0) for f in common)
        theirs_s = sum(ref["files"][f].get("cpu_seconds", 0) for f in common)
        ratio = f"{ours_s / theirs_s:.2f}x" if theirs_s else "?"
        print(f"{client}: {len(theirs & ours)} of the {len(theirs)} passing on brainstate pass "
              f"here ({len(ours - theirs)} pass here only); CPU time {ours_s:.0f} s / "
              f"{theirs_s:.0f} s = {ratio} ({len(common)} files)")
        for f, t in sorted(theirs - ours)[:20]:
            print(f"    misses {f}::{t}")
        r["compared"] = {"passing_on_brainstate": len(theirs), "of_those_here": len(theirs & ours),
                         "seconds": ours_s, "seconds_on_brainstate": theirs_s}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stack", default="0.5.4", choices=sorted(STACKS),
                   help="which brainstate's clients, on which Python (stacks.py)")
    p.add_argument("--only", default=None,
                   help="run these clients only (comma-separated)")
    p.add_argument("--files", default=None, help="run the test files whose path contains this")
    p.add_argument("--max-files", type=int, default=None, help="at most this many files a client, evenly spaced over its sorted list")
    p.add_argument("--timeout", type=int, default=300, help="seconds per file")
    p.add_argument("--jobs", type=int, default=1, help="files run at once")
    p.add_argument("--venv", default=None, help="the clients' environment (made once; default "
                   "the stack's, stacks.py)")
    p.add_argument("--wheels", default=None,
                   help="a folder of wheels and sdists to take before the package index")
    p.add_argument("--brainx", default=None, metavar="DIR",
                   help="measure the brainx of this source tree (e.g. `git archive HEAD brainx` "
                        "unpacked there) instead of the installed one: edits in progress in the "
                        "working tree do not disturb the run")
    p.add_argument("--on-brainstate", action="store_true",
                   help="run on the stack's brainstate itself (the reference), not on brainx")
    p.add_argument("--json", default=None, help="write the per-file results here")
    p.add_argument("--compare", default=None,
                   help="a --json of an --on-brainstate run: print how many of the tests "
                        "passing there pass here, and the time ratio")
    p.add_argument("--top", type=int, default=8, help="failure causes shown a client")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)

    stack = STACKS[args.stack]
    clients = args.only.split(",") if args.only else list(stack.clients)
    unknown = [c for c in clients if c not in stack.clients]
    if unknown:
        p.error(f"no client {', '.join(unknown)} in the stack {stack.name}: "
                f"{', '.join(stack.clients)}")
    on_bs = args.on_brainstate
    results = {}
    with tempfile.TemporaryDirectory(prefix="brainx-clients-") as cache:
        # the stack's interpreter downloads (the index offers a client only to the Pythons it supports)
        getter = base_python(stack) if on_bs else brainx_python(stack)
        wheels = {}
        for dist, version in stack.family.items():
            wheels[canon(dist)] = download(getter, dist, version, os.path.join(cache, "wheels"),
                                           True, args.wheels)
        venv = args.venv or (stack.reference_venv if on_bs else stack.venv)
        python = make_venv(stack, venv, wheels, cache, on_bs)
        for client in clients:
            source, files, archive = prepare(stack, client, cache, wheels, getter, on_bs,
                                             args.wheels)
            if args.files:
                files = [f for f in files if args.files in f]
            if args.max_files is not None and len(files) > args.max_files:
                # evenly spaced over the sorted list, so every subpackage is sampled
                step = len(files) / max(1, args.max_files)
                files = [files[int(i * step)] for i in range(args.max_files)]
            import_name = stack.clients[client].import_name
            brainx = None if on_bs else args.brainx
            broken = import_check(python, import_name, on_bs, brainx)
            where = f"brainstate {stack.brainstate}" if on_bs else "brainx"
            print(f"\n== {client} ({archive}) on {where}: {len(files)} test files"
                  + (f"; import {import_name} fails: {broken}" if broken else ""), flush=True)
            rows = {}
            with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
                futures = {pool.submit(run_file, python, source, f, args.timeout, args.verbose,
                                       brainx): f
                           for f in files}
                for future in concurrent.futures.as_completed(futures):
                    name = futures[future]
                    c = rows[name] = future.result()
                    total = c["passed"] + c["failed"] + c["error"]
                    common = collections.Counter(c["causes"]).most_common(1)
                    print(f"{name:64s} {c['passed']:4d} / {total:4d} {c['seconds']:6.1f} s"
                          f" {c['cpu_seconds']:6.1f} s CPU"
                          + (f"  ({c['error']} errors)" if c["error"] else "")
                          + ("  TIMEOUT" if c["timeout"] else "")
                          + (f"  {common[0][0][:90]}" if common else ""), flush=True)
            results[client] = {"archive": archive, "import_error": broken, "files": rows,
                               "stack": stack.name, "on": where,
                               "reference": None if on_bs else stack.reference.get(client)}

    summarize(results, args.top)
    if args.compare:
        with open(args.compare) as f:
            compare(results, json.load(f))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
