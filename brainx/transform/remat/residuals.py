"""What a stateful function saves for its backward pass: `print_saved_residuals`."""

from __future__ import annotations

import contextlib
import io
from typing import Callable, List

import jax
from jax.ad_checkpoint import print_saved_residuals as _jax_print_saved_residuals

from brainx.state.state import State
from brainx.transform.core.stateful import StatefulFunction, peek_state_values

__all__ = ["print_saved_residuals", "saved_residuals"]


def saved_residuals(fun: Callable, *args, grad_states=None, **kwargs) -> List[str]:
    """The residuals reverse-mode AD of ``fun`` would keep, one line each.

    The stateful counterpart of ``jax.ad_checkpoint.print_saved_residuals``:
    ``fun`` is differentiated with respect to ``grad_states`` (a state, a
    sequence or a dict of states) and its positional arguments. Each line
    gives a residual's type and where it comes from (an argument, or the
    operation and source line that made it). Nothing is run and no state
    changes.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.ones(3))
    >>> def f(x):
    ...     return jnp.sum(jnp.sin(jnp.sin(w.value * x)))
    >>> len(brainx.transform.saved_residuals(f, 1.0, grad_states=w)) > 0
    True
    >>> ckpt = brainx.transform.checkpoint(f)
    >>> all("from the argument" in line
    ...     for line in brainx.transform.saved_residuals(ckpt, 1.0, grad_states=w))
    True
    """
    grad_list = jax.tree.leaves(grad_states, is_leaf=lambda x: isinstance(x, State))
    sf = StatefulFunction(fun, name=f"saved_residuals({getattr(fun, '__name__', 'fun')})")

    def run(sig, key, dyn_args, dyn_kwargs):
        values = peek_state_values(sig.states)
        missing = [s for s in grad_list if s not in sig.index]
        if missing:
            raise ValueError(f"grad_states includes {missing!r}, which the function never reads.")
        positions = [sig.index[s] for s in grad_list]
        pure = sf.pure(sig, key)

        def f(grad_states, *args):
            vals = list(values)
            for p, v in zip(positions, grad_states):
                vals[p] = v
            return pure(vals, *args, **dyn_kwargs)[0]

        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            _jax_print_saved_residuals(f, [values[p] for p in positions], *dyn_args)
        return buffer.getvalue().splitlines()

    return sf.call(run, args, kwargs)


def print_saved_residuals(fun: Callable, *args, grad_states=None, **kwargs) -> None:
    """Print :func:`saved_residuals`: what differentiating ``fun`` would keep in memory."""
    for line in saved_residuals(fun, *args, grad_states=grad_states, **kwargs):
        print(line)
