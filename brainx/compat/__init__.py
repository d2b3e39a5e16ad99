"""Serve ``import brainstate`` with brainx, for a whole stack of libraries at once.

A program that imports brainstate itself switches to brainx by its import
(``import brainx as brainstate``). Libraries built on brainstate (braintools,
brainpy's state API, braintrace, braincell) import it in their own files;
:func:`install_as_brainstate` makes those imports give brainx, the way
PyMySQL's ``install_as_MySQLdb()`` serves ``import MySQLdb``. Call it once,
before the libraries are imported:

.. code-block:: python

    import brainx.compat
    brainx.compat.install_as_brainstate()

    import braintools     # its `import brainstate` is brainx

What it maps:

* ``brainstate`` to a thin module that reads and writes brainx's attributes
  but reports the brainstate version it serves (``brainstate.__version__`` is
  ``"0.6.0"``, ``brainx.__version__`` stays brainx's own), so clients' version
  checks pass;
* ``brainstate``'s public subpackages (``transform``, ``random``,
  ``environ``, ``graph``, ``util``, ``nn``, ``mixin``, ``typing``, ``init``,
  ``optim``, ``surrogate``, ``augment``, ``compile``, ``functional``) to
  brainx's;
* private module paths that clients import public names through
  (``brainstate.transform._make_jaxpr``, ``brainstate.graph._node``, ...): such
  a module reads its names from the public package above it, so a public name
  imports and a truly private one fails with ``ImportError`` naming it;
* ``brainstate._state`` to ``brainx.state``, ``brainstate._error`` to
  ``brainx.errors``, brainstate's private hook modules to brainx's, and
  ``brainstate._compatible_import`` (the JAX names brainstate re-exports:
  ``Primitive``, ``ClosedJaxpr``, ``safe_zip``, ``make_debug_info``, ...) to
  ``brainx.compat.jax_shim``, which finds them in JAX.

It also makes a state that a raw JAX trace wrote and did not put back read as
its value from before that write once the trace has ended, as brainstate goes
on, instead of raising :class:`~brainx.TracerLeakError`
(:func:`brainx.state.lending.set_ended_write_policy`): braincell's solvers
write a cell's states under ``jax.vjp`` and overwrite them afterwards. And
it applies brainstate's rule to ``state.value = tracer`` from a raw JAX
transform outside every brainx call (``jax.jit`` over a function that sets a
state): :class:`~brainx.TracerLeakError`, a ``TraceContextError``, at the write
(:func:`brainx.state.lending.set_raw_write_policy`), where brainx alone lends
the state to that trace and reports at the next read. Inside brainx transforms
both lend, so braintrace's writes inside its ``custom_vjp`` and ``scan`` run.

Limits: brainstate internals that brainx does not have (graph-definition internals
such as ``NodeSpec`` and edges, drawing a jaxpr) are not there; brainstate's jaxpr passes
and ``TRACE_CONTEXT`` are served (:doc:`/brainstate-compat` has the list). It refuses to
run when the real brainstate is already imported, since objects of both would then mix.

The rest of brainstate compatibility lives in this package too, on the top floor of
brainx (nothing below imports it; ``brainx/__init__.py`` sets the names brainstate's
users find in lower packages): its old module names ``brainx.compile``,
``brainx.augment``, ``brainx.functional`` (:mod:`brainx.compat.deprecated`), its
stand-ins ``FakeState`` (:mod:`brainx.compat.fake_state`) and
``transform.in_new_state_probe`` (:mod:`brainx.compat.new_state_probe`), its switches
that change nothing here (:mod:`brainx.compat.no_op_switches`), the JAX names it
re-exports (:mod:`brainx.compat.jax_shim`) and its private modules
(:mod:`brainx.compat.private`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import itertools
import sys
import types
from typing import Any

import brainx   # the package being served (set up by the time the functions here run)
from brainx.state.lending import set_ended_write_policy, set_raw_write_policy
from brainx.state.trace import active_traces

__all__ = ["install_as_brainstate", "installed_as_brainstate"]

#: brainstate's public subpackages, served by the brainx module of the same name.
SUBPACKAGES = ("transform", "random", "environ", "graph", "util", "nn", "typing", "mixin",
               "augment", "compile", "functional", "init", "optim", "surrogate")

#: brainstate's private modules that hold public names, and where brainx keeps them.
PRIVATE_MODULES = {
    "_state": "brainx.state",
    "_error": "brainx.errors",
    "_state_hook_core": "brainx.state.hooks",
    "_state_hook_context": "brainx.state.hooks",
    "_state_hook_manager": "brainx.state.hook_manager",
    "_state_global_hooks": "brainx.state.global_hooks",
    # the pretty-repr modules: their public names, and the helpers their own tests import
    # (CONTEXT, _default_repr_object, _repr_object_general, ...), from brainx's modules
    "util._pretty_repr": ("brainx.util.pretty", "brainx.util"),
    "util._pretty_pytree": ("brainx.util.pretty_containers", "brainx.util.mappings",
                            "brainx.util"),
    # private helpers that brainstate's tests and clients import: served by the module of
    # brainx.compat.private itself (its own helpers, then the public package's names), so a
    # test that patches a module global (`_mapping_core.BatchTracer = ...`) patches the one
    # the helpers read
    **{f"transform._{name}": "brainx.compat.private.ir"
       for name in ("ir_utils", "ir_optim", "ir_tocode", "ir_inline", "ir_processing")},
    "transform._make_jaxpr": "brainx.compat.private.transform",
    "transform._mapping_core": "brainx.compat.private.transform",
    **{f"nn._{name}": "brainx.compat.private.nn"
       for name in ("delay", "dynamics", "normalizations", "common")},
    "random._state": "brainx.compat.private.random",
    "random._impl": "brainx.compat.private.random_impl",
    **{f"transform._{name}": "brainx.compat.private.autodiff"
       for name in ("grad_jacobian", "grad_transform", "error_if")},
    "transform._mapping2": "brainx.compat.private.mapping",
}


#: The brainstate version :func:`install_as_brainstate` reports unless told another.
SERVED_VERSION = "0.6.0"


def installed_as_brainstate() -> bool:
    """Whether ``import brainstate`` gives brainx (:func:`install_as_brainstate` ran)."""
    present = sys.modules.get("brainstate")
    return present is brainx or (isinstance(present, _ServedBrainstate)
                                 and present.__dict__["_brainx"] is brainx)


def install_as_brainstate(version: str = SERVED_VERSION) -> None:
    """Make ``import brainstate`` (and its submodules) give brainx, in this process.

    Call it before importing the libraries that import brainstate. Calling it
    again only changes the version it reports.

    ``import brainstate`` then gives a thin module that reads and writes every
    attribute on :mod:`brainx` (``brainstate.State is brainx.State``), except
    ``__version__`` and ``__version_info__``: those say the brainstate version
    served, so a client's version check (``brainstate.__version__ >= "0.6"``)
    passes, while ``brainx.__version__`` stays brainx's own.

    Parameters
    ----------
    version : str, default ``"0.6.0"``
        The brainstate version ``brainstate.__version__`` reports
        (``brainstate.__version_info__`` is its numeric parts: ``(0, 6, 0)``).
        brainx follows brainstate 0.6.0's API; say ``"0.5.4"`` for a stack
        that checks for the older one.

    Raises
    ------
    RuntimeError
        If the real brainstate is imported already: its states and brainx's
        would mix. Call this first thing, or do not import brainstate.

    Examples
    --------
    (Not run here: it changes the process's imports for good.)

    >>> import brainx, brainx.compat
    >>> brainx.compat.install_as_brainstate()                         # doctest: +SKIP
    >>> import brainstate                                             # doctest: +SKIP
    >>> brainstate.State is brainx.State, brainstate.transform is brainx.transform  # doctest: +SKIP
    (True, True)
    >>> brainstate.__version__, brainstate.__version_info__, brainx.__version__  # doctest: +SKIP
    ('0.6.0', (0, 6, 0), '0.1.0')
    >>> from brainstate.transform._make_jaxpr import StatefulFunction   # doctest: +SKIP
    >>> StatefulFunction is brainx.transform.StatefulFunction          # doctest: +SKIP
    True
    """
    present = sys.modules.get("brainstate")
    if isinstance(present, _ServedBrainstate) and present.__dict__["_brainx"] is brainx:
        present.__version__ = version
        return
    if present is not None and present is not brainx:
        raise RuntimeError(
            "install_as_brainstate: the real brainstate is imported already "
            f"({getattr(present, '__file__', present)!r}); objects of both would mix. Call "
            "brainx.compat.install_as_brainstate() before anything imports brainstate.")
    sys.modules["brainstate"] = _ServedBrainstate(brainx, version)
    for name in SUBPACKAGES:
        try:
            module = importlib.import_module("brainx." + name)
        except ImportError:
            module = getattr(brainx, name, None)
        if module is not None:
            sys.modules["brainstate." + name] = module
    for private, public in PRIVATE_MODULES.items():
        if isinstance(public, str) and public.startswith("brainx.compat.private."):
            served = importlib.import_module(public)
            # (also under brainx's package name: `import brainstate.nn._delay as d` looks the
            # module up as an attribute of brainx.nn, then as sys.modules["brainx.nn._delay"])
            sys.modules["brainstate." + private] = sys.modules["brainx." + private] = served
            continue
        names = (public,) if isinstance(public, str) else public
        sys.modules["brainstate." + private] = _forwarding(
            "brainstate." + private, *(importlib.import_module(n) for n in names))
    sys.modules["brainstate._state"].TRACE_CONTEXT = _TraceContext()
    sys.modules["brainstate._compatible_import"] = importlib.import_module("brainx.compat.jax_shim")
    if not any(isinstance(finder, _PrivateToPublic) for finder in sys.meta_path):
        sys.meta_path.append(_PrivateToPublic())
    # brainstate lets code read a state a raw JAX trace wrote after that trace ended (braincell's
    # solvers do, then overwrite it): give the value from before that write, do not raise.
    set_ended_write_policy("restore")
    # and, as brainstate, refuses `state.value = tracer` of a raw JAX trace outside every
    # brainx call at the write (`jax.jit` over a function that sets a state)
    set_raw_write_policy("raise")


def _version_info(version: str) -> tuple:
    """``"0.6.0"`` -> ``(0, 6, 0)``; a part with letters keeps its leading digits (``"0rc1"`` -> 0)."""
    parts = []
    for part in version.split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


class _ServedBrainstate(types.ModuleType):
    """``sys.modules["brainstate"]``: brainx, under brainstate's name and version.

    Reads, writes and deletions of attributes go to brainx (``brainstate.X =
    ...`` sets ``brainx.X``), except the version and the module's own identity
    (``__name__``, ``__doc__``). A private module served under ``brainstate.``
    (``brainstate._compatible_import``) is an attribute too, as on brainstate.
    """

    _LOCAL = frozenset({"__name__", "__doc__", "__version__", "__version_info__", "_brainx"})

    def __init__(self, target: types.ModuleType, version: str):
        super().__init__("brainstate", target.__doc__)
        self.__dict__["_brainx"] = target
        for attribute in ("__spec__", "__loader__", "__package__"):  # read from brainx
            self.__dict__.pop(attribute, None)
        self.__version__ = version

    def __getattr__(self, name: str) -> Any:
        target = self.__dict__["_brainx"]
        try:
            return getattr(target, name)
        except AttributeError:
            served = sys.modules.get("brainstate." + name)
            if served is not None:
                return served
            raise AttributeError(
                f"module 'brainstate' (served by brainx) has no attribute {name!r}: brainx has "
                f"no such name (see docs/brainstate-compat.md).") from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "__version__":
            self.__dict__["__version__"] = value
            self.__dict__["__version_info__"] = _version_info(value)
        elif name in self._LOCAL:
            self.__dict__[name] = value
        else:
            setattr(self.__dict__["_brainx"], name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._LOCAL:
            raise AttributeError(f"brainstate.{name} cannot be deleted (brainx serves it)")
        delattr(self.__dict__["_brainx"], name)

    def __dir__(self) -> list:
        return sorted(set(dir(self.__dict__["_brainx"])) | {"__version__", "__version_info__"})

    def __repr__(self) -> str:
        target = self.__dict__["_brainx"]
        return (f"<module 'brainstate' (brainx {target.__version__} serving brainstate "
                f"{self.__version__})>")


class _TraceContext:
    """``brainstate._state.TRACE_CONTEXT``: its ``state_stack`` is this thread's active
    :class:`~brainx.StateTraceStack` scopes, innermost last (``brainx.state.trace.active_traces``).

    brainstate's tests and a few tools push a scope with ``state_stack.append(...)`` and pop
    it, or read the depth; the list is brainx's own, so a scope pushed so records reads and
    writes as one entered with ``with``.
    """

    @property
    def state_stack(self) -> list:
        return active_traces()

    def get_trace_stack_level(self) -> int:
        return len(self.state_stack)


def _forwarding(private_name: str, *publics: types.ModuleType) -> types.ModuleType:
    """A module named ``private_name`` whose attributes are those of ``publics`` (the first
    that has the name)."""
    module = types.ModuleType(private_name)

    def forward(name: str) -> Any:
        for public in publics:
            if hasattr(public, name):
                return getattr(public, name)
        raise AttributeError(
            f"module {private_name!r} has no attribute {name!r}: brainx serves brainstate's "
            f"private modules with the public names of "
            f"{', '.join(p.__name__ for p in publics)}, and this one is not among them "
            "(see docs/brainstate-compat.md).")

    module.__getattr__ = forward  # type: ignore[attr-defined]
    return module


class _PrivateToPublic(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``brainstate.<pkg>._<private>`` reads its names from brainx's public ``<pkg>``."""

    def find_spec(self, name: str, path: Any = None, target: Any = None):
        # ("brainx." too: `from brainstate.graph import _walk` asks for brainx.graph._walk)
        parent, _, last = name.rpartition(".")
        if not (name.startswith(("brainstate.", "brainx.")) and last.startswith("_")
                and installed_as_brainstate()):
            return None
        spec = getattr(sys.modules.get(parent), "__spec__", None)
        if spec is not None and spec.loader is self:  # inside a served module: a missing name
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        public = importlib.import_module(module.__name__.rsplit(".", 1)[0])
        module.__getattr__ = _forwarding(module.__name__, public).__getattr__  # type: ignore
