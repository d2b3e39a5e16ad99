"""`checkpoint` / `remat`: ``jax.checkpoint`` for functions that read and write states."""

from __future__ import annotations

import functools
from typing import Callable, Optional, Sequence

import jax

from brainx._jax.traces import jit_disabled
from brainx.transform.compiled.static_hint import CONCRETIZATION_ERRORS, add_static_hint
from brainx.transform.core.arguments import no_function
from brainx.transform.core.method_binding import bind_to_instance
from brainx.transform.core.stateful import StatefulFunction, read_state_values, write_state_values
from brainx.transform.remat.policies import checkpoint_with_policy, uses_state_names
from brainx.transform.remat import ring_loops  # noqa: F401  (for_loop of a checkpointed step)
from brainx.transform.remat.state_names import named_pure, state_paths

__all__ = ["checkpoint", "remat", "CheckpointedFunction"]


class CheckpointedFunction:
    """A stateful function whose intermediate values are recomputed on the backward pass."""

    def __init__(self, fun: Callable, *, prevent_cse: bool = True, policy: Optional[Callable] = None,
                 static_argnums=(), static_argnames=()):
        self.fun = fun
        self.prevent_cse = prevent_cse
        self.policy = policy
        self._static_argnums = static_argnums
        self._static_argnames = static_argnames
        self.stateful = StatefulFunction(fun, static_argnums, static_argnames,
                                         name=f"checkpoint({getattr(fun, '__name__', 'fun')})")
        functools.update_wrapper(self, fun, updated=())

    def __call__(self, *args, **kwargs):
        if jit_disabled():
            return self.fun(*args, **kwargs)
        try:
            return self.stateful.call(self._run, args, kwargs)
        except CONCRETIZATION_ERRORS as e:  # a Python branch on a traced value: say what to do
            add_static_hint(e, "checkpoint", self.fun, self._static_argnums, self._static_argnames)
            raise

    def _run(self, sig, key, dyn_args, dyn_kwargs):
        # A fresh pure closure per call: jax.checkpoint caches traces by function,
        # and we want every call to see the current closures and attributes.
        if uses_state_names(self.policy):  # a state-aware policy decides on named state values
            paths = state_paths(getattr(self.fun, "__self__", None))
            base = named_pure(self.stateful, sig, paths)
        else:
            base = self.stateful.pure(sig, key)
        pure = checkpoint_with_policy(base, prevent_cse=self.prevent_cse, policy=self.policy)
        values = read_state_values(sig.states)
        out, new_values = pure(values, *dyn_args, **dyn_kwargs)
        write_state_values(sig.write_states, new_values)
        return out

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return bind_to_instance(self, instance, lambda f, **kw: CheckpointedFunction(f, **kw), dict(
            prevent_cse=self.prevent_cse, policy=self.policy,
            static_argnums=self._static_argnums, static_argnames=self._static_argnames))

    def __repr__(self) -> str:
        return f"<brainx.transform.remat.checkpoint of {self.stateful.name}>"


def checkpoint(fun: Optional[Callable] = None, *, prevent_cse: bool = True,
               policy: Optional[Callable[..., bool]] = None,
               static_argnums: int | Sequence[int] = (),
               static_argnames: str | Sequence[str] = ()
               ) -> CheckpointedFunction | Callable[[Callable], CheckpointedFunction]:
    """Rematerialise a stateful function: save less on the forward pass, recompute on the backward.

    Wraps ``jax.checkpoint``. The states the function reads become inputs of
    the checkpointed region and the states it writes become outputs, which
    are written back, so a checkpointed simulation step updates its
    ``HiddenState`` s exactly as the plain step would while its intermediate
    values are recomputed instead of stored when differentiated.

    Each call traces the function afresh, like ``jax.checkpoint`` is meant to:
    an attribute or closed-over array that changed since the last call is
    used with its new value, and a function that once closed over a tracer
    keeps working. Only the set of states the function touches is cached (and
    checked on every trace). The :doc:`checkpointing guide </checkpoint>` shows
    what a checkpointed step saves and what it costs; for a whole simulation loop
    see :func:`checkpointed_for_loop`. In a ``for_loop`` or ``scan``, a ring buffer
    the step writes one row of (a delay's history) is kept as that row, not whole,
    and restored on the backward pass (:mod:`~brainx.transform.remat.ring_buffers`).

    Parameters
    ----------
    fun : callable, optional
        The function. Without it, ``checkpoint(**options)`` returns a decorator.
    prevent_cse : bool
        As in ``jax.checkpoint``: stop XLA from merging the recomputation with
        the forward pass. ``False`` is safe (and faster) inside ``scan``.
    policy : callable, optional
        A ``jax.checkpoint_policies`` policy saying which intermediate values
        may be saved (for example ``dots_saveable`` or
        ``save_only_these_names('pre')`` with ``jax.ad_checkpoint.checkpoint_name``), or one
        from :mod:`brainx.transform.policies`: a state-aware one (``save_states(HiddenState)``;
        then every state value is named where the function reads or computes it), or
        ``save_anything_except_these_names('pre')``, which recomputes only ``pre``.
    static_argnums, static_argnames
        Arguments passed as Python values, positionally or by keyword; Python
        control flow on them is allowed and each value gets its own trace.
        For a method, ``self`` is argument 0.

    Returns
    -------
    CheckpointedFunction
        A callable taking ``fun``'s arguments and returning its result, with the
        same state writes; a method decorated with it stays a method. Without
        ``fun``: a decorator that makes one.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.ones(3))
    >>> h = brainx.HiddenState(jnp.zeros(3))
    >>> @brainx.transform.checkpoint(static_argnums=1)
    ... def step(x, training):
    ...     h.value = jnp.tanh(w.value * x + h.value)
    ...     return h.value.sum() if training else 0.0
    >>> loss = brainx.transform.grad(lambda x: step(x, True), grad_states=w)
    >>> loss(1.0).shape, h.value.shape
    ((3,), (3,))
    """
    if no_function(fun):
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums, static_argnames=static_argnames)
    return CheckpointedFunction(fun, prevent_cse=prevent_cse, policy=policy,
                                static_argnums=static_argnums, static_argnames=static_argnames)


remat = checkpoint
