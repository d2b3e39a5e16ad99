"""The brainstate stacks ``run_clients.py`` measures brainx against.

A stack is one brainstate release and the versions of its client libraries
that users install with it, on the Python those need:

* ``0.5.4``: brainstate 0.5.4's clients (braintools 0.3.0, brainpy-state
  0.1.0, braintrace 0.2.6, braincell 0.1.0) on Python 3.11, with brainx from
  ``.venv``;
* ``0.6``: brainstate 0.6.0's (brainpy 2.9.0, whose ``brainpy.state`` came
  back from the retired brainpy-state, braintools 0.4.0, braintrace 0.2.8,
  braincell 0.2.0, brainspikes 0.2.0, brainevent 0.3.0), which all require
  Python >= 3.12, with brainx from ``.venv-python3.12`` (``make install
  PYTHON=python3.12``).

Each stack names its own environments (the clients beside brainx, and the
reference with brainstate itself), so the two never share installed packages,
and the reference figures its clients passed on brainstate (the issue that
asked for the stack measured them; ``run_clients.py --on-brainstate``
measures them again).
"""

from __future__ import annotations

import dataclasses
import glob
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass(frozen=True)
class Client:
    """A client library whose own tests are run.

    ``tests`` is the folder (relative to the unpacked source) whose test files
    are run; ``None``: the package folder and a top-level ``tests/``.
    """
    dist: str
    version: str
    package: str
    import_name: str
    tests: str | None = None


@dataclasses.dataclass(frozen=True)
class Stack:
    """One brainstate release, its clients, and where they are installed."""
    name: str
    brainstate: str
    python: str                 # "python3.12": found on PATH or in pyenv's folder
    brainx_venv: str            # brainx installed editable (relative to the repository)
    venv: str                   # the clients beside brainx (made once)
    reference_venv: str         # the clients beside brainstate itself (made once)
    clients: dict
    family: dict                # installed pinned with --no-deps (each requires brainstate)
    reference: dict             # client: tests passing on brainstate, as the issue measured
    note: str = ""


STACKS = {
    "0.5.4": Stack(
        name="0.5.4", brainstate="0.5.4", python="python3.11", brainx_venv=".venv",
        venv="/tmp/brainx-clients-venv", reference_venv="/tmp/brainstate-clients-venv",
        # brainpy_state refuses a direct import outside its tests: users import brainpy.state
        clients={
            "braintools": Client("braintools", "0.3.0", "braintools", "braintools"),
            "brainpy-state": Client("brainpy-state", "0.1.0", "brainpy_state", "brainpy.state"),
            "braintrace": Client("braintrace", "0.2.6", "braintrace", "braintrace"),
            "braincell": Client("braincell", "0.1.0", "braincell", "braincell"),
        },
        family={"braintools": "0.3.0", "brainpy-state": "0.1.0", "braintrace": "0.2.6",
                "braincell": "0.1.0", "brainpy": "2.8.2"},
        reference={"braintools": 497, "brainpy-state": 238, "braintrace": 604, "braincell": 1042},
        note="issue 20's counts (other test sets than the full suites)"),
    "0.6": Stack(
        name="0.6", brainstate="0.6.0", python="python3.12", brainx_venv=".venv-python3.12",
        venv="/tmp/brainx-clients-venv-0.6", reference_venv="/tmp/brainstate-clients-venv-0.6",
        clients={
            "brainpy": Client("brainpy", "2.9.0", "brainpy", "brainpy.state", tests="brainpy/state"),
            "braintools": Client("braintools", "0.4.0", "braintools", "braintools"),
            "braintrace": Client("braintrace", "0.2.8", "braintrace", "braintrace"),
            "braincell": Client("braincell", "0.2.0", "braincell", "braincell"),
            "brainspikes": Client("brainspikes", "0.2.0", "brainspike", "brainspike"),
        },
        family={"brainpy": "2.9.0", "braintools": "0.4.0", "braintrace": "0.2.8",
                "braincell": "0.2.0", "brainspikes": "0.2.0", "brainevent": "0.3.0"},
        reference={"brainpy": 291, "braintools": 1086, "braintrace": 612, "braincell": 898,
                   "brainspikes": 391},
        note="issue 32's counts on brainstate 0.6.0 (Python 3.12)"),
}


def find_python(name: str) -> str | None:
    """The interpreter ``name`` (``python3.12``) on PATH, else the newest of pyenv's versions.

    The same search as the Makefile's ``PYTHON_EXE``: a pyenv version installed
    but not selected is found in ``$(pyenv root)/versions/3.12.*/bin``.
    """
    on_path = shutil.which(name)
    if on_path:
        run = subprocess.run([on_path, "-c", "import sys; print(sys._base_executable)"],
                             capture_output=True, text=True)
        if run.returncode == 0:     # (a pyenv shim of a version not selected fails)
            return run.stdout.strip()
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        return None
    version = name.replace("python", "")
    found = glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", name)) if root else []

    def key(path):
        parts = path.split(os.sep)[-3].split(".")
        return [int(p) if p.isdigit() else -1 for p in parts]
    return max(found, key=key) if found else None


def base_python(stack: Stack) -> str:
    """The interpreter the stack's environments are made with."""
    found = find_python(stack.python)
    if found is None:
        raise RuntimeError(f"no interpreter {stack.python} here (on PATH or in pyenv's versions):"
                           f" the stack {stack.name} needs it")
    return found


def brainx_python(stack: Stack) -> str:
    """brainx's environment for ``stack``; an error that says how to make it if missing."""
    python = os.path.join(ROOT, stack.brainx_venv, "bin", "python")
    if not os.path.exists(python):
        raise RuntimeError(f"{python} is missing: make it with `make install PYTHON={stack.python}`"
                           f" (the stack {stack.name} runs on {stack.python})")
    return python
