"""`make demo`'s environment (brainx with its ``examples`` extra) runs every guide and tutorial page.

Every module that a ```python block of docs/*.md or a code cell of docs/tutorials/*.md imports
must come from the standard library, brainx itself, or a distribution that installing
``brainx-jax[examples]`` brings in (its requirements, followed through their own requirements
and through the extras the ``examples`` extra names). The pages are executed by test_docs.py and
the site build in the test environment, which has more installed; this test is what catches a
page that needs a package the demo environment lacks.
"""

import ast
import importlib.metadata as md
import pathlib
import re
import sys

import pytest
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).parent.parent
PAGES = sorted(ROOT.glob("docs/*.md")) + sorted(ROOT.glob("docs/tutorials/*.md"))
BLOCK = re.compile(r"```(?:python|\{code-cell\}[^\n]*)\n(.*?)```", re.S)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed_closure(dist: str, extras: frozenset, seen: dict) -> None:
    """Add ``dist`` (with ``extras``) and everything it requires to ``seen``."""
    key = _norm(dist)
    if extras <= seen.get(key, frozenset()) and key in seen:
        return
    seen[key] = seen.get(key, frozenset()) | extras
    for line in md.requires(dist) or ():
        req = Requirement(line)
        wanted = [e for e in (extras or {""}) if req.marker is None
                  or req.marker.evaluate({"extra": e})]
        if wanted:
            try:
                _installed_closure(req.name, frozenset(req.extras), seen)
            except md.PackageNotFoundError:
                seen.setdefault(_norm(req.name), frozenset())


def _examples_closure() -> dict:
    """brainx-jax[examples] as pyproject.toml says (not the install's metadata, which may be
    older than the checkout), followed through the installed distributions' requirements."""
    tomllib = pytest.importorskip("tomllib")        # Python 3.11 and later
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras, todo, seen = project["optional-dependencies"], ["examples"], {}
    lines = list(project["dependencies"])
    while todo:
        for line in extras[todo.pop()]:
            req = Requirement(line)
            if _norm(req.name) == _norm(project["name"]):
                todo.extend(req.extras)
            else:
                lines.append(line)
    for line in lines:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate():
            try:
                _installed_closure(req.name, frozenset(req.extras), seen)
            except md.PackageNotFoundError:
                seen.setdefault(_norm(req.name), frozenset())
    return seen


def _imported_modules(code: str):
    code = "\n".join(l for l in code.splitlines() if not l.startswith((":", "%", "!")))
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            yield from (a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_every_page_imports_only_what_the_examples_extra_installs():
    closure = _examples_closure()
    providers = md.packages_distributions()
    missing = {}
    for page in PAGES:
        for code in BLOCK.findall(page.read_text()):
            for module in _imported_modules(code):
                if module in sys.stdlib_module_names or module == "brainx":
                    continue
                assert module in providers, (f"{module}, imported by {page.name}, is not installed "
                                             "here: install brainx-jax[test,examples]")
                dists = {_norm(d) for d in providers[module]}
                if not dists & set(closure):
                    missing.setdefault(module, set()).add(page.relative_to(ROOT).as_posix())
    assert missing == {}, ("pages import modules that brainx-jax[examples] does not install: "
                           f"{missing}; add their distribution to the examples extra")
