"""The table of layer conversions: one :class:`LayerMapping` per (brainx type, framework).

A mapping holds both directions, so the code that reads a layer and the code
that writes it back sit side by side. The built-in mappings of a framework are
registered the first time that framework is used (its module imports flax or
equinox then, never at ``import brainx``). Lookups are by exact type: a
subclass may compute something else, so it needs its own mapping.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from brainx.interop.errors import MissingDependencyError

__all__ = ["LayerMapping", "register_layer_mapping", "supported_layers", "FRAMEWORKS",
           "load_framework", "lookup_export", "lookup_import", "mark_unsupported",
           "unsupported_reason"]

FRAMEWORKS = ("nnx", "linen", "equinox")
_MODULES = {"nnx": "brainx.interop.nnx_layers", "linen": "brainx.interop.linen_layers",
            "equinox": "brainx.interop.equinox_layers"}

_EXPORT: Dict[Tuple[type, str], "LayerMapping"] = {}
_IMPORT: Dict[Tuple[type, str], List["LayerMapping"]] = {}
_UNSUPPORTED: Dict[Tuple[type, str], str] = {}
_LOADED: Dict[str, Any] = {}


@dataclass
class LayerMapping:
    """How one brainx layer type converts to and from one framework's layer type.

    Parameters
    ----------
    bst_type : type
        The brainx layer class (``brainx.nn.Linear``...).
    framework : str
        ``"nnx"``, ``"linen"`` or ``"equinox"``.
    foreign_type : type
        The framework's layer class (``flax.nnx.Linear``...).
    to_bst : callable
        ``to_bst(foreign, ctx) -> brainx module``: builds the brainx layer and
        fills its weights. For linen, ``foreign`` has ``.module`` (the linen
        module) and ``.variables`` (its slice of the variables, a dict of
        collections such as ``{"params": {...}}``).
    to_foreign : callable
        ``to_foreign(layer, ctx) -> foreign``: builds the framework's layer with
        the same weights. For linen, return ``(linen_module, variables)``.

    Notes
    -----
    ``ctx`` carries ``cur_size`` (the running unbatched input shape, or
    ``None``), ``sample_input``, ``rngs`` (nnx) and ``key`` (equinox), and
    ``require_size(name)``, which raises :class:`MissingShapeError` when the shape
    is unknown. Several brainx types may share one foreign type (``Conv1d``,
    ``Conv2d`` and ``Conv3d`` all map to ``nnx.Conv``); on import they are tried
    in the order registered, and any ``to_bst`` of them may build the right one.

    Examples
    --------
    >>> import brainx
    >>> from brainx.interop import LayerMapping
    >>> m = LayerMapping(brainx.nn.ReLU, "nnx", object, lambda f, ctx: brainx.nn.ReLU(),
    ...                  lambda layer, ctx: brainx.nn.relu)
    >>> m.framework
    'nnx'
    """

    bst_type: type
    framework: str
    foreign_type: type
    to_bst: Callable[[Any, Any], Any]
    to_foreign: Callable[[Any, Any], Any]

    def __post_init__(self):
        if self.framework not in FRAMEWORKS:
            raise ValueError(f"LayerMapping: framework must be one of {FRAMEWORKS}, got "
                             f"{self.framework!r}.")
        for what in ("bst_type", "foreign_type"):
            if not isinstance(getattr(self, what), type):
                raise TypeError(f"LayerMapping: {what} must be a class, got "
                                f"{getattr(self, what)!r}.")


def register_layer_mapping(mapping: LayerMapping) -> None:
    """Register ``mapping`` for both directions (replacing one for the same brainx type).

    The framework's built-in mappings are loaded first, so a mapping registered
    here for a built-in type overrides it.

    Parameters
    ----------
    mapping : LayerMapping
        The conversion to add.

    Examples
    --------
    A brainx layer that scales its input, converted to an equinox ``Lambda``:

    >>> import jax.numpy as jnp, brainx, equinox as eqx
    >>> from brainx import interop
    >>> class Double(brainx.nn.Module):
    ...     def update(self, x):
    ...         return 2 * x
    >>> interop.register_layer_mapping(interop.LayerMapping(
    ...     Double, "equinox", eqx.nn.Lambda,
    ...     to_bst=lambda m, ctx: Double(), to_foreign=lambda layer, ctx: eqx.nn.Lambda(lambda x: 2 * x)))
    >>> interop.to_equinox(Double())(jnp.ones(2)).tolist()
    [2.0, 2.0]
    """
    if not isinstance(mapping, LayerMapping):
        raise TypeError(f"register_layer_mapping: expected a LayerMapping, got {mapping!r}.")
    load_framework(mapping.framework)
    _add(mapping)


def _add(mapping: LayerMapping) -> None:
    key = (mapping.bst_type, mapping.framework)
    old = _EXPORT.get(key)
    if old is not None:
        _IMPORT[(old.foreign_type, old.framework)].remove(old)
    _EXPORT[key] = mapping
    _UNSUPPORTED.pop(key, None)
    entries = _IMPORT.setdefault((mapping.foreign_type, mapping.framework), [])
    if _is_user(mapping):
        entries.insert(0, mapping)      # the user's mapping wins on import
    else:
        entries.append(mapping)


def _is_user(mapping: LayerMapping) -> bool:
    return not mapping.bst_type.__module__.startswith("brainx.")


def mark_unsupported(framework: str, cls: type, reason: str) -> None:
    """Record that ``cls`` (a brainx or a foreign type) does not convert, and why."""
    _UNSUPPORTED[(cls, framework)] = reason


def unsupported_reason(framework: str, cls: type) -> Optional[str]:
    """The recorded reason ``cls`` does not convert with ``framework``, or ``None``."""
    return _UNSUPPORTED.get((cls, framework))


def lookup_export(framework: str, cls: type) -> Optional[LayerMapping]:
    """The mapping that converts brainx type ``cls`` to ``framework``, or ``None``."""
    return _EXPORT.get((cls, framework))


def lookup_import(framework: str, cls: type) -> List[LayerMapping]:
    """The mappings that convert ``framework``'s type ``cls`` to brainx (possibly several)."""
    return list(_IMPORT.get((cls, framework), ()))


def load_framework(framework: str) -> Any:
    """Import the adapter module of ``framework`` and register its built-in mappings once."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"brainx.interop: unknown framework {framework!r}; use one of "
                         f"{FRAMEWORKS}.")
    if framework not in _LOADED:
        module = importlib.import_module(_MODULES[framework])
        adapter = module.load()     # raises MissingDependencyError without the package
        _LOADED[framework] = adapter
        for mapping in module.builtin_mappings(adapter):
            if (mapping.bst_type, framework) not in _EXPORT:
                _add(mapping)
            else:   # a second foreign type for the same brainx type: import only
                _IMPORT.setdefault((mapping.foreign_type, framework), []).append(mapping)
    return _LOADED[framework]


def supported_layers(framework: Optional[str] = None) -> Dict[str, List[str]]:
    """The brainx layer types that convert, per framework.

    Parameters
    ----------
    framework : {"nnx", "linen", "equinox"}, optional
        Only this framework (its package must be installed). ``None``: every
        framework whose package is installed.

    Returns
    -------
    dict
        ``{framework: sorted brainx class names}``, including mappings added with
        :func:`register_layer_mapping`.

    Examples
    --------
    >>> from brainx import interop
    >>> layers = interop.supported_layers("nnx")
    >>> "Linear" in layers["nnx"], "Conv2d" in layers["nnx"]
    (True, True)
    """
    names = FRAMEWORKS if framework is None else (framework,)
    out = {}
    for fw in names:
        try:
            load_framework(fw)
        except MissingDependencyError:
            if framework is not None:
                raise
            continue
        out[fw] = sorted({cls.__name__ for (cls, f) in _EXPORT if f == fw})
    return out
