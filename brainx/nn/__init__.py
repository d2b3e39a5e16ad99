"""Neural-network modules for spiking models, following brainstate.nn's names.

:class:`Module` collects its states by type (``net.states(ParamState)``) with
dotted paths; :func:`init_all_states` / :func:`reset_all_states` call every
module's ``init_state`` / ``reset_state``. Layers: :class:`Linear`,
:class:`LIF`, :class:`LIFRef`, :class:`ALIF`, :class:`Expon`; spike functions
with surrogate gradients in :mod:`brainx.nn.surrogate`; initialisers in
:mod:`brainx.nn.init`.
"""

from brainx.nn import init, surrogate
from brainx.nn.collective import init_all_states, reset_all_states
from brainx.nn.linear import Linear
from brainx.nn.module import Module, iter_tree
from brainx.nn.neuron import ALIF, LIF, LIFRef, Neuron, exp_decay
from brainx.nn.synapse import Expon

__all__ = [
    "Module", "iter_tree", "init_all_states", "reset_all_states", "Linear", "Neuron", "LIF",
    "LIFRef", "ALIF", "Expon", "exp_decay", "init", "surrogate",
]
