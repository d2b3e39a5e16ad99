"""What one conversion call threads through the layers, and the framework imports.

:class:`Context` carries the running input shape while a foreign model is
walked into brainx (brainx's convolutions and batch norms are built for a
given ``in_size``) and the RNG handles a framework's constructors want.
:func:`require` imports flax or equinox when a conversion asks for it, and
turns a missing package into :class:`MissingDependencyError`.
"""

from __future__ import annotations

import importlib
from typing import Any, Optional, Tuple

import brainunit as u
import jax.numpy as jnp

from brainx.interop.errors import ConversionError, MissingDependencyError, MissingShapeError

__all__ = ["Context", "require", "as_shape", "plain_array"]


def require(module: str, framework: str) -> Any:
    """Import ``module`` (``"flax.nnx"``, ``"equinox"``...) or raise :class:`MissingDependencyError`."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(module.split(".")[0], framework) from e


def as_shape(sample_input: Any) -> Optional[Tuple[int, ...]]:
    """The unbatched shape given by ``sample_input``: an example array, a shape, or ``None``."""
    if sample_input is None:
        return None
    if hasattr(sample_input, "shape"):
        return tuple(int(n) for n in sample_input.shape)
    if isinstance(sample_input, int):
        return (sample_input,)
    try:
        shape = tuple(int(n) for n in sample_input)
    except TypeError:
        raise TypeError(f"sample_input must be one unbatched example (an array) or its shape "
                        f"(a tuple of ints), got {sample_input!r}.") from None
    return shape


def plain_array(value: Any, what: str) -> jnp.ndarray:
    """``value`` as a JAX array; a quantity with a physical unit cannot go to flax/equinox."""
    if isinstance(value, u.Quantity):
        if not value.unit.is_unitless:
            raise ConversionError(
                f"The {what} carries the unit {value.unit}; flax and equinox layers hold plain "
                f"arrays. Build the brainx model without units (or replace the parameter by its "
                f"mantissa, `u.get_mantissa(value)`) before converting.")
        value = value.mantissa
    return jnp.asarray(value)


class Context:
    """The state of one conversion call.

    Parameters
    ----------
    framework : str
        ``"nnx"``, ``"linen"`` or ``"equinox"``.
    sample_input : tuple of int, optional
        The unbatched input shape given by the user.
    rngs : flax.nnx.Rngs, optional
        Passed to nnx constructors (their random weights are overwritten).
    key : jax.Array, optional
        Passed to equinox constructors (their random weights are overwritten).

    Attributes
    ----------
    cur_size : tuple of int or None
        The unbatched shape flowing into the layer being converted to brainx
        (``None``: unknown). A mapping that knows the shape its layer outputs
        sets it with :meth:`advance`; otherwise the built layer's ``out_size``
        is used.
    """

    def __init__(self, framework: str, sample_input: Optional[Tuple[int, ...]] = None,
                 rngs: Any = None, key: Any = None):
        self.framework = framework
        self.sample_input = sample_input
        self.cur_size = sample_input
        self.rngs, self.key = rngs, key
        self.advanced = False
        self.layout: Optional[str] = None   # "first"/"last": the brainx layout of a wrapped layer

    def require_size(self, layer_name: str) -> Tuple[int, ...]:
        """The current unbatched input shape; raises :class:`MissingShapeError` when unknown."""
        if self.cur_size is None:
            raise MissingShapeError(
                f"Converting `{layer_name}` ({self.framework}) to brainx needs the shape of its "
                f"input, which the {self.framework} layer does not record. Pass "
                f"`sample_input=` to the conversion: one unbatched example of the model's input, "
                f"or its shape (e.g. `sample_input=(32, 32, 3)` for 32x32 RGB images).")
        return self.cur_size

    def advance(self, size: Optional[Tuple[int, ...]]) -> None:
        """Set the shape the converted layer outputs (``None``: unknown from here on)."""
        self.cur_size = None if size is None else tuple(int(n) for n in size)
        self.advanced = True
