"""`StateDictManager`: a ``dict`` of named states, read and written as values in one call.

A program that keeps its states under names (a checkpoint's keys, the
entries of a config) often wants all their values at once, or wants to write
a dictionary of new values back. :class:`StateDictManager` is a plain
``dict`` from names to :class:`~brainx.State` objects that refuses anything
else and adds those operations:

* :meth:`~StateDictManager.collect_values` / :meth:`~StateDictManager.to_dict_values`
  read every state's value into a plain ``dict``;
* :meth:`~StateDictManager.assign_values` writes ``{name: value}`` dictionaries
  back, through ``state.value = ...`` (so inside a ``brainx.transform`` the
  writes are recorded like any other);
* :meth:`~StateDictManager.split_values` / :meth:`~StateDictManager.split` /
  :meth:`~StateDictManager.subset` group the entries by state type (for
  example parameters apart from the rest).

It is a :class:`brainx.util.DictManager` (its selection, identity and set
operations, each returning a ``StateDictManager``) that holds states only, and
brainstate's ``StateDictManager``. One difference: brainstate's checks a value
only in ``add_unique_key`` / ``add_unique_value``, so ``mgr['x'] = 3`` is
accepted there and fails later, in ``collect_values``; here every way in
(``mgr[k] = v``, the constructor, ``update``, ``setdefault``) refuses a value
that is not a State, naming the key.

Like brainstate's, it is a JAX pytree whose children are the states (the
names are its structure), so ``jax.tree.leaves(mgr)`` lists the states and a
tree map rebuilds a manager of what the function returned for each.
"""

from __future__ import annotations

from typing import Any, Dict, Hashable, Iterable, Tuple

import jax

from brainx.state.state import State
from brainx.util.dict_manager import DictManager, Selector

__all__ = ["StateDictManager"]


class StateDictManager(DictManager):
    """A ``dict`` of named :class:`~brainx.State` objects; read and write their values at once.

    Takes what ``dict`` takes, every value a State. See the module docstring.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> mgr = brainx.StateDictManager(w=brainx.ParamState(jnp.ones(2)),
    ...                               h=brainx.HiddenState(jnp.zeros(2)))
    >>> mgr.collect_values()["w"]
    Array([1., 1.], dtype=float32)
    >>> mgr.assign_values({"h": jnp.full(2, 5.0)})
    >>> params, rest = mgr.split(brainx.ParamState)
    >>> list(params), list(rest)
    (['w'], ['h'])
    """

    def __init__(self, *args: Any, **kwargs: State):
        super().__init__()
        self.update(*args, **kwargs)

    def _new(self, items: Any = ()) -> "StateDictManager":
        out = type(self)()
        for key, value in dict(items).items():
            dict.__setitem__(out, key, value)       # taken from this manager: states already
        return out

    # -- only states get in -----------------------------------------------------------
    def _check_elem(self, elem: Any, key: Hashable = None) -> None:
        """Refuse ``elem`` unless it is a State."""
        if not isinstance(elem, State):
            where = "" if key is None else f" under {key!r}"
            raise TypeError(
                f"A StateDictManager holds State objects only; got {elem!r} of type "
                f"{type(elem).__name__}{where}. Wrap the value in a State (for example "
                f"brainx.State(value)) or keep it in a plain dict.")

    def __setitem__(self, key: Hashable, value: State) -> None:
        self._check_elem(value, key)
        super().__setitem__(key, value)

    def update(self, *args: Any, **kwargs: State) -> None:
        """``dict.update``, each value checked to be a State."""
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key: Hashable, default: State) -> State:
        """``dict.setdefault``; ``default`` must be a State."""
        if key not in self:
            self[key] = default
        return self[key]

    # -- values -----------------------------------------------------------------------
    def collect_values(self) -> Dict[Hashable, Any]:
        """``{name: state.value}`` for every entry, as a plain ``dict``."""
        return {k: v.value for k, v in self.items()}

    def to_dict_values(self) -> Dict[Hashable, Any]:
        """The same as :meth:`collect_values` (brainstate has both names)."""
        return self.collect_values()

    def assign_values(self, *args: Dict[Hashable, Any]) -> None:
        """Write ``{name: value}`` dictionaries into the states, in order.

        Raises
        ------
        TypeError
            If an argument is not a ``dict``.
        KeyError
            If a name is not in the manager (the states named before it are written).
        """
        for arg in args:
            if not isinstance(arg, dict):
                raise TypeError(f"assign_values takes dictionaries of {{name: value}}; got "
                                f"{type(arg).__name__} {arg!r}.")
            for key, value in arg.items():
                if key not in self:
                    raise KeyError(f"assign_values: no state named {key!r} here (the names are "
                                   f"{list(self)}).")
                self[key].value = value

    def split_values(self, *filters: Selector) -> Tuple[Dict[Hashable, Any], ...]:
        """The values grouped by ``filters``: one ``dict`` per filter, and one for the rest.

        Each state goes to the first filter it matches (a State type, a tuple
        of types, or a predicate).
        """
        return tuple({k: v.value for k, v in group.items()} for group in self.split(*filters))

    def copy(self) -> "StateDictManager":
        """A shallow copy: a new manager holding the same states."""
        return self._new(self)



def _flatten_with_keys(mgr: StateDictManager):
    keys = tuple(mgr)
    return tuple((jax.tree_util.DictKey(k), mgr[k]) for k in keys), keys


def _unflatten(keys: Tuple[Hashable, ...], children: Iterable[Any]) -> StateDictManager:
    # the children may be what a tree map made of the states: no State check here
    out = StateDictManager()
    for key, child in zip(keys, children):
        dict.__setitem__(out, key, child)
    return out


jax.tree_util.register_pytree_with_keys(
    StateDictManager, _flatten_with_keys, _unflatten,
    flatten_func=lambda mgr: (tuple(mgr.values()), tuple(mgr)))
