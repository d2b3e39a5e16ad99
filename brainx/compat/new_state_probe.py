"""`in_new_state_probe`: brainstate's question "is this the throwaway discovery pass?".

brainstate's ``*_new_states`` transforms run the function an extra time, eagerly,
to enumerate the states it touches, then throw away the states that pass
created; code binding a one-shot side effect to freshly created states (a
cache compiled over them) asks :func:`in_new_state_probe` to skip that pass.

brainx has no such pass. :func:`~brainx.transform.vmap_new_states` (and
:func:`~brainx.transform.vmap2_new_states`, built on it) trace the function
once per call signature, and the states created in that trace are the ones
kept and batched: a side effect bound to them is bound to the right objects.
The function exists so brainstate code that asks runs unchanged, and it
answers ``False`` because no brainx code runs in a discarded pass. Users reach it as
``brainx.transform.in_new_state_probe`` (``brainx/__init__.py`` sets it there).
"""

from __future__ import annotations

__all__ = ["in_new_state_probe"]


def in_new_state_probe() -> bool:
    """Whether the caller runs in a discovery pass whose new states are discarded.

    Always ``False`` in brainx: ``vmap_new_states`` keeps the states of the one
    trace it makes (see the module docstring; brainstate 0.5.4 runs an extra
    eager probe and answers ``True`` there).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> made, asked = [], []
    >>> def init():
    ...     asked.append(brainx.transform.in_new_state_probe())
    ...     made.append(brainx.ParamState(jnp.zeros(2)))
    ...     return made[-1]
    >>> w = brainx.transform.vmap_new_states(init, axis_size=3)()
    >>> asked, w is made[-1], w.value.shape      # the state built in the trace is kept
    ([False], True, (3, 2))
    """
    return False
