"""brainstate's private helpers, for code that imports them through brainstate's private paths.

brainstate's own tests, and a few client libraries, import helpers that brainstate keeps in
private modules (``from brainstate.random._state import formalize_key``,
``from brainstate.transform._ir_utils import IRError``). :func:`brainx.compat.install_as_brainstate`
serves each such module with one module here: its own names first (written for brainx, with
brainstate's meaning), then the public names of the brainx package above it. Nothing in
brainx imports these modules; they exist only for the brainstate switch.

==========================  =====================================================
module here                 serves (under ``brainstate.``)
==========================  =====================================================
``ir``                      ``transform._ir_utils``, ``_ir_optim``, ``_ir_tocode``,
                            ``_ir_inline``, ``_ir_processing``
``transform``               ``transform._make_jaxpr``, ``transform._mapping_core``
``nn``                      ``nn._delay``, ``nn._dynamics``, ``nn._normalizations``,
                            ``nn._common``
``random``                  ``random._state``
``random_impl``             ``random._impl`` (key-first samplers and their helpers)
``autodiff``                ``transform._grad_jacobian``, ``_grad_transform``, ``_error_if``
``mapping``                 ``transform._mapping2``
==========================  =====================================================

``ir`` gathers the names of ``ir_utils`` (identity containers, jaxpr checks), ``ir_fold``
(constant folding) and ``ir_tocode`` (code-generation rules) and adds its own.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

__all__ = ["public_fallback"]


def public_fallback(here: str, public: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for module ``here``: a name it lacks is read from ``public``.

    Dunder names are not forwarded: ``__path__`` read from a package would make the import
    system take a missing helper (``from brainstate.nn._delay import _get_delay``) for a
    submodule and hand back a module.
    """

    def __getattr__(name: str) -> Any:
        if not (name.startswith("__") and name.endswith("__")):
            try:
                return getattr(importlib.import_module(public), name)
            except AttributeError:
                pass
        raise AttributeError(
            f"module {here!r} has no attribute {name!r}: brainx serves this brainstate private "
            f"module with {here} and the public names of {public}, and this name is in "
            "neither (see docs/brainstate-compat.md).")

    return __getattr__
