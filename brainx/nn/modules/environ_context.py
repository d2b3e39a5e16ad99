"""``nn.EnvironContext``: a module run inside a ``brainx.environ.context`` (brainstate's wrapper).

``EnvironContext(layer, fit=False)`` calls ``layer`` with those settings in
force, so one part of a model can run in evaluation mode, or with its own
``dt``, while the rest does not. Settings given at call time
(``wrapped(x, context={"fit": True})``) are added for that call.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from brainx import environ
from brainx.nn.modules.module import Module

__all__ = ["EnvironContext"]


class EnvironContext(Module):
    """Run ``layer`` inside ``brainx.environ.context(**context)``.

    Parameters
    ----------
    layer : Module
        The module to call.
    **context
        Settings for :func:`brainx.environ.context` (``fit=False``, ``dt=...``).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> drop = brainx.nn.Dropout(0.5)
    >>> evaluated = brainx.nn.EnvironContext(drop, fit=False)
    >>> x = jnp.ones(4)
    >>> with brainx.environ.context(fit=True):
    ...     bool((evaluated(x) == x).all())       # no dropout: fit is False inside
    True
    """

    def __init__(self, layer: Module, **context: Any):
        super().__init__()
        if not isinstance(layer, Module):
            raise TypeError(f"EnvironContext wraps a brainx.nn.Module; got {layer!r} "
                            f"(a {type(layer).__name__}).")
        self.layer = layer
        self.context = dict(context)

    def update(self, *args: Any, context: Optional[Dict[str, Any]] = None, **kwargs: Any) -> Any:
        """Call ``layer(*args, **kwargs)`` with the stored settings and ``context`` in force."""
        with environ.context(**{**self.context, **(context or {})}):
            return self.layer(*args, **kwargs)

    def add_context(self, **context: Any) -> None:
        """Add settings (or replace stored ones) for every later call."""
        self.context.update(context)
