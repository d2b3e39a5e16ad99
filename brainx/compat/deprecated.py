"""brainstate's deprecated module names (``compile``, ``augment``, ``functional``), kept for old programs.

brainstate 0.5.4 still answers ``brainstate.compile.jit``,
``brainstate.augment.grad`` and ``brainstate.functional.relu`` with a
``DeprecationWarning``, forwarding a fixed list of names to ``transform`` and
``nn``. brainx does the same, so that a program written for older brainstate
runs with the import changed, and says what to write instead.

Example
-------
>>> import warnings, brainx
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     jit = brainx.compile.jit
>>> jit is brainx.transform.jit, caught[0].category.__name__
(True, 'DeprecationWarning')
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Iterable

__all__ = ["DeprecatedModule", "compile", "augment", "functional"]


class DeprecatedModule:
    """A stand-in module forwarding ``names`` to ``replacement``, each access warned."""

    def __init__(self, name: str, replacement: str, names: Iterable[str]):
        self.__name__ = name
        self._replacement = replacement
        self._names = frozenset(names)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr not in self._names:
            raise AttributeError(
                f"{self.__name__} is deprecated and has no {attr!r}; use {self._replacement}.")
        warnings.warn(f"{self.__name__}.{attr} is deprecated: use {self._replacement}.{attr}.",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(self._replacement), attr)

    def __dir__(self):
        return sorted(self._names)

    def __repr__(self) -> str:
        return f"<deprecated module {self.__name__} (use {self._replacement})>"


compile = DeprecatedModule("brainx.compile", "brainx.transform", (
    "checkpoint", "remat", "cond", "switch", "ifelse", "jit_error_if", "jit", "scan",
    "checkpointed_scan", "for_loop", "checkpointed_for_loop", "while_loop", "bounded_while_loop",
    "StatefulFunction", "make_jaxpr", "ProgressBar"))

augment = DeprecatedModule("brainx.augment", "brainx.transform", (
    "GradientTransform", "grad", "vector_grad", "hessian", "jacobian", "jacrev", "jacfwd", "vmap"))

functional = DeprecatedModule("brainx.functional", "brainx.nn", (
    "clip_grad_norm", "tanh", "relu", "squareplus", "softplus",
    "soft_sign", "sigmoid", "silu", "swish", "log_sigmoid", "elu", "leaky_relu", "hard_tanh",
    "celu", "selu", "gelu", "glu", "logsumexp", "log_softmax", "softmax", "standardize", "relu6",
    "hard_sigmoid", "sparse_plus", "hard_silu", "hard_swish", "hard_shrink", "rrelu", "mish",
    "soft_shrink", "prelu", "softmin", "one_hot", "sparse_sigmoid"))
