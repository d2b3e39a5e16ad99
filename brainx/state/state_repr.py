"""How a state prints: its value's summary first, then the metadata that is set.

``repr(state)`` goes through the pretty-repr engine (:mod:`brainx.pretty_repr`),
as brainstate 0.6.0 prints it:

* the value comes first, without a key, as the summary of its arrays
  (``ParamState(f32[2,3])``, ``HiddenState(f32[3] mV)``; a scalar is ``f32[]``,
  whether or not it is concrete, since the repr describes the value's type);
* then ``name=`` and ``tag=`` when set, and any other metadata given to the
  constructor (``ParamState(f32[2], name='w', tag={'t'})``);
* a dict value without metadata prints in brace form, its keys bare where they
  are identifiers: ``ParamState{bias: f32[4], weight: f32[3,4]}``.

Bookkeeping (the trace level, the place of creation, hooks) is never shown. A
snapshot (:class:`~brainx.TreefyState`) prints as
``TreefyState(type=ParamState, value=f32[3], name='w')``.
"""

from __future__ import annotations

from typing import Any, Iterator, Union

import jax

from brainx.pretty_repr.layout import PrettyAttr, PrettyType
from brainx.state.values import _Expired

__all__ = ["abstract_value", "state_pretty_items", "treefy_pretty_items"]

# Attributes of a State that are bookkeeping, not metadata: never printed.
_HIDDEN = ("_value", "name", "tag", "_level", "_source")


def abstract_value(value: Any) -> Any:
    """``value`` with each array leaf as its abstract value (shape and dtype, no data).

    A value with leaves JAX cannot abstract (strings, sentinels) is returned as is.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.state.state_repr import abstract_value
    >>> abstract_value({"w": jnp.zeros(2)})
    {'w': ShapedArray(float32[2])}
    """
    try:
        return jax.tree.map(_shaped, value)
    except TypeError:
        return value


def _shaped(leaf: Any) -> Any:
    return jax.api_util.shaped_abstractify(leaf)


def _show(value: Any) -> Any:
    """A metadata value as the engine should print it (strings quoted)."""
    return repr(value) if isinstance(value, str) else value


def _metadata(state: Any) -> Iterator[PrettyAttr]:
    if state.name is not None:
        yield PrettyAttr("name", _show(state.name))
    tag = vars(state).get("tag")
    if tag is not None:  # a set, printed in sorted order so that reprs are reproducible
        yield PrettyAttr("tag", "{" + ", ".join(sorted(map(repr, tag))) + "}" if tag else "set()")
    hidden = _HIDDEN + getattr(type(state), "_bookkeeping_attrs", ())
    for key, value in vars(state).items():
        if key in hidden or key.startswith(("__brainx", "_brainx")) or value is None:
            continue
        yield PrettyAttr(key.lstrip("_") if key == "_name" else key, _show(value))


def _bare_key(key: Any) -> str:
    return key if isinstance(key, str) and key.isidentifier() else repr(key)


def state_pretty_items(state: Any) -> Iterator[Union[PrettyType, PrettyAttr]]:
    """The pretty-repr items of ``state`` (its value is read without running read hooks).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> brainx.ParamState({"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)})
    ParamState{b: f32[3], w: f32[2,3]}
    >>> brainx.HiddenState(jnp.zeros(2), name="v")
    HiddenState(f32[2], name='v')
    """
    value = state._value
    if type(value) is _Expired:
        shown: Any = f"<expired: created inside {value.where or 'a transform'}>"
    else:
        shown = _show(abstract_value(value))
    metadata = list(_metadata(state))
    if isinstance(shown, dict) and not metadata:
        yield PrettyType(type(state), start="{", end="}", value_sep=": ")
        for key, leaf in shown.items():
            yield PrettyAttr(_bare_key(key), _show(leaf))
        return
    yield PrettyType(type(state))
    yield PrettyAttr("", shown)
    yield from metadata


def treefy_pretty_items(ref: Any) -> Iterator[Union[PrettyType, PrettyAttr]]:
    """The pretty-repr items of a :class:`~brainx.TreefyState`.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> brainx.ParamState(jnp.zeros(3), name="w").to_state_ref()
    TreefyState(type=ParamState, value=f32[3], name='w')
    """
    yield PrettyType(type(ref))
    yield PrettyAttr("type", ref.type)
    yield PrettyAttr("value", _show(abstract_value(ref.value)))
    for key, value in vars(ref).items():
        if key in ("type", "value") or value is None:
            continue
        yield PrettyAttr(key.lstrip("_") if key == "_name" else key, _show(value))
