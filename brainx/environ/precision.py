"""The float precision and the default dtypes that follow it."""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import dtypes
from .env_state import EnvironmentState
from .keys import PRECISION, PrecisionType
from .settings import get, set

__all__ = ["set_precision", "get_precision", "dftype", "ditype", "dutype", "dctype", "tolerance"]


def set_precision(precision: PrecisionType, *, env: Optional[EnvironmentState] = None) -> None:
    """Set the precision (8, 16, 32, 64 or ``"bf16"``), as ``set(precision=...)``."""
    set(precision=precision, env=env)


def get_precision(*, env: Optional[EnvironmentState] = None) -> int:
    """The float precision in bits (``"bf16"`` reports 16).

    Unset, it is :data:`~brainx.environ.INITIAL_PRECISION`: 64 when JAX's x64 mode was on
    when brainx was imported, else 32.
    """
    return dtypes.bits(get(PRECISION, env=env))


def dftype(*, env: Optional[EnvironmentState] = None):
    """The default float dtype for the current precision (``float32`` unless x64 is on).

    Examples
    --------
    >>> import numpy as np
    >>> from brainx import environ
    >>> with environ.context(precision=16):
    ...     environ.dftype() is np.float16, environ.ditype() is np.int16
    (True, True)
    """
    return dtypes._get_float(get(PRECISION, env=env))


def ditype(*, env: Optional[EnvironmentState] = None):
    """The default integer dtype for the current precision."""
    return dtypes._get_int(get(PRECISION, env=env))


def dutype(*, env: Optional[EnvironmentState] = None):
    """The default unsigned integer dtype for the current precision."""
    return dtypes._get_uint(get(PRECISION, env=env))


def dctype(*, env: Optional[EnvironmentState] = None):
    """The default complex dtype for the current precision (complex128 only at 64 bits)."""
    return dtypes._get_complex(get(PRECISION, env=env))


def tolerance(*, env: Optional[EnvironmentState] = None) -> np.ndarray:
    """A comparison tolerance for the current precision, as a NumPy scalar of its float type.

    ``1e-12`` (float64) at 64 bits, ``1e-5`` (float32) at 32 bits, ``1e-2``
    (float16) below.
    """
    return dtypes._tolerance(get(PRECISION, env=env))
