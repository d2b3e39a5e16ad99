"""Optimisers over parameter states, on optax.

The brainstate pattern::

    opt = brainx.optim.Adam(lr=1e-3)
    opt.register_trainable_weights(net.states(brainx.ParamState))
    grads = brainx.transform.grad(loss, grad_states=net.states(brainx.ParamState))(x, y)
    opt.update(grads)            # writes the parameters and the optimiser's own states

:class:`OptaxOptimizer` wraps any ``optax.GradientTransformation``; the named
optimisers (:class:`Adam`, :class:`SGD`, ...) build one for you, and the
schedules (:func:`StepLR`, :func:`CosineAnnealingLR`, ...) are optax schedules
under braintools' names. optax's state is an :class:`OptimState`, so the update
compiles inside ``brainx.transform.jit`` and is saved by :func:`brainx.io.save`.

Examples
--------
>>> import jax.numpy as jnp, brainx
>>> w = brainx.ParamState(jnp.array([1.0, -1.0]))
>>> opt = brainx.optim.Momentum(lr=brainx.optim.ExponentialLR(0.1, gamma=0.5), momentum=0.9)
>>> opt.register_trainable_weights({"w": w})
>>> opt.update({"w": jnp.array([1.0, 1.0])})
>>> [round(v, 4) for v in w.value.tolist()], round(float(opt.current_lr()), 4)
([0.9, -1.1], 0.05)
"""

from brainx.optim.base import OptaxOptimizer, Optimizer, OptimState
from brainx.optim.optimizers import (
    SGD, SM3, AdaBelief, Adadelta, Adafactor, Adagrad, Adam, Adamax, AdamW, Fromage, Lamb, Lars,
    Lion, Momentum, MomentumNesterov, Nadam, Novograd, RAdam, RMSProp, RMSprop, Rprop, Yogi,
)
from brainx.optim.schedules import (
    ConstantLR, CosineAnnealingLR, ExponentialDecayLR, ExponentialLR, LinearLR, MultiStepLR,
    OneCycleLR, PiecewiseConstantSchedule, PolynomialLR, SequentialLR, StepLR,
    WarmupCosineSchedule, WarmupScheduler,
)

__all__ = [
    "OptimState", "OptaxOptimizer", "Optimizer",
    "SGD", "Momentum", "MomentumNesterov", "Adam", "AdamW", "Adagrad", "Adadelta", "RMSprop",
    "RMSProp", "Adamax", "Nadam", "RAdam", "Lamb", "Lars", "Yogi", "AdaBelief", "Lion",
    "Novograd", "Fromage", "Rprop", "Adafactor", "SM3",
    "ConstantLR", "StepLR", "MultiStepLR", "ExponentialLR", "ExponentialDecayLR",
    "CosineAnnealingLR", "PolynomialLR", "LinearLR", "WarmupScheduler", "WarmupCosineSchedule",
    "PiecewiseConstantSchedule", "OneCycleLR", "SequentialLR",
]
