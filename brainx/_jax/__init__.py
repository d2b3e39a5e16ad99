"""The one door to JAX's private API.

brainx works with what JAX exports, except where JAX has no public way to do
what a stateful transform needs: read the current trace, trace a function into
a jaxpr that other code may extend, give ``jax.jit`` a trace made elsewhere,
compare trace contexts. Those uses come through this package and nowhere else
(``tests/test_architecture.py`` checks that no other file names ``jax._src``),
so a JAX release that moves something breaks here, in one place, and the list
of what brainx waits for from JAX is this package:

* :mod:`brainx._jax.internals`: every private JAX module brainx imports, each
  with what it is for and the public replacement it waits for;
* :mod:`brainx._jax.names`: where each JAX version keeps the names brainstate's
  shim exports (public ``jax.extend`` paths before private ones), and small
  helpers that read JAX's data structures across versions;
* :mod:`brainx._jax.traces`: which JAX traces are active, and which of them
  brainx opened itself (``current_trace``, ``owned_traces``, lanes of ``vmap``).

Nothing here imports the rest of brainx.
"""
