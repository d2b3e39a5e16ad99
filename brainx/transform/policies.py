"""``brainx.transform.policies``: checkpoint policies by state, and JAX's, in one namespace.

See :mod:`brainx.transform.remat.policies` for the state-aware ones and for
``save_anything_except_these_names``, which here recomputes what it excludes
(JAX's, in jax 0.10, keeps everything).

>>> from brainx.transform import policies
>>> callable(policies.save_states("lif.*")) and callable(policies.dots_saveable)
True
"""

import jax


from brainx.transform.remat.policies import (  # noqa: F401
    StatePolicy, checkpoint_with_policy, names_intermediates, offload_states, recompute_states,
    save_anything_except_these_names, save_from_both_policies,
    save_states, uses_state_names,
)

# JAX's policies, re-exported to combine with ours.
_jax = jax.checkpoint_policies
checkpoint_dots = _jax.checkpoint_dots
dots_saveable = _jax.dots_saveable
dots_with_no_batch_dims_saveable = _jax.dots_with_no_batch_dims_saveable
everything_saveable = _jax.everything_saveable
nothing_saveable = _jax.nothing_saveable
offload_dot_with_no_batch_dims = _jax.offload_dot_with_no_batch_dims
save_only_these_names = _jax.save_only_these_names
save_any_names_but_these = _jax.save_any_names_but_these
save_and_offload_only_these_names = _jax.save_and_offload_only_these_names

__all__ = ["StatePolicy", "save_states", "recompute_states", "offload_states",
           "save_anything_except_these_names",
           "save_from_both_policies", "uses_state_names", "names_intermediates",
           "checkpoint_with_policy", "everything_saveable",
           "nothing_saveable", "dots_saveable", "checkpoint_dots",
           "dots_with_no_batch_dims_saveable", "offload_dot_with_no_batch_dims",
           "save_only_these_names", "save_any_names_but_these",
           "save_and_offload_only_these_names"]
