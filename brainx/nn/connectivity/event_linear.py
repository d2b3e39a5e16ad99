"""`EventLinear`: a dense weight matrix driven by spikes, one row per event.

When the weights are dense but the input is a spike train, ``spikes @ W``
only needs the rows of ``W`` whose neuron fired. ``EventLinear`` sums those rows
in brainx's native kernel on CPU (:mod:`brainx.nn.connectivity.native`), elsewhere
in brainevent's (:mod:`brainx.nn.connectivity.event_backend`; with numba): the cost
is proportional to the number of spikes times the output size, not to the full
matrix. It stores the full ``(in, out)`` matrix; for sparse
connectivity use :class:`~brainx.nn.EventFixedProb` or
:class:`~brainx.nn.SparseLinear`.
"""

from __future__ import annotations

from typing import Any, Optional

import brainunit as u
import jax.numpy as jnp

from brainx.nn.connectivity.event_backend import as_events, layer_kernel, load_brainevent
from brainx.nn.connectivity.native.product import dense_event_product
from brainx.nn.init import param
from brainx.nn.plain_arrays import as_array, reshape
from brainx.nn.modules.module import Module
from brainx.state.state import ParamState

__all__ = ["EventLinear"]


class EventLinear(Module):
    """Dense layer for spike inputs: ``y[j] = sum of W[i, j] over the neurons i that spiked``.

    Parameters
    ----------
    in_size, out_size : int or tuple of int
        Input and output sizes (their last axes count).
    weight : float, array, Quantity or initialiser
        ``(in, out)`` weights, or a scalar shared by every pair. Its unit is
        the output's. Kept in the :class:`~brainx.ParamState` ``self.weight``.
    float_as_event : bool
        ``True``: a float input counts as events (entries ``> 0`` add their
        row once, the gradient is that of ``x @ W``); ``False``: a float input
        is multiplied densely, ``x @ W``.
    block_size : int
        Accepted for brainstate's signature; brainevent chooses its own blocks.
    name : str, optional
        A label for ``repr``.
    param_type : type
        The State class of the weights.
    backend : str, optional
        The kernel of the event product: ``"native"`` (CPU), or a brainevent
        backend (``"numba"`` / ``"jax_raw"`` on CPU); ``None``: the global
        choice when the layer is built (on CPU ``"native"`` where it can be built).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> layer = brainx.nn.EventLinear(3, 2, weight=jnp.array([[1., 2.], [3., 4.], [5., 6.]]))
    >>> layer(jnp.array([True, False, True])).tolist()
    [6.0, 8.0]
    """

    def __init__(self, in_size, out_size, weight: Any, float_as_event: bool = True,
                 block_size: int = 64, name: Optional[str] = None,
                 param_type: type = ParamState, backend: Optional[str] = None):
        super().__init__(name=name)
        self.in_size = in_size
        self.out_size = out_size
        self.float_as_event = float_as_event
        self.block_size = block_size
        self.backend = backend
        self.kernel = layer_kernel(backend, type(self).__name__)   # "native", or brainevent's
        w = param(weight, (self.in_size[-1], self.out_size[-1]), allow_none=False)
        self.weight = param_type(as_array(w, dtype=float))   # (no torch import: issue 45)

    def update(self, spikes):
        """The summed rows of ``W`` for the active inputs (``spikes``: ``(..., in)``)."""
        weight = self.weight.value
        n_in = self.in_size[-1]
        shape = tuple(jnp.shape(spikes))
        if not shape or shape[-1] != n_in:
            raise ValueError(f"EventLinear: the input's last axis must have {n_in} entries, "
                             f"got shape {shape}.")
        event = self.float_as_event or jnp.asarray(spikes).dtype == jnp.bool_
        if u.math.size(weight) == 1:
            return self._homogeneous(spikes, weight, event)
        if not event:
            return u.math.matmul(spikes, weight)
        if self.kernel == "native":
            y = dense_event_product(u.get_mantissa(spikes), u.get_mantissa(weight))
            return u.maybe_decimal(u.Quantity(y, unit=u.get_unit(weight)))
        be = load_brainevent("EventLinear")
        spikes = as_events(spikes)
        flat = spikes if len(shape) == 1 else u.math.reshape(spikes, (-1, n_in))
        backend = None if self.backend == "native" else self.backend
        if len(shape) == 1:
            return be.binary_densemv(weight, flat, transpose=True, backend=backend)
        y = be.binary_densemm(weight, flat.T, transpose=True, backend=backend).T
        return u.math.reshape(y, shape[:-1] + (self.out_size[-1],))

    def _homogeneous(self, spikes, weight, event: bool):
        """One shared weight: every output gets ``w * (number of events)``."""
        if event:   # the value counts events, the gradient is that of the value sum
            spikes = as_events(spikes)
        x = jnp.asarray(spikes, dtype=jnp.result_type(float))
        reduced = jnp.sum(x, axis=-1, keepdims=True)
        ones = jnp.ones(jnp.shape(x)[:-1] + (self.out_size[-1],), dtype=reduced.dtype)
        return ones * reduced * reshape(weight, ())
