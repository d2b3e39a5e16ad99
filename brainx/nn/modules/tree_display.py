"""``print(module)``: the module tree with every state's kind, shape, dtype and unit.

``repr(module)`` stays one line (the class and its sizes); ``str(module)``,
what ``print`` shows, adds the children and the states below it, one per
line, as brainstate and flax.nnx print a model:

.. code-block:: text

    Net()
      lin: Linear(in_size=(3,), out_size=(4,))
        weight: ParamState(value={'bias': float32[4], 'weight': float32[3,4]})
      lif: LIF(in_size=(4,))
        V: HiddenState(shape=(4,), dtype=float32, unit=mV)

The states' lines follow the repr options (:func:`brainx.util.repr_options`):
``summary=False`` shows the values, ``show_nbytes=True`` the memory sizes.
"""

from __future__ import annotations

from typing import Any, Iterator, List, Tuple

import jax

from brainx.graph.node import Node
from brainx.state.state import State
from brainx.util.repr_options import format_array_like, one_line

__all__ = ["module_tree"]


def module_tree(module: Any) -> str:
    """The lines of ``print(module)`` (see the module docstring).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> class Net(brainx.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.lin = brainx.nn.Linear(3, 4)
    ...         self.h = brainx.HiddenState(jnp.zeros(4))
    >>> print(Net())
    Net()
      lin: Linear(in_size=(3,), out_size=(4,))
        weight: ParamState(value={'bias': float32[4], 'weight': float32[3,4]})
      h: HiddenState(shape=(4,), dtype=float32)
    """
    lines: List[str] = [_header(module)]
    _children(module, 1, lines, {id(module)})
    return "\n".join(lines)


def _children(node: Any, depth: int, lines: List[str], seen: set) -> None:
    pad = "  " * depth
    for name, value in _items(node):
        if isinstance(value, State):
            lines.append(f"{pad}{name}: {_state_line(value)}")
        elif isinstance(value, Node):  # a Module (graph nodes print alike)
            if id(value) in seen:
                lines.append(f"{pad}{name}: <the {type(value).__name__} shown above>")
                continue
            seen.add(id(value))
            lines.append(f"{pad}{name}: {_header(value)}")
            _children(value, depth + 1, lines, seen)


def _header(node: Any) -> str:
    """The node's one-line repr (a repr of several lines, a Sequential's: its class name)."""
    text = repr(node)
    return text if "\n" not in text else f"{type(node).__name__}(...)"


def _items(node: Any) -> Iterator[Tuple[str, Any]]:
    """Attribute names and values, lists / tuples / dicts of modules and states unrolled."""
    for name, value in vars(node).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (list, tuple)):
            yield from ((f"{name}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, dict):
            yield from ((f"{name}[{k!r}]", v) for k, v in value.items())
        else:
            yield name, value


def _state_line(state: State) -> str:
    value = state._value
    if isinstance(value, (jax.Array, jax.ShapeDtypeStruct)) or hasattr(value, "mantissa"):
        return repr(state)
    leaves = jax.tree_util.tree_map(_leaf, value)
    return f"{type(state).__name__}(value={leaves!r})"


class _Leaf:
    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _leaf(x: Any) -> Any:
    """``float32[3,4]`` (`` mV`` for a unit), or what the repr options ask for instead."""
    if getattr(x, "shape", None) is None or getattr(x, "dtype", None) is None:
        return x
    return _Leaf(one_line(format_array_like(x)))
