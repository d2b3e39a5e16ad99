"""Precision values and the dtypes they stand for (pure functions, no settings read)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .keys import SUPPORTED_PRECISIONS, PrecisionType

_FLOATS = {64: np.float64, 32: np.float32, 16: np.float16, "bf16": jnp.bfloat16,
           8: jnp.float8_e5m2}
_INTS = {64: np.int64, 32: np.int32, 16: np.int16, 8: np.int8}
_UINTS = {64: np.uint64, 32: np.uint32, 16: np.uint16, 8: np.uint8}


def normalize_precision(value: Any) -> PrecisionType:
    """``value`` as one of ``SUPPORTED_PRECISIONS`` (``"32"`` becomes 32), or ``ValueError``."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or value not in SUPPORTED_PRECISIONS:
        raise ValueError(f"precision must be one of {SUPPORTED_PRECISIONS}, got {value!r}.")
    return value


def bits(precision: PrecisionType) -> int:
    """The width in bits (``"bf16"`` is 16)."""
    precision = normalize_precision(precision)
    return 16 if precision == "bf16" else precision


def _get_float(precision: PrecisionType):
    """The float dtype of ``precision`` (``"bf16"``: bfloat16, 8: float8_e5m2)."""
    return _FLOATS[normalize_precision(precision)]


def _get_int(precision: PrecisionType):
    """The signed integer dtype of ``precision`` (``"bf16"``: int16)."""
    return _INTS[bits(precision)]


def _get_uint(precision: PrecisionType):
    """The unsigned integer dtype of ``precision`` (``"bf16"``: uint16)."""
    return _UINTS[bits(precision)]


def _get_complex(precision: PrecisionType):
    """The complex dtype of ``precision``: complex128 at 64 bits, complex64 below."""
    return np.complex128 if bits(precision) == 64 else np.complex64


def _tolerance(precision: PrecisionType) -> np.ndarray:
    width = bits(precision)
    if width == 64:
        return np.asarray(1e-12, dtype=np.float64)
    if width == 32:
        return np.asarray(1e-5, dtype=np.float32)
    return np.asarray(1e-2, dtype=np.float16)


def apply_to_jax(precision: PrecisionType) -> None:
    """Switch JAX's process-wide ``jax_enable_x64`` flag for ``precision``."""
    jax.config.update("jax_enable_x64", precision == 64)
