"""Objects of the real brainstate package inside a brainx model, and the hint to move them over.

A brainstate program moved to brainx by changing ``import brainstate`` alone
still gets the real brainstate wherever a library it imports (braintools,
brainpy) imports it: that library's neurons and synapses are then modules of
the real brainstate, which brainx does not walk into. ``init_all_states``
does not call their ``init_state`` (the program fails later with
``AttributeError: 'Expon' object has no attribute 'g'``), and brainx's
transforms and saving do not see their states. The cure is
``brainx.compat.install_as_brainstate()`` before those libraries are
imported, so that ``import brainstate`` gives brainx to them too.

:func:`real_brainstate_objects` finds such objects in a model tree (by the
module their class was defined in: a ``brainstate`` module loaded from
outside brainx), and :func:`warn_real_brainstate_objects` says what to do.
"""

from __future__ import annotations

import os
import sys
import warnings
import weakref
from typing import Any, Iterator, List, Optional, Tuple

from brainx.graph.walk import is_container, is_graph_node, node_children

__all__ = ["real_brainstate_class", "real_brainstate_objects", "warn_real_brainstate_objects"]

_BRAINX_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BY_TYPE: "weakref.WeakKeyDictionary[type, Optional[type]]" = weakref.WeakKeyDictionary()
_SHOWN = 5


def real_brainstate_class(cls: type) -> Optional[type]:
    """The first class of ``cls``'s MRO that the real brainstate package defines, else ``None``.

    A class counts when its ``__module__`` is ``brainstate`` or under it, and
    both that module and ``brainstate`` itself were loaded from files outside
    brainx (under ``install_as_brainstate()``, ``brainstate`` is brainx).

    Examples
    --------
    >>> import brainx
    >>> from brainx.nn.modules.brainstate_objects import real_brainstate_class
    >>> real_brainstate_class(brainx.nn.LIF) is None
    True
    """
    try:
        return _BY_TYPE[cls]
    except KeyError:
        found = next((c for c in cls.__mro__ if _from_real_brainstate(c)), None)
        _BY_TYPE[cls] = found
        return found


def _from_real_brainstate(cls: type) -> bool:
    name = getattr(cls, "__module__", None) or ""
    if name != "brainstate" and not name.startswith("brainstate."):
        return False
    # the class's module and `brainstate` itself loaded from outside brainx: under
    # install_as_brainstate() `brainstate` is brainx (its own test files are not flagged)
    return all(_outside_brainx(getattr(sys.modules.get(m), "__file__", None))
               for m in (name, "brainstate"))


def _outside_brainx(path: Optional[str]) -> bool:
    return path is not None and not os.path.abspath(path).startswith(_BRAINX_ROOT + os.sep)


def real_brainstate_objects(root: Any) -> Iterator[Tuple[str, Any, type]]:
    """``(dotted path, object, its real brainstate base)`` for each such object in ``root``'s tree.

    The walk does not enter them (brainx's walk does not either), and each
    object is reported once.
    """
    seen: set = set()

    def walk(obj: Any, path: Tuple[Any, ...]):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        base = real_brainstate_class(type(obj))
        if base is not None:
            yield ".".join(map(str, path)) or "<root>", obj, base
        elif is_graph_node(obj) or is_container(obj):
            for key, child in node_children(obj):
                yield from walk(child, path + (key,))

    yield from walk(root, ())


def warn_real_brainstate_objects(root: Any, what: str) -> None:
    """Warn, naming their paths, if ``root`` holds objects of the real brainstate.

    ``what`` names the caller (``"init_all_states"``) in the message.
    """
    found: List[Tuple[str, Any, type]] = []
    for item in real_brainstate_objects(root):
        found.append(item)
        if len(found) > _SHOWN:
            break
    if not found:
        return
    shown = ", ".join(f"{path} ({type(obj).__module__}.{type(obj).__qualname__}, a "
                      f"{base.__module__}.{base.__qualname__})"
                      for path, obj, base in found[:_SHOWN])
    more = ", ..." if len(found) > _SHOWN else ""
    top = found[0][2].__module__.split(".")[0]
    origin = getattr(sys.modules.get(top), "__file__", None) or "?"
    warnings.warn(
        f"brainx.nn.{what}: the model holds objects of the real brainstate package (loaded from "
        f"{origin}), not of brainx: {shown}{more}. brainx does not walk into them: their "
        "init_state()/reset_state() are not called and brainx's transforms and saving do not "
        "see their states. A library imported by this program (braintools, brainpy, ...) "
        "imported the real brainstate. Call brainx.compat.install_as_brainstate() first thing "
        "in the program, before those libraries are imported, so that they build on brainx.",
        UserWarning, stacklevel=_first_frame_outside_brainx())


def _first_frame_outside_brainx() -> int:
    """The ``stacklevel`` of the innermost caller outside brainx (the user's line)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_BRAINX_ROOT + os.sep):
        frame, level = frame.f_back, level + 1
    return level
