"""`count_parameters`: how many trainable numbers a model has, per parameter state."""

from __future__ import annotations

from typing import Any, Tuple, Union

import jax
import numpy as np

from brainx.nn.modules.module import Module
from brainx.state.state import ParamState

__all__ = ["count_parameters"]


def _human(n: float, precision: int) -> str:
    """``1234 -> '1.23K'`` (numbers below 1000 as they are)."""
    if n < 1000:
        return str(int(n))
    for suffix in ("K", "M", "B", "T", "P"):
        n /= 1000.0
        if round(n, precision) < 1000:
            return f"{n:.{precision}f}{suffix}"
    return f"{n:.{precision}f}E"


def _size(value: Any) -> int:
    leaves = jax.tree.leaves(value)
    return int(sum(np.size(getattr(x, "mantissa", x)) for x in leaves))


def count_parameters(module: Module, precision: int = 2, return_table: bool = False
                     ) -> Union[int, Tuple[str, int]]:
    """Print a table of the ``ParamState`` s of ``module`` with their sizes; return the total.

    Parameters
    ----------
    module : Module
    precision : int
        Decimals of the abbreviated counts (``12.35K``).
    return_table : bool
        Return ``(table_text, total)`` instead of ``total``.

    Examples
    --------
    >>> import brainx
    >>> net = brainx.nn.Sequential(brainx.nn.Linear(3, 4), brainx.nn.ReLU(), brainx.nn.Linear(4, 2))
    >>> brainx.nn.count_parameters(net)
    Module           Parameters
    ---------------  ----------
    layers.0.weight  16
    layers.2.weight  10
    Total            26
    26
    """
    if not isinstance(module, Module):
        raise TypeError(f"count_parameters: expected a brainx.nn.Module, got {module!r}.")
    rows = [(str(path), _size(s.value)) for path, s in module.states(ParamState).items()]
    total = sum(n for _, n in rows)
    cells = [("Module", "Parameters")] + [(p, _human(n, precision)) for p, n in rows]
    cells.append(("Total", _human(total, precision)))
    w0 = max(len(a) for a, _ in cells)
    w1 = max(len(b) for _, b in cells)
    lines = [f"{a:<{w0}}  {b}".rstrip() for a, b in cells]
    lines.insert(1, f"{'-' * w0}  {'-' * w1}")
    table = "\n".join(lines)
    print(table)
    return (table, total) if return_table else total
