"""The error of :mod:`brainx.io`: a file that does not fit its target, or is damaged."""

from __future__ import annotations

__all__ = ["CheckpointError"]


class CheckpointError(ValueError):
    """The file does not fit the target (paths, leaves, dtypes, shapes, units), is damaged
    (its checksum differs) or is no checkpoint; or a load was undone. No state was changed."""


CheckpointError.__module__ = "brainx.io"  # its public name, in tracebacks and the API pages
