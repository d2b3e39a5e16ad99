"""Run brainstate's brain-dynamics and deep-learning notebooks on brainx, with the import changed.

The notebooks are read at run time from a brainstate checkout (``--repo``,
default: the snapshot under ``/work/.mirror``); nothing of them is stored
in brainx. Every code cell runs, in order, in one namespace per notebook,
after three textual edits:

* ``import brainstate`` becomes ``import brainx as brainstate`` (and
  ``brainstate.X`` imports become ``brainx.X``);
* an import of a package that brainx does not replace and that is not
  installed (braintools, brainpy, brainmass, ...) binds a placeholder, so
  the cell's other imports still run; the cells that *use* the package fail
  there, and are counted as needing it;
* IPython lines (``%magic``, ``!shell``) are dropped, ``plt.show()`` does
  nothing (matplotlib runs on Agg);
* the per-notebook substitutions in ``SHRINK`` make long runs short (fewer
  neurons, steps or epochs); each one that no longer matches is reported.

Each notebook runs in its own process under a time limit (``--timeout``);
a cell that is still running when it expires is reported as such, and the
cells after it as not reached. A failing cell is classified by its error:
``needs braintools`` / ``needs brainpy`` (an import of a package brainx
does not replace), ``blocked`` (a name that an earlier failing cell should
have defined) or ``error`` (a brainx gap or difference: the thing to fix).

With ``--stack VENV`` the notebooks run as a brainstate user's whole stack
would: in the environment ``tests/compat/run_clients.py`` builds (braintools,
brainpy and the other clients installed beside brainx, ``import brainstate``
served by :func:`brainx.compat.install_as_brainstate`), with their imports
left as written, so the cells that use braintools or brainpy run too, on
brainx. Given the environment ``run_clients.py --on-brainstate`` builds, the
same run is the reference on brainstate 0.5.4 itself.

Usage::

    python tests/compat/run_tutorials.py                    # all notebooks, a table
    python tests/compat/run_tutorials.py --only 02_synaptic --verbose
    python tests/compat/run_tutorials.py --json results.json
    python tests/compat/run_tutorials.py --stack /tmp/brainx-clients-venv   # the whole stack
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import traceback

DEFAULT_REPO = "/work/.mirror/chaobrain+brainstate/repo"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# brainstate's core (states, transforms, randomness, the how-tos around them) first, then
# brain dynamics, then deep learning; brainstate 0.5.4's paths
CORE_NOTEBOOKS = [
    "docs/getting_started/quickstart.ipynb",
    "docs/tutorials/core/01_state_and_pytrees.ipynb",
    "docs/tutorials/core/06_transformations_essentials.ipynb",
    "docs/tutorials/core/08_randomness.ipynb",
    "docs/tutorials/transformations/01_jit_and_compilation.ipynb",
    "docs/tutorials/transformations/02_autodiff.ipynb",
    "docs/tutorials/transformations/03_vectorization.ipynb",
    "docs/tutorials/transformations/04_advanced_batching.ipynb",
    "docs/tutorials/transformations/05_control_flow.ipynb",
    "docs/tutorials/transformations/06_error_handling_and_checks.ipynb",
    "docs/tutorials/transformations/07_debugging.ipynb",
    "docs/tutorials/transformations/08_ir_optimization_and_codegen.ipynb",
    "docs/how_to/checkpoint_and_restore.ipynb",
    "docs/how_to/custom_states_and_mixins.ipynb",
    "docs/how_to/filter_and_organize_states.ipynb",
    "docs/how_to/inspect_and_edit_state_graph.ipynb",
    "docs/how_to/interoperate_with_flax_equinox.ipynb",
    "docs/how_to/migrate_from_pytorch.ipynb",
    "docs/how_to/state_hooks.ipynb",
]
NOTEBOOKS = CORE_NOTEBOOKS + [
    "docs/tutorials/brain_dynamics/01_dynamics_and_integration.ipynb",
    "docs/tutorials/brain_dynamics/02_synaptic_delays.ipynb",
    "docs/tutorials/brain_dynamics/03_event_driven_operators.ipynb",
    "docs/tutorials/brain_dynamics/04_building_an_snn.ipynb",
    "docs/tutorials/brain_dynamics/05_training_an_snn.ipynb",
    "docs/examples/brain_dynamics/hodgkin_huxley_neuron.ipynb",
    "docs/examples/brain_dynamics/snn_simulation.ipynb",
    "docs/examples/brain_dynamics/snn_training.ipynb",
    "docs/tutorials/core/02_modules_and_graph.ipynb",
    "docs/tutorials/core/03_common_layers.ipynb",
    "docs/tutorials/core/04_activations_and_normalization.ipynb",
    "docs/tutorials/core/05_parameters_transforms_regularization.ipynb",
    "docs/tutorials/core/07_training_and_metrics.ipynb",
    "docs/how_to/choose_parameter_transforms.ipynb",
    "docs/how_to/constrain_and_regularize_parameters.ipynb",
    "docs/how_to/collective_operations.ipynb",
    "docs/examples/deep_learning/image_classification.ipynb",
    "docs/examples/deep_learning/integrator_rnn.ipynb",
    "docs/examples/deep_learning/variational_autoencoder.ipynb",
]

# (old, new) text substitutions per notebook (matched against the notebook's file name)
SHRINK: dict[str, list[tuple[str, str]]] = {
    "image_classification": [("n_samples=5000)", "n_samples=200)"),
                             ("n_samples=500)", "n_samples=50)"),
                             ("n_samples=1000)", "n_samples=100)"),
                             ("'num_epochs': 20", "'num_epochs': 1")],
    "integrator_rnn": [("num_epochs = 5", "num_epochs = 1")],
    "05_parameters_transforms": [("STEPS = 100", "STEPS = 10")],   # an unrolled 100-step HH loop
    "variational_autoencoder": [("epochs = 20", "epochs = 1")],
}

_PRELUDE = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as _plt
_plt.show = lambda *a, **k: None
"""

# packages the tutorials import that brainx does not replace
OTHERS = ("braintools", "brainpy", "brainmass", "datasets", "seaborn", "pandas", "flax", "equinox",
          "torch", "orbax")


class Missing:
    """Stands for a package that is not installed: any use raises ModuleNotFoundError."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise ModuleNotFoundError(f"No module named {self._name.split('.')[0]!r} "
                                  f"(the tutorial uses {self._name}.{attr})",
                                  name=self._name.split(".")[0])

    def __call__(self, *args, **kwargs):
        raise ModuleNotFoundError(f"No module named {self._name.split('.')[0]!r} "
                                  f"(the tutorial calls {self._name})", name=self._name.split(".")[0])


def _installed(pkg: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(pkg) is not None


def stub_missing_imports(src: str) -> str:
    """Imports of OTHERS that are not installed become placeholders (one line each)."""
    out = []
    for ln in src.splitlines():
        m = re.match(r"^(\s*)import ([\w.]+)(?: as (\w+))?\s*$", ln)
        if m and m.group(2).split(".")[0] in OTHERS and not _installed(m.group(2).split(".")[0]):
            bind = m.group(3) or m.group(2).split(".")[0]
            ln = f"{m.group(1)}{bind} = _tutorial_missing({m.group(2).split('.')[0]!r})"
        m = re.match(r"^(\s*)from ([\w.]+) import ([\w, ]+)\s*$", ln)
        if m and m.group(2).split(".")[0] in OTHERS and not _installed(m.group(2).split(".")[0]):
            names = [n.strip().split(" as ")[-1].strip() for n in m.group(3).split(",")]
            ln = m.group(1) + "; ".join(f"{n} = _tutorial_missing({m.group(2) + '.' + n!r})"
                                         for n in names)
        out.append(ln)
    return "\n".join(out)


def notebook_cells(repo: str, path: str) -> list[str]:
    """The source of every code cell of ``path`` at the checkout's HEAD."""
    raw = subprocess.check_output(["git", "-C", repo, "show", f"HEAD:{path}"])
    nb = json.loads(raw)
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def as_written(src: str) -> str:
    """The cell with its imports as written (``--stack``), without IPython lines."""
    lines = [ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    return stub_missing_imports("\n".join(lines))


def to_brainx(src: str) -> str:
    """The cell with brainstate's imports pointing at brainx, and no IPython lines."""
    src = re.sub(r"^(\s*)import brainstate\s*$", r"\1import brainx as brainstate", src, flags=re.M)
    src = re.sub(r"^(\s*)import brainstate\.(\w+) as", r"\1import brainx.\2 as", src, flags=re.M)
    src = re.sub(r"^(\s*)from brainstate(\.[\w.]+)? import", r"\1from brainx\2 import", src, flags=re.M)
    return as_written(src)


def shrink(name: str, cells: list[str]) -> tuple[list[str], list[str]]:
    """Apply the notebook's substitutions; returns the cells and the ones that matched nothing."""
    unmatched = []
    for key, subs in SHRINK.items():
        if key not in name:
            continue
        for old, new in subs:
            hit = False
            for i, c in enumerate(cells):
                if old in c:
                    cells[i], hit = c.replace(old, new), True
            if not hit:
                unmatched.append(old)
    return cells, unmatched


def classify(exc: BaseException, undefined: set[str]) -> str:
    msg = str(exc)
    if isinstance(exc, ModuleNotFoundError):
        for pkg in OTHERS:
            if exc.name and exc.name.split(".")[0] == pkg:
                return f"needs {pkg}"
    if isinstance(exc, NameError):
        m = re.search(r"name '(\w+)' is not defined", msg)
        if m and m.group(1) in undefined:
            return "blocked"
        if m and m.group(1) in ("braintools", "brainpy", "brainmass"):
            return f"needs {m.group(1)}"
    return "error"


def _assigned_names(src: str) -> set[str]:
    """Names a cell would define at top level (to tell 'blocked' from a real NameError)."""
    import ast
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
    return names


def run_one(repo: str, path: str, stack: bool = False) -> None:
    """Child process: run the notebook's cells, one JSON line per cell on stdout.

    ``stack``: the imports stay as written, and the environment serves
    ``import brainstate`` (brainx through ``install_as_brainstate``, or
    brainstate itself).
    """
    convert = as_written if stack else to_brainx
    cells, unmatched = shrink(path, [convert(c) for c in notebook_cells(repo, path)])
    served = "brainx"
    if stack:
        import brainstate
        served = f"{brainstate.__name__} {getattr(brainstate, '__version__', '')}".strip()
    print(json.dumps({"unmatched": unmatched, "served_by": served}), flush=True)
    ns: dict = {"__name__": "__main__", "_tutorial_missing": Missing}
    exec(_PRELUDE, ns)
    undefined: set[str] = set()
    for i, src in enumerate(cells):
        print(json.dumps({"start": i}), flush=True)
        t0 = time.perf_counter()
        try:
            exec(compile(src, f"{os.path.basename(path)}[cell {i}]", "exec"), ns)
            rec = {"cell": i, "ok": True}
        except BaseException as exc:  # noqa: BLE001 - a notebook cell may raise anything
            kind = classify(exc, undefined)
            undefined |= _assigned_names(src)
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            rec = {"cell": i, "ok": False, "kind": kind,
                   "error": f"{type(exc).__name__}: {str(exc)[:400]}",
                   "where": "".join(tb[-3:])[-1200:]}
        rec["seconds"] = round(time.perf_counter() - t0, 2)
        import matplotlib.pyplot as plt
        plt.close("all")
        print(json.dumps(rec), flush=True)


def run_notebook(repo: str, path: str, timeout: float, python: str, root: str,
                 stack: bool = False) -> dict:
    """Run one notebook in a child process; collect its per-cell records."""
    n_cells = len(notebook_cells(repo, path))
    # the brainx of this checkout (or --brainx), not whichever one the interpreter has installed
    env = dict(os.environ, MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([python, __file__, "--child", path, "--repo", repo]
                              + (["--child-stack"] if stack else []),
                              capture_output=True, text=True, timeout=timeout, env=env)
        out, timed_out = proc.stdout, False
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        timed_out = True
    records, unmatched, started, served = [], [], None, "?"
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "unmatched" in rec:
            unmatched, served = rec["unmatched"], rec.get("served_by", "?")
        elif "start" in rec:
            started = rec["start"]
        else:
            records.append(rec)
    if timed_out and started is not None and (not records or records[-1]["cell"] != started):
        records.append({"cell": started, "ok": False, "kind": "timeout",
                        "error": f"still running after the {timeout:g} s limit"})
    return {"notebook": path, "cells": n_cells, "ok": sum(r["ok"] for r in records),
            "records": records, "unmatched": unmatched, "timed_out": timed_out,
            "served_by": served,
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", default=DEFAULT_REPO, help="a brainstate git checkout")
    p.add_argument("--only", default="", help="run the notebooks whose path contains this")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per notebook")
    p.add_argument("--json", default="", help="write the results here")
    p.add_argument("--brainx", default=ROOT, help="the checkout whose brainx runs them")
    p.add_argument("--verbose", action="store_true", help="print every failure's traceback tail")
    p.add_argument("--stack", default="",
                   help="run in this environment (run_clients.py's), imports as written: "
                        "braintools and brainpy on whatever serves `import brainstate` there")
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    p.add_argument("--child-stack", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        run_one(args.repo, args.child, args.child_stack)
        return 0
    python = os.path.join(args.stack, "bin", "python") if args.stack else sys.executable
    results = []
    for path in NOTEBOOKS:
        if args.only and args.only not in path:
            continue
        r = run_notebook(args.repo, path, args.timeout, python, args.brainx, bool(args.stack))
        results.append(r)
        print(f"{r['ok']:3d}/{r['cells']:<3d} {r['seconds']:6.1f}s  {path}"
              + (f"  (brainstate: {r['served_by']})" if args.stack else ""), flush=True)
        for u in r["unmatched"]:
            print(f"        substitution matched nothing: {u!r}")
        for rec in r["records"]:
            if not rec["ok"]:
                print(f"        cell {rec['cell']:2d} [{rec['kind']}] {rec['error'][:160]}")
                if args.verbose and rec.get("where"):
                    print("          " + rec["where"].replace("\n", "\n          "))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
