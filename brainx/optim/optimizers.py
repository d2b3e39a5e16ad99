"""The named optimisers: each builds one optax transformation for :class:`OptaxOptimizer`.

Names and arguments follow braintools (``betas=(b1, b2)``, ``weight_decay``,
``grad_clip_norm``, ``grad_clip_value``); the arithmetic is optax's. ``lr`` is a
number or a schedule ``step -> lr`` (see :mod:`brainx.optim.schedules`), where
``step`` counts :meth:`~OptaxOptimizer.update` calls.

``weight_decay`` is the coupled L2 term (added to the gradient before the
update rule), except in :class:`AdamW`, :class:`Lamb` and :class:`Lion`,
whose optax rules decay the weights themselves (decoupled).

=====================  ==========================  =====================================
class                  optax                       state per weight
=====================  ==========================  =====================================
SGD                    ``sgd``                     momentum trace if ``momentum``
Momentum / ...Nesterov ``sgd(momentum=...)``       momentum trace
Adam                   ``adam`` / ``amsgrad``      first and second moments
AdamW                  ``adamw``                   first and second moments
Adagrad                ``adagrad``                 sum of squared gradients
Adadelta               ``adadelta``                two running averages
RMSprop (RMSProp)      ``rmsprop``                 squared average (+ mean, momentum)
Adamax, Nadam, RAdam   ``adamax/nadam/radam``      first and second moments
Lamb, Lars             ``lamb/lars``               moments / momentum, trust ratio
Yogi, AdaBelief        ``yogi/adabelief``          first and second moments
Lion                   ``lion``                    one momentum
Novograd, Fromage      ``novograd/fromage``        moments / none
Rprop, Adafactor, SM3  ``rprop/adafactor/sm3``     step sizes / factored moments
=====================  ==========================  =====================================
"""

from __future__ import annotations

from typing import Optional, Tuple

import optax

from brainx.optim.base import LearningRate, OptaxOptimizer

__all__ = [
    "SGD", "Momentum", "MomentumNesterov", "Adam", "AdamW", "Adagrad", "Adadelta", "RMSprop",
    "RMSProp", "Adamax", "Nadam", "RAdam", "Lamb", "Lars", "Yogi", "AdaBelief", "Lion",
    "Novograd", "Fromage", "Rprop", "Adafactor", "SM3",
]

Betas = Tuple[float, float]


class SGD(OptaxOptimizer):
    """Stochastic gradient descent, with optional (Nesterov) momentum: ``optax.sgd``.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array([1.0, 2.0]))
    >>> opt = brainx.optim.SGD(lr=0.5)
    >>> opt.register_trainable_weights({"w": w})
    >>> opt.update({"w": jnp.array([1.0, -1.0])})
    >>> w.value.tolist()
    [0.5, 2.5]
    """

    def __init__(self, lr: LearningRate = 1e-2, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        super().__init__(optax.sgd(lr, momentum or None, nesterov), lr, weight_decay,
                         grad_clip_norm, grad_clip_value)


class Momentum(SGD):
    """SGD with heavy-ball momentum (``momentum=0.9`` by default)."""

    def __init__(self, lr: LearningRate = 1e-3, momentum: float = 0.9, weight_decay: float = 0.0,
                 grad_clip_norm: Optional[float] = None, grad_clip_value: Optional[float] = None):
        super().__init__(lr, momentum, weight_decay, False, grad_clip_norm, grad_clip_value)


class MomentumNesterov(SGD):
    """SGD with Nesterov momentum."""

    def __init__(self, lr: LearningRate = 1e-3, momentum: float = 0.9, weight_decay: float = 0.0,
                 grad_clip_norm: Optional[float] = None, grad_clip_value: Optional[float] = None):
        super().__init__(lr, momentum, weight_decay, True, grad_clip_norm, grad_clip_value)


class Adam(OptaxOptimizer):
    """Adam (Kingma & Ba, 2015) with bias correction: ``optax.adam`` (``optax.amsgrad``).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.array([1.0, -1.0]))
    >>> opt = brainx.optim.Adam(lr=0.1)
    >>> opt.register_trainable_weights({"w": w})
    >>> opt.update({"w": jnp.array([3.0, -0.5])})   # the first step moves each weight by lr
    >>> [round(v, 4) for v in w.value.tolist()]
    [0.9, -0.9]
    """

    def __init__(self, lr: LearningRate = 1e-3, betas: Betas = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False,
                 grad_clip_norm: Optional[float] = None, grad_clip_value: Optional[float] = None):
        rule = optax.amsgrad if amsgrad else optax.adam
        super().__init__(rule(lr, b1=betas[0], b2=betas[1], eps=eps), lr, weight_decay,
                         grad_clip_norm, grad_clip_value)


class AdamW(OptaxOptimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``optax.adamw``."""

    def __init__(self, lr: LearningRate = 1e-3, betas: Betas = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        tx = optax.adamw(lr, b1=betas[0], b2=betas[1], eps=eps, weight_decay=weight_decay)
        super().__init__(tx, lr, 0.0, grad_clip_norm, grad_clip_value)


class Adagrad(OptaxOptimizer):
    """Adagrad: per-weight steps shrink with the summed squared gradients."""

    def __init__(self, lr: LearningRate = 1e-2, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, weight_decay: float = 0.0,
                 grad_clip_norm: Optional[float] = None, grad_clip_value: Optional[float] = None):
        tx = optax.adagrad(lr, initial_accumulator_value=initial_accumulator_value, eps=eps)
        super().__init__(tx, lr, weight_decay, grad_clip_norm, grad_clip_value)


class Adadelta(OptaxOptimizer):
    """Adadelta: Adagrad with running averages instead of sums."""

    def __init__(self, lr: LearningRate = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        super().__init__(optax.adadelta(lr, rho=rho, eps=eps), lr, weight_decay, grad_clip_norm,
                         grad_clip_value)


class RMSprop(OptaxOptimizer):
    """RMSprop: steps divided by a running RMS of the gradient (``eps`` outside the root).

    ``alpha`` is the averaging constant (optax's ``decay``); ``centered``
    subtracts the squared running mean; ``momentum`` adds a momentum trace.
    """

    def __init__(self, lr: LearningRate = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 grad_clip_norm: Optional[float] = None, grad_clip_value: Optional[float] = None):
        tx = optax.rmsprop(lr, decay=alpha, eps=eps, eps_in_sqrt=False, centered=centered,
                           momentum=momentum or None)
        super().__init__(tx, lr, weight_decay, grad_clip_norm, grad_clip_value)


RMSProp = RMSprop  # brainstate's spelling


class Adamax(OptaxOptimizer):
    """Adamax: Adam with an infinity-norm second moment."""

    def __init__(self, lr: LearningRate = 2e-3, betas: Betas = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        super().__init__(optax.adamax(lr, b1=betas[0], b2=betas[1], eps=eps), lr, weight_decay,
                         grad_clip_norm, grad_clip_value)


class Nadam(OptaxOptimizer):
    """Nadam: Adam with Nesterov momentum."""

    def __init__(self, lr: LearningRate = 2e-3, betas: Betas = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        super().__init__(optax.nadam(lr, b1=betas[0], b2=betas[1], eps=eps), lr, weight_decay,
                         grad_clip_norm, grad_clip_value)


class RAdam(OptaxOptimizer):
    """Rectified Adam: the adaptive step is switched on once its variance is tractable."""

    def __init__(self, lr: LearningRate = 1e-3, betas: Betas = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        super().__init__(optax.radam(lr, b1=betas[0], b2=betas[1], eps=eps), lr, weight_decay,
                         grad_clip_norm, grad_clip_value)


class Lamb(OptaxOptimizer):
    """LAMB: Adam with a layer-wise trust ratio (large batches); decoupled weight decay."""

    def __init__(self, lr: LearningRate = 1e-3, betas: Betas = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.0, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        tx = optax.lamb(lr, b1=betas[0], b2=betas[1], eps=eps, weight_decay=weight_decay)
        super().__init__(tx, lr, 0.0, grad_clip_norm, grad_clip_value)


class Lars(OptaxOptimizer):
    """LARS: momentum SGD with a layer-wise trust ratio; optax applies the weight decay."""

    def __init__(self, lr: LearningRate = 1.0, momentum: float = 0.9, weight_decay: float = 0.0,
                 trust_coefficient: float = 1e-3, eps: float = 1e-8,
                 grad_clip_norm: Optional[float] = None, grad_clip_value: Optional[float] = None):
        tx = optax.lars(lr, weight_decay=weight_decay, trust_coefficient=trust_coefficient,
                        eps=eps, momentum=momentum)
        super().__init__(tx, lr, 0.0, grad_clip_norm, grad_clip_value)


class Yogi(OptaxOptimizer):
    """Yogi: Adam whose second moment grows additively."""

    def __init__(self, lr: LearningRate = 1e-3, betas: Betas = (0.9, 0.999), eps: float = 1e-3,
                 weight_decay: float = 0.0, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        super().__init__(optax.yogi(lr, b1=betas[0], b2=betas[1], eps=eps), lr, weight_decay,
                         grad_clip_norm, grad_clip_value)


class AdaBelief(OptaxOptimizer):
    """AdaBelief: Adam scaled by the belief in the gradient (its deviation from the mean)."""

    def __init__(self, lr: LearningRate = 1e-3, betas: Betas = (0.9, 0.999), eps: float = 1e-16,
                 weight_decay: float = 0.0, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        super().__init__(optax.adabelief(lr, b1=betas[0], b2=betas[1], eps=eps), lr, weight_decay,
                         grad_clip_norm, grad_clip_value)


class Lion(OptaxOptimizer):
    """Lion: the sign of an interpolated momentum; decoupled weight decay."""

    def __init__(self, lr: LearningRate = 1e-4, betas: Betas = (0.9, 0.99),
                 weight_decay: float = 0.0, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        tx = optax.lion(lr, b1=betas[0], b2=betas[1], weight_decay=weight_decay)
        super().__init__(tx, lr, 0.0, grad_clip_norm, grad_clip_value)


class Novograd(OptaxOptimizer):
    """NovoGrad: layer-wise second moments; decoupled weight decay."""

    def __init__(self, lr: LearningRate = 1e-3, betas: Betas = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        tx = optax.novograd(lr, b1=betas[0], b2=betas[1], eps=eps, weight_decay=weight_decay)
        super().__init__(tx, lr, 0.0, grad_clip_norm, grad_clip_value)


class Fromage(OptaxOptimizer):
    """Fromage: steps relative to each weight's norm."""

    def __init__(self, lr: LearningRate = 1.0, min_norm: float = 1e-6,
                 grad_clip_norm: Optional[float] = None, grad_clip_value: Optional[float] = None):
        super().__init__(optax.fromage(lr, min_norm=min_norm), lr, 0.0, grad_clip_norm,
                         grad_clip_value)


class Rprop(OptaxOptimizer):
    """Rprop: per-weight step sizes grown or shrunk by the sign agreement of gradients."""

    def __init__(self, lr: float = 1e-2, etas: Betas = (0.5, 1.2),
                 step_sizes: Betas = (1e-6, 50.0), grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        tx = optax.rprop(lr, eta_minus=etas[0], eta_plus=etas[1], min_step_size=step_sizes[0],
                         max_step_size=step_sizes[1])
        super().__init__(tx, lr, 0.0, grad_clip_norm, grad_clip_value)


class Adafactor(OptaxOptimizer):
    """Adafactor: factored second moments (memory-light); ``lr=None`` uses its own schedule."""

    def __init__(self, lr: Optional[LearningRate] = None, eps: float = 1e-30,
                 clipping_threshold: Optional[float] = 1.0, decay_rate: float = 0.8,
                 factored: bool = True, min_dim_size_to_factor: int = 128,
                 weight_decay: float = 0.0, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        tx = optax.adafactor(lr, min_dim_size_to_factor=min_dim_size_to_factor,
                             decay_rate=decay_rate, clipping_threshold=clipping_threshold,
                             eps=eps, factored=factored)
        super().__init__(tx, lr, weight_decay, grad_clip_norm, grad_clip_value)


class SM3(OptaxOptimizer):
    """SM3: memory-efficient adaptive steps from cover sets of the weight's axes."""

    def __init__(self, lr: float = 1.0, momentum: float = 0.9, weight_decay: float = 0.0,
                 grad_clip_norm: Optional[float] = None, grad_clip_value: Optional[float] = None):
        super().__init__(optax.sm3(lr, momentum=momentum), lr, weight_decay, grad_clip_norm,
                         grad_clip_value)
