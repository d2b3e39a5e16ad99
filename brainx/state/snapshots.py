"""`TreefyState`: a state as plain data, its type, value and metadata, and a JAX pytree.

:meth:`State.to_state_ref <brainx.State.to_state_ref>` takes one and
:meth:`State.update_from_ref <brainx.State.update_from_ref>` writes one back.

:func:`brainx.graph.treefy_states` and :func:`brainx.graph.treefy_split`
return the states of a model as ``TreefyState``\\ s: snapshots that do not
change when the model's states do, that ``jax.tree.map`` maps over (the value
is the only child), and that :meth:`TreefyState.to_state` (or
:func:`brainx.graph.treefy_merge`) turns back into new states.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional

import jax

from brainx.pretty_repr.layout import pretty_str, render
from brainx.state.state_repr import treefy_pretty_items

__all__ = ["TreefyState"]

# Per-instance bookkeeping, not metadata: a rebuilt state gets its own. A State subclass
# names its own in ``_bookkeeping_attrs`` (RandomState: its backed-up key).
_NOT_METADATA = ("_level", "_source", "_value", "name")


class TreefyState:
    """A snapshot of a state: ``type``, ``value`` and metadata (``name``, ``tag``, ...).

    Parameters
    ----------
    type : type
        The ``State`` subclass to rebuild.
    value : pytree
        The value.
    **metadata
        The state's other attributes (``tag``, ...). The name is kept under
        brainstate's key ``_name`` (``name=`` is accepted too) and read as
        :attr:`name`.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> w = brainx.ParamState(jnp.ones(2), name="w", tag="fast")
    >>> ref = brainx.graph.TreefyState.from_state(w)
    >>> doubled = jax.tree.map(lambda x: 2 * x, ref)
    >>> new = doubled.to_state()
    >>> type(new).__name__, new.name, new.tag, new.value.tolist(), w.value.tolist()
    ('ParamState', 'w', {'fast'}, [2.0, 2.0], [1.0, 1.0])
    """

    def __init__(self, type: type, value: Any, **metadata: Any):
        if "name" in metadata:
            metadata["_name"] = metadata.pop("name")
        self.type = type
        self.value = value
        vars(self).update(metadata)

    @classmethod
    def from_state(cls, state: Any) -> "TreefyState":
        """The snapshot of ``state`` (its current value, read as ``state.value``)."""
        skip = _NOT_METADATA + getattr(type(state), "_bookkeeping_attrs", ())
        metadata = {k: v for k, v in vars(state).items()
                    if k not in skip and not k.startswith("__brainx")}
        return cls(type(state), state.value, _name=state.name, **metadata)

    @property
    def name(self) -> Optional[str]:
        """The state's name (``None`` if it has none)."""
        return vars(self).get("_name")

    @name.setter
    def name(self, name: Optional[str]) -> None:
        self._name = name

    def get_metadata(self) -> Dict[str, Any]:
        """Everything but ``type`` and ``value``."""
        return {k: v for k, v in vars(self).items() if k not in ("type", "value")}

    def replace(self, value: Any) -> "TreefyState":
        """The same snapshot with another value."""
        return TreefyState(self.type, value, **self.get_metadata())

    def copy(self) -> "TreefyState":
        """A new snapshot with the same value and metadata."""
        return self.replace(self.value)

    def to_state(self) -> Any:
        """A new state of ``type`` with this value and metadata (its ``__init__`` is not run)."""
        rebuild = getattr(self.type, "_from_snapshot", None)
        if rebuild is None:
            raise TypeError(f"TreefyState.to_state: its type {self.type!r} is not a brainx "
                            "State class, so there is no state to rebuild.")
        metadata = self.get_metadata()
        name = metadata.pop("_name", None)
        return rebuild(self.value, name, metadata)

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, TreefyState):
            return NotImplemented
        return (self.type is other.type and _Meta(self.get_metadata()) == _Meta(other.get_metadata())
                and jax.tree.structure(self.value) == jax.tree.structure(other.value)
                and all(_same(a, b) for a, b in zip(jax.tree.leaves(self.value),
                                                    jax.tree.leaves(other.value))))

    __hash__ = None

    def __pretty_repr__(self) -> Iterator[Any]:
        """The pretty-repr items: ``type``, ``value`` (its summary) and the metadata that is set."""
        return treefy_pretty_items(self)

    def __repr__(self) -> str:
        return render(self)

    __repr__._uses_pretty_repr = True  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return pretty_str(self)


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool((a == b).all()) if hasattr(a == b, "all") else bool(a == b)
    except Exception:
        return False


class _Meta:
    """Metadata as pytree aux data: equal when the dicts are equal, hashable whatever they hold."""

    __slots__ = ("items",)

    def __init__(self, items: Dict[str, Any]):
        self.items = items

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, _Meta) and self.items.keys() == other.items.keys()
                and all(_same(v, other.items[k]) for k, v in self.items.items()))

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.items)))


def _flatten_with_keys(ref: TreefyState):
    return ((jax.tree_util.GetAttrKey("value"), ref.value),), (ref.type, _Meta(ref.get_metadata()))


def _unflatten(aux, children) -> TreefyState:
    state_type, meta = aux
    return TreefyState(state_type, children[0], **meta.items)


jax.tree_util.register_pytree_with_keys(
    TreefyState, _flatten_with_keys, _unflatten,
    flatten_func=lambda ref: ((ref.value,), (ref.type, _Meta(ref.get_metadata()))))
