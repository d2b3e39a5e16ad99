"""Several hidden variables in one state: `HiddenGroupState`, `HiddenTreeState`.

Eligibility-trace learning rules (and some solvers) want a model's hidden
variables stacked in one array. Both classes keep one value and give access
to each variable by index or name:

=====================  ==============================================  ==================
class                  value                                           variables
=====================  ==============================================  ==================
``HiddenGroupState``   one array (or Quantity), variables on the last  ``"0"``, ``"1"``, ...
                       axis                                            (index or str)
``HiddenTreeState``    one dimensionless array, variables on the last  the dict keys, or
                       axis; each variable keeps its own unit          ``"0"``, ``"1"``, ...
=====================  ==============================================  ==================
"""

from __future__ import annotations

from typing import Any, Dict, Sequence, Tuple

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx.state.state import HiddenState, check_array_value

__all__ = ["HiddenGroupState", "HiddenTreeState"]


class HiddenGroupState(HiddenState):
    """Hidden variables stacked on the last axis of one array.

    Parameters
    ----------
    value : array or Quantity
        At least 2-d; the last axis indexes the variables.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> s = brainx.HiddenGroupState(jnp.zeros((4, 2)))
    >>> s.set_value({1: jnp.ones(4)})
    >>> s.varshape, s.num_state, s.get_value("1").tolist()
    ((4,), 2, [1.0, 1.0, 1.0, 1.0])
    """

    def __init__(self, value: Any, **kwargs):
        if not isinstance(value, (np.ndarray, jax.Array, u.Quantity)) or np.ndim(value) < 2:
            raise ValueError(f"{type(self).__name__} needs an array of at least 2 dimensions "
                             f"(the last one indexes the variables), got {value!r}.")
        self.name2index = {str(i): i for i in range(np.shape(value)[-1])}
        super().__init__(value, **kwargs)

    @property
    def varshape(self) -> Tuple[int, ...]:
        """The shape of each variable (the value's shape without its last axis)."""
        return tuple(np.shape(self.value))[:-1]

    @property
    def num_state(self) -> int:
        """How many variables the state holds.

        Raises ``ValueError`` when ``name2index`` no longer names each of them
        (it was changed by hand, or the value was given another last axis).
        """
        count = int(np.shape(self.value)[-1])
        if len(self.name2index) != count or set(self.name2index.values()) != set(range(count)):
            raise ValueError(
                f"{self!r}: its value holds {count} variables but name2index names "
                f"{sorted(self.name2index.values())} ({list(self.name2index)}). Keep one "
                f"name for each index 0 to {count - 1}, or make a new {type(self).__name__}.")
        return count

    def _index(self, item: int | str, writing: bool = False) -> int:
        """The position of variable ``item``; in ``set_value`` a bad index is a ValueError."""
        if isinstance(item, str):
            if item not in self.name2index:
                raise KeyError(f"{self!r} has no variable {item!r} (not found among "
                               f"{list(self.name2index)}); use one of those names or an index.")
            return self.name2index[item]
        if not isinstance(item, (int, np.integer)) or isinstance(item, bool):
            raise TypeError(f"{self!r}: a variable key should be int or str, got {item!r} of "
                            f"type {type(item).__name__}.")
        low = 0 if writing else -self.num_state
        if not low <= item < self.num_state:
            error = ValueError if writing else IndexError
            raise error(f"{self!r}: variable index {item} is out of range; it has "
                        f"{self.num_state} variables (0 to {self.num_state - 1}).")
        return int(item)

    def get_value(self, item: int | str) -> Any:
        """The variable ``item`` (an index or a name)."""
        return self.value[..., self._index(item)]

    def set_value(self, values: Dict[int | str, Any] | Sequence[Any]) -> None:
        """Write some variables: ``{item: value}``, or a sequence of all of them."""
        new = jnp.asarray(self.value) if isinstance(self.value, np.ndarray) else self.value
        for i, v in self._items(values):
            self._check_shape(i, v)
            new = new.at[..., i].set(v)
        self.value = new

    def _items(self, values: Any):
        """``(position, value)`` for each variable ``values`` sets."""
        if isinstance(values, (list, tuple)):
            values = dict(enumerate(values))
        if not isinstance(values, dict):
            raise TypeError(f"{self!r}.set_value takes a dictionary of hidden states "
                            f"({{name or index: value}}) or a list of all of them; got "
                            f"{type(values).__name__}.")
        return [(self._index(item, writing=True), v) for item, v in values.items()]

    def _check_shape(self, i: int, value: Any) -> None:
        if tuple(np.shape(value)) != self.varshape:
            raise ValueError(f"{self!r}.set_value: variable {i} was given shape "
                             f"{tuple(np.shape(value))}; it must have the shape of the hidden "
                             f"state, {self.varshape}.")


class HiddenTreeState(HiddenGroupState):
    """Hidden variables with their own units, kept as one dimensionless array.

    Parameters
    ----------
    value : sequence or dict of arrays/Quantities
        The variables, all of one shape.

    Examples
    --------
    >>> import brainunit as u, jax.numpy as jnp, brainx
    >>> s = brainx.HiddenTreeState({"v": jnp.zeros(3) * u.mV, "i": jnp.ones(3) * u.mA})
    >>> s.get_value("i")
    Quantity([1. 1. 1.], "mA")
    >>> s.set_value({"v": jnp.full(3, 2.0) * u.mV}); s.get_value("v").mantissa.tolist()
    [2.0, 2.0, 2.0]
    """

    def __init__(self, value: Dict[str, Any] | Sequence[Any], **kwargs):
        if not isinstance(value, (dict, list, tuple)):
            raise TypeError(f"{type(self).__name__} takes a dictionary/sequence of arrays or "
                            f"Quantities (one per variable); got {type(value).__name__}.")
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        for key, v in items:
            check_array_value(type(self).__name__, v, f"variable {key!r}")
        if not items:
            raise ValueError(f"{type(self).__name__} needs at least one variable.")
        shapes = {tuple(np.shape(v)) for _, v in items}
        if len(shapes) != 1:
            raise ValueError(f"{type(self).__name__}: the variables must have one shape, got "
                             f"{sorted(shapes)}.")
        self.units = [u.get_unit(v) for _, v in items]
        stacked = jnp.stack([u.get_mantissa(v) for _, v in items], axis=-1)
        super().__init__(stacked, **kwargs)
        self.name2index = {str(k): i for i, (k, _) in enumerate(items)}

    @property
    def name2unit(self) -> Dict[str, Any]:
        """The unit of each variable, by name."""
        return {name: self.units[i] for name, i in self.name2index.items()}

    @property
    def index2unit(self) -> Dict[int, Any]:
        """The unit of each variable, by index."""
        return dict(enumerate(self.units))

    def get_value(self, item: int | str) -> Any:
        i = self._index(item)
        return u.maybe_decimal(self.value[..., i] * self.units[i])

    def set_value(self, values: Dict[int | str, Any] | Sequence[Any]) -> None:
        new = self.value
        for i, v in self._items(values):
            self._check_shape(i, v)
            new = new.at[..., i].set(u.Quantity(v).to_decimal(self.units[i])
                                     if not self.units[i].is_unitless else u.get_mantissa(v))
        self.value = new
