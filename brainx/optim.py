"""Gradient-descent optimisers over parameter states: `SGD` and `Adam`.

The brainstate pattern::

    opt = brainx.optim.Adam(lr=1e-3)
    opt.register_trainable_weights(net.states(brainx.ParamState))
    grads = brainx.transform.grad(loss, grad_states=net.states(brainx.ParamState))(x, y)
    opt.update(grads)            # writes the parameters and the optimiser's own states

The optimiser's moments and step counter are :class:`OptimState` s, so the
whole update can sit inside ``brainx.transform.jit``. Parameter values may be
any pytree, brainunit quantities included: the update runs on the mantissas
and keeps each parameter's unit.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Union

import brainunit as u
import jax
import jax.numpy as jnp

from brainx.nn.module import Module
from brainx.state.state import LongTermState, State

__all__ = ["OptimState", "Optimizer", "SGD", "Adam"]


class OptimState(LongTermState):
    """A state owned by an optimiser (moments, step count)."""


def _is_quantity(x) -> bool:
    return isinstance(x, u.Quantity)


def _mantissas(tree):
    leaves, treedef = jax.tree.flatten(tree, is_leaf=_is_quantity)
    return [leaf.mantissa if _is_quantity(leaf) else jnp.asarray(leaf) for leaf in leaves], \
        leaves, treedef


def _rebuild(like_leaves, treedef, mantissas):
    out = [u.Quantity(m, unit=leaf.unit) if _is_quantity(leaf) else m
           for leaf, m in zip(like_leaves, mantissas)]
    return jax.tree.unflatten(treedef, out)


class _Registered:
    """Holds the registered parameter states out of the module-tree walk."""

    def __init__(self, states: Dict[str, State]):
        self.states = states


class Optimizer(Module):
    """Base class. Subclasses implement ``_init_slots(mantissas)`` and ``_step(...)``."""

    def __init__(self, lr: Union[float, Callable[[jax.Array], Any]]):
        super().__init__()
        self.lr = lr
        self.step_count = OptimState(jnp.zeros((), jnp.int32), name="step_count")
        self._weights = _Registered({})
        self.slots: Dict[str, Dict[str, OptimState]] = {}

    @property
    def param_states(self) -> Dict[str, State]:
        return dict(self._weights.states)

    def register_trainable_weights(self, states: Union[Mapping[str, State], Any]) -> None:
        """Register the parameter states to update (a dict, e.g. ``net.states(ParamState)``)."""
        if not isinstance(states, Mapping):
            leaves = jax.tree.leaves(states, is_leaf=lambda x: isinstance(x, State))
            states = {str(i): s for i, s in enumerate(leaves)}
        for key, s in states.items():
            if not isinstance(s, State):
                raise TypeError(f"register_trainable_weights: {key!r} is {s!r}, not a State.")
            if key in self._weights.states and self._weights.states[key] is not s:
                raise ValueError(f"register_trainable_weights: {key!r} is already registered "
                                 f"to a different state ({self._weights.states[key]!r}).")
        for key, s in states.items():
            if key in self._weights.states:
                continue
            self._weights.states[key] = s
            mantissas, _, _ = _mantissas(s.value)
            self.slots[key] = {name: OptimState(value, name=f"{name}[{key}]")
                               for name, value in self._init_slots(mantissas).items()}

    def current_lr(self) -> Any:
        """The learning rate for the coming step."""
        return self.lr(self.step_count.value) if callable(self.lr) else self.lr

    def update(self, grads: Mapping[str, Any]) -> None:
        """Apply one step with ``grads`` (keys as registered). All states change, or none."""
        registered = self._weights.states
        if not isinstance(grads, Mapping):
            raise TypeError(f"update() expects a dict of gradients keyed like the registered "
                            f"weights, got {type(grads).__name__}.")
        unknown = [k for k in grads if k not in registered]
        if unknown:
            raise KeyError(f"update(): gradients for unregistered weights {unknown}; registered: "
                           f"{list(registered)}.")
        lr = self.current_lr()
        t = self.step_count.value + 1
        new_params, new_slots = {}, {}
        for key, g in grads.items():
            state = registered[key]
            p_m, p_leaves, treedef = _mantissas(state.value)
            g_m, _, g_def = _mantissas(g)
            if g_def != treedef or any(jnp.shape(a) != jnp.shape(b) for a, b in zip(p_m, g_m)):
                raise ValueError(f"update(): the gradient for {key!r} does not match the "
                                 f"structure/shapes of {state!r}.")
            slots = {name: s.value for name, s in self.slots[key].items()}
            p_new, slots_new = self._step(p_m, g_m, slots, lr, t)
            new_params[key] = _rebuild(p_leaves, treedef, p_new)
            new_slots[key] = slots_new
        for key, value in new_params.items():
            registered[key].value = value
            for name, s in self.slots[key].items():
                s.value = new_slots[key][name]
        self.step_count.value = t

    def _init_slots(self, params: list) -> Dict[str, list]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _step(self, params: list, grads: list, slots: Dict[str, list], lr, t):
        raise NotImplementedError  # pragma: no cover - abstract


class SGD(Optimizer):
    """Stochastic gradient descent, with optional momentum.

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

    def __init__(self, lr=1e-2, momentum: float = 0.0):
        super().__init__(lr)
        self.momentum = momentum

    def _init_slots(self, params):
        return {"velocity": [jnp.zeros_like(p) for p in params]} if self.momentum else {}

    def _step(self, params, grads, slots, lr, t):
        if not self.momentum:
            return [p - lr * g for p, g in zip(params, grads)], {}
        vel = [self.momentum * v + g for v, g in zip(slots["velocity"], grads)]
        return [p - lr * v for p, v in zip(params, vel)], {"velocity": vel}


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015) with bias correction; ``weight_decay`` adds an L2 term.

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

    def __init__(self, lr=1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(lr)
        self.beta1, self.beta2, self.eps, self.weight_decay = beta1, beta2, eps, weight_decay

    def _init_slots(self, params):
        return {"m": [jnp.zeros_like(p) for p in params],
                "v": [jnp.zeros_like(p) for p in params]}

    def _step(self, params, grads, slots, lr, t):
        b1, b2 = self.beta1, self.beta2
        if self.weight_decay:
            grads = [g + self.weight_decay * p for p, g in zip(params, grads)]
        m = [b1 * a + (1 - b1) * g for a, g in zip(slots["m"], grads)]
        v = [b2 * a + (1 - b2) * g * g for a, g in zip(slots["v"], grads)]
        tf = t.astype(jnp.result_type(float))
        c1, c2 = 1 - b1 ** tf, 1 - b2 ** tf
        new = [p - lr * (mi / c1) / (jnp.sqrt(vi / c2) + self.eps)
               for p, mi, vi in zip(params, m, v)]
        return new, {"m": m, "v": v}
