"""``jit`` and what keeps its calls cheap.

:mod:`.jit` is the transform; :mod:`.jit_entry` one compiled trace and the
checks before reusing it; :mod:`.call_codegen` the generated per-signature call
path; :mod:`.instance_sharing` the key under which instances of one class share
a trace, :mod:`.shared_traces` the traces they share; :mod:`.jit_cache_seed` hands
``jax.jit`` a trace already made; :mod:`.device_sharding` the device shardings of states and arguments.
The public name is :func:`brainx.transform.jit`.
"""
