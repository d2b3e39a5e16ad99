"""What a stateful function keeps for its backward pass: `saved_residuals`, `print_saved_residuals`.

The stateful counterparts of ``jax.ad_checkpoint.saved_residuals`` and
``print_saved_residuals``. The function is traced once with every state
value it reads or writes named after its state
(:class:`~brainx.transform.remat.state_names.NamingScope`); the forward pass
of ``jax.vjp`` of the resulting pure function is then read by
:func:`~brainx.transform.remat.residual_report.analyse_residuals`, which says
of each residual whether it is a state's value (by path and type), an
argument, a named value or an intermediate (with its source line), and how
many loop steps stacked it. Nothing is run and no state changes.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, List, Tuple

import jax
import jax.numpy as jnp

from brainx.state.state import State
from brainx.transform.core.stateful import StatefulFunction, peek_state_values
from brainx.transform.remat.residual_report import Residual, ResidualReport, analyse_residuals
from brainx.transform.remat.state_names import NamingScope, label_of_tag, state_paths, state_tag

__all__ = ["print_saved_residuals", "saved_residuals", "gradient_temp_bytes", "Residual",
           "ResidualReport"]


def _grad_list(grad_states: Any) -> List[State]:
    return jax.tree.leaves(grad_states, is_leaf=lambda x: isinstance(x, State))


def _arg_labels(fun: Callable, args: tuple) -> List[str]:
    """A label per leaf of ``args``: the parameter's name, with the leaf's path inside it."""
    try:
        names = [p.name for p in inspect.signature(fun).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    labels = []
    for i, arg in enumerate(args):
        name = names[i] if i < len(names) else f"args[{i}]"
        for path, _ in jax.tree_util.tree_flatten_with_path(arg)[0]:
            labels.append(name + jax.tree_util.keystr(path))
    return labels


def _pure_of(fun: Callable, args: tuple, kwargs: dict, grad_states: Any, paths: Any):
    """``(f, grad_values, dyn_args, labels)``: ``f(grad_values, *dyn_args)`` is ``fun``'s output."""
    grad_list = _grad_list(grad_states)
    found = state_paths(*[p for p in (paths, grad_states, getattr(fun, "__self__", None), *args)
                          if p is not None])
    name = getattr(fun, "__name__", "fun")

    def named(*a, **k):
        with NamingScope(found):
            return fun(*a, **k)

    sf = StatefulFunction(named, name=f"saved_residuals({name})")

    def build(sig, key, dyn_args, dyn_kwargs):
        values = peek_state_values(sig.states)
        missing = [s for s in grad_list if s not in sig.index]
        if missing:
            raise ValueError(
                f"saved_residuals({name}): grad_states includes {missing!r}, which {name} never "
                "reads. Pass only states the function reads (or none).")
        positions = [sig.index[s] for s in grad_list]
        pure = sf.pure(sig, key)

        def f(grad_values, *dyn):
            vals = list(values)
            for p, v in zip(positions, grad_values):
                vals[p] = v
            return pure(vals, *dyn, **dyn_kwargs)[0]

        return f, [values[p] for p in positions], dyn_args

    f, grad_values, dyn_args = sf.call(build, args, kwargs)
    labels = [("state", label_of_tag(state_tag(s, found.get(s))))
              for s, v in zip(grad_list, grad_values) for _ in jax.tree.leaves(v)]
    return f, grad_values, dyn_args, labels + [("argument", a) for a in _arg_labels(fun, dyn_args)]


def _flat(f: Callable, grad_values, dyn_args) -> Tuple[Callable, list]:
    leaves, tree = jax.tree.flatten((grad_values, dyn_args))

    def flat(*xs):
        g, a = jax.tree.unflatten(tree, xs)
        return f(g, *a)

    return flat, leaves


def saved_residuals(fun: Callable, *args, grad_states: Any = None, paths: Any = None,
                    **kwargs) -> ResidualReport:
    """The residuals reverse-mode AD of ``fun`` keeps, each with its origin and size.

    ``fun`` is differentiated with respect to ``grad_states`` (a state, a
    sequence or a dict of states) and its positional arguments, as
    ``jax.ad_checkpoint.saved_residuals`` does. Each :class:`Residual` gives
    its shape, dtype and bytes, and its origin in the user's terms: a state by
    path and type (``lif.V (HiddenState)``), an argument, a
    ``checkpoint_name``, or an intermediate with its source line. Residuals
    kept once per loop step carry the loop lengths (``1000 x f32[256]``).

    Parameters
    ----------
    fun : callable
        The function; it may read and write states.
    *args, **kwargs
        Its arguments.
    grad_states : State, sequence or dict of States, optional
        The states differentiated.
    paths : module, dict or sequence, optional
        Where to find the states' paths (``brainx.graph.states`` of it). By
        default: ``grad_states`` (a dict of paths), the object of a bound
        method, and the arguments. A state without a path shows its ``name``
        or its type.

    Returns
    -------
    ResidualReport
        A list of :class:`Residual` with ``total_bytes``; ``str()`` is a table.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.ones(3), name="w")
    >>> def f(x):
    ...     return jnp.sum(jnp.sin(w.value * x))
    >>> report = brainx.transform.saved_residuals(f, jnp.ones(3), grad_states=w)
    >>> [(r.kind, r.origin) for r in report]   # d/dw needs x; d/dx needs w; both need cos
    [('argument', 'x'), ('state', 'w (ParamState)'), ('intermediate', 'output of cos')]
    >>> report.total_bytes
    36
    """
    f, grad_values, dyn_args, labels = _pure_of(fun, args, kwargs, grad_states, paths)
    flat, leaves = _flat(f, grad_values, dyn_args)
    closed, out_shape = jax.make_jaxpr(lambda *xs: jax.vjp(flat, *xs), return_shape=True)(*leaves)
    num_res = len(jax.tree.leaves(out_shape[1]))
    jaxpr = closed.jaxpr
    res_vars = jaxpr.outvars[len(jaxpr.outvars) - num_res:]
    return analyse_residuals(jaxpr, res_vars, labels)


def gradient_temp_bytes(fun: Callable, *args, grad_states: Any = None, paths: Any = None,
                        **kwargs) -> int:
    """XLA's temporary memory (bytes) of the compiled gradient :func:`saved_residuals` reads.

    The gradient with respect to ``grad_states`` and the positional
    arguments, output cotangents all ones (``memory_analysis()``).
    """
    f, grad_values, dyn_args, _ = _pure_of(fun, args, kwargs, grad_states, paths)
    flat, leaves = _flat(f, grad_values, dyn_args)

    def backward(*xs):
        out, vjp = jax.vjp(flat, *xs)
        return vjp(jax.tree.map(jnp.ones_like, out))

    compiled = jax.jit(backward).lower(*leaves).compile()
    return int(compiled.memory_analysis().temp_size_in_bytes)


def print_saved_residuals(fun: Callable, *args, grad_states: Any = None, paths: Any = None,
                          **kwargs) -> ResidualReport:
    """Print :func:`saved_residuals` as a table, with XLA's temp bytes of the compiled gradient.

    Returns the report (its ``temp_bytes`` set).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.ones(3), name="w")
    >>> _ = brainx.transform.print_saved_residuals(
    ...     lambda x: jnp.sum(w.value * x), jnp.ones(3), grad_states=w)  # doctest: +ELLIPSIS
    residual  bytes  kind      origin          source
    --------  -----  --------  --------------  ------
    f32[3]       12  argument  x
    f32[3]       12  state     w (ParamState)
    total 24 bytes in 2 residuals; XLA temp memory of the compiled gradient ... bytes
    """
    report = saved_residuals(fun, *args, grad_states=grad_states, paths=paths, **kwargs)
    report.temp_bytes = gradient_temp_bytes(fun, *args, grad_states=grad_states, paths=paths,
                                            **kwargs)
    print(report.table())
    return report
