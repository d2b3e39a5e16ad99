"""Fail the docs build when a public name is on no API page.

The public API is what ``brainx`` exports: every name in the ``__all__`` of ``brainx`` and of
the public modules reachable from it through ``__all__`` (``brainx.transform``,
``brainx.nn.init``, ...), plus :mod:`brainx.compat`. After Sphinx has read every page, each
such name must be documented (an autosummary entry on a docs/api/*.rst page gives it its own
page):

* a module: documented with ``automodule``, under its public name or its real one;
* anything else: as ``<module>.<name>``, or, when the same object is exported by another
  public module too (``brainx.TracerLeakError`` is ``brainx.errors.TracerLeakError``), under
  any of its public names.

A missing name is a warning, which ``make docs`` (``-W``) turns into an error that says which
page to add it to.
"""

import importlib
import inspect

from sphinx.util import logging

logger = logging.getLogger(__name__)

ROOTS = ("brainx", "brainx.compat")


def public_names():
    """``[(public module path, name, object)]`` for every public module's ``__all__``."""
    out, seen, todo = [], set(), [(r, importlib.import_module(r)) for r in ROOTS]
    while todo:
        path, mod = todo.pop(0)
        if path in seen:
            continue
        seen.add(path)
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            out.append((path, name, obj))
            if inspect.ismodule(obj) and obj.__name__.startswith("brainx"):
                todo.append((f"{path}.{name}", obj))
    return out


def check_coverage(app, env):
    py = env.get_domain("py")
    objects, modules = set(py.objects), set(py.modules)
    by_id = {}   # classes and functions exported under several names: any one will do
    for path, name, obj in public_names():
        if callable(obj) and not inspect.ismodule(obj):
            by_id.setdefault(id(obj), []).append(f"{path}.{name}")
    missing = []
    for path, name, obj in public_names():
        full = f"{path}.{name}"
        if inspect.ismodule(obj):
            if full not in modules and obj.__name__ not in modules:
                missing.append(full)
        elif not any(alias in objects for alias in by_id.get(id(obj), [full])):
            missing.append(full)
    for full in missing:
        module = full.rsplit(".", 1)[0]
        logger.warning(f"{full} is public (in {module}.__all__) but on no API page: add it to "
                       f"the autosummary table of its module's page in docs/api/",
                       type="brainx", subtype="api_coverage")


def setup(app):
    app.connect("env-check-consistency", check_coverage)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
