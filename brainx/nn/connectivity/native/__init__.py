"""Native (C++) event kernels for the CPU, called from compiled steps as XLA FFI custom calls.

``build`` compiles ``event_kernels.cc`` on first use and caches the library;
``cache_trust`` decides whether a cached library may be loaded (who could have
written it, and whether it is the file its build recorded); ``rows`` holds a
sparse matrix in the kernel's layout, checked and owned; ``product`` is the JAX
function around the call, with its derivative. docs/event-driven.md tells when
they are used.
"""
