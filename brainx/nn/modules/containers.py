"""`Sequential`: layers chained output-to-input, and `ElementWiseBlock`, the shape-keeping layer.

A :class:`Sequential` holds its layers in a list (so their states are found
under ``"layers.0.weight"``, ``"layers.2.weight"``...) and calls them in turn.
It also passes sizes along: each layer's ``out_size`` is the next layer's
``in_size``, which lets you write ``Linear.desc(out_size=10)`` (a
:class:`~brainx.mixin.ParamDescriber`) instead of repeating the input size.
Element-wise layers (:class:`ElementWiseBlock`, and plain functions such as
``jax.nn.relu``) keep the size they receive.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Sequence, Tuple, Union

from brainx.mixin import ParamDescriber
from brainx.nn.modules.module import Module

__all__ = ["ElementWiseBlock", "Sequential"]


class ElementWiseBlock(Module):
    """Base class of layers applied element by element: the output has the input's size.

    :class:`Sequential` passes the size it receives through such a layer.
    Activations (:class:`~brainx.nn.ReLU`...) and dropout derive from it.
    """


class Sequential(Module):
    """Layers called one after the other, each on the output of the previous one.

    Parameters
    ----------
    first : Module
        The first layer; it must be a built :class:`Module` (it fixes ``in_size``).
    *layers : Module, ParamDescriber or callable
        The following layers. A :class:`~brainx.mixin.ParamDescriber` is built
        with ``in_size=`` the previous layer's ``out_size``; a plain callable
        (``jax.nn.relu``) or an :class:`ElementWiseBlock` keeps the size.

    Notes
    -----
    ``seq[i]`` is a layer, ``seq[i:j]`` and ``seq[[i, j]]`` a new
    ``Sequential`` sharing those layers (and their states). ``append``,
    ``extend`` and ``insert`` add layers and keep the sizes up to date.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> from brainx import nn
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear.desc(out_size=2), jax.nn.tanh)
    >>> net.in_size, net.out_size
    ((4,), (2,))
    >>> net(jnp.ones((5, 4))).shape
    (5, 2)
    >>> list(net.states())
    ['layers.0.weight', 'layers.2.weight']
    >>> net[2].in_size, len(net[:2].layers)
    ((8,), 2)
    """

    def __init__(self, first: Module, *layers: Union[Module, ParamDescriber, Callable],
                 name: Optional[str] = None):
        super().__init__(name=name)
        if not isinstance(first, Module):
            raise TypeError(f"Sequential: the first layer must be a built Module (it fixes the "
                            f"input size), got {first!r}. Wrap a function in a Module, or put a "
                            "layer with an in_size first.")
        self.layers: list = [first]
        size = first.out_size
        for layer in layers:
            layer, size = self._format(layer, size)
            self.layers.append(layer)
        if first.in_size is not None:
            self.in_size = first.in_size
        if size is not None:
            self.out_size = size

    def update(self, x: Any) -> Any:
        """``x`` through every layer in order; returns the last layer's output."""
        for i, layer in enumerate(self.layers):
            try:
                x = layer(x)
            except Exception as e:
                if hasattr(e, "add_note") and not getattr(e, "_brainx_seq_noted", False):
                    e.add_note(f"(raised by layer {i} of Sequential: {layer!r})")
                    e._brainx_seq_noted = True
                raise
        return x

    # -- indexing ------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self):
        return iter(self.layers)

    def __getitem__(self, key: Union[int, slice, Sequence[int]]):
        if isinstance(key, int):
            return self.layers[key]
        if isinstance(key, slice):
            return self._from_layers(self.layers[key])
        if isinstance(key, (tuple, list)):
            return self._from_layers([self.layers[k] for k in key])
        raise KeyError(f"Sequential: index with an int, a slice or a list of ints, got {key!r}.")

    @classmethod
    def _from_layers(cls, layers: Sequence[Any]) -> "Sequential":
        if not layers:
            seq = cls.__new__(cls)
            Module.__init__(seq)
            seq.layers = []
            return seq
        return cls(*layers)

    # -- growing ---------------------------------------------------------------------
    def append(self, layer: Union[Module, ParamDescriber, Callable]) -> None:
        """Add ``layer`` at the end (built with ``in_size`` = the current ``out_size`` if a describer)."""
        self.extend([layer])

    def extend(self, layers: Iterable[Union[Module, ParamDescriber, Callable]]) -> None:
        """Add each of ``layers`` at the end, in order."""
        if not self.layers:
            raise ValueError("Sequential: cannot extend an empty Sequential; build it with a "
                             "first layer.")
        size = self.out_size
        for layer in layers:
            layer, size = self._format(layer, size)
            self.layers.append(layer)
        self._out_size = size

    def insert(self, index: int, layer: Union[Module, ParamDescriber, Callable]) -> None:
        """Insert ``layer`` before position ``index``, as ``list.insert`` (``-1``: before the last)."""
        n = len(self.layers)
        index = max(0, index + n) if index < 0 else index
        if index == 0 and not isinstance(layer, Module):
            raise TypeError("Sequential: the first layer must be a built Module (it fixes the "
                            f"input size), got {layer!r}.")
        if index > n:
            raise IndexError(f"Sequential: index {index} is out of range for {n} layers.")
        layer, _ = self._format(layer, self._size_before(index))
        self.layers.insert(index, layer)
        if index == 0 and layer.in_size is not None:
            self.in_size = layer.in_size
        self._out_size = self._size_before(len(self.layers))

    def _size_before(self, index: int) -> Optional[Tuple[int, ...]]:
        """The size flowing into position ``index``."""
        size = self.layers[0].in_size if self.layers else None
        for layer in self.layers[:index]:
            _, size = self._format(layer, size)
        return size

    def _format(self, layer: Any, in_size: Optional[Tuple[int, ...]]):
        """``(built layer, its output size)`` for a layer placed after one of size ``in_size``."""
        if isinstance(layer, ParamDescriber):
            if in_size is None:
                raise ValueError(
                    f"Sequential: cannot build {layer!r}: the layer before it has no out_size. "
                    "Give that layer an in_size (pools and Flatten take in_size=...), or build "
                    "this layer yourself with its in_size.")
            layer = layer(in_size=in_size)
            if not isinstance(layer, Module):
                raise TypeError(f"Sequential: a describer built {layer!r}, not a Module.")
            return layer, layer.out_size
        if isinstance(layer, ElementWiseBlock):
            return layer, in_size
        if isinstance(layer, Module):
            return layer, layer.out_size
        if callable(layer):
            return layer, in_size
        raise TypeError(f"Sequential: a layer must be a Module, a ParamDescriber or a callable, "
                        f"got {layer!r}.")

