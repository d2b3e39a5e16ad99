"""The event-driven kernels: where they come from and which backend runs them.

The event-driven layers (:class:`~brainx.nn.EventFixedProb`,
:class:`~brainx.nn.EventLinear`, :class:`~brainx.nn.FixedNumConn`,
:class:`~brainx.nn.SparseLinear`) hand their products to **brainevent**, an
optional dependency (``pip install 'brainx-jax[event]'``). It is imported the
first time a layer is built, never when ``brainx`` is imported.

On CPU there are three kernels (*backends*) to choose from:

==========  =====================================================  ==================================
backend     what runs                                              needs
==========  =====================================================  ==================================
``native``  brainx's C++ kernel, an XLA FFI custom call: the       a C++ compiler, once (the library
            active rows only, no Python on the step                is cached); not brainevent
``numba``   brainevent's compiled loops over the active rows,      ``numba`` (``brainx-jax[numba]``)
            called back from XLA through Python
``jax_raw`` brainevent's gather / ``segment_sum`` over all         nothing more
            stored synapses
==========  =====================================================  ==================================

``native`` is the default on CPU for :class:`~brainx.nn.EventFixedProb`,
:class:`~brainx.nn.FixedNumConn`, :class:`~brainx.nn.EventFixedProbGroup`,
:class:`~brainx.nn.EventLinear` and :class:`~brainx.nn.SparseLinear` over a
brainunit matrix
(:mod:`brainx.nn.connectivity.native` builds it on first use; where it cannot,
one warning says why and brainevent's kernels run). The other layers, and every
layer on GPU, use brainevent.

:func:`set_event_backend` chooses the backend on a platform; for ``numba`` and
``jax_raw`` it is also brainevent's choice for every kernel (the event product,
the float product and the gradient kernels). A layer's own ``backend=``
argument overrides it for that layer. A layer reads the choice when it is
built: set it at set-up, before building the network. When numba is not
installed, brainevent's kernels default to ``jax_raw`` on CPU (brainevent's own
default, numba, would fail there).

An input entry is an *event* when it is ``True`` or ``> 0``. Float inputs
pass through :func:`as_events` first, so every backend sees exact 0/1 values
(brainevent 0.2.1's ``jax_raw`` dense kernel would otherwise multiply by the
float value while its numba kernel counts events) and the gradient with
respect to the input stays that of ``x @ W``.

Examples
--------
>>> from brainx.nn.connectivity import event_backend
>>> event_backend.get_event_backend() in ("native", "numba", "jax_raw")
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

from brainx.nn.connectivity.native import build as native_build

__all__ = ["load_brainevent", "set_event_backend", "get_event_backend", "use_event_backend",
           "has_numba", "has_native", "native_by_default", "layer_kernel", "as_events", "CPU_BACKENDS"]

CPU_BACKENDS = ("native", "numba", "jax_raw")

_MODULE = None
_CHOSEN: dict = {}     # platform -> the backend set_event_backend chose (absent: the default)


def has_numba() -> bool:
    """Whether numba can be imported (brainevent's fast CPU kernels need it)."""
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):  # a None entry in sys.modules
        return False


def has_native() -> bool:
    """Whether the native kernels run here: on a CPU default device, once built and loaded.

    The first call builds them (a few seconds) unless a cached build is found.
    """
    return jax.default_backend() == "cpu" and native_build.load() is not None


def _brainevent_installed() -> bool:
    try:
        return _MODULE is not None or importlib.util.find_spec("brainevent") is not None
    except (ImportError, ValueError):
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
    """Choose the backend of the event-driven layers built from now on, on ``platform``.

    Call it at set-up, before building the network: a layer reads the choice
    when it is built. ``"numba"`` and ``"jax_raw"`` are also set as brainevent's
    backend for every kernel (which it reads when a step is compiled).

    Parameters
    ----------
    backend : str or None
        ``"native"``, ``"numba"`` or ``"jax_raw"`` on CPU (see the module's
        table); on GPU, any backend brainevent has there. ``None``: the default
        (on CPU ``"native"`` where it can be built, else brainevent's default,
        which is ``"jax_raw"`` without numba).
    platform : str
        ``"cpu"``, ``"gpu"`` or ``"tpu"``.

    Raises
    ------
    ValueError
        ``backend`` is not one of the CPU backends (on CPU).
    ImportError
        ``"numba"`` was asked for and numba is not installed.
    RuntimeError
        ``"native"`` was asked for and the native kernels cannot be built or
        loaded here (the message says why).
    """
    if backend == "native" and platform != "cpu":
        raise ValueError(f"set_event_backend: the native kernels run on the CPU only, not on "
                         f"{platform!r}; use one of brainevent's backends there.")
    if platform == "cpu" and backend is not None:
        if backend not in CPU_BACKENDS:
            raise ValueError(f"set_event_backend: unknown CPU backend {backend!r}; "
                             f"choose one of {CPU_BACKENDS} (or None for the default).")
        if backend == "numba" and not has_numba():
            raise ImportError("set_event_backend('numba') needs numba, which is not installed: "
                              "pip install 'brainx-jax[numba]', or use 'native' or 'jax_raw'.")
        if backend == "native" and not has_native():
            raise RuntimeError("set_event_backend('native'): the native kernels cannot run here ("
                               f"{native_build.unavailable_reason() or 'the default device is not a CPU'}"
                               "); use 'jax_raw' or 'numba'.")
    if backend == "native" or (backend is None and platform == "cpu" and has_native()
                                and not _brainevent_installed()):
        _CHOSEN[platform] = backend
        return
    be = load_brainevent("set_event_backend")
    if platform == "cpu" and backend is None and not has_numba():
        be.config.set_backend(platform, "jax_raw")      # brainevent's default would be numba
    else:
        be.config.set_backend(platform, backend)
    _CHOSEN[platform] = backend


def get_event_backend(platform: str = "cpu") -> Optional[str]:
    """The backend a layer built now on ``platform`` uses (``None``: each brainevent kernel's default).

    On CPU, ``"native"`` unless another backend was chosen or the native kernels
    cannot be built here.
    """
    if platform == "cpu" and native_by_default():
        return "native"
    be = load_brainevent("get_event_backend")
    chosen = be.config.get_backend(platform)
    if chosen is None and platform == "cpu":
        return "numba"   # brainevent's CPU default for every event kernel
    return chosen


@contextlib.contextmanager
def use_event_backend(backend: Optional[str], platform: str = "cpu") -> Iterator[None]:
    """:func:`set_event_backend` for a ``with`` block, then the previous choice again.

    Like :func:`set_event_backend`, a set-up switch: build the layers inside the block.
    """
    previous = _CHOSEN.get(platform)
    be = _MODULE if _MODULE is not None or backend == "native" else load_brainevent(
        "use_event_backend")
    previous_be = be.config.get_backend(platform) if be is not None else None
    set_event_backend(backend, platform)
    try:
        yield
    finally:
        if previous is None:
            _CHOSEN.pop(platform, None)
        else:
            _CHOSEN[platform] = previous
        if be is not None:
            be.config.set_backend(platform, previous_be)


def native_by_default() -> bool:
    """Whether a layer built now without a ``backend=`` gets the native kernel."""
    return _CHOSEN.get("cpu") in (None, "native") and has_native()   # (has_native: a CPU)


def layer_kernel(requested: Optional[str], what: str) -> Optional[str]:
    """The backend a layer built with ``backend=requested`` uses: ``"native"`` or brainevent's.

    ``requested="native"`` where the native kernels cannot run falls back to
    brainevent's choice: after the build's one warning, or silently with
    ``BRAINX_NATIVE=0`` or off the CPU. Any other name is
    brainevent's, checked as :func:`set_event_backend` checks it.
    """
    if requested is None:
        if native_by_default():
            return "native"
        load_brainevent(what)
        return None                       # brainevent's choice when the step is compiled
    if requested == "native":
        if has_native():
            return "native"
        load_brainevent(what)
        return None
    if jax.default_backend() == "cpu" and requested not in CPU_BACKENDS:
        raise ValueError(f"{what}: unknown CPU backend {requested!r}; choose one of {CPU_BACKENDS}.")
    load_brainevent(what)
    return requested


def as_events(x):
    """``x`` as events for the kernels: a bool array as is, a float one as exact 0/1 floats,
    an integer one as ``x > 0``.

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
    if x.dtype == jnp.bool_:
        return x
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x > 0            # integer spikes: brainevent's kernels would count any nonzero
    return _events(x)


@jax.custom_jvp
def _events(x):
    """``x > 0`` as floats, with the tangent of the identity (one comparison forward)."""
    return (x > 0).astype(x.dtype)


@_events.defjvp
def _events_jvp(primals, tangents):
    (x,), (tx,) = primals, tangents
    return _events(x), tx
