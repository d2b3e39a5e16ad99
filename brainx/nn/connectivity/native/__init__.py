"""Native (C++) event kernels for the CPU, called from compiled steps as XLA FFI custom calls.

``build`` compiles ``event_kernels.cc`` on first use and caches the library;
``rows`` holds a sparse matrix in the kernel's layout; ``product`` is the JAX
function around the call, with its derivative. docs/event-driven.md tells when
they are used.
"""
