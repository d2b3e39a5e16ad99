"""Neural-network modules, following brainstate.nn's names.

:class:`Module` collects its states by type (``net.states(ParamState)``) with
dotted paths; :func:`init_all_states` / :func:`reset_all_states` call every
module's ``init_state`` / ``reset_state``. Layers for deep learning
(:class:`Sequential`, :class:`Linear`, convolutions, pooling, normalisation,
dropout, embeddings, recurrent cells, activations; see :doc:`/nn-layers`) and
for spiking models (:class:`Dynamics`, the base of :class:`LIF`, :class:`LIFRef`,
:class:`ALIF`, :class:`Expon`, :class:`Alpha`, :class:`DualExpon`; :class:`Delay`
buffers and the readers of delayed states, see :doc:`/dynamics`); spike functions with surrogate gradients in
:mod:`brainx.nn.surrogate`; initialisers in :mod:`brainx.nn.init`; event-driven connectivity,
constrained parameters (:class:`Param` and its transforms) and regularisers (:doc:`/event-driven`);
running metrics and :func:`clip_grad_norm` for training loops.
"""

import warnings as _warnings

from brainx.mixin import ParamDescriber
from brainx.nn import hooks, init, surrogate
from brainx.nn.connectivity import event_backend
from brainx.nn.hooks import (
    not_receive_update_input, not_receive_update_output, receive_update_input,
    receive_update_output,
)

# the module tree
from brainx.nn.modules.collective import (
    assign_state_values, call_all_fns, call_order, init_all_states, reset_all_states,
    vmap_call_all_fns, vmap_init_all_states, vmap_reset_all_states,
)
from brainx.nn.modules.containers import ElementWiseBlock, Sequential
from brainx.nn.modules.environ_context import EnvironContext
from brainx.nn.modules.module import Module, iter_tree
from brainx.nn.modules.param_count import count_parameters
from brainx.nn.modules.vmap_module import Vmap
from brainx.nn.modules.map_module import Map

# deep-learning layers
from brainx.nn.layers.activations import (
    celu, elu, gelu, glu, hard_shrink, hard_sigmoid, hard_silu, hard_swish, hard_tanh,
    leaky_relu, log_sigmoid, log_softmax, logsumexp, mish, one_hot, prelu, relu, relu6, rrelu,
    selu, sigmoid, silu, soft_shrink, soft_sign, softmax, softmin, softplus, sparse_plus,
    sparse_sigmoid, squareplus, standardize, swish, tanh, tanh_shrink,
)
from brainx.nn.layers.conv import (
    Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
)
from brainx.nn.layers.dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from brainx.nn.layers.elementwise import (
    CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, Identity,
    LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6, RReLU, Sigmoid, SiLU, Softmax,
    Softmax2d, Softmin, Softplus, Softshrink, Softsign, SpikeBitwise, Tanh, Tanhshrink, Threshold,
)
from brainx.nn.layers.embedding import Embedding
from brainx.nn.layers.linear import Linear
from brainx.nn.layers.linear_variants import LoRA, ScaledWSLinear, SignedWLinear, weight_standardization
from brainx.nn.layers.normalization import (
    BatchNorm0d, BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm, RMSNorm,
)
from brainx.nn.layers.pooling import (
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
    AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, LPPool1d, LPPool2d,
    LPPool3d, MaxPool1d, MaxPool2d, MaxPool3d,
)
from brainx.nn.layers.unpooling import MaxUnpool1d, MaxUnpool2d, MaxUnpool3d
from brainx.nn.layers.rnn_cells import GRUCell, LSTMCell, RNNCell, ValinaRNNCell
from brainx.nn.layers.shape_ops import Flatten, Unflatten

# brain dynamics: neurons, synapses, delays
from brainx.nn.dynamics.base import Dynamics
from brainx.nn.dynamics.delay import Delay, DelayAccess, StateWithDelay
from brainx.nn.dynamics.interpolation import InterpolationRegistry
from brainx.nn.dynamics.exp_euler import exp_euler_step
from brainx.nn.dynamics.neuron import ALIF, LIF, LIFRef, Neuron, exp_decay
from brainx.nn.dynamics.iaf_psc_exp import IafPscExp, iaf_psc_exp_propagators
from brainx.nn.dynamics.poisson_background import PoissonBackground
from brainx.nn.spike_raster import SpikeRaster, pack_spikes
from brainx.nn import spike_stats
from brainx.nn.dynamics.prefetch import (
    OutputDelayAt, Prefetch, PrefetchDelay, PrefetchDelayAt, init_maybe_prefetch,
)
from brainx.nn.dynamics.synapse import Alpha, DualExpon, Expon, Synapse
from brainx.nn.dynamics.synouts import COBA, CUBA, SynOut

# connectivity between populations
from brainx.nn.connectivity.event_backend import get_event_backend, set_event_backend, use_event_backend
from brainx.nn.connectivity.event_conn import EventFixedNumConn, EventFixedProb, FixedNumConn
from brainx.nn.connectivity.event_group import EventFixedProbGroup
from brainx.nn.connectivity.delayed_conn import DelayedEventConn
from brainx.nn.connectivity.delayed_csr import DelayedCSR, delay_steps
from brainx.nn.connectivity.fixed_total import fixed_total_number, fixed_total_number_blocks
from brainx.nn.connectivity.fixed_total_onto import fixed_total_number_onto
from brainx.nn.connectivity.event_linear import EventLinear
from brainx.nn.connectivity.sparse_linear import SparseLinear

# constrained parameters and regularisers
from brainx.nn.params.param import Const, Param
from brainx.nn.params.param_transforms import (
    AffineT, ChainT, ClipT, ExpT, IdentityT, LogT, NegativeT, NegSoftplusT, PositiveT, SigmoidT,
    SoftplusT, SoftsignT, TanhT, Transform,
)
from brainx.nn.params.param_constraints import (
    MaskedT, OrderedT, PowerT, ReluT, ScaledSigmoidT, SimplexT, UnitVectorT,
)
from brainx.nn.params.regularization import (
    ElasticNetReg, GaussianReg, HuberReg, L1Reg, L2Reg, Regularization,
)
from brainx.nn.params.regularization_more import (
    CauchyReg, ChainedReg, DirichletReg, GroupLassoReg, HorseshoeReg, MaxNormReg, OrthogonalReg,
    SpectralNormReg, SpikeAndSlabReg, StudentTReg, TotalVariationReg, UniformReg,
)

# hierarchical data of composed models
from brainx.nn.hidata import HiData

# training-loop helpers
from brainx.nn.training.grad_clip import clip_grad_norm
from brainx.nn.training.metrics import AccuracyMetric, AverageMetric, Metric, MetricState, MultiMetric

__all__ = [
    # modules and collective operations
    "Module", "iter_tree", "ParamDescriber", "ElementWiseBlock", "Sequential", "call_order",
    "call_all_fns", "vmap_call_all_fns", "init_all_states", "vmap_init_all_states",
    "reset_all_states", "vmap_reset_all_states", "assign_state_values", "count_parameters",
    # layers
    "Vmap", "Map", "EnvironContext", "Linear", "SignedWLinear", "ScaledWSLinear", "LoRA", "weight_standardization", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d",
    "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "MaxUnpool1d", "MaxUnpool2d",
    "MaxUnpool3d", "LPPool1d", "LPPool2d", "LPPool3d", "BatchNorm0d", "BatchNorm1d",
    "BatchNorm2d", "BatchNorm3d", "LayerNorm", "RMSNorm", "GroupNorm", "Dropout", "Dropout1d",
    "Dropout2d", "Dropout3d", "Flatten", "Unflatten", "Embedding", "RNNCell", "ValinaRNNCell",
    "GRUCell", "LSTMCell",
    # activation layers
    "Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU",
    "Mish", "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU",
    "LogSigmoid", "Softplus", "Softshrink", "PReLU", "Softsign", "Tanhshrink", "Softmin",
    "Softmax", "Softmax2d", "LogSoftmax", "Identity", "SpikeBitwise",
    # activation functions
    "tanh", "relu", "squareplus", "softplus", "soft_sign", "sigmoid", "silu", "swish",
    "log_sigmoid", "elu", "leaky_relu", "hard_tanh", "celu", "selu", "gelu", "glu", "logsumexp",
    "log_softmax", "softmax", "standardize", "one_hot", "relu6", "hard_sigmoid", "hard_silu",
    "hard_swish", "hard_shrink", "rrelu", "mish", "soft_shrink", "prelu", "tanh_shrink",
    "softmin", "sparse_plus", "sparse_sigmoid",
    # spiking models
    "Neuron", "LIF", "LIFRef", "ALIF", "IafPscExp", "iaf_psc_exp_propagators", "PoissonBackground", "SpikeRaster", "pack_spikes", "spike_stats",
    "Expon", "exp_decay", "init", "surrogate",
    "Dynamics", "Synapse", "Alpha", "DualExpon", "SynOut", "COBA", "CUBA", "exp_euler_step",
    "Delay", "DelayAccess", "StateWithDelay", "InterpolationRegistry", "Prefetch",
    "PrefetchDelay", "PrefetchDelayAt", "OutputDelayAt", "init_maybe_prefetch",
    "receive_update_input", "not_receive_update_input",
    "receive_update_output", "not_receive_update_output", "hooks",
    "FixedNumConn", "EventFixedNumConn", "EventFixedProb", "EventFixedProbGroup", "EventLinear",
    "DelayedEventConn", "DelayedCSR", "delay_steps", "fixed_total_number", "fixed_total_number_blocks", "fixed_total_number_onto",
    "SparseLinear",
    "event_backend", "set_event_backend", "get_event_backend", "use_event_backend",
    "Param", "Const", "Transform", "IdentityT", "SoftplusT", "NegSoftplusT", "ExpT", "LogT",
    "SigmoidT", "TanhT", "SoftsignT", "ClipT", "AffineT", "ChainT", "PositiveT", "NegativeT",
    "Regularization", "L1Reg", "L2Reg", "ElasticNetReg", "GaussianReg", "HuberReg", "HiData",
    "ChainedReg", "GroupLassoReg", "TotalVariationReg", "MaxNormReg", "OrthogonalReg",
    "SpectralNormReg", "StudentTReg", "CauchyReg", "UniformReg", "HorseshoeReg", "SpikeAndSlabReg",
    "DirichletReg", "ReluT", "ScaledSigmoidT",
    "PowerT", "MaskedT", "SimplexT", "UnitVectorT", "OrderedT", "clip_grad_norm", "Metric",
    "MetricState", "AverageMetric", "AccuracyMetric", "MultiMetric",
]

#: brainstate's deprecated names in ``nn``, and the name to use instead (brainstate 0.6 answers
#: them with a ``DeprecationWarning``; so does brainx)
_DEPRECATED = {"DynamicsGroup": "Module", "ModuleMapper": "Map"}


def __getattr__(name: str):
    """``nn.DynamicsGroup`` (``nn.Module``) and ``nn.ModuleMapper`` (``nn.Map``), with a warning."""
    if name in _DEPRECATED:
        new = _DEPRECATED[name]
        _warnings.warn(f"brainx.nn.{name} is deprecated (as in brainstate 0.6): use "
                       f"brainx.nn.{new}.", DeprecationWarning, stacklevel=2)
        return globals()[new]
    raise AttributeError(f"module 'brainx.nn' has no attribute {name!r}")
