"""``for_loop`` and ``scan`` of a checkpointed step: its ring buffers restored, not kept.

:func:`~brainx.transform.for_loop` and :func:`~brainx.transform.scan` run
their steps through :func:`checkpointed_step_scan` (a hook of
:mod:`brainx.transform.control.loops`, set here, one group up). A step that
calls a :func:`~brainx.transform.checkpoint` ed function without a policy and
writes a ring buffer (see :mod:`~brainx.transform.remat.ring_buffers`) is run
by a loop with its own reverse pass: per step it keeps the carry without the
buffers plus each buffer's overwritten window, and walks the loop backwards,
restoring the buffers and recomputing each step once, as ``jax.checkpoint``
would (``vmap`` goes through it; forward mode does not: see
:mod:`~brainx.transform.remat.ring_buffers` for the switch). A loop with a progress bar,
and any other step, is the ``lax.scan`` it always was (from the one trace of the
step that looked for a checkpoint: the step's Python runs once, as before).
"""

from __future__ import annotations

from typing import Callable

import jax
from jax import lax
from jax.extend import core as jex_core

from brainx.transform.control import loops
from brainx.transform.remat.reverse_loops import vjp_scan
from brainx.transform.remat.ring_buffers import PER_STEP, enabled, find_ring_plan, has_checkpoint

__all__ = ["checkpointed_step_scan"]


def checkpointed_step_scan(body: Callable, init, xs, *, length: int, reverse: bool, unroll):
    """``lax.scan(body, init, xs, ...)``, reversed with ring buffers restored where the step
    checkpoints them (else exactly that ``lax.scan``).

    >>> import jax, jax.numpy as jnp
    >>> def step(c, x):  # c = (buffer, index): one row written per step
    ...     buf, i = c
    ...     row = jax.checkpoint(lambda b: jnp.sin(b[(i - 3) % 4] + x))(buf)
    ...     return (buf.at[i].set(row), (i + 1) % 4), row.sum()
    >>> loss = lambda xs, loop: loop(step, (jnp.zeros((4, 8)), 0), xs)[1].sum()
    >>> ring = lambda f, c, xs: checkpointed_step_scan(f, c, xs, length=20, reverse=False,
    ...                                                 unroll=1)
    >>> xs = jnp.linspace(0.0, 1.0, 160).reshape(20, 8)
    >>> bool(jnp.allclose(jax.grad(loss)(xs, ring), jax.grad(loss)(xs, jax.lax.scan)))
    True
    """
    if not length or not enabled():
        return lax.scan(body, init, xs, length=length, reverse=reverse, unroll=unroll)
    x0 = None if xs is None else jax.eval_shape(lambda xs: jax.tree.map(lambda a: a[0], xs), xs)
    closed, shape = jax.make_jaxpr(body, return_shape=True)(init, x0)
    if has_checkpoint(closed.jaxpr, without_policy=True):
        step = lambda consts, c, x: body(c, x)
        if find_ring_plan(step, (), init, x0) is not None:
            return vjp_scan(step, (), init, xs, length, reverse=reverse, unroll=unroll or 1,
                            schedule=PER_STEP)
    run, out_tree = jex_core.jaxpr_as_fun(closed), jax.tree.structure(shape)
    traced = lambda c, x: jax.tree.unflatten(out_tree, run(*jax.tree.leaves((c, x))))
    return lax.scan(traced, init, xs, length=length, reverse=reverse, unroll=unroll)


loops.STEP_SCAN[0] = checkpointed_step_scan
