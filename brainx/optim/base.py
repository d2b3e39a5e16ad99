"""`OptaxOptimizer`: any optax gradient transformation over a set of parameter states.

optax does the arithmetic; this module adds only what a stateful, unit-aware
model needs around it:

* **states in, states out.** The parameters are :class:`~brainx.ParamState` s
  registered once with :meth:`OptaxOptimizer.register_trainable_weights`;
  :meth:`OptaxOptimizer.update` reads them, runs ``tx.update`` and writes
  them back, all or nothing.
* **the optimiser's own state is a State.** optax's state (moments, counts)
  lives in the :class:`OptimState` ``opt_state`` and the number of updates
  in ``step_count``, so ``brainx.transform.jit`` threads them like any model
  state, ``transform.vmap`` batches them with the model, and
  :func:`brainx.io.save` writes them with the parameters.
* **units.** A parameter may hold brainunit quantities: optax sees their
  mantissas, the moments are kept as plain arrays in the parameter's unit,
  and the updated parameter gets its unit back. A gradient may be a plain
  array (what ``brainx.transform.grad`` returns) or a Quantity (from
  ``grad(unit_aware=True)``); either way its mantissa is the derivative with
  respect to the parameter's mantissa, which is what optax is given.

The named optimisers (:class:`~brainx.optim.Adam`, :class:`~brainx.optim.SGD`,
...) are thin constructors of an optax transformation; pass your own with
``OptaxOptimizer(optax.chain(...))``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Union

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.core import Tracer

from brainx.nn.modules.module import Module
from brainx.state.state import LongTermState, State

__all__ = ["OptimState", "OptaxOptimizer", "Optimizer"]

LearningRate = Union[float, Callable[[jax.Array], Any]]


class OptimState(LongTermState):
    """A state owned by an optimiser (optax's state, the update count)."""


def _is_quantity(x: Any) -> bool:
    return isinstance(x, u.Quantity)


def mantissas(tree: Any) -> Any:
    """``tree`` with every brainunit Quantity replaced by its mantissa (as a JAX array)."""
    return jax.tree.map(lambda x: x.mantissa if _is_quantity(x) else jnp.asarray(x), tree,
                        is_leaf=_is_quantity)


def with_units_of(like: Any, tree: Any) -> Any:
    """``tree`` (mantissas) with the units of the Quantities at the same places in ``like``."""
    return jax.tree.map(lambda ref, m: u.Quantity(m, unit=ref.unit) if _is_quantity(ref) else m,
                        like, tree, is_leaf=_is_quantity)


def _layout(tree: Any):
    """Structure and shapes, to compare a gradient with its parameter."""
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, [tuple(np.shape(x)) for x in leaves]


class _Registered:
    """Holds the registered parameter states out of the module-tree walk.

    The parameters belong to the model: ``opt.states()`` and
    ``brainx.io.save({"net": net, "opt": opt})`` should list them once, under
    the model.
    """

    def __init__(self):
        self.states: Dict[str, State] = {}


class OptaxOptimizer(Module):
    """An optax ``GradientTransformation`` applied to registered parameter states.

    Parameters
    ----------
    tx : optax.GradientTransformation
        The update rule, e.g. ``optax.adam(1e-3)`` or an ``optax.chain``.
    lr : float or callable, optional
        The learning rate ``tx`` was built with, for :meth:`current_lr` only
        (the named optimisers pass it; ``tx`` already applies it).
    weight_decay : float
        Adds ``weight_decay * param`` to the gradient before ``tx`` (L2,
        coupled; :class:`~brainx.optim.AdamW` has the decoupled kind).
    grad_clip_norm, grad_clip_value : float, optional
        Clip the gradients by their global norm / elementwise, before the
        weight decay and ``tx``.

    Attributes
    ----------
    opt_state : OptimState
        optax's state for the registered parameters (mantissas, unitless).
    step_count : OptimState
        How many updates were applied (int32).

    Examples
    --------
    >>> import jax.numpy as jnp, optax, brainx
    >>> w = brainx.ParamState(jnp.array([1.0, 2.0]))
    >>> opt = brainx.optim.OptaxOptimizer(optax.sgd(0.5))
    >>> opt.register_trainable_weights({"w": w})
    >>> opt.update({"w": jnp.array([1.0, -1.0])})
    >>> w.value.tolist(), int(opt.step_count.value)
    ([0.5, 2.5], 1)
    """

    def __init__(self, tx: optax.GradientTransformation, lr: Optional[LearningRate] = None,
                 weight_decay: float = 0.0, grad_clip_norm: Optional[float] = None,
                 grad_clip_value: Optional[float] = None):
        super().__init__()
        if not isinstance(tx, optax.GradientTransformation):
            raise TypeError(f"{type(self).__name__}: tx must be an optax.GradientTransformation "
                            f"(e.g. optax.adam(1e-3)), got {tx!r}.")
        pre = []
        if grad_clip_norm is not None:
            pre.append(optax.clip_by_global_norm(grad_clip_norm))
        if grad_clip_value is not None:
            pre.append(optax.clip(grad_clip_value))
        if weight_decay:
            pre.append(optax.add_decayed_weights(weight_decay))
        self.tx = optax.chain(*pre, tx) if pre else tx
        self.lr = lr
        self._weights = _Registered()
        self._updated = False  # an update was run or traced (the count may be a tracer)
        self.step_count = OptimState(jnp.zeros((), jnp.int32), name="step_count")
        self.opt_state = OptimState(self.tx.init({}), name="opt_state")

    @property
    def param_states(self) -> Dict[str, State]:
        """The registered parameter states, by key."""
        return dict(self._weights.states)

    def register_trainable_weights(self, states: Union[Mapping[str, State], Any]) -> None:
        """Register the parameter states to update.

        Parameters
        ----------
        states : dict or sequence of State
            Usually ``net.states(brainx.ParamState)``. A sequence is keyed by
            position (``"0"``, ``"1"``, ...). Registering the same state again
            under the same key does nothing.

        Register every weight before the first :meth:`update`: optax's state
        covers all of them and is initialised here.
        """
        if not isinstance(states, Mapping):
            leaves = jax.tree.leaves(states, is_leaf=lambda x: isinstance(x, State))
            states = {str(i): s for i, s in enumerate(leaves)}
        registered = self._weights.states
        for key, s in states.items():
            if not isinstance(s, State):
                raise TypeError(f"register_trainable_weights: {key!r} is {s!r}, not a State.")
            if key in registered and registered[key] is not s:
                raise ValueError(f"register_trainable_weights: {key!r} is already registered "
                                 f"to a different state ({registered[key]!r}).")
        new = {k: s for k, s in states.items() if k not in registered}
        if not new:
            return
        count = self.step_count.value
        if not isinstance(count, Tracer):   # inside vmap_new_states, a fresh optimiser's count
            count = int(count)              # is traced: rely on _updated alone
        if self._updated or (not isinstance(count, Tracer) and count > 0):
            raise RuntimeError(
                f"register_trainable_weights: {list(new)} arrive after the first update. optax's "
                "state covers every weight and would start again from zero; register all "
                "weights before the first update(), or build a new optimiser.")
        registered.update(new)
        self.opt_state.value = self.tx.init(
            {k: mantissas(s.value) for k, s in registered.items()})

    def current_lr(self) -> Any:
        """The learning rate of the coming update (``None`` when not given)."""
        return self.lr(self.step_count.value) if callable(self.lr) else self.lr

    def update(self, grads: Mapping[str, Any], **extra_args: Any) -> None:
        """Apply one update with ``grads`` (keyed like the registered weights).

        Parameters
        ----------
        grads : dict
            One gradient per registered weight, with the weight's structure
            and shapes. Plain arrays or Quantities (their mantissas are used).
        **extra_args
            Passed to ``tx.update`` (for transformations that take them, such
            as ``optax.lbfgs``'s ``value``, ``grad`` and ``value_fn``).

        Every check runs before anything is written: a refused update leaves
        the parameters, ``opt_state`` and ``step_count`` as they were.
        """
        registered = self._weights.states
        if not isinstance(grads, Mapping):
            raise TypeError(f"update() expects a dict of gradients keyed like the registered "
                            f"weights, got {type(grads).__name__}.")
        unknown = [k for k in grads if k not in registered]
        if unknown:
            raise KeyError(f"update(): gradients for unregistered weights {unknown}; registered: "
                           f"{list(registered)}.")
        missing = [k for k in registered if k not in grads]
        if missing:
            raise KeyError(f"update(): no gradient for the registered weights {missing}. optax "
                           "updates all weights together: pass a gradient for each, or register "
                           "only the weights you train.")
        params = {k: mantissas(s.value) for k, s in registered.items()}
        g = {k: mantissas(grads[k]) for k in registered}
        for key, state in registered.items():
            if _layout(g[key]) != _layout(params[key]):
                raise ValueError(
                    f"update(): the gradient for {key!r} does not match the structure/shapes of "
                    f"{state!r}: got {_layout(g[key])[1]} in {_layout(g[key])[0]}.")
        updates, new_opt_state = self.tx.update(g, self.opt_state.value, params, **extra_args)
        new_params = optax.apply_updates(params, updates)
        for key, state in registered.items():
            state.value = with_units_of(state.value, new_params[key])
        self.opt_state.value = new_opt_state
        self.step_count.value = self.step_count.value + 1
        self._updated = True


Optimizer = OptaxOptimizer  # the name brainstate's and the earlier brainx's base class had
