"""Run brainstate's own core test files against brainx, with the import changed.

The test files are read at run time from a brainstate checkout (``--repo``,
default: the snapshot under ``/work/.mirror``); nothing of them is stored in
brainx. They are written to a temporary folder (keeping brainstate's package
paths, so their relative names stay unique) next to a ``conftest.py`` that
calls ``brainx.compat.install_as_brainstate()`` (the one switch of a brainstate
stack, with its brainstate rules for raw-trace writes) and
makes ``import brainstate`` (and ``brainstate.transform``, ``.random``,
``.environ``, ``.graph``, ``.util``, ``.nn``, ``.typing``, ...) give brainx's
modules, and pytest runs each file in its own process under a time limit.

Only brainstate's core is run (state, transform, random, environ, graph,
util, mixin); ``nn`` has its own tutorials harness (``run_tutorials.py``).
Three private modules that many tests import for public things are mapped to
brainx's (``brainstate._state`` to ``brainx.state``, ``_error`` to
``brainx.errors``, ``_compatible_import`` to JAX's own names). Any other
private module path (``brainstate.transform._make_jaxpr``, ...) reads its
names from the public package above it (``brainx.transform``): a test that
imports a public name through a private path runs, one that imports a private
name (``_make_hashable``, ``TRACE_CONTEXT``, ...) fails with the missing name
shown in the table, so internals no user program imports are told apart from
public gaps.

Usage::

    python tests/compat/run_brainstate_tests.py                 # a table per file
    python tests/compat/run_brainstate_tests.py --only _jit_test --verbose
    python tests/compat/run_brainstate_tests.py --json results.json
    python tests/compat/run_brainstate_tests.py --lenient   # private names as failing stand-ins

``--lenient`` answers "how much of brainstate's public behaviour holds": a
private name brainx lacks (``TRACE_CONTEXT``, ``_size2shape``) becomes a
stand-in that raises ``NotImplementedError`` when used, so one private import
no longer fails every test of its file; the tests that use it still fail.

``--changed-since OLD`` (another checkout or unpacked wheel, e.g. brainstate
0.5.4's beside 0.6.0's) also counts the tests the newer release added or
changed (``changed_tests.py``: each test function's and method's source,
compared as syntax trees) and how many of them pass: the release's new
behaviour, beside the whole suite. ``--nn`` adds ``brainstate/nn``'s files.
``--on-brainstate PYTHON`` runs the same files on brainstate itself, in the
environment of that interpreter (``/tmp/bs06-ref/bin/python``), for the figures
to compare with; ``--compare JSON`` (that run's ``--json``) then prints how many
of the tests passing there pass on brainx, and the time ratio::

    python tests/compat/run_brainstate_tests.py --repo /tmp/bs06/new \\
        --changed-since /tmp/bs06/old --json bx.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile

from changed_tests import case_key, changed, test_sources

DEFAULT_REPO = "/work/.mirror/chaobrain+brainstate/repo"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORE = re.compile(r"^brainstate/(_state|environ|mixin|random/|transform/|graph/|util/)[^/]*.*_test\.py$")
NN = re.compile(r"^brainstate/nn/[^/]*_test\.py$")

CONFTEST = '''
import importlib, importlib.abc, importlib.util, sys, types
import brainx, brainx.compat

# The switch a brainstate stack uses (brainstate's rules for raw-trace writes included); what
# follows adds the test files' own mapping (--lenient stand-ins for private names).
brainx.compat.install_as_brainstate()  # (brainstate: a module reporting 0.6.0, over brainx)
for name in ("transform", "random", "environ", "graph", "util", "nn", "typing", "mixin",
             "augment", "compile", "functional", "init", "optim", "surrogate"):
    try:
        module = importlib.import_module("brainx." + name)
    except ImportError:
        module = getattr(brainx, name, None)
    if module is None:
        module = types.ModuleType("brainstate." + name)  # absent in brainx: attribute errors
    sys.modules["brainstate." + name] = module
    setattr(brainx, name, module)

# --lenient: a private name brainx lacks is a stand-in that fails when used, so
# the file's other tests still run (a file is not lost to one private import).
import os
LENIENT = os.environ.get("BRAINX_COMPAT_LENIENT") == "1"


class _NotMirrored:
    def __init__(self, name):
        object.__setattr__(self, "_name", name)

    def _fail(self, *args, **kwargs):
        raise NotImplementedError(f"the brainstate internal {self._name} is not mirrored "
                                  "by brainx (a stand-in under --lenient)")

    __call__ = __iter__ = __getitem__ = __enter__ = __len__ = _fail

    def __getattr__(self, attr):
        self._fail()


def _forwarding(private_name, public):
    module = types.ModuleType(private_name)

    def forward(name):
        try:
            return getattr(public, name)
        except AttributeError:
            if LENIENT and not name.startswith("__"):
                return _NotMirrored(f"{private_name}.{name}")
            raise AttributeError(f"module {private_name!r} has no attribute {name!r}")
    module.__getattr__ = forward
    return module


# Three private modules many tests import for public things: where brainx keeps them.
import brainx.errors, brainx.state
# (over the modules install_as_brainstate serves: brainstate._state has TRACE_CONTEXT)
sys.modules["brainstate._state"] = _forwarding("brainstate._state",
                                               sys.modules["brainstate._state"])
sys.modules["brainstate._error"] = brainx.errors
# brainstate's private hook modules: the brainx modules that hold the same public names.
import brainx.state.hooks, brainx.state.hook_manager, brainx.state.global_hooks
sys.modules["brainstate._state_hook_core"] = brainx.state.hooks
sys.modules["brainstate._state_hook_context"] = brainx.state.hooks
sys.modules["brainstate._state_hook_manager"] = brainx.state.hook_manager
sys.modules["brainstate._state_global_hooks"] = brainx.state.global_hooks


class _PrivateToPublic(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``brainstate.<pkg>._<private>`` reads its names from brainx's public ``<pkg>``.

    A test that imports a public name through a private module path then runs;
    one that imports a truly private name still fails ("cannot import name").
    """

    def find_spec(self, name, path=None, target=None):
        # ("brainx." too: `from brainstate.graph import _walk` asks for brainx.graph._walk)
        if name.startswith(("brainstate.", "brainx.")) and name.rsplit(".", 1)[1].startswith("_"):
            # (`from brainstate.nn._delay import _get_delay`, a private function, gets a module
            # too: the file's other tests run, and the ones that call it fail with "'module'
            # object is not callable")
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        public = importlib.import_module(module.__name__.rsplit(".", 1)[0])
        module.__getattr__ = _forwarding(module.__name__, public).__getattr__


# brainstate's JAX shim as install_as_brainstate serves it (brainx.compat.jax_shim), --lenient on top
sys.modules["brainstate._compatible_import"] = _forwarding(
    "brainstate._compatible_import", sys.modules["brainstate._compatible_import"])
sys.meta_path.insert(0, _PrivateToPublic())  # before install_as_brainstate's (--lenient)

# brainstate's own test helpers (``_testing.py``, read from the checkout with the tests),
# on brainx: `from brainstate._testing import SMALL_BATCH` in the test files
_testing = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bs_tests", "_testing.py")
if os.path.exists(_testing):
    _spec = importlib.util.spec_from_file_location("brainstate._testing", _testing)
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["brainstate._testing"] = _module
    sys.modules["brainx._testing"] = _module     # `from brainstate import _testing`
    _spec.loader.exec_module(_module)
'''

FRESH_INTERPRETER = '''
# Written by brainx's tests/compat/run_brainstate_tests.py: `import brainstate` in a fresh
# interpreter calls brainx.compat.install_as_brainstate() first.
import importlib.abc, importlib.util, sys


class _BrainxAsBrainstate(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "brainstate":
            return None
        sys.meta_path.remove(self)
        import brainx.compat
        brainx.compat.install_as_brainstate()
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return sys.modules[spec.name]

    def exec_module(self, module):
        pass


sys.meta_path.append(_BrainxAsBrainstate())
'''

PRIVATE = re.compile(r"No module named '(brainstate[.\w]*\._\w+)'|"
                     r"cannot import name '(\w+)' from '(brain(?:state|x)[.\w]*)'")

SUMMARY = re.compile(r"(\d+) (passed|failed|error|errors|skipped|xfailed|xpassed)")


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True,
                          check=True).stdout


def fetch_release(spec: str, folder: str) -> str:
    """``brainstate==X``: its wheel (which carries the test files), downloaded and unpacked.

    Downloaded by this interpreter's pip: brainstate 0.6.0 needs Python >= 3.12.
    """
    target = os.path.join(folder, spec.replace("==", "-"))
    run = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                          ":all:", "-q", "-d", target, spec], capture_output=True, text=True)
    wheels = [n for n in os.listdir(target) if n.endswith(".whl")] if os.path.isdir(target) else []
    if run.returncode or not wheels:
        raise RuntimeError(f"pip download {spec} failed:\n{run.stderr[-2000:]}")
    with zipfile.ZipFile(os.path.join(target, wheels[0])) as z:
        z.extractall(target)
    return target


def source_files(repo: str) -> dict:
    """``{path: reader}`` of a brainstate checkout (git) or an unpacked wheel or sdist folder."""
    if os.path.isdir(os.path.join(repo, ".git")) or repo.endswith(".git") or \
            os.path.isfile(os.path.join(repo, "HEAD")):
        return {n: (lambda n=n: git(repo, "show", f"HEAD:{n}"))
                for n in git(repo, "ls-tree", "-r", "HEAD", "--name-only").split()}
    files = {}
    for dirpath, _, filenames in os.walk(os.path.join(repo, "brainstate")):
        for filename in filenames:
            full = os.path.join(dirpath, filename)
            files[os.path.relpath(full, repo)] = lambda full=full: open(full).read()
    return files


def export(repo: str, folder: str, only: str | None, nn: bool = False,
           on_brainstate: bool = False) -> list:
    files = source_files(repo)
    names = [n for n in files if (CORE.match(n) or (nn and NN.match(n)))
             and (only is None or only in n)]
    # brainstate's test set-up beside its tests: its conftest.py (a seeded generator before
    # each test, `slow` tests skipped, 8 CPU devices for the sharding tests) and _testing.py
    support = [n for n in ("brainstate/conftest.py", "brainstate/_testing.py") if n in files]
    for name in names + support:
        path = os.path.join(folder, name.replace("brainstate/", "bs_tests/", 1))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(files[name]())
    for dirpath, _, _ in os.walk(os.path.join(folder, "bs_tests")):
        open(os.path.join(dirpath, "__init__.py"), "a").close()
    with open(os.path.join(folder, "conftest.py"), "w") as f:
        f.write("# the real brainstate\n" if on_brainstate else CONFTEST)
    # a fresh interpreter a test starts (environ's import-precision tests) imports brainstate
    # too: a sitecustomize on the runner's PYTHONPATH serves it with brainx there as well
    os.makedirs(os.path.join(folder, "fresh"), exist_ok=True)
    with open(os.path.join(folder, "fresh", "sitecustomize.py"), "w") as f:
        f.write("" if on_brainstate else FRESH_INTERPRETER)
    return sorted(names)


def changed_since(repo: str, old_repo: str, names: list) -> dict:
    """``{file: {(class, test), ...}}``: the tests of ``names`` new or changed since ``old_repo``."""
    new_files, old_files = source_files(repo), source_files(old_repo)
    out = {}
    for name in names:
        old = test_sources(old_files[name]()) if name in old_files else {}
        out[name] = changed(test_sources(new_files[name]()), old)
    return out


def junit_cases(xml: str) -> list:
    """``[[classname, name, outcome, cause], ...]`` of a pytest ``--junitxml`` file.

    ``cause``: a failure's or error's first line (its message), else empty.
    """
    cases = []
    try:
        root = ET.parse(xml).getroot()
    except (ET.ParseError, FileNotFoundError):
        return cases
    for case in root.iter("testcase"):
        outcome, cause = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                if outcome != "skipped":
                    lines = (child.get("message") or child.text or "").strip().splitlines()
                    cause = re.sub(r"0x[0-9a-f]+", "0x..", lines[0] if lines else "")[:200]
                break
        cases.append([case.get("classname", ""), case.get("name", ""), outcome, cause])
    return cases


def children_cpu() -> float:
    """CPU seconds (user and system) of the finished child processes so far.

    Around one test process at a time (``--jobs 1``) it is that process's: on a
    loaded machine a steadier measure than wall time for comparing two runs.
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_file(folder: str, name: str, timeout: int, verbose: bool, lenient: bool = False,
             python: str | None = None, brainx: str = ROOT) -> dict:
    path = os.path.join("bs_tests", name.split("/", 1)[1])
    env = dict(os.environ, JAX_PLATFORMS="cpu", BRAINX_COMPAT_LENIENT="1" if lenient else "0")
    env.pop("PYTHONPATH", None)
    if python is None:
        env["PYTHONPATH"] = os.pathsep.join((brainx, os.path.join(folder, "fresh")))
    xml = os.path.join(folder, "junit.xml")
    start, cpu = time.perf_counter(), children_cpu()
    try:
        run = subprocess.run([python or sys.executable, "-m", "pytest", "-q", "-p",
                              "no:cacheprovider", "--tb=line", "-rf", f"--junitxml={xml}", path],
                             cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
        text = run.stdout + run.stderr
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        text += "\nTIMEOUT"
    counts = {k: 0 for k in ("passed", "failed", "error", "skipped")}
    tail = text.strip().splitlines()[-1] if text.strip() else ""
    for n, kind in SUMMARY.findall(tail):
        kind = {"errors": "error", "xfailed": "skipped", "xpassed": "passed"}.get(kind, kind)
        counts[kind] += int(n)
    counts["timeout"] = "TIMEOUT" in text
    counts["seconds"] = round(time.perf_counter() - start, 1)
    counts["cpu_seconds"] = round(children_cpu() - cpu, 1)
    counts["cases"] = junit_cases(xml)
    if os.path.exists(xml):
        os.remove(xml)
    counts["missing"] = sorted({m.group(1) or f"{m.group(3)}.{m.group(2)}"
                                for m in PRIVATE.finditer(text)})
    if verbose:
        print(text[-6000:])
    return counts


def changed_report(results: dict, changes: dict, reference: dict | None = None) -> dict:
    """Print and return how many of the new or changed tests pass.

    A test is a collected case (each parameter set apart). A file that fails
    before its tests are collected counts each of its new or changed functions
    as one failing test. With ``reference`` (an ``--on-brainstate`` run's
    results), the count is of the new or changed tests that pass there.
    """
    passing, total, functions, ref_passing = 0, 0, 0, 0
    rows, causes = [], collections.Counter()
    for name, keys in changes.items():
        if not keys or name not in results:
            continue
        module = "bs_tests." + name.split("/", 1)[1][:-3].replace("/", ".")
        functions += len(keys)
        mine = [(c, n, o) for c, n, o, *_ in results[name]["cases"]
                if case_key(c, n, module, keys) in keys and o != "skipped"]
        causes.update(f"{name.split('/')[-1]}: {why[0]}" for c, n, o, *why in results[name]["cases"]
                      if case_key(c, n, module, keys) in keys and o in ("failed", "error") and why)
        if not mine and results[name]["missing"]:
            causes[f"{name.split('/')[-1]}: not collected, missing "
                   f"{', '.join(results[name]['missing'])}"] += len(keys)
        n_total = len(mine) if mine else len(keys)
        n_pass = sum(o == "passed" for _, _, o in mine)
        ok_ref = None
        if reference is not None and name in reference:
            theirs = {(c, n) for c, n, o, *_ in reference[name]["cases"]
                      if o == "passed" and case_key(c, n, module, keys) in keys}
            ok_ref = len(theirs)
            ref_passing += ok_ref
            n_pass = sum(o == "passed" and (c, n) in theirs for c, n, o in mine)
        passing += n_pass
        total += n_total
        rows.append((name, n_pass, n_total if ok_ref is None else ok_ref))
    print(f"\nnew or changed tests ({functions} functions)"
          + (": passing here of those passing on brainstate" if reference is not None else ""))
    for name, n_pass, n_total in rows:
        print(f"  {name:58s} {n_pass:4d} / {n_total:4d}")
    denominator = ref_passing if reference is not None else total
    print(f"  {'all new or changed':58s} {passing:4d} / {denominator:4d}")
    for why, n in causes.most_common():
        print(f"    {n:4d}  {why[:150]}")
    return {"functions": functions, "passing": passing, "of": denominator}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", default=DEFAULT_REPO,
                   help="a brainstate git checkout, or a folder holding an unpacked wheel "
                        "(brainstate 0.6.0's wheel carries its test files), or brainstate==X "
                        "(its wheel, downloaded)")
    p.add_argument("--only", default=None, help="run the files whose path contains this")
    p.add_argument("--nn", action="store_true", help="brainstate/nn's test files too")
    p.add_argument("--timeout", type=int, default=300, help="seconds per file")
    p.add_argument("--json", default=None)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--lenient", action="store_true",
                   help="a missing private name is a stand-in that fails when used, so the "
                        "rest of its file runs (public behaviour only)")
    p.add_argument("--changed-since", default=None, metavar="OLD",
                   help="an earlier release (checkout or unpacked wheel): also count the tests "
                        "added or changed since, and how many of them pass")
    p.add_argument("--brainx", default=ROOT, metavar="DIR",
                   help="measure the brainx of this source tree (e.g. `git archive HEAD brainx` "
                        "unpacked there): edits in progress here do not disturb the run")
    p.add_argument("--changed-only", action="store_true",
                   help="with --changed-since: run only the files that hold new or changed tests")
    p.add_argument("--on-brainstate", default=None, metavar="PYTHON",
                   help="run on the brainstate installed for this interpreter (the reference)")
    p.add_argument("--compare", default=None, metavar="JSON",
                   help="the --json of an --on-brainstate run: count against what passes there")
    args = p.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for key in ("repo", "changed_since"):
            if (getattr(args, key) or "").startswith("brainstate=="):
                setattr(args, key, fetch_release(getattr(args, key), folder))
        names = export(args.repo, folder, args.only, args.nn, bool(args.on_brainstate))
        changes = changed_since(args.repo, args.changed_since, names) if args.changed_since else {}
        if args.changed_only:
            names = [n for n in names if changes.get(n)]
        for name in names:
            results[name] = run_file(folder, name, args.timeout, args.verbose, args.lenient,
                                     args.on_brainstate, args.brainx)
            c = results[name]
            total = c["passed"] + c["failed"] + c["error"]
            print(f"{name:60s} {c['passed']:4d} / {total:4d} {c['seconds']:6.1f} s"
                  f" {c['cpu_seconds']:6.1f} s CPU"
                  + (f"  ({c['error']} errors)" if c["error"] else "")
                  + ("  TIMEOUT" if c["timeout"] else "")
                  + (f"  missing: {', '.join(c['missing'][:3])}" if c["missing"] else ""),
                  flush=True)
    passed = sum(c["passed"] for c in results.values())
    total = sum(c["passed"] + c["failed"] + c["error"] for c in results.values())
    seconds = sum(c["seconds"] for c in results.values())
    cpu = sum(c["cpu_seconds"] for c in results.values())
    if args.nn:     # the core alone, comparable with runs without --nn
        core = [c for n, c in results.items() if CORE.match(n)]
        print(f"{'core (without nn)':60s} {sum(c['passed'] for c in core):4d} / "
              f"{sum(c['passed'] + c['failed'] + c['error'] for c in core):4d}")
    print(f"{'all':60s} {passed:4d} / {total:4d} {seconds:6.0f} s {cpu:6.0f} s CPU")
    reference = None
    if args.compare:
        with open(args.compare) as f:
            reference = json.load(f)["files"]
        common = [n for n in results if n in reference]
        theirs = {(n, c, t) for n in common for c, t, o, *_ in reference[n]["cases"]
                  if o == "passed"}
        ours = {(n, c, t) for n in common for c, t, o, *_ in results[n]["cases"] if o == "passed"}
        ref_s = sum(reference[n].get("cpu_seconds", 0) for n in common)
        our_s = sum(results[n]["cpu_seconds"] for n in common)
        print(f"{'of those passing on brainstate':60s} {len(theirs & ours):4d} / {len(theirs):4d}"
              f"  CPU time {our_s:.0f} s / {ref_s:.0f} s = {our_s / max(ref_s, 1e-9):.2f}x")
    summary = {"passed": passed, "total": total, "seconds": seconds, "cpu_seconds": cpu}
    if changes:
        summary["changed"] = changed_report(results, changes, reference)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "files": results,
                       "changed": {n: sorted(map(list, k)) for n, k in changes.items()}},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
