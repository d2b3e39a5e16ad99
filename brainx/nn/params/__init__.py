"""Constrained parameters: :class:`~brainx.nn.Param` with its bijective transforms, and
regularisers (re-exported by :mod:`brainx.nn`)."""
