"""What each checkpointing strategy costs on *your* gradient: :func:`memory_report`.

The checkpointed loops of a function run the strategy of the
``checkpoint_strategy`` setting when they name none
(:mod:`~brainx.transform.remat.default_strategy`). :func:`memory_report`
sets it to each strategy in turn, compiles the gradient of the function
(``brainx.transform.jit(brainx.transform.grad(fn, grad_states=...))``, what
a training step compiles) and measures:

==================  ============================================================
column              what
==================  ============================================================
temp memory         XLA's temporary memory of the compiled gradient
                    (``memory_analysis().temp_size_in_bytes``)
time                the median time of a call (after a first, warm-up call)
max rel. grad       the largest difference of the gradient from the first
error               strategy's (no remat by default), relative to that
                    gradient's largest entry, over every leaf
==================  ============================================================

The "no remat" row is a real no-remat program even when the step handed to the
loop is already :func:`~brainx.transform.checkpoint` ed: ``NoRemat`` runs the
step with its checkpoints inlined. Below the table, a line warns of each
strategy that needs more memory than no remat, naming the states its reverse
pass keeps (largest first, from :func:`~brainx.transform.saved_residuals`):
usually a large state in the loop carry, such as a delay buffer kept at every
segment start.

So the function is written once, with plain ``checkpointed_for_loop(step,
xs)`` calls (no ``checkpoint=``), and the report says what each strategy
would cost. Every call starts from the states' values as they were, and the
states are put back afterwards.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import jax
import numpy as np

from brainx import environ
from brainx.state.trace import StateTraceStack
from brainx.transform.autodiff.gradients import grad
from brainx.transform.compiled.jit import jit
from brainx.transform.remat.checkpoint_strategies import (
    Binomial, CheckpointStrategy, Nested, NoRemat, PerStepRemat, as_strategy,
)
from brainx.transform.remat.default_strategy import KEY, default_strategy_reads
from brainx.transform.remat.memory_budget import Budgeted
from brainx.transform.remat.residuals import saved_residuals

__all__ = ["memory_report", "MemoryReport", "MemoryRow", "default_strategies"]


@dataclass(frozen=True)
class MemoryRow:
    """One strategy's cost: ``temp_bytes``, ``seconds`` per call, ``max_error`` of the gradient.

    ``chosen`` is the strategy a :class:`~brainx.transform.remat.memory_budget.Budgeted`
    row ran (``None`` for the others).
    """

    name: str
    strategy: CheckpointStrategy
    temp_bytes: int
    seconds: float
    max_error: float
    chosen: Optional[CheckpointStrategy] = None
    #: the states the reverse pass keeps, largest first, with their bytes (set for a row
    #: that needs more memory than no remat)
    kept_states: Tuple[Tuple[str, int], ...] = ()


@dataclass
class MemoryReport:
    """The rows of :func:`memory_report`, the first being the reference; ``str()`` is a table."""

    rows: List[MemoryRow] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, key: Union[int, str]) -> MemoryRow:
        """A row by position or by name."""
        if isinstance(key, str):
            for row in self.rows:
                if row.name == key:
                    return row
            raise KeyError(f"No row named {key!r}; the rows are {[r.name for r in self.rows]}.")
        return self.rows[key]

    def table(self) -> str:
        ref = self.rows[0]
        cells = []
        for r in self.rows:
            name = r.name if r.chosen is None else f"{r.name} -> {_short(r.chosen)}"
            cells.append((name, f"{r.temp_bytes / 1024:,.1f}",
                          f"{r.temp_bytes / max(ref.temp_bytes, 1):.2f}x",
                          f"{r.seconds * 1e3:,.2f}", f"{r.seconds / ref.seconds:.2f}x",
                          f"{r.max_error:.1e}"))
        head = ("strategy", "temp KiB", "memory", "ms / call", "time", "max rel. grad error")
        widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(head)]
        line = lambda row: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                     for i, (c, w) in enumerate(zip(row, widths)))
        return "\n".join([line(head), line(["-" * w for w in widths])]
                          + [line(c) for c in cells] + self.warnings())

    def warnings(self) -> List[str]:
        """A line for each strategy that needs more memory than the no-remat row."""
        base = next((r for r in self.rows if isinstance(r.strategy, NoRemat)), None)
        if base is None:
            return []
        out = []
        for r in self.rows:
            if r.temp_bytes <= base.temp_bytes:
                continue
            kept = ", ".join(f"{name} ({b / 1024:,.1f} KiB)" for name, b in r.kept_states)
            out.append(f"warning: {r.name} needs {r.temp_bytes / max(base.temp_bytes, 1):.2f}x "
                       f"the memory of no remat; " + (
                           f"its reverse pass keeps the states {kept}" if kept else
                           "see print_saved_residuals for what it keeps"))
        return out

    __str__ = table


def _short(strategy: CheckpointStrategy) -> str:
    """``Nested(levels=3)``: the repr without the fields left at their defaults."""
    fields = getattr(strategy, "__dataclass_fields__", {})
    parts = [f"{k}={getattr(strategy, k)!r}" for k, f in fields.items()
             if f.repr and getattr(strategy, k) != f.default and k != "choice"]
    return f"{type(strategy).__name__}({', '.join(parts)})"


def default_strategies(memory_budget: Optional[int] = None) -> Dict[str, CheckpointStrategy]:
    """The strategies :func:`memory_report` compares unless told otherwise.

    >>> list(default_strategies())
    ['no remat', 'per-step checkpoint', 'Nested()', 'Binomial(8)']
    >>> list(default_strategies(memory_budget=2**20))[-1]
    'budget 1,024 KiB'
    """
    out: Dict[str, CheckpointStrategy] = {"no remat": NoRemat(),
                                          "per-step checkpoint": PerStepRemat(),
                                          "Nested()": Nested(), "Binomial(8)": Binomial(8)}
    if memory_budget is not None:
        out[f"budget {memory_budget / 1024:,.0f} KiB"] = Budgeted(memory_budget)
    return out


def _named(strategies: Union[None, Mapping[str, Any], Sequence[Any]],
           memory_budget: Optional[int]) -> Dict[str, CheckpointStrategy]:
    if strategies is None:
        return default_strategies(memory_budget)
    if isinstance(strategies, Mapping):
        out = {str(k): as_strategy(v) for k, v in strategies.items()}
    else:
        out = {}
        for s in strategies:
            s = as_strategy(s)
            out[_short(s)] = s
    if memory_budget is not None:
        out[f"budget {memory_budget / 1024:,.0f} KiB"] = Budgeted(memory_budget)
    if not out:
        raise ValueError("memory_report: strategies is empty; give at least one strategy.")
    return out


def _leaves(tree: Any) -> List[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _kept_states(fn: Callable, args: tuple, kwargs: dict, grad_kwargs: dict, strategy,
                 top: int = 3) -> Tuple[Tuple[str, int], ...]:
    """The states the gradient under ``strategy`` keeps, by bytes, the ``top`` largest."""
    try:
        with environ.context(**{KEY: strategy}), StateTraceStack("memory_report", restore=True):
            report = saved_residuals(fn, *args, grad_states=grad_kwargs["grad_states"], **kwargs)
    except Exception:  # noqa: BLE001  the table stands without the names
        return ()
    by_state: Dict[str, int] = {}
    for r in report.of("state"):
        by_state[r.origin] = by_state.get(r.origin, 0) + r.nbytes
    return tuple(sorted(by_state.items(), key=lambda kv: -kv[1])[:top])


def _relative_error(leaves: List[np.ndarray], ref: List[np.ndarray]) -> float:
    """The largest ``|a - b|`` over the leaves, relative to the reference leaf's largest entry."""
    errors = [float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), np.finfo(np.float32).tiny)
              for a, b in zip(leaves, ref) if a.size]
    return max(errors, default=0.0)


def _measure(fn: Callable, args: tuple, kwargs: dict, grad_kwargs: dict, strategy, name: str,
             repeats: int):
    """``(temp_bytes, seconds, gradient leaves)`` of the gradient under ``strategy``."""
    grad_fn = jit(grad(fn, **grad_kwargs))
    with environ.context(**{KEY: strategy}):
        before = default_strategy_reads()
        lowered = grad_fn.lower(*args, **kwargs)
        if default_strategy_reads() == before:
            raise ValueError(
                f"memory_report: {getattr(fn, '__name__', 'fn')} ran no checkpointed loop that "
                f"takes its strategy from the setting, so the row {name!r} would measure the "
                "same program as every other. Call checkpointed_for_loop / checkpointed_scan "
                "in it without checkpoint=, base= or memory_budget= (and not inside a "
                "brainx.transform.jit function compiled before).")
        compiled = lowered.compile()
    temp = int(compiled.memory_analysis().temp_size_in_bytes)
    with StateTraceStack("memory_report", restore=True):  # every state as it was, after
        out = jax.block_until_ready(compiled(*args, **kwargs))
        grads = out[0] if grad_kwargs.get("has_aux") else out
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(compiled(*args, **kwargs))
            times.append(time.perf_counter() - start)
    return temp, statistics.median(times), _leaves(grads)


def memory_report(fn: Callable, *args, grad_states: Any = None,
                  strategies: Union[None, Mapping[str, Any], Sequence[Any]] = None,
                  memory_budget: Optional[int] = None, argnums: Any = None,
                  has_aux: bool = False, repeats: int = 5, verbose: bool = True,
                  **kwargs) -> MemoryReport:
    """Compile the gradient of ``fn`` under several checkpoint strategies and compare them.

    ``fn`` is a loss over states (its arguments ``*args, **kwargs``) whose
    time loops are ``checkpointed_for_loop`` / ``checkpointed_scan`` calls
    that name no strategy: each row runs them with one strategy (set as
    ``brainx.environ``'s ``checkpoint_strategy``). The gradient is
    ``brainx.transform.grad(fn, grad_states=grad_states, argnums=argnums,
    has_aux=has_aux)``, compiled with ``brainx.transform.jit``.

    Parameters
    ----------
    fn : callable
        The loss.
    *args, **kwargs
        Its arguments.
    grad_states : State, sequence or dict of States
        The states differentiated (as for :func:`~brainx.transform.grad`).
    strategies : dict or sequence, optional
        ``{name: strategy}``, or strategies (named by their repr), or names
        (``"nested"``). Default: :func:`default_strategies`. The first is the
        reference of the error and ratio columns.
    memory_budget : int, optional
        Bytes: adds a row for ``Budgeted(memory_budget)``, which shows what it chose.
    argnums, has_aux
        As for :func:`~brainx.transform.grad`.
    repeats : int
        Calls timed per strategy (the median is reported), after one warm-up call.
    verbose : bool
        Print the table.

    Returns
    -------
    MemoryReport
        Its rows (:class:`MemoryRow`: ``temp_bytes``, ``seconds``,
        ``max_error`` (relative to the reference gradient's largest entry),
        ``kept_states``), by position or name; ``str()`` is the table with its warnings.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.ones(8) * 0.5)
    >>> v = brainx.HiddenState(jnp.zeros(8))
    >>> def step(x):
    ...     v.value = jnp.tanh(w.value * v.value + x)
    ...     return jnp.sum(v.value ** 2)
    >>> def loss(xs):
    ...     v.value = jnp.zeros(8)
    ...     return brainx.transform.checkpointed_for_loop(step, xs).mean()
    >>> report = brainx.transform.memory_report(loss, jnp.ones((64, 8)), grad_states=w,
    ...                                         repeats=1, verbose=False)
    >>> [row.name for row in report]
    ['no remat', 'per-step checkpoint', 'Nested()', 'Binomial(8)']
    >>> report["no remat"].temp_bytes > report["Binomial(8)"].temp_bytes
    True
    >>> max(row.max_error for row in report) < 1e-5
    True
    """
    if repeats < 1:
        raise ValueError(f"memory_report: repeats must be at least 1, got {repeats!r}.")
    grad_kwargs = dict(grad_states=grad_states, argnums=argnums, has_aux=has_aux)
    rows, ref = [], None
    for name, strategy in _named(strategies, memory_budget).items():
        temp, secs, leaves = _measure(fn, args, kwargs, grad_kwargs, strategy, name, repeats)
        ref = leaves if ref is None else ref
        chosen = strategy.choice.strategy if isinstance(strategy, Budgeted) and \
            strategy.choice is not None else None
        rows.append(MemoryRow(name, strategy, temp, secs, _relative_error(leaves, ref), chosen))
    base = next((r.temp_bytes for r in rows if isinstance(r.strategy, NoRemat)), None)
    if base is not None:
        rows = [dataclasses.replace(r, kept_states=_kept_states(fn, args, kwargs, grad_kwargs,
                                                                 r.strategy))
                if r.temp_bytes > base else r for r in rows]
    report = MemoryReport(rows)
    if verbose:
        print(report.table())
    return report
