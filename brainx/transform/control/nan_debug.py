"""Finding where a NaN or an Inf comes from: `debug_nan`, `debug_nan_if`, `breakpoint_if`.

:func:`debug_nan` runs a stateful function's pure form under
``jax.experimental.checkify`` with its float checks: every primitive that
makes a NaN (or divides by zero) is recorded with its source line. An error
is raised only when a NaN or an Inf reaches what the function gives back
(its return value or the new value of a state it writes): a NaN made in a
branch that ``jnp.where`` then discards is not reported. The report names
the primitive and the line that made the NaN, and which outputs hold NaN or
Inf (by State, for written states). No state is changed.

Called eagerly, the error is raised at once. Inside ``jit``, a loop or
``vmap``, the check is compiled in and a host callback raises when the
compiled code runs (JAX wraps the error in its runtime error). Under
``vmap``, the report is about the first lane whose outputs hold a NaN.
"""

from __future__ import annotations

import functools
import pathlib
import traceback
from typing import Any, Callable, List, Sequence

import jax
import jax.numpy as jnp
from jax.core import Tracer
from jax.experimental import checkify

from brainx.transform.core.arguments import function_name
from brainx.transform.core.stateful import StatefulFunction, read_state_values
from brainx.transform.core.unvmap import unvmap

__all__ = ["debug_nan", "debug_nan_if", "breakpoint_if", "has_nan_or_inf"]

_BRAINX_DIR = str(pathlib.Path(__file__).resolve().parents[2])


def has_nan_or_inf(tree: Any) -> Any:
    """A scalar bool: whether any inexact leaf of ``tree`` holds a NaN or an Inf."""
    flags = [jnp.any(~jnp.isfinite(x)) for x in jax.tree.leaves(tree)
             if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
    return jnp.any(jnp.stack(flags)) if flags else jnp.asarray(False)


def debug_nan(fn: Callable, *args, phase: str = "") -> None:
    """Run ``fn(*args)`` with NaN/Inf checks; raise if one reaches its outputs.

    Parameters
    ----------
    fn : callable
        May read and write states. It runs on its pure form: no state is
        changed.
    *args
        The positional arguments to run it with.
    phase : str
        A label put in the message (``"forward"``, ``"grad"``, ...).

    Raises
    ------
    RuntimeError
        When a NaN or an Inf reaches ``fn``'s return value or a written
        state's new value. The message starts ``"<name>: NaN/Inf detected"``
        (brainstate's words) and names the primitive (``Introduced by
        primitive``) and line (``Source location``) that made the NaN, and
        the outputs that hold it (``Contaminated outputs``). Unlike
        brainstate's, it starts with the function's qualified name and names
        each output (``the return value[...]``, ``the new value of State``). Inside ``jit`` (or any trace) the
        error is raised by a host callback when the compiled code runs.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> brainx.transform.debug_nan(jnp.log, jnp.array([1.0, 2.0]))   # fine: nothing happens
    >>> try:
    ...     brainx.transform.debug_nan(jnp.log, jnp.array([-1.0, 2.0]))
    ... except RuntimeError as e:
    ...     print(str(e).splitlines()[1])
      Introduced by primitive `log`
    """
    sf = StatefulFunction(fn, name=f"debug_nan({function_name(fn)})")

    def run(sig, key, dyn_args, dyn_kwargs):
        values = read_state_values(sig.states)
        checked = checkify.checkify(sf.pure(sig, key), errors=checkify.float_checks)
        err, (out, new_values) = checked(values, *dyn_args, **dyn_kwargs)
        labels = [f"the return value{jax.tree_util.keystr(path)}"
                  for path, _ in jax.tree_util.tree_flatten_with_path(out)[0]]
        labels += [f"the new value of {s!r}" for s, v in zip(sig.write_states, new_values)
                   for _ in jax.tree.leaves(v)]
        _raise_if_bad(err, jax.tree.leaves((out, new_values)), labels, sf.name, phase)

    sf.call(run, args, {})


def debug_nan_if(has_nan: Any, fn: Callable, *args, phase: str = "") -> None:
    """:func:`debug_nan` of ``fn(*args)``, run only when ``has_nan`` is true.

    ``has_nan`` may be traced (the check then sits in a ``lax.cond`` and costs
    nothing while it is false); under ``vmap`` it is true when any lane's is.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> x = jnp.array([-1.0, 2.0])
    >>> brainx.transform.debug_nan_if(False, jnp.log, x)   # not checked
    >>> try:
    ...     brainx.transform.debug_nan_if(jnp.any(x < 0), jnp.log, x)
    ... except RuntimeError as e:
    ...     print("NaN" in str(e))
    True
    """
    pred = unvmap(has_nan, op="any")
    if not isinstance(pred, Tracer):
        if bool(pred):
            debug_nan(fn, *args, phase=phase)
        return
    jax.lax.cond(pred, lambda: debug_nan(fn, *args, phase=phase), lambda: None)


def breakpoint_if(pred: Any, **breakpoint_kwargs) -> Any:
    """``jax.debug.breakpoint(**breakpoint_kwargs)``, only when ``pred`` is true.

    Under ``vmap``, it stops when any lane's ``pred`` is true. Returns the
    ``token`` given in ``breakpoint_kwargs`` (``None`` by default).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> brainx.transform.breakpoint_if(jnp.array(False))   # does not stop
    """
    token = breakpoint_kwargs.get("token")
    pred = unvmap(pred, op="any")
    if not isinstance(pred, Tracer):  # known now: no cond, and no frames captured when false
        return jax.debug.breakpoint(**breakpoint_kwargs) if bool(pred) else token
    return jax.lax.cond(pred, lambda: jax.debug.breakpoint(**breakpoint_kwargs), lambda: token)


# -- the report ------------------------------------------------------------------------------

def _raise_if_bad(err: Any, leaves: Sequence[Any], labels: Sequence[str], name: str,
                  phase: str) -> None:
    """Raise now (concrete values) or from a host callback (traced) if ``leaves`` are not finite."""
    bad = has_nan_or_inf(leaves)
    flag = unvmap(bad, op="any")
    report = functools.partial(_raise_report, labels=tuple(labels), name=name, phase=phase)
    if not isinstance(flag, Tracer):
        if bool(flag):
            report(True, err, list(leaves))
        return
    # Under vmap the callback runs once per lane: the first lane with a NaN raises.
    jax.lax.cond(flag, lambda b, e, x: jax.debug.callback(report, b, e, x, ordered=True),
                 lambda b, e, x: None, bad, err, list(leaves))


def _raise_report(bad: Any, err: Any, leaves: List[Any], *, labels: Sequence[str], name: str,
                  phase: str) -> None:
    if not bad:
        return
    where = f" [{phase}]" if phase else ""
    lines = [f"{name}{where}: NaN/Inf detected in the function's outputs."]
    exc = err.get_exception()
    if exc is not None:
        prim = getattr(exc, "prim", None)
        lines.append(f"  Introduced by primitive `{prim}`" if prim else f"  Checkify report: {exc}")
        source = _user_frame(getattr(exc, "traceback_info", None))
        lines.append(f"  Source location: {source or 'unknown (only JAX or brainx frames)'}")
    else:
        lines.append("  Source location: unknown (no primitive made a NaN: an Inf from overflow "
                     "or log(0), or a NaN or an Inf given as input, reached the outputs)")
    bad_outputs = []
    for label, x in zip(labels, leaves):
        if not jnp.issubdtype(jnp.result_type(x), jnp.inexact):
            continue
        n_nan, n_inf = int(jnp.sum(jnp.isnan(x))), int(jnp.sum(jnp.isinf(x)))
        if n_nan or n_inf:
            bad_outputs.append(f"    {label}: shape {tuple(jnp.shape(x))}, {n_nan} NaN, "
                               f"{n_inf} Inf")
    if bad_outputs:
        lines += ["  Contaminated outputs:"] + bad_outputs
    raise RuntimeError("\n".join(lines))


def _user_frame(tb: Any) -> str:
    """The innermost frame of ``tb`` outside JAX and brainx, as ``File "...", line N, in f``."""
    if tb is None:
        return ""
    try:
        frames = traceback.extract_tb(tb.as_python_traceback())
    except Exception:  # pragma: no cover - a traceback JAX could not rebuild
        return ""
    for frame in reversed(frames):
        f = frame.filename
        if not (f.startswith(_BRAINX_DIR) or "/jax/" in f or "/jaxlib/" in f
                or "site-packages" in f):
            return f'File "{f}", line {frame.lineno}, in {frame.name}'
    return ""
