"""Which of a brainstate release's tests are new or changed since an earlier one.

``run_brainstate_tests.py --changed-since OLD`` reports, beside the whole
suite, how many of the tests a release added or changed pass on brainx: those
are the tests of its new behaviour. A test is identified by its file, its class
(empty for a module-level function) and its name; it is *new or changed* when
its source in the newer release differs from the earlier one's, or the earlier
one has no such test. Sources are compared as syntax trees (``ast.dump``), so
a change of layout or of a comment does not count, nor does a docstring (it
says what the test is for; it checks nothing). A method a class inherits from a
base class in the same file is that base's source (a new subclass of an old
base is a new test: the old release has no such test).

Example::

    >>> old = "def test_a():\\n    assert 1\\n"
    >>> new = "def test_a():\\n    # same test\\n    assert 1\\n\\ndef test_b():\\n    pass\\n"
    >>> sorted(changed(test_sources(new), test_sources(old)))
    [('', 'test_b')]
"""

from __future__ import annotations

import ast
from typing import Container


def _without_docstring(node: ast.AST) -> ast.AST:
    body = getattr(node, "body", None)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None),
                                                             ast.Constant) \
            and isinstance(body[0].value.value, str):
        node.body = body[1:] or [ast.Pass()]
    return node


def _dump(node: ast.AST) -> str:
    return ast.dump(_without_docstring(node))


def test_sources(text: str) -> dict:
    """``{(class, name): source}`` of a test file's test functions and methods.

    Methods are listed under every class of the file that has them, its own or
    inherited from a base class defined in the same file.
    """
    tree = ast.parse(text)
    out = {}
    classes = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            out[("", node.name)] = _dump(node)
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = node

    def methods(name: str, seen: frozenset = frozenset()) -> dict:
        node = classes.get(name)
        if node is None or name in seen:
            return {}
        found = {}
        for base in reversed(node.bases):        # the first base wins, as in the MRO
            if isinstance(base, ast.Name):
                found.update(methods(base.id, seen | {name}))
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and item.name.startswith("test"):
                found[item.name] = _dump(item)
        return found

    for name in classes:
        for method, source in methods(name).items():
            out[(name, method)] = source
    return out


def changed(new: dict, old: dict) -> set:
    """The keys of ``new`` (``test_sources``) whose source differs from ``old``'s or is not there."""
    return {key for key, source in new.items() if old.get(key) != source}


def case_key(classname: str, name: str, module: str, keys: Container = ()) -> tuple:
    """A junit test case's ``(class, function)``: ``name`` without its parameters.

    pytest's are in brackets (``test_x[a-1]``); absl's ``parameterized.parameters`` adds the
    case's index (``test_x0``, ``test_x1``): with ``keys`` given, a name that is not one of
    them but is one with its trailing digits removed counts as that one.
    """
    cls = classname[len(module) + 1:] if classname.startswith(module + ".") else ""
    key = (cls.split(".")[-1] if cls else "", name.split("[", 1)[0])
    if keys and key not in keys and key[1][-1:].isdigit():
        bare = (key[0], key[1].rstrip("0123456789"))
        if bare in keys:
            return bare
    return key
