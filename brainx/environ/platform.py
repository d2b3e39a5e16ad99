"""The platform JAX runs on and its number of host (CPU) devices.

Both are JAX settings that take effect only before JAX starts its backends
(before the first array is made), and they are process-wide: they cannot be
set in a :func:`brainx.environ.context`. Importing brainx starts no backend.
brainstate 0.5.4 sets JAX's flags even after the backends started, where they
do nothing; brainx refuses with an error that says when to call instead.
"""

from __future__ import annotations

import os
import re
from typing import Any

import jax
import numpy as np

from brainx._jax.internals import xla_bridge

from .env_state import GLOBAL_ENV
from .keys import HOST_DEVICE_COUNT, PLATFORM, SUPPORTED_PLATFORMS

__all__ = ["set_platform", "get_platform", "set_host_device_count", "get_host_device_count"]


def _backends_started() -> bool:
    if xla_bridge is None:  # another JAX layout: assume they may have
        return True
    return xla_bridge.backends_are_initialized()


def _call_behavior(key: str, value: Any) -> None:
    behavior = GLOBAL_ENV.functions.get(key)
    if behavior is not None:
        behavior(value)


def set_platform(platform: str) -> None:
    """Run JAX on ``platform`` (``"cpu"``, ``"gpu"`` or ``"tpu"``); call it before any JAX work.

    Sets JAX's ``jax_platforms``. Once JAX has started its backends the
    platform is fixed: asking for another one raises ``RuntimeError`` (asking
    for the current one does nothing).

    Examples
    --------
    >>> from brainx import environ
    >>> environ.set_platform(environ.get_platform())   # the current one: a no-op
    """
    if platform not in SUPPORTED_PLATFORMS:
        raise ValueError(f"platform must be one of {SUPPORTED_PLATFORMS}, got {platform!r}.")
    if _backends_started():
        current = jax.default_backend()
        if current != platform:
            raise RuntimeError(
                f"Cannot switch the platform to {platform!r}: JAX has already started its "
                f"backends on {current!r} (an array was created or a function ran). Call "
                "brainx.environ.set_platform() at the start of the program, before any JAX "
                "work, or set the JAX_PLATFORMS environment variable.")
    else:
        jax.config.update("jax_platforms", platform)
    _call_behavior(PLATFORM, platform)


def get_platform() -> str:
    """The platform JAX runs on: ``"cpu"``, ``"gpu"`` or ``"tpu"``.

    Before JAX has started its backends, a platform chosen with
    :func:`set_platform` is reported without starting them; otherwise this
    asks JAX, which starts its default backend.
    """
    if not _backends_started():
        chosen = (jax.config.jax_platforms or "").split(",")[0].strip()
        if chosen in SUPPORTED_PLATFORMS:
            return chosen
        if chosen in ("cuda", "rocm"):
            return "gpu"
    return jax.default_backend()


def set_host_device_count(n: int) -> None:
    """Make JAX show ``n`` CPU devices (to try ``pmap``/sharding on one machine).

    Must run before JAX starts its backends (before the first array is made):
    afterwards it raises ``RuntimeError``, unless ``n`` is already the count.
    Sets JAX's ``jax_num_cpu_devices`` and, as brainstate does, the
    ``--xla_force_host_platform_device_count`` flag in ``XLA_FLAGS`` (seen by
    child processes too).

    Examples
    --------
    >>> from brainx import environ
    >>> environ.set_host_device_count(environ.get_host_device_count())   # unchanged: a no-op
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"host device count must be a positive integer, got {n!r}.")
    n = int(n)
    if _backends_started():
        current = get_host_device_count()
        if current != n:
            raise RuntimeError(
                f"Cannot set the host device count to {n}: JAX has already started its "
                f"backends with {current} CPU device(s) (an array was created or a function "
                "ran). Call brainx.environ.set_host_device_count() right after importing, "
                "before any JAX work.")
    else:
        flags = re.sub(r"--xla_force_host_platform_device_count=\S+", "",
                       os.environ.get("XLA_FLAGS", "")).split()
        os.environ["XLA_FLAGS"] = " ".join(
            [f"--xla_force_host_platform_device_count={n}"] + flags)
        jax.config.update("jax_num_cpu_devices", n)
    _call_behavior(HOST_DEVICE_COUNT, n)


def get_host_device_count() -> int:
    """The number of CPU devices JAX shows (or will show); does not start a backend."""
    if _backends_started():  # XLA_FLAGS set since then (an imported script's) changes nothing
        try:
            return len(jax.devices("cpu"))
        except RuntimeError:  # no CPU backend
            pass
    configured = jax.config.jax_num_cpu_devices
    if configured and configured > 0:
        return int(configured)
    match = re.search(r"--xla_force_host_platform_device_count=(\d+)",
                      os.environ.get("XLA_FLAGS", ""))
    return int(match.group(1)) if match else 1
