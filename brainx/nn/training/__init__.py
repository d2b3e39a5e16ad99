"""Training-loop helpers: running metrics and gradient clipping (re-exported by :mod:`brainx.nn`)."""
