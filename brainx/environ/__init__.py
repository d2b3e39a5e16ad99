"""Global simulation settings: the time step ``dt``, the float precision, and any key you like.

Settings come in two layers, as in brainstate:

* :func:`set` changes the process-wide defaults (every thread sees them);
* :func:`context` overrides settings inside a ``with`` block, for the
  current thread only, and restores them on exit even when the block raises.

:func:`get` looks in the innermost :func:`context` first, then in the
defaults. One exception: ``precision`` also switches JAX's ``jax_enable_x64``
flag, which is process-wide, so a ``context(precision=64)`` affects every
thread while it is open. Until a precision is set, it is
:data:`INITIAL_PRECISION`: JAX's x64 setting when brainx was imported (64 if
float64 was enabled before, else 32); importing brainx leaves JAX's flag as
it is. Times are
brainunit quantities (``0.1 * u.ms``) or plain numbers, whatever the model's
time constants are.

The platform (``"cpu"``, ``"gpu"``, ``"tpu"``) and the number of host (CPU)
devices are JAX settings that only take effect before JAX starts its
backends (before the first array is made). :func:`set_platform` and
:func:`set_host_device_count` change them, and refuse with an error once the
backends are running; importing brainx starts no backend. They are
process-wide and cannot be set in a :func:`context`.

Every function takes an ``env=`` keyword to work on an
:class:`EnvironmentState` of its own instead of the global one (settings,
behaviours and contexts kept apart, as in brainstate).

Settings are read when a function is *traced*. Most are baked into the trace
like any Python value it closes over, and ``transform.jit`` traces again when
one it read has changed (a new ``dt``, ``fit``, ``precision``). The per-step
settings (``t``, ``i`` and array values: see :func:`set_per_step`) are inputs
of the compiled program instead: a step called under a new
``context(t=...)`` each time compiles once and sees every ``t``, and a step
called inside a loop body's ``context(t=...)`` reads the body's ``t``. A
Python float ``t`` is float64 with x64 on; without, it is float32, and the
step index ``i`` keeps every step (:mod:`brainx.environ.time_precision`).

Examples
--------
>>> import brainunit as u
>>> from brainx import environ
>>> environ.set(dt=0.1 * u.ms)
>>> environ.get_dt()
Quantity(0.1, "ms")
>>> with environ.context(dt=0.05 * u.ms):
...     environ.get_dt()
Quantity(0.05, "ms")
>>> environ.get_dt()
Quantity(0.1, "ms")
"""

from .dtypes import _get_complex, _get_float, _get_int, _get_uint  # noqa: F401 (brainstate's)
from .env_state import INITIAL_PRECISION, EnvironmentState
from .keys import (DEFAULT_PRECISION, DT, FIT, HOST_DEVICE_COUNT, JIT_ERROR_CHECK, PLATFORM,
                   PRECISION, SUPPORTED_PLATFORMS, SUPPORTED_PRECISIONS, I, PlatformType,
                   PrecisionType, T)  # noqa: F401
from .platform import get_host_device_count, get_platform, set_host_device_count, set_platform
from .precision import (dctype, dftype, ditype, dutype, get_precision, set_precision,
                        tolerance)
from .settings import (all, context, get, get_dt, list_registered_behaviors, pop,
                       register_default_behavior, reset, set, unregister_default_behavior)
from .step_values import get_per_step, set_per_step
from .time_precision import StepTimePrecisionWarning

__all__ = [
    # settings
    "set", "get", "all", "pop", "context", "reset", "get_dt", "EnvironmentState",
    # per-step settings: inputs of compiled functions
    "set_per_step", "get_per_step", "StepTimePrecisionWarning",
    # platform and devices
    "set_platform", "get_platform", "set_host_device_count", "get_host_device_count",
    # precision and default dtypes
    "set_precision", "get_precision", "dftype", "ditype", "dutype", "dctype", "tolerance",
    # behaviours
    "register_default_behavior", "unregister_default_behavior", "list_registered_behaviors",
    # keys and constants
    "I", "T", "DT", "PRECISION", "PLATFORM", "HOST_DEVICE_COUNT", "JIT_ERROR_CHECK", "FIT",
    "DEFAULT_PRECISION", "INITIAL_PRECISION", "SUPPORTED_PLATFORMS", "SUPPORTED_PRECISIONS",
]

_INITIAL_PRECISION = INITIAL_PRECISION  # brainstate 0.6's name
