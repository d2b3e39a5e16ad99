"""A name ``brainx`` that is not this package fails with an ImportError that says what to do.

Each case runs in a fresh interpreter (``sys.modules`` must not hold brainx yet), from a folder
that the test builds in ``tmp_path``.
"""

import importlib.metadata
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import brainx

BRAINX_DIR = pathlib.Path(brainx.__file__).resolve().parent


def _run(code, cwd):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Where a fresh interpreter finds brainx (this test's own copy, or the installed one when
    the tests run from another checkout, a git worktree say), and whether it is found on
    sys.path (a wheel, editable_mode=compat) rather than by a finder. Asked once per module:
    each fresh interpreter that imports brainx costs seconds, and the answer is the same."""
    neutral = tmp_path_factory.mktemp("neutral")
    out = _run("import os, brainx; print(os.path.dirname(os.path.realpath(brainx.__file__)))",
               neutral)
    where = out.stdout.strip()
    out = _run("import importlib.machinery as m; s = m.PathFinder.find_spec('brainx'); "
               "print(s and s.origin)", neutral)
    return where, out.stdout.strip() == os.path.join(where, "__init__.py")


def test_a_folder_named_brainx_beside_the_script_is_named_in_the_error(tmp_path, installed):
    installed_dir, served_by_path_entry = installed
    (tmp_path / "brainx").mkdir()           # a data folder, no __init__.py: a namespace package
    out = _run("import brainx; from brainx import nn; print(brainx.__version__)", tmp_path)
    if served_by_path_entry:     # a regular package on sys.path wins: no shadowing
        assert out.returncode == 0 and out.stdout.strip() == brainx.__version__, out.stderr
        return
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: 'import brainx' found the folder ")
    assert repr(str(tmp_path / "brainx")) in last             # which folder shadowed brainx
    assert f"brainx (stateful transforms for JAX) is installed in {installed_dir}" in last
    assert "Rename or move that folder" in last                # what to do
    assert "AttributeError" not in out.stderr


def test_another_regular_package_named_brainx_is_named_in_the_error(tmp_path, installed):
    installed_dir, served_by_path_entry = installed
    (tmp_path / "brainx").mkdir()
    (tmp_path / "brainx" / "__init__.py").write_text("VALUE = 1\n")
    out = _run("import brainx.transform", tmp_path)
    if served_by_path_entry:   # then the other package hides brainx.transform
        assert "No module named 'brainx.transform'" in out.stderr
        return
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: 'import brainx' imported "
                           f"{str(tmp_path / 'brainx' / '__init__.py')!r}, which is not this package")
    assert "comes first on sys.path" in last and installed_dir in last


def test_another_init_in_brainx_own_folder_names_the_meta_package(tmp_path):
    # what a case-insensitive file system leaves after installing the package index's "brainx"
    # (import package BrainX) over brainx-jax: its __init__.py ran as brainx's, in brainx's folder
    code = f"""
        import importlib.machinery, sys, types
        init = {str(BRAINX_DIR / '__init__.py')!r}
        spec = importlib.machinery.ModuleSpec("brainx", None, origin=init, is_package=True)
        spec.submodule_search_locations = [{str(BRAINX_DIR)!r}]
        spec._initializing = False                      # its __init__.py has finished
        pkg = types.ModuleType("brainx")
        pkg.__spec__, pkg.__file__, pkg.__path__ = spec, init, [{str(BRAINX_DIR)!r}]
        pkg.__version__ = "2026.8.18"
        sys.modules["brainx"] = pkg
        import brainx.errors
    """
    out = _run(code, tmp_path)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert "is not brainx's own __init__.py (it defines __version__ = '2026.8.18')" in last
    assert "case-insensitive file system" in last
    assert "pip uninstall BrainX brainx-jax" in last


def test_the_check_passes_for_brainx_itself_even_when_run_again(tmp_path):
    out = _run("""
        import importlib, sys
        import brainx
        del sys.modules["brainx._import_check"]         # as a test that purges modules would
        importlib.import_module("brainx._import_check")
        print(brainx.__version__)
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == brainx.__version__


def test_the_distribution_is_brainx_jax():
    dist = importlib.metadata.distribution("brainx-jax")
    assert dist.version == brainx.__version__
    assert dist.metadata["Name"] == "brainx-jax"
