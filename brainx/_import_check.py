"""Fail clearly when the name ``brainx`` is not this package.

brainx's submodules import this module (``brainx.errors`` and ``brainx.pretty_repr``, which every
other part imports). It checks, once per process, that the module bound to ``brainx`` in
``sys.modules`` is the package this file belongs to. It is not when

- a folder named ``brainx`` without an ``__init__.py`` (a data folder, an empty one) sits in the
  working directory or on ``sys.path``: Python makes a namespace package of it, which wins over an
  editable install's finder, and that finder still serves ``brainx.nn`` and the other submodules,
  so ``from brainx import nn`` works while ``brainx.__version__`` does not exist;
- another package named ``brainx`` (a user's own, an old copy) comes first on ``sys.path``;
- the package index's ``brainx`` (the brainstate ecosystem's meta-package, import name ``BrainX``)
  was installed over this one on a case-insensitive file system (macOS, Windows), where ``BrainX/``
  and ``brainx/`` are one folder and its ``__init__.py`` replaced ours.

In each case importing a submodule raises :class:`ImportError` naming what shadowed brainx, where
brainx is installed and what to do. Cost: a dictionary look-up and a string comparison, once.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _same_file(a: str, b: str) -> bool:
    return a == b or os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def _shadow_message(pkg: object) -> str | None:
    """The error message when ``pkg`` (``sys.modules['brainx']``) is not this package, else None."""
    init = getattr(pkg, "__file__", None)
    where = f"brainx (stateful transforms for JAX) is installed in {_HERE}"
    fix = ("Rename or move that folder (or run Python from another directory), then import brainx "
           "again. See the install guide: a folder named 'brainx' must not sit beside your scripts.")
    if init is None:      # a namespace package: folder(s) named brainx without __init__.py
        folders = [str(p) for p in getattr(pkg, "__path__", [])] or ["<unknown>"]
        return (f"'import brainx' found the folder {', '.join(map(repr, folders))}, which has no "
                f"__init__.py, so Python made an empty namespace package of it instead of importing "
                f"brainx; {where}. {fix}")
    if not _same_file(os.path.dirname(os.path.abspath(init)), _HERE):
        return (f"'import brainx' imported {init!r}, which is not this package; {where}. That other "
                f"'brainx' comes first on sys.path. {fix}")
    spec = getattr(pkg, "__spec__", None)
    initializing = getattr(spec, "_initializing", None)
    # brainx/__init__.py imports this module while it runs (so the package is initializing), and
    # the import leaves the attribute brainx._import_check behind. Neither holds when another
    # __init__.py ran in brainx's place, as the BrainX meta-package's does on macOS or Windows.
    if initializing is False and "_import_check" not in vars(pkg):
        other = getattr(pkg, "__version__", None)
        return (f"{init!r} is not brainx's own __init__.py (it defines __version__ = {other!r}): "
                f"another distribution wrote into brainx's folder. The package index's 'brainx' "
                f"(BrainX, the brainstate ecosystem's meta-package) does so on a case-insensitive file "
                f"system, where 'BrainX/' and 'brainx/' are one folder. Uninstall both "
                f"('pip uninstall BrainX brainx-jax') and reinstall brainx-jax alone; the two cannot "
                f"share one environment there. {where}.")
    return None


def check() -> None:
    """Raise :class:`ImportError` if ``sys.modules['brainx']`` is not this package."""
    pkg = sys.modules.get("brainx")
    if pkg is None:       # imported by path, not as brainx's submodule (a tool reading the file)
        return
    message = _shadow_message(pkg)
    if message is not None:
        raise ImportError(message, name="brainx")


check()
