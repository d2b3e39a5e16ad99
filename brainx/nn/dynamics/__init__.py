"""Brain dynamics: :class:`~brainx.nn.Dynamics` and its neurons and synapses, synaptic outputs,
delays and their prefetching readers, and the exponential-Euler step (all re-exported by
:mod:`brainx.nn`; see docs/dynamics.md)."""
