"""The event-driven kernels: where they come from and which backend runs them.

The event-driven layers (:class:`~brainx.nn.EventFixedProb`,
:class:`~brainx.nn.EventLinear`, :class:`~brainx.nn.FixedNumConn`,
:class:`~brainx.nn.SparseLinear`) hand their products to **brainevent**, an
optional dependency (``pip install 'brainx-jax[event]'``). It is imported the
first time a layer is built, never when ``brainx`` is imported.

brainevent has one kernel per *backend* for each operation. On CPU there are
two:

==========  =====================================================  ==================================
backend     what runs                                              needs
==========  =====================================================  ==================================
``numba``   compiled loops over the active rows only (events)     ``numba`` (``brainx-jax[numba]``)
``jax_raw`` gather / ``segment_sum`` over all stored synapses     nothing more
==========  =====================================================  ==================================

:func:`set_event_backend` chooses the backend of every brainevent kernel on a
platform: the event product, the float product and the gradient kernels. A
layer's own ``backend=`` argument overrides it for that layer's event
(spike) product only; it is part of the compiled function's key, so two
layers with different backends can run side by side. When numba is not
installed and no backend was chosen, brainx chooses ``jax_raw`` for the CPU
on the first import (brainevent's own default, numba, would fail there).

An input entry is an *event* when it is ``True`` or ``> 0``. Float inputs
pass through :func:`as_events` first, so every backend sees exact 0/1 values
(brainevent 0.2.1's ``jax_raw`` dense kernel would otherwise multiply by the
float value while its numba kernel counts events) and the gradient with
respect to the input stays that of ``x @ W``.

Examples
--------
>>> from brainx.nn.connectivity import event_backend
>>> event_backend.get_event_backend() in ("numba", "jax_raw")
True
>>> with event_backend.use_event_backend("jax_raw"):
...     event_backend.get_event_backend()
'jax_raw'
"""

from __future__ import annotations

import contextlib
import importlib.util
from typing import Iterator, Optional

import jax
import jax.numpy as jnp

__all__ = ["load_brainevent", "set_event_backend", "get_event_backend", "use_event_backend",
           "has_numba", "as_events", "CPU_BACKENDS"]

CPU_BACKENDS = ("numba", "jax_raw")

_MODULE = None


def has_numba() -> bool:
    """Whether numba can be imported (brainevent's fast CPU kernels need it)."""
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):  # a None entry in sys.modules
        return False


def load_brainevent(what: str = "This layer"):
    """The ``brainevent`` module, imported on first use.

    Parameters
    ----------
    what : str
        Who needs it, for the error message.

    Returns
    -------
    module
        ``brainevent``.

    Raises
    ------
    ImportError
        brainevent is not installed; the message names the extra to install.
    """
    global _MODULE
    if _MODULE is None:
        try:
            import brainevent as module
        except ImportError as e:
            raise ImportError(
                f"{what} needs the optional package 'brainevent' for its event-driven "
                f"kernels, which is not installed ({e}). Install it with "
                f"pip install 'brainx-jax[event]' (add 'brainx-jax[numba]' for the fast CPU kernels)."
            ) from e
        if not has_numba() and module.config.get_backend("cpu") is None:
            module.config.set_backend("cpu", "jax_raw")
        _MODULE = module
    return _MODULE


def set_event_backend(backend: Optional[str], platform: str = "cpu") -> None:
    """Choose the backend of every brainevent kernel on ``platform``.

    Call it at set-up, before the first compiled step: it clears JAX's
    compilation caches when the choice changes, so functions compiled under the
    old backend compile again on their next call.

    Parameters
    ----------
    backend : str or None
        ``"numba"`` or ``"jax_raw"`` on CPU (see the module's table); on GPU,
        any backend brainevent has there. ``None``: brainevent's default
        (on CPU without numba: ``"jax_raw"``).
    platform : str
        ``"cpu"``, ``"gpu"`` or ``"tpu"``.

    Raises
    ------
    ValueError
        ``backend`` is not one of the CPU backends (on CPU).
    ImportError
        ``"numba"`` was asked for and numba is not installed.
    """
    be = load_brainevent("set_event_backend")
    if platform == "cpu" and backend is not None:
        if backend not in CPU_BACKENDS:
            raise ValueError(f"set_event_backend: unknown CPU backend {backend!r}; "
                             f"choose one of {CPU_BACKENDS} (or None for brainevent's default).")
        if backend == "numba" and not has_numba():
            raise ImportError("set_event_backend('numba') needs numba, which is not installed: "
                              "pip install 'brainx-jax[numba]', or use 'jax_raw'.")
    if platform == "cpu" and backend is None and not has_numba():
        backend = "jax_raw"      # brainevent's default would be numba
    be.config.set_backend(platform, backend)


def get_event_backend(platform: str = "cpu") -> Optional[str]:
    """The backend of brainevent's kernels on ``platform`` (``None``: each kernel's default)."""
    be = load_brainevent("get_event_backend")
    chosen = be.config.get_backend(platform)
    if chosen is None and platform == "cpu":
        return "numba"   # brainevent's CPU default for every event kernel
    return chosen


@contextlib.contextmanager
def use_event_backend(backend: Optional[str], platform: str = "cpu") -> Iterator[None]:
    """:func:`set_event_backend` for a ``with`` block, then the previous choice again.

    Like :func:`set_event_backend`, a set-up switch: what is compiled inside the
    block is compiled again after it.
    """
    be = load_brainevent("use_event_backend")
    previous = be.config.get_backend(platform)
    set_event_backend(backend, platform)
    try:
        yield
    finally:
        be.config.set_backend(platform, previous)


def as_events(x):
    """``x`` as events for the kernels: a bool array as is, a float one as exact 0/1 floats.

    The float result is ``1.0`` where ``x > 0`` and ``0.0`` elsewhere, with the
    gradient of the identity (a straight-through estimate), so
    ``grad(f(as_events(x) @ W))`` is ``grad(f(x @ W))`` at spike-valued ``x``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.nn.connectivity.event_backend import as_events
    >>> as_events(jnp.array([2.5, 0.0, -1.0])).tolist()
    [1.0, 0.0, 0.0]
    >>> jax.grad(lambda x: (as_events(x) * jnp.array([1., 2., 3.])).sum())(jnp.ones(3)).tolist()
    [1.0, 2.0, 3.0]
    """
    x = jnp.asarray(x)
    if x.dtype == jnp.bool_ or not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    return _events(x)


@jax.custom_jvp
def _events(x):
    """``x > 0`` as floats, with the tangent of the identity (one comparison forward)."""
    return (x > 0).astype(x.dtype)


@_events.defjvp
def _events_jvp(primals, tangents):
    (x,), (tx,) = primals, tangents
    return _events(x), tx
