"""Recurrent cells: `ValinaRNNCell` (brainstate's spelling), `GRUCell`, `LSTMCell`.

A cell takes one time step: ``h = cell(x)`` reads its hidden state, computes
the new one, writes it and returns it. The hidden states are
``HiddenState`` s created by ``init_state(batch_size=None)`` (shape
``(num_out,)`` or ``(batch_size, num_out)``) and refilled in place by
``reset_state(batch_size)``, so ``brainx.nn.init_all_states(model, batch_size=...)``
prepares a whole network. Run a sequence with ``brainx.transform.for_loop``.

Each cell's weights are :class:`~brainx.nn.Linear` layers on the
concatenation ``[x, h]``:

==================  ===================================================================
cell                step
==================  ===================================================================
``ValinaRNNCell``   ``h = act(W [x, h] + b)``
``GRUCell``         ``r, z = sigmoid(Wrz [x, h]);``
                    ``h = (1 - z) h + z act(Wh [x, r h])``
``LSTMCell``        ``i, g, f, o = W [x, h];  c = sigmoid(f + 1) c + sigmoid(i) act(g);``
                    ``h = sigmoid(o) act(c)``
==================  ===================================================================

Examples
--------
>>> import jax.numpy as jnp, brainx
>>> from brainx import nn
>>> cell = nn.init_all_states(nn.LSTMCell(3, 4), batch_size=2)
>>> cell(jnp.ones((2, 3))).shape, cell.c.value.shape
((2, 4), (2, 4))
>>> _ = nn.reset_all_states(cell, batch_size=5)
>>> cell.h.value.shape
(5, 4)
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import jax.numpy as jnp

from brainx.nn.layers import activations
from brainx.nn.init import Orthogonal, XavierNormal, ZeroInit, param
from brainx.nn.layers.linear import Linear
from brainx.nn.modules.module import Module
from brainx.state.state import HiddenState

__all__ = ["RNNCell", "ValinaRNNCell", "GRUCell", "LSTMCell"]


def _activation(activation: Union[str, Callable]) -> Callable:
    if isinstance(activation, str):
        fn = getattr(activations, activation, None)
        if fn is None or activation not in activations.__all__:
            raise ValueError(f"Unknown activation {activation!r}: use a name from "
                             "brainx.nn.layers.activations (e.g. 'tanh', 'relu') or a callable.")
        return fn
    if not callable(activation):
        raise TypeError(f"activation must be a name or a callable, got {activation!r}.")
    return activation


class RNNCell(Module):
    """Base class of recurrent cells (brainstate's): a module with hidden states.

    A subclass creates its states in ``init_state``, resets them in
    ``reset_state`` and steps in ``update(x)``; ``__init__(name=None)`` as
    :class:`Module`'s, so brainstate programs subclass it unchanged. The cells
    here share their sizes, activation and state lifecycle through a private
    base below it.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> class Leaky(brainx.nn.RNNCell):
    ...     def __init__(self, n):
    ...         super().__init__()
    ...         self.n = n
    ...     def init_state(self, batch_size=None, **kwargs):
    ...         self.h = brainx.HiddenState(jnp.zeros(self.n))
    ...     def update(self, x):
    ...         self.h.value = 0.5 * self.h.value + x
    ...         return self.h.value
    >>> cell = brainx.nn.init_all_states(Leaky(2))
    >>> (jnp.ones(2) >> cell).tolist()
    [1.0, 1.0]
    """


class _SizedCell(RNNCell):
    """The cells' shared part: sizes, activation, and the hidden states' lifecycle."""

    state_names: tuple = ("h",)

    def __init__(self, num_in: int, num_out: int, state_init: Union[Callable, Any],
                 activation: Union[str, Callable], name: Optional[str] = None):
        super().__init__(name=name)
        self.num_in, self.num_out = int(num_in), int(num_out)
        self.in_size, self.out_size = self.num_in, self.num_out
        self._state_initializer = state_init
        self.activation = _activation(activation)

    def _initial(self, batch_size: Optional[int]):
        return param(self._state_initializer, (self.num_out,), batch_size, broadcast=True)

    def init_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        """Create the hidden states, ``(num_out,)`` or ``(batch_size, num_out)``."""
        for n in self.state_names:
            setattr(self, n, HiddenState(self._initial(batch_size), name=n))

    def reset_state(self, batch_size: Optional[int] = None, **kwargs) -> None:
        """Put initial values into the existing hidden states."""
        self._require()
        for n in self.state_names:
            getattr(self, n).value = self._initial(batch_size)

    def _require(self) -> None:
        if not all(hasattr(self, n) for n in self.state_names):
            raise RuntimeError(f"{self!r} has no hidden state yet: call init_state() on it (or "
                               "brainx.nn.init_all_states(model, batch_size=...)) first.")


class ValinaRNNCell(_SizedCell):
    """Vanilla RNN cell: ``h = activation(W [x, h] + b)``.

    Parameters
    ----------
    num_in, num_out : int
        Input and hidden sizes.
    state_init : initialiser or array-like
        Initial ``h``.
    w_init, b_init : initialiser or array
        Of ``W`` ``(num_in + num_out, num_out)`` and ``b``.
    activation : str or callable
        A name from :mod:`brainx.nn.layers.activations` or a function.
    """

    def __init__(self, num_in: int, num_out: int, state_init: Union[Callable, Any] = ZeroInit(),
                 w_init: Union[Callable, Any] = XavierNormal(),
                 b_init: Union[Callable, Any] = ZeroInit(),
                 activation: Union[str, Callable] = "relu", name: Optional[str] = None):
        super().__init__(num_in, num_out, state_init, activation, name)
        self.W = Linear(num_in + num_out, num_out, w_init=w_init, b_init=b_init)

    def update(self, x: Any) -> Any:
        self._require()
        self.h.value = self.activation(self.W(jnp.concatenate([x, self.h.value], axis=-1)))
        return self.h.value


class GRUCell(_SizedCell):
    """Gated recurrent unit: reset gate ``r``, update gate ``z`` (see the module table).

    Parameters
    ----------
    num_in, num_out : int
        Input and hidden sizes.
    w_init, b_init : initialiser or array
        Of ``Wrz`` ``(num_in + num_out, 2 num_out)`` and ``Wh`` ``(num_in + num_out, num_out)``.
    state_init : initialiser or array-like
        Initial ``h``.
    activation : str or callable
        The candidate's nonlinearity.
    """

    def __init__(self, num_in: int, num_out: int, w_init: Union[Callable, Any] = Orthogonal(),
                 b_init: Union[Callable, Any] = ZeroInit(),
                 state_init: Union[Callable, Any] = ZeroInit(),
                 activation: Union[str, Callable] = "tanh", name: Optional[str] = None):
        super().__init__(num_in, num_out, state_init, activation, name)
        self.Wrz = Linear(num_in + num_out, num_out * 2, w_init=w_init, b_init=b_init)
        self.Wh = Linear(num_in + num_out, num_out, w_init=w_init, b_init=b_init)

    def update(self, x: Any) -> Any:
        self._require()
        h = self.h.value
        r, z = jnp.split(activations.sigmoid(self.Wrz(jnp.concatenate([x, h], -1))), 2, axis=-1)
        candidate = self.activation(self.Wh(jnp.concatenate([x, r * h], axis=-1)))
        self.h.value = (1 - z) * h + z * candidate
        return self.h.value


class LSTMCell(_SizedCell):
    """Long short-term memory cell with hidden ``h`` and cell ``c`` (see the module table).

    The gates come from one :class:`~brainx.nn.Linear` ``W`` in the order
    ``i, g, f, o``; the forget gate has a fixed ``+1`` bias, as in brainstate.

    Parameters
    ----------
    num_in, num_out : int
        Input and hidden sizes.
    w_init, b_init : initialiser or array
        Of ``W`` ``(num_in + num_out, 4 num_out)``.
    state_init : initialiser or array-like
        Initial ``h`` and ``c``.
    activation : str or callable
        Applied to the candidate ``g`` and to ``c``.
    """

    state_names = ("c", "h")

    def __init__(self, num_in: int, num_out: int, w_init: Union[Callable, Any] = XavierNormal(),
                 b_init: Union[Callable, Any] = ZeroInit(),
                 state_init: Union[Callable, Any] = ZeroInit(),
                 activation: Union[str, Callable] = "tanh", name: Optional[str] = None):
        super().__init__(num_in, num_out, state_init, activation, name)
        self.W = Linear(num_in + num_out, num_out * 4, w_init=w_init, b_init=b_init)

    def update(self, x: Any) -> Any:
        self._require()
        h, c = self.h.value, self.c.value
        i, g, f, o = jnp.split(self.W(jnp.concatenate([x, h], axis=-1)), 4, axis=-1)
        sigmoid = activations.sigmoid
        c = sigmoid(f + 1.0) * c + sigmoid(i) * self.activation(g)
        h = sigmoid(o) * self.activation(c)
        self.h.value, self.c.value = h, c
        return h
