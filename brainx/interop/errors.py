"""The errors of :mod:`brainx.interop`; each message says what to do next.

All derive from :class:`InteropError` (itself a :class:`brainx.errors.BrainxError`),
so ``except brainx.interop.InteropError`` catches every conversion failure.
"""

from __future__ import annotations

from brainx.errors import BrainxError

__all__ = ["InteropError", "MissingDependencyError", "UnmappedLayerError",
           "UnsupportedLayerError", "UnsupportedStructureError", "MissingShapeError",
           "ConversionError"]


class InteropError(BrainxError):
    """Base class of the errors raised while converting a model."""


class MissingDependencyError(InteropError, ImportError):
    """The framework to convert to or from (``flax``, ``equinox``) is not installed.

    Parameters
    ----------
    package : str
        The package that failed to import.
    framework : str
        The framework asked for (``"nnx"``, ``"linen"`` or ``"equinox"``).
    """

    def __init__(self, package: str, framework: str):
        self.package, self.framework = package, framework
        super().__init__(
            f"Converting to or from {framework} needs the package {package!r}, which is not "
            f"installed. Install it with `pip install {package}` or with brainx's extra: "
            f"`pip install 'brainx-jax[interop]'`.")


class UnmappedLayerError(InteropError, TypeError):
    """No conversion is registered for a leaf layer's type.

    Parameters
    ----------
    layer_type : type
        The type that has no mapping.
    framework : str
        The framework converted to or from.
    """

    def __init__(self, layer_type: type, framework: str):
        self.layer_type, self.framework = layer_type, framework
        name = f"{layer_type.__module__}.{layer_type.__qualname__}"
        super().__init__(
            f"No {framework} conversion is registered for the layer type `{name}`. Register one "
            f"with `brainx.interop.register_layer_mapping(LayerMapping(...))`, or take the layer "
            f"out of the model and convert the rest. `brainx.interop.supported_layers()` lists "
            f"the layers that convert.")


class UnsupportedLayerError(InteropError, TypeError):
    """A known layer, or a setting of it, that cannot convert without changing what it computes.

    The message names the layer, the reason and the way out.
    """


class UnsupportedStructureError(InteropError, TypeError):
    """A container whose forward pass cannot be rebuilt.

    Only single layers and ``Sequential`` stacks of convertible layers (and plain
    functions between them) convert; a module with its own ``__call__`` /
    ``update`` (skip connections, branches, attention) does not.
    """


class MissingShapeError(InteropError, ValueError):
    """Building a brainx layer needs the input shape, and no ``sample_input`` gave it.

    brainx's convolutions and batch norms are built for a given ``in_size`` (one
    sample's shape, with its spatial axes); flax and equinox layers do not record
    it. Pass ``sample_input=`` (one unbatched example, or its shape).
    """


class ConversionError(InteropError, ValueError):
    """The weights of a layer cannot be carried over (a shape, a unit or a setting mismatch)."""
