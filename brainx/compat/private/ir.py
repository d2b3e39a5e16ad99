"""brainstate's private helpers of its jaxpr tools (see :mod:`brainx.compat.private`).

One module serves ``brainstate.transform._ir_utils``, ``_ir_optim``, ``_ir_tocode``,
``_ir_inline`` and ``_ir_processing``: the helpers those modules hold that brainstate's
tests import, written for brainx with brainstate's meaning, then (module
``__getattr__``) the public names of :mod:`brainx.transform` (``optimize_jaxpr``,
``inline_jit``, ``fn_to_python_code``...). The helpers live by concept in
:mod:`~brainx.compat.private.ir_utils` (collections, checks, literals),
:mod:`~brainx.compat.private.ir_fold` (partial evaluation) and
:mod:`~brainx.compat.private.ir_tocode` (the code handler registry);
:func:`make_var_factory` is here, reading this module's ``Var`` (a test replaces it).
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any, Callable, List

from jax.extend.core import ClosedJaxpr, Jaxpr, Literal, Var  # noqa: F401

from brainx.compat.private import public_fallback
# (the names below are served: brainstate's tests import them from this module)
from brainx.compat.private.ir_fold import (  # noqa: F401
    CONSTANT_FOLD_BLACKLIST, _eval_eqn, constant_fold_blacklist, constant_fold_jaxpr,
    partial_eval_jaxpr)
from brainx.compat.private.ir_tocode import (  # noqa: F401
    normal_fn, prim_to_python, register_prim_as)
from brainx.compat.private.ir_utils import (  # noqa: F401
    IdentityMap, IdentitySet, IRError, IRValidationError, UnsupportedPrimitiveError,
    _canonical_param, check_all_vars, ensure_jaxpr, is_scalar_literal_value, literal_with_dtype)

__all__: List[str] = []  # brainstate's internals: nothing here is public

__getattr__ = public_fallback(__name__, "brainx.transform")



def make_var_factory() -> Callable[[Any], Any]:
    """A function ``factory(aval)`` giving a fresh jaxpr variable of type ``aval`` each call.

    JAX's ``Var`` has been built three ways: ``Var(aval)`` (JAX >= 0.7),
    ``Var(suffix, aval)`` and ``Var(count, suffix, aval)``. The factory tries first the
    way ``Var``'s signature names, then the others, each on a ``TypeError``, and keeps
    the first that works; when none does, the last ``TypeError`` is raised.

    Examples
    --------
    >>> import jax, numpy as np
    >>> new_var = make_var_factory()
    >>> aval = jax.core.ShapedArray((), np.float32)
    >>> a, b = new_var(aval), new_var(aval)
    >>> a is not b and a.aval == aval
    True
    """
    cls = Var  # read when the factory is made (a test swaps this module's Var)
    names = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    counter = itertools.count()
    ways = {
        "aval": lambda aval: cls(aval),
        "suffix": lambda aval: cls("", aval),
        "count": lambda aval: cls(next(counter), "", aval),
    }
    if names[:2] == ["suffix", "aval"]:
        order = ["suffix", "count", "aval"]
    elif "count" in names and "suffix" in names:
        order = ["count", "suffix", "aval"]
    else:
        order = ["aval", "suffix", "count"]
    chosen: List[Callable[[Any], Any]] = []

    def factory(aval: Any) -> Any:
        if chosen:
            return chosen[0](aval)
        error: Exception = TypeError(f"cannot build a {cls.__name__}")
        for way in order:
            try:
                var = ways[way](aval)
            except TypeError as exc:
                error = exc
                continue
            chosen.append(ways[way])
            return var
        raise error

    return factory
