"""Convert models between ``brainx.nn`` and flax.nnx, flax.linen and equinox.

:func:`to_nnx`, :func:`to_linen` and :func:`to_equinox` build a brainx model's
equivalent in another framework; :func:`from_nnx`, :func:`from_linen` and
:func:`from_equinox` go the other way. The converted model has the same layers
and weights (batch-norm running statistics included) and computes the same
function. Single layers and ``Sequential`` stacks of them convert; a layer or a
container that cannot raises an :class:`InteropError` saying why and what to do.
:func:`register_layer_mapping` adds a conversion for a layer of your own.

flax and equinox are optional: they are imported on the first conversion
(``pip install 'brainx-jax[interop]'``), not by ``import brainx``.

Examples
--------
>>> import jax.numpy as jnp, brainx
>>> from flax import nnx
>>> from brainx import interop
>>> model = brainx.nn.Sequential(brainx.nn.Linear(4, 8), brainx.nn.LayerNorm(8))
>>> back = interop.from_nnx(interop.to_nnx(model, rngs=nnx.Rngs(0)))
>>> x = jnp.ones((2, 4))
>>> bool(jnp.allclose(back(x), model(x)))
True
"""

from brainx.interop.api import from_equinox, from_linen, from_nnx, to_equinox, to_linen, to_nnx
from brainx.interop.errors import (
    ConversionError, InteropError, MissingDependencyError, MissingShapeError, UnmappedLayerError,
    UnsupportedLayerError, UnsupportedStructureError,
)
from brainx.interop.registry import LayerMapping, register_layer_mapping, supported_layers

__all__ = [
    "from_nnx", "to_nnx", "from_linen", "to_linen", "from_equinox", "to_equinox",
    "register_layer_mapping", "supported_layers", "LayerMapping",
    "InteropError", "MissingDependencyError", "UnmappedLayerError", "UnsupportedLayerError",
    "UnsupportedStructureError", "MissingShapeError", "ConversionError",
]
