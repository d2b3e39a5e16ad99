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

It is brainstate's ``StateDictManager`` (the part of ``brainstate.util.DictManager``
that serves states included). One difference: brainstate's checks a value
only in ``add_unique_key`` / ``add_unique_value``, so ``mgr['x'] = 3`` is
accepted there and fails later, in ``collect_values``; here every way in
(``mgr[k] = v``, the constructor, ``update``, ``setdefault``) refuses a value
that is not a State, naming the key.

Like brainstate's, it is a JAX pytree whose children are the states (the
names are its structure), so ``jax.tree.leaves(mgr)`` lists the states and a
tree map rebuilds a manager of what the function returned for each.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, Iterable, Tuple, Type, Union

import jax

from brainx.state.state import State

__all__ = ["StateDictManager"]

Selector = Union[Type, Tuple[Type, ...], Callable[[Any], bool]]


def _selects(selector: Selector) -> Callable[[Any], bool]:
    """A predicate from a state type, a tuple of types, or a predicate."""
    if isinstance(selector, (type, tuple)):
        return lambda state: isinstance(state, selector)
    if callable(selector):
        return selector
    raise TypeError(f"Select states with a State type, a tuple of types, or a predicate "
                    f"`f(state) -> bool`; got {selector!r}.")


class StateDictManager(dict):
    """A ``dict`` of :class:`~brainx.State` objects by name, with value-wise reads and writes.

    Parameters
    ----------
    *args, **kwargs
        What ``dict(...)`` takes; every value must be a State.

    Raises
    ------
    TypeError
        When a value that is not a State is put in (by any means).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> w, h = brainx.ParamState(jnp.ones(2)), brainx.ShortTermState(jnp.zeros(2))
    >>> states = brainx.StateDictManager(w=w, h=h)
    >>> {k: v.tolist() for k, v in states.collect_values().items()}
    {'w': [1.0, 1.0], 'h': [0.0, 0.0]}
    >>> states.assign_values({"h": jnp.full(2, 5.0)})
    >>> h.value.tolist()
    [5.0, 5.0]
    >>> params, others = states.split_values(brainx.ParamState)
    >>> sorted(params), sorted(others)
    (['w'], ['h'])
    """

    def __init__(self, *args: Any, **kwargs: State):
        super().__init__()
        self.update(*args, **kwargs)

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

    def add_unique_key(self, key: Hashable, val: State) -> None:
        """Put ``val`` under ``key``, unless ``key`` already holds another state.

        Raises
        ------
        ValueError
            If ``key`` holds a different state (putting the same one again is fine).
        """
        self._check_elem(val, key)
        if key in self:
            if self[key] is not val:
                raise ValueError(f"Key {key!r} already holds {self[key]!r}, not {val!r}. "
                                 "Use another key, or delete the old entry first.")
        else:
            self[key] = val

    def add_unique_value(self, key: Hashable, val: State) -> bool:
        """Put ``val`` under ``key`` unless it is already held (under any key).

        Returns
        -------
        bool
            ``True`` if it was put in, ``False`` if the state was already here.

        Raises
        ------
        ValueError
            If ``key`` holds a different state.
        """
        self._check_elem(val, key)
        if key in self and self[key] is not val:
            raise ValueError(f"Key {key!r} already holds {self[key]!r}, not {val!r}. "
                             "Use another key, or delete the old entry first.")
        if any(v is val for v in self.values()):
            return False
        self[key] = val
        return True

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

    # -- selecting states -------------------------------------------------------------
    def split(self, *filters: Selector) -> Tuple["StateDictManager", ...]:
        """The states grouped by ``filters``: one manager per filter, and one for the rest."""
        tests = [_selects(f) for f in filters]
        groups = tuple(type(self)() for _ in range(len(tests) + 1))
        for key, state in self.items():
            index = next((i for i, test in enumerate(tests) if test(state)), len(tests))
            dict.__setitem__(groups[index], key, state)
        return groups

    def subset(self, sep: Selector) -> "StateDictManager":
        """The entries whose state matches ``sep`` (a State type, a tuple of types, or a predicate)."""
        return self.split(sep)[0]

    def not_subset(self, sep: Selector) -> "StateDictManager":
        """The entries whose state does not match ``sep``."""
        return self.split(sep)[1]

    def unique(self) -> "StateDictManager":
        """A manager with each state once (the first key that holds it)."""
        out, seen = type(self)(), set()
        for key, state in self.items():
            if id(state) not in seen:
                seen.add(id(state))
                dict.__setitem__(out, key, state)
        return out

    def unique_(self) -> "StateDictManager":
        """Remove, in place, the keys that hold a state an earlier key holds; returns ``self``."""
        keep = self.unique()
        for key in [k for k in self if k not in keep]:
            del self[key]
        return self

    def assign(self, *args: Dict[Hashable, State], **kwargs: State) -> None:
        """Put in the entries of dictionaries of states (not values: see :meth:`assign_values`)."""
        for arg in args:
            if not isinstance(arg, dict):
                raise TypeError(f"assign takes dictionaries of states; got {type(arg).__name__}.")
            self.update(arg)
        self.update(kwargs)

    def pop_by_keys(self, keys: Iterable[Hashable]) -> None:
        """Remove the entries of ``keys`` (those present)."""
        for key in list(keys):
            self.pop(key, None)

    def to_dict(self) -> Dict[Hashable, State]:
        """A plain ``dict`` of the same entries."""
        return dict(self)

    def copy(self) -> "StateDictManager":
        """A shallow copy: a new manager holding the same states."""
        return type(self)(self)

    __copy__ = copy

    def __repr__(self) -> str:
        return f"StateDictManager({dict.__repr__(self)})"


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
