"""The walk that converts a model layer by layer, the same for every framework.

A node converts by its registered mapping when its type has one (even a layer
with sub-layers inside, such as a cell). Otherwise a sequential container is
converted child by child, a plain function is carried over as a function, and
anything else raises: :class:`UnsupportedStructureError` for a container with
its own forward pass, :class:`UnmappedLayerError` for a leaf with no mapping.
The framework modules supply an :class:`Adapter` that knows their containers.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

import jax

from brainx import nn
from brainx.interop.context import Context
from brainx.interop.errors import (UnmappedLayerError, UnsupportedLayerError,
                                   UnsupportedStructureError)
from brainx.interop.functions import (activation_to_function, function_to_layer, is_activation,
                                      wrapped_layout)
from brainx.interop.registry import lookup_export, lookup_import, unsupported_reason
from brainx.nn.modules.module import Module

__all__ = ["Adapter", "to_brainx", "to_foreign"]

_CUSTOM_FORWARD = ("only single layers and Sequential stacks of convertible layers (with plain "
                   "functions between them) convert; a module with its own forward pass (skip "
                   "connections, branches, attention) cannot be rebuilt from its layers. Convert "
                   "its layers one by one and write the forward pass again, or register a "
                   "LayerMapping for the whole module with brainx.interop.register_layer_mapping.")


class Adapter:
    """What the walk needs to know about one framework's containers (subclassed per framework)."""

    name: str = ""

    def node_type(self, node: Any) -> type:
        """The type looked up in the registry."""
        return type(node)

    def children(self, node: Any) -> Optional[List[Any]]:
        """The steps of a sequential container in order, or ``None`` if ``node`` is not one."""
        raise NotImplementedError

    def as_function(self, node: Any) -> Optional[Callable]:
        """The function a parameter-free step applies, or ``None``."""
        raise NotImplementedError

    def has_submodules(self, node: Any) -> bool:
        """Whether ``node`` holds layers (then it is a container with its own forward pass)."""
        raise NotImplementedError

    def function(self, fn: Callable) -> Any:
        """A step of this framework's sequential container that applies ``fn``."""
        raise NotImplementedError

    def sequential(self, children: List[Any]) -> Any:
        """This framework's sequential container of ``children``."""
        raise NotImplementedError

    def leaf(self, converted: Any) -> Any:
        """What a mapping's ``to_foreign`` returned, in the form the walk passes on."""
        return converted


def _function_out_size(fn: Callable, size):
    """The unbatched output shape of ``fn`` for one batched probe, or ``None``."""
    if size is None:
        return None
    try:
        out = jax.eval_shape(fn, jax.ShapeDtypeStruct((1,) + tuple(size), jax.numpy.float32))
        return tuple(out.shape[1:])
    except Exception:  # noqa: BLE001  (any function: the shape is then unknown)
        return None


def to_brainx(node: Any, adapter: Adapter, ctx: Context) -> Any:
    """The brainx module equivalent to the foreign ``node``."""
    cls = adapter.node_type(node)
    mappings = lookup_import(adapter.name, cls)
    if mappings:
        ctx.advanced = False
        layer = mappings[0].to_bst(node, ctx)
        if not ctx.advanced:
            out = getattr(layer, "out_size", None)
            if out is not None:
                ctx.cur_size = tuple(out)
        return layer
    reason = unsupported_reason(adapter.name, cls)
    if reason is not None:
        raise UnsupportedLayerError(reason)
    fn = adapter.as_function(node)
    if fn is not None:
        layer = function_to_layer(fn)
        ctx.cur_size = _function_out_size(layer, ctx.cur_size)
        return layer
    children = adapter.children(node)
    if children is not None:
        if not children:
            raise UnsupportedStructureError(f"The {adapter.name} `{cls.__name__}` is empty; there "
                                            "is nothing to convert.")
        return _sequential_to_brainx(children, adapter, ctx)
    if adapter.has_submodules(node):
        raise UnsupportedStructureError(f"Cannot convert the {adapter.name} module "
                                        f"`{cls.__name__}`: {_CUSTOM_FORWARD}")
    raise UnmappedLayerError(cls, adapter.name)


def _sequential_to_brainx(children: List[Any], adapter: Adapter, ctx: Context) -> Any:
    layers, i, collapsed = [], 0, False
    while i < len(children):
        layout = wrapped_layout(children[i:i + 3], adapter.as_function)
        if layout is not None and adapter.as_function(children[i + 1]) is None:
            ctx.layout = layout     # a layer wrapped in layout changes: brainx has that layout
            try:
                layers.append(to_brainx(children[i + 1], adapter, ctx))
            finally:
                ctx.layout = None
            i, collapsed = i + 3, True
        else:
            layers.append(to_brainx(children[i], adapter, ctx))
            i += 1
    if collapsed and len(children) == 3:
        return layers[0]            # what converting one brainx layer produced
    return nn.Sequential(*layers)


def _has_submodules(layer: Module) -> bool:
    return len(layer.nodes(allowed_hierarchy=(1, 1))) > 0


def to_foreign(layer: Any, adapter: Adapter, ctx: Context) -> Any:
    """The ``adapter`` framework's model equivalent to the brainx ``layer``."""
    cls = type(layer)
    mapping = lookup_export(adapter.name, cls)
    if mapping is not None:
        return adapter.leaf(mapping.to_foreign(layer, ctx))
    reason = unsupported_reason(adapter.name, cls)
    if reason is not None:
        raise UnsupportedLayerError(reason)
    if is_activation(layer):
        return adapter.function(activation_to_function(layer))
    if cls is nn.Sequential:
        if not layer.layers:
            raise UnsupportedStructureError("The Sequential is empty; there is nothing to convert.")
        return adapter.sequential([to_foreign(child, adapter, ctx) for child in layer.layers])
    if not isinstance(layer, Module):
        if callable(layer):
            return adapter.function(layer)
        raise TypeError(f"brainx.interop converts brainx modules, got {layer!r}.")
    if _has_submodules(layer):
        raise UnsupportedStructureError(f"Cannot convert `{cls.__name__}` to {adapter.name}: "
                                        f"{_CUSTOM_FORWARD}")
    raise UnmappedLayerError(cls, adapter.name)


