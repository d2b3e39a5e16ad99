"""Run the test suites of brainstate's client libraries against brainx.

braintools, brainpy-state, braintrace and braincell import ``brainstate`` in
their own files. This runner measures how much of each one's own test suite
passes when ``import brainstate`` gives brainx
(:func:`brainx.compat.install_as_brainstate`). Nothing of the clients is
stored in brainx: each run

1. downloads the client's source distribution with ``pip download --no-deps``
   (its wheel when there is none; the sdists carry the ``*_test.py`` files
   that some wheels leave out) into a temporary folder, and unpacks it;
2. installs the clients, pinned, into a virtual environment kept under
   ``--venv`` (default ``/tmp/brainx-clients-venv``, made once), which sees
   brainx's own environment (``.venv``) through a ``.pth`` file. The clients
   and their brain* dependencies (brainpy 2.8.2 for brainpy-state) go in with
   ``--no-deps``; their other requirements (from the wheels' ``Requires-Dist``)
   go in as usual. brainstate is never installed: the runner stops if it is.
   A ``.pth`` hook in that environment calls ``install_as_brainstate()`` when
   a fresh interpreter (a client test that starts one) imports brainstate;
3. runs each test file with pytest in that environment, in its own process
   under ``--timeout`` seconds, from the unpacked source next to a
   ``conftest.py`` that calls ``brainx.compat.install_as_brainstate()`` before
   anything else, and reads the results from ``--junitxml``;
4. prints a row per file, ``client: X of B passing`` and the most common
   failure causes (an error's first line: a missing name, a wrong result).

``--on-brainstate`` runs the same files on brainstate 0.5.4 itself, for the
figure to compare with: a separate environment (default
``/tmp/brainstate-clients-venv``) with brainstate and its own pinned
dependencies and no brainx, and no ``install_as_brainstate()``.

Usage::

    python tests/compat/run_clients.py                       # all four clients
    python tests/compat/run_clients.py --only braintools --max-files 20
    python tests/compat/run_clients.py --only braintrace --files _algorithm --verbose
    python tests/compat/run_clients.py --json clients.json --jobs 2
    python tests/compat/run_clients.py --only braincell --on-brainstate   # the reference

The numbers on brainstate 0.5.4 that issue 20 compares against: braintools 497
of 498 brainstate-facing tests, brainpy-state 238, braintrace 604, braincell 1042.
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
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BRAINX_VENV = os.path.join(ROOT, ".venv")
DEFAULT_VENV = "/tmp/brainx-clients-venv"
BRAINSTATE_VENV = "/tmp/brainstate-clients-venv"
BRAINSTATE = "0.5.4"

#: client: (distribution on the package index, version, package folder, import name);
#: brainpy_state refuses a direct import outside its tests: users import brainpy.state.
CLIENTS = {
    "braintools": ("braintools", "0.3.0", "braintools", "braintools"),
    "brainpy-state": ("brainpy-state", "0.1.0", "brainpy_state", "brainpy.state"),
    "braintrace": ("braintrace", "0.2.6", "braintrace", "braintrace"),
    "braincell": ("braincell", "0.1.0", "braincell", "braincell"),
}
#: brainstate's family: installed pinned with --no-deps (each requires brainstate).
FAMILY = {"braintools": "0.3.0", "brainpy-state": "0.1.0", "braintrace": "0.2.6",
          "braincell": "0.1.0", "brainpy": "2.8.2"}
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

def download(dist: str, version: str, folder: str, binary: bool) -> str | None:
    """The path of ``dist==version``'s wheel (``binary``) or sdist in ``folder``, or None."""
    os.makedirs(folder, exist_ok=True)
    kind = ["--only-binary", ":all:"] if binary else ["--no-binary", ":all:"]
    try:
        pip(sys.executable, "download", "--no-deps", *kind, "-d", folder, f"{dist}=={version}")
    except RuntimeError:
        return None
    stem = canon(dist).replace("-", "_")
    for path in sorted(glob.glob(os.path.join(folder, "*"))):
        base = os.path.basename(path)
        if (canon(base.split("-")[0]).replace("-", "_") == stem
                and f"-{version}" in base and base.endswith(".whl") == binary):
            return path
    return None


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


def test_files(source: str, package: str) -> list:
    """The test files inside the package or a tests/ folder, relative to ``source``."""
    found = []
    for top in (package, "tests", "test"):
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


def make_venv(venv: str, wheels: dict, cache: str, on_brainstate: bool = False) -> str:
    """Create (once) the clients' environment; install the family's wheels and their deps.

    ``on_brainstate``: with brainstate itself (and its dependencies), without brainx.
    """
    python = venv_python(venv)
    if not os.path.exists(python):
        base = subprocess.run([os.path.join(BRAINX_VENV, "bin", "python"), "-c",
                               "import sys; print(sys._base_executable)"],
                              capture_output=True, text=True, check=True).stdout.strip()
        subprocess.run([base, "-m", "venv", venv], check=True)
        if not on_brainstate:
            # brainx (editable) and its dependencies come from brainx's own environment
            theirs = site_packages(os.path.join(BRAINX_VENV, "bin", "python"))
            with open(os.path.join(site_packages(python), "brainx-venv.pth"), "w") as f:
                f.write(theirs + "\n" + ROOT + "\n")
    if not on_brainstate:
        install_import_hook(python)
    stamp = os.path.join(venv, "brainx-clients.json")
    wanted = {canon(d): v for d, v in FAMILY.items()}
    if on_brainstate:
        wanted["brainstate"] = BRAINSTATE
    done = json.load(open(stamp)) if os.path.exists(stamp) else {}
    if done == wanted:
        return python
    if on_brainstate:
        # numba: brainx's environment has it (brainevent's kernels); some client tests need it
        pip(python, "install", f"brainstate=={BRAINSTATE}", "numba")
    # the family, pinned and without dependencies (each requires brainstate) ...
    family_wheels = []
    others = set()
    for dist, version in FAMILY.items():
        wheel = wheels.get(canon(dist)) or download(dist, version, os.path.join(cache, "wheels"), True)
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
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "causes": []}
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
    return counts


def run_file(python: str, source: str, rel: str, timeout: int, verbose: bool) -> dict:
    fd, xml = tempfile.mkstemp(suffix=".xml")
    os.close(fd)
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
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
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "causes": []}
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
    if verbose:
        print(text[-6000:], flush=True)
    return counts


def prepare(client: str, cache: str, wheels: dict, on_brainstate: bool = False) -> tuple:
    """Download and unpack the client; the source folder and its test files."""
    dist, version, package, _ = CLIENTS[client]
    archive = download(dist, version, os.path.join(cache, "sdist"), False) \
        or wheels.get(canon(dist)) or download(dist, version, os.path.join(cache, "wheels"), True)
    if archive is None:
        raise RuntimeError(f"{dist}=={version}: nothing to download")
    source = unpack(archive, os.path.join(cache, "src", client))
    with open(os.path.join(source, "conftest.py"), "w") as f:
        f.write(CONFTEST_BRAINSTATE if on_brainstate else CONFTEST)
    with open(os.path.join(source, "pytest.ini"), "w") as f:
        f.write(PYTEST_INI)
    return source, test_files(source, package), os.path.basename(archive)


def import_check(python: str, package: str, on_brainstate: bool = False) -> str | None:
    code = (f"import {package}" if on_brainstate else
            f"import brainx.compat; brainx.compat.install_as_brainstate(); import {package}")
    run = subprocess.run([python, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"), cwd="/")
    if run.returncode:
        return run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"rc {run.returncode}"
    return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=None, choices=sorted(CLIENTS),
                   help="run this client only")
    p.add_argument("--files", default=None, help="run the test files whose path contains this")
    p.add_argument("--max-files", type=int, default=None, help="at most this many files a client, evenly spaced over its sorted list")
    p.add_argument("--timeout", type=int, default=300, help="seconds per file")
    p.add_argument("--jobs", type=int, default=1, help="files run at once")
    p.add_argument("--venv", default=None, help="the clients' environment (made once; default "
                   f"{DEFAULT_VENV}, or {BRAINSTATE_VENV} with --on-brainstate)")
    p.add_argument("--on-brainstate", action="store_true",
                   help=f"run on brainstate {BRAINSTATE} itself (the reference), not on brainx")
    p.add_argument("--json", default=None, help="write the per-file results here")
    p.add_argument("--top", type=int, default=8, help="failure causes shown a client")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)

    clients = [args.only] if args.only else list(CLIENTS)
    results = {}
    with tempfile.TemporaryDirectory(prefix="brainx-clients-") as cache:
        wheels = {}
        for dist, version in FAMILY.items():
            wheels[canon(dist)] = download(dist, version, os.path.join(cache, "wheels"), True)
        on_bs = args.on_brainstate
        venv = args.venv or (BRAINSTATE_VENV if on_bs else DEFAULT_VENV)
        python = make_venv(venv, wheels, cache, on_bs)
        for client in clients:
            source, files, archive = prepare(client, cache, wheels, on_bs)
            if args.files:
                files = [f for f in files if args.files in f]
            if args.max_files is not None and len(files) > args.max_files:
                # evenly spaced over the sorted list, so every subpackage is sampled
                step = len(files) / max(1, args.max_files)
                files = [files[int(i * step)] for i in range(args.max_files)]
            broken = import_check(python, CLIENTS[client][3], on_bs)
            where = f"brainstate {BRAINSTATE}" if on_bs else "brainx"
            print(f"\n== {client} ({archive}) on {where}: {len(files)} test files"
                  + (f"; import {CLIENTS[client][3]} fails: {broken}" if broken else ""), flush=True)
            rows = {}
            with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
                futures = {pool.submit(run_file, python, source, f, args.timeout, args.verbose): f
                           for f in files}
                for future in concurrent.futures.as_completed(futures):
                    name = futures[future]
                    c = rows[name] = future.result()
                    total = c["passed"] + c["failed"] + c["error"]
                    common = collections.Counter(c["causes"]).most_common(1)
                    print(f"{name:64s} {c['passed']:4d} / {total:4d}"
                          + (f"  ({c['error']} errors)" if c["error"] else "")
                          + ("  TIMEOUT" if c["timeout"] else "")
                          + (f"  {common[0][0][:90]}" if common else ""), flush=True)
            results[client] = {"archive": archive, "import_error": broken, "files": rows}

    print()
    for client, r in results.items():
        rows = r["files"].values()
        passed = sum(c["passed"] for c in rows)
        total = sum(c["passed"] + c["failed"] + c["error"] for c in rows)
        skipped = sum(c["skipped"] for c in rows)
        timeouts = sum(c["timeout"] for c in rows)
        r.update(passed=passed, total=total, skipped=skipped)
        print(f"{client}: {passed} of {total} passing ({len(r['files'])} files"
              + (f", {skipped} skipped" if skipped else "")
              + (f", {timeouts} timed out" if timeouts else "") + ")")
        causes = collections.Counter(x for c in rows for x in c["causes"])
        r["causes"] = causes.most_common()
        for cause, n in causes.most_common(args.top):
            print(f"    {n:5d}  {cause}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
