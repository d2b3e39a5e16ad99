"""State-aware checkpoint policies: keep, recompute or offload the values of chosen states.

A ``jax.checkpoint`` policy is a small predicate, ``policy(prim, *avals,
**params)``, asked of every operation of the checkpointed region: may its
output be kept for the backward pass? ``brainx.transform.checkpoint`` names
the value of each state where the region reads it and where it computes the
state's new value (:mod:`~brainx.transform.remat.state_names`), so a policy
can decide *by state*:

=====================================  =========================================
policy                                 keeps for the backward pass
=====================================  =========================================
``save_states(*sel)``                  the selected states' values; recomputes
                                       the rest
``recompute_states(*sel)``             every other state's value; recomputes
                                       these and every intermediate
``offload_states(*sel, ...)``          the selected states' values, in host
                                       memory
``save_anything_except_these_names``   every value but those named
``(*names)``                           (``checkpoint_name``) with these names
=====================================  =========================================

A selector is a State type (``brainx.HiddenState``), a State, a string
matched against the state's path (``"lif.*"``, shell-style) or one of its
tags, or a sequence of these. They combine with JAX's policies through
:func:`save_from_both_policies` (``jax.checkpoint_policies.save_from_both_policies``
works too for the boolean ones): ``save_from_both_policies(dots_saveable,
save_states(brainx.HiddenState))`` keeps matrix products and hidden states.

``save_anything_except_these_names`` names every intermediate value of the
region (:mod:`~brainx.transform.remat.value_names`) and keeps by name, so the
excluded values really are recomputed; JAX's own keeps everything in jax
0.10. (A state-aware "everything except these states" would save no memory
in a loop: a state the step writes is the loop's carry, which the loop keeps for
every step anyway. To keep every state's value except some, and recompute the
rest, use ``recompute_states``.)
:func:`checkpoint_with_policy` is ``jax.checkpoint`` that does this naming
when a policy asks for it; brainx's checkpoints and checkpointed loops use it.
"""

from __future__ import annotations

import fnmatch
from typing import Any, Callable, Iterable, Optional

import jax
from jax.ad_checkpoint import Offloadable, Recompute, Saveable

from brainx.state.state import State
from brainx.transform.remat.state_names import (
    NAME_PRIMITIVE, PREFIX, label_of_tag, state_of_tag,
)
from brainx.transform.remat.value_names import with_named_intermediates

__all__ = ["StatePolicy", "save_states", "recompute_states", "offload_states",
           "save_anything_except_these_names",
           "save_from_both_policies", "uses_state_names", "names_intermediates",
           "checkpoint_with_policy"]


def _flatten(selectors: Iterable[Any]) -> tuple:
    out = []
    for s in selectors:
        if isinstance(s, (list, tuple, set, frozenset)):
            out.extend(_flatten(s))
        elif isinstance(s, (type, State, str)) or callable(s):
            out.append(s)
        else:
            raise TypeError(f"A state selector is a State type, a State, a path glob or tag "
                            f"string, or a sequence of these; got {s!r}.")
    return tuple(out)


def _path(name: str) -> str:
    """The path part of a state name's label (``lif.V`` of ``lif.V (HiddenState)``)."""
    label = label_of_tag(name)
    return label.rsplit(" (", 1)[0]


class StatePolicy:
    """A checkpoint policy that decides on the named values of selected states.

    Parameters
    ----------
    selectors : tuple
        State types, States, path globs / tags (see the module docstring).
    """

    def __init__(self, *selectors: Any):
        self.selectors = _flatten(selectors)

    def selects(self, name: str) -> bool:
        """Whether the value named ``name`` belongs to a selected state."""
        if not name.startswith(PREFIX):
            return False
        state = state_of_tag(name)
        path = _path(name)
        for sel in self.selectors:
            if isinstance(sel, type):
                if state is not None and isinstance(state, sel):
                    return True
            elif isinstance(sel, State):
                if state is sel:
                    return True
            elif isinstance(sel, str):
                if fnmatch.fnmatchcase(path, sel) or (state is not None and sel in (state.tag or ())):
                    return True
        return False

    def decide(self, selected: bool) -> Any:
        raise NotImplementedError

    def __call__(self, prim, *avals, **params) -> Any:
        if prim is NAME_PRIMITIVE and params.get("name", "").startswith(PREFIX):
            return self.decide(self.selects(params["name"]))
        return self.decide(None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.selectors!r}"


class _Save(StatePolicy):
    def decide(self, selected):
        return bool(selected)


class _Recompute(StatePolicy):
    def decide(self, selected):
        return selected is False


class _Offload(StatePolicy):
    def __init__(self, *selectors, src: str = "device", dst: str = "pinned_host"):
        super().__init__(*selectors)
        self.src, self.dst = src, dst

    def decide(self, selected):
        return Offloadable(src=self.src, dst=self.dst) if selected else Recompute


def save_states(*selectors: Any) -> StatePolicy:
    """Keep the values of the selected states; recompute everything else.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx.transform import policies
    >>> v = brainx.HiddenState(jnp.zeros(3)); w = brainx.ParamState(jnp.ones(3))
    >>> @brainx.transform.checkpoint(policy=policies.save_states(brainx.HiddenState))
    ... def step(x):
    ...     v.value = jnp.sin(w.value * x + v.value)
    ...     return jnp.sum(v.value ** 2)
    >>> report = brainx.transform.saved_residuals(step, jnp.ones(3), grad_states=w)
    >>> sorted({r.origin.split('#')[0] for r in report if r.kind == "state"})
    ['HiddenState', 'ParamState']
    """
    return _Save(*selectors)


def recompute_states(*selectors: Any) -> StatePolicy:
    """Keep the values of every state except the selected ones; recompute those and the rest."""
    return _Recompute(*selectors)


def offload_states(*selectors: Any, src: str = "device", dst: str = "pinned_host") -> StatePolicy:
    """Move the values of the selected states to ``dst`` memory (host) for the backward pass.

    Everything else is recomputed. Offloading needs a backend with host
    memory spaces (GPU, TPU); combine it with other policies through
    :func:`save_from_both_policies`.
    """
    return _Offload(*selectors, src=src, dst=dst)


def save_from_both_policies(policy_1: Callable, policy_2: Callable) -> Callable:
    """Keep what either policy keeps; an offloading decision wins over recomputation.

    Like ``jax.checkpoint_policies.save_from_both_policies``, but accepts
    policies that offload (``offload_states``, ``offload_dot_with_no_batch_dims``).
    """
    def policy(prim, *args, **params):
        out = [p(prim, *args, **params) for p in (policy_1, policy_2)]
        if any(o is True or o is Saveable for o in out):
            return True
        for o in out:
            if isinstance(o, Offloadable):
                return o
        return False

    policy._brainx_parts = (policy_1, policy_2)
    return policy


class _SaveAnythingExceptNames:
    """Keep every named value whose name is not excluded; unnamed operations are recomputed."""

    names_intermediates = True

    def __init__(self, names):
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"save_anything_except_these_names takes the names given to "
                                f"checkpoint_name (strings), got {n!r}.")
        self.names = frozenset(names)

    def __call__(self, prim, *avals, **params):
        if prim is NAME_PRIMITIVE:
            return params.get("name") not in self.names
        return False

    def __repr__(self) -> str:
        return f"save_anything_except_these_names{tuple(sorted(self.names))!r}"


def save_anything_except_these_names(*names: str) -> Callable:
    """Keep every value except those named (``checkpoint_name``) with one of ``names``.

    Unlike ``jax.checkpoint_policies.save_anything_except_these_names`` of
    jax 0.10 (which keeps everything), the excluded values are recomputed:
    every other value the function computes is named and kept by name (see
    the module docstring). What derivative rules compute from those values
    (the ``cos`` of a ``sin``) is recomputed too, cheaply, from what is kept.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> from jax.ad_checkpoint import checkpoint_name
    >>> from brainx.transform import policies
    >>> w = brainx.ParamState(jnp.ones((3, 3)), name="w")
    >>> def f(x):
    ...     pre = checkpoint_name(jnp.sin(w.value @ x), "pre")
    ...     return jnp.sum(pre * x)                 # d/dx needs pre
    >>> def kept(policy):
    ...     ck = brainx.transform.checkpoint(f, policy=policy)
    ...     return [r.origin for r in brainx.transform.saved_residuals(ck, jnp.ones(3),
    ...                                                                grad_states=w)]
    >>> kept(policies.save_anything_except_these_names())
    ['x', 'output of dot_general', "'pre'", 'w (ParamState)']
    >>> kept(policies.save_anything_except_these_names("pre"))   # pre = sin(w @ x) recomputed
    ['x', 'output of dot_general', 'w (ParamState)']
    """
    return _SaveAnythingExceptNames(names)


def uses_state_names(policy: Any) -> bool:
    """Whether ``policy`` is, or combines, a :class:`StatePolicy` (then states are named)."""
    return _any_part(policy, lambda p: isinstance(p, StatePolicy))


def names_intermediates(policy: Any) -> bool:
    """Whether ``policy`` is, or combines, one that keeps intermediate values by name."""
    return _any_part(policy, lambda p: getattr(p, "names_intermediates", False) is True)


def _any_part(policy: Any, test: Callable[[Any], bool], _depth: int = 0) -> bool:
    """``test`` of ``policy`` or of a policy it combines (``save_from_both_policies``)."""
    if policy is None or _depth > 4:
        return False
    if test(policy):
        return True
    parts = list(getattr(policy, "_brainx_parts", ()))
    parts += [_safe_contents(c) for c in (getattr(policy, "__closure__", None) or ())
              if callable(_safe_contents(c))]
    return any(_any_part(p, test, _depth + 1) for p in parts)


def _safe_contents(cell) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def checkpoint_with_policy(fun: Callable, *, policy: Optional[Callable],
                           prevent_cse: bool = True) -> Callable:
    """``jax.checkpoint(fun, policy=policy, prevent_cse=prevent_cse)``, naming every
    intermediate value first when ``policy`` keeps values by name
    (:func:`save_anything_except_these_names`).

    >>> import jax, jax.numpy as jnp
    >>> f = checkpoint_with_policy(jnp.sin, policy=save_anything_except_these_names("x"))
    >>> float(jax.grad(f)(0.0))
    1.0
    """
    if names_intermediates(policy):
        fun = with_named_intermediates(fun)
    return jax.checkpoint(fun, prevent_cse=prevent_cse, policy=policy)
