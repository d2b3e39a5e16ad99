"""The package runs one way: the import graph of brainx/ read from its source.

Every ``import`` of a brainx module is an arrow (one under ``if TYPE_CHECKING:`` too: a
circle of types is still a circle); importing ``brainx.a.b.c`` also runs the
``__init__`` of ``brainx.a`` and ``brainx.a.b``, so those are arrows too. The checks:
no circle, no arrow from a lower layer to a higher one (``LAYERS``; inside ``transform/``,
``TRANSFORM_LAYERS``), no brainx import inside a function (a deferred import is how a
circle hides), JAX's private modules named only behind the door (``brainx/_jax/``), and no
file over 600 lines. docs/architecture.md draws the same map.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "brainx"

#: Bottom to top: a module may import from its own layer (without a circle) or below.
LAYERS = [
    {"_import_check", "errors", "dtype_names", "_jax"},
    {"pretty_repr"},
    {"util", "mixin"},
    {"typing", "state"},
    {"environ", "graph"},
    {"random"},
    {"transform"},
    {"nn", "distributed"},
    {"interop", "io", "optim"},
    {"compat"},
]
#: Inside brainx.transform, bottom to top (its ``__init__`` and ``policies`` re-export, on top).
TRANSFORM_LAYERS = ["ir", "core", "compiled", "control", "mapping", "autodiff", "remat"]
MAX_LINES = 600


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: pathlib.Path):
    """``(target module, line, at module level)`` for each brainx import in one file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, top) for a in child.names
                             if a.name.split(".")[0] == "brainx")
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[:len(package.split(".")) - child.level + 1]
                    source = ".".join(base + ([child.module] if child.module else []))
                else:
                    source = child.module or ""
                if source.split(".")[0] == "brainx":
                    for a in child.names:
                        full = f"{source}.{a.name}"
                        found.append((full if full in MODULES else source, child.lineno, top))
            visit(child, top and not isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)))

    visit(ast.parse(path.read_text()), True)
    return found


IMPORTS = {name: _imports(name, path) for name, path in MODULES.items()}


def _runs(target: str) -> set:
    """The modules an import of ``target`` runs: it and the packages above it (not brainx)."""
    parts = target.split(".")
    return {".".join(parts[:i]) for i in range(2, len(parts) + 1)} & set(MODULES)


def _graph() -> dict:
    return {m: {t for target, _, _ in IMPORTS[m] for t in _runs(target)
                if t != m and not m.startswith(t + ".")} for m in MODULES}


def _rank(module: str) -> tuple:
    parts = module.split(".")
    if len(parts) == 1:
        return (len(LAYERS), 0)                          # brainx itself imports everything
    top = parts[1]
    layer = next(i for i, names in enumerate(LAYERS) if top in names)
    inner = len(TRANSFORM_LAYERS)
    if top == "transform" and len(parts) > 2 and parts[2] in TRANSFORM_LAYERS:
        inner = TRANSFORM_LAYERS.index(parts[2])
    return (layer, inner)


def test_every_package_has_a_layer():
    tops = {m.split(".")[1] for m in MODULES if "." in m}
    assert tops <= set().union(*LAYERS), f"packages with no layer: {tops - set().union(*LAYERS)}"
    subs = {m.split(".")[2] for m in MODULES if m.startswith("brainx.transform.")
            and (PACKAGE / "transform" / m.split(".")[2]).is_dir()}
    assert subs <= set(TRANSFORM_LAYERS), f"transform packages with no layer: {subs}"


def test_no_arrow_runs_up():
    upward = sorted(f"{m} -> {t}" for m, targets in _graph().items() for t in targets
                    if _rank(t) > _rank(m))
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_circle():
    graph, index, low, stack, on_stack, circles = _graph(), {}, {}, [], set(), []

    def connect(v: str) -> None:                          # Tarjan's strongly connected parts
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for v in graph:
        if v not in index:
            connect(v)
    assert not circles, f"import circles: {circles}"


def test_no_deferred_import():
    deferred = sorted(f"{MODULES[m].relative_to(PACKAGE.parent)}:{line} imports {t}"
                      for m, found in IMPORTS.items() for t, line, top in found if not top)
    assert not deferred, "brainx imports inside functions:\n" + "\n".join(deferred)


def test_jax_internals_only_behind_the_door():
    private = re.compile(r"jax\._src")
    outside = sorted(f"{p.relative_to(PACKAGE.parent)}:{i}" for name, p in MODULES.items()
                     if not name.startswith("brainx._jax")
                     for i, line in enumerate(p.read_text().splitlines(), 1)
                     if private.search(line))
    assert not outside, "jax._src named outside brainx/_jax:\n" + "\n".join(outside)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_file_over_600_lines(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name]} has {lines} lines; split it by concept"


def test_the_checks_see_a_circle_and_an_upward_arrow(monkeypatch):
    """The graph is read as described: a made-up circle and upward arrow are found."""
    fake = dict(IMPORTS)
    fake["brainx.util.filter"] = IMPORTS["brainx.util.filter"] + [("brainx.transform", 1, True)]
    monkeypatch.setattr(sys.modules[__name__], "IMPORTS", fake)
    graph = _graph()
    assert "brainx.transform" in graph["brainx.util.filter"]
    assert _rank("brainx.transform") > _rank("brainx.util.filter")
    assert _rank("brainx.transform.remat.checkpoint") > _rank("brainx.transform.core.stateful")
