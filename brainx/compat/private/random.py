"""brainstate's private helpers of ``brainstate.random`` (see :mod:`brainx.compat.private`)."""

from __future__ import annotations

from brainx.compat.private import public_fallback

__getattr__ = public_fallback(__name__, "brainx.random")
