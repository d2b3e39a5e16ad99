"""`save` and `load`: the values of a tree of states to one checked msgpack file and back.

``save`` walks the target (a module, a state, or dicts/lists/tuples of them)
the way :meth:`brainx.nn.Module.states` does, so every state gets a dotted path
(``"net.rec.weight"``, ``"opt.opt_state"``, ``"rng"``). Each state's value is
flattened into leaves (``"['weight']"``, ``"[0].mu['rec.weight']"``), and each
leaf is stored with its dtype, shape, unit and CRC-32 (see :mod:`brainx.io.codec`).
Modules that keep constants outside their states (the synapses of a sparse layer)
have them saved too, under their path (:mod:`brainx.io.layer_arrays`). The file
ends with the CRC-32 of all of it (:mod:`brainx.io.msgpack_stream`), and is
written beside ``path`` and renamed over it (:mod:`brainx.io.temporaries`).

``load`` verifies the file's checksum, walks the freshly built target the same
way, checks the file against it (the same state paths, the same leaves, dtypes,
shapes and unit dimensions; each module's arrays by the module), and only then
writes every state, installs the arrays and sets the settings. A load is all or
nothing: a refused check changes nothing, and a write that fails (a state hook
that refuses it) puts back everything written before it. The structure comes
from the target (optax's named tuples, dicts, units), the numbers from the file.

=========  ==================================================================
version    what a file holds
=========  ==================================================================
1          states and settings (brainx before 2026-12-07): read unchecked
2          also a CRC-32 per array and one over the file; modules' arrays
=========  ==================================================================
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import brainunit as u
import jax
from jax.core import Tracer

from brainx import environ as brainx_environ
from brainx.io import msgpack_stream
from brainx.io.codec import (
    Spec, as_key_record, damaged_arrays, decode_leaf, describe_leaf, describe_record,
    encode_leaf, spec, spec_of_record,
)
from brainx.io.errors import CheckpointError
from brainx.io.layer_arrays import SavesArrays
from brainx.io.temporaries import atomic_file
from brainx.nn.modules.module import Module, iter_tree
from brainx.state.state import ParamState, State, structure_changed

__all__ = ["save", "load", "CheckpointError"]

FORMAT, VERSION = "brainx.io", 2
ROOT = "<root>"  # the path of a target that is itself a State (or a module with arrays)
_UNSET = object()
_INIT_HINT = ("A module's hidden states (membrane potentials, synaptic currents, delays) exist "
              "only once it is initialised: call brainx.nn.init_all_states(model) (with the "
              "batch_size it was saved with) before saving or loading.")


def _is_quantity(x: Any) -> bool:
    return isinstance(x, u.Quantity)


def _collect(target: Any, what: str) -> Tuple[Dict[str, State], Dict[str, Any]]:
    """The states of ``target`` and its modules that save arrays, by dotted path."""
    if isinstance(target, State):
        return {ROOT: target}, {}
    states, modules, any_module = {}, {}, False
    for parts, obj in iter_tree(target):
        if isinstance(obj, State):
            states[".".join(parts)] = obj
            continue
        any_module = any_module or isinstance(obj, Module)
        if isinstance(obj, SavesArrays):
            modules[".".join(parts) or ROOT] = obj
    if not states and not modules:
        fix = (_INIT_HINT if any_module else
               "Pass a module, a State, or a dict/list/tuple of them.")
        raise TypeError(f"{what}: no State found in {target!r}. {fix}")
    return states, modules


def _leaves(value: Any, path: str, what: str) -> Tuple[List[Tuple[str, Any]], Any]:
    pairs, treedef = jax.tree_util.tree_flatten_with_path(value, is_leaf=_is_quantity)
    leaves = [(jax.tree_util.keystr(k), x) for k, x in pairs]
    for key, x in leaves:
        if isinstance(x, Tracer) or (_is_quantity(x) and isinstance(x.mantissa, Tracer)):
            raise RuntimeError(f"{what}: state {path!r} holds a JAX tracer (leaf {key or 'value'}); "
                               "save and load outside jit/grad/loops, between steps.")
    return leaves, treedef


def _encoded(pairs, where: str) -> list:
    records = []
    for key, x in pairs:
        try:
            records.append([key, encode_leaf(x)])
        except TypeError as e:
            raise TypeError(f"brainx.io.save: {where}, leaf {key or 'value'}: {e}") from None
    return records


def _module_arrays(path: str, module: Any) -> Dict[str, Any]:
    arrays = module.saved_arrays()
    where = f"{type(module).__name__} {path!r}"
    if not isinstance(arrays, dict) or not all(isinstance(k, str) for k in arrays):
        raise TypeError(f"brainx.io.save: {where}.saved_arrays() returned {type(arrays).__name__}; "
                        "it must return a dict of arrays by name (str).")
    return {"path": path, "type": type(module).__name__,
            "leaves": _encoded(arrays.items(), where)}


def save(path: str | os.PathLike, target: Any, *, environ: bool = False,
         overwrite: bool = True) -> None:
    """Save the values of every state in ``target`` to ``path`` (msgpack).

    Arguments
    ---------
    path : str or PathLike
        The file. It is written to a temporary file in the same folder, then
        renamed over ``path``: a failed save leaves the previous file intact
        (the temporaries of killed saves are removed by the next save there).
    target : Module, State, or dict/list/tuple of these
        E.g. ``{"net": net, "opt": opt, "rng": brainx.random.DEFAULT}``. Units,
        dtypes, PRNG keys and optimiser states are kept exactly, and so are the
        arrays of modules that declare them (an unseeded sparse layer's synapses).
    environ : bool
        Also save the current ``brainx.environ`` settings (``dt``, ...).
    overwrite : bool
        If False, refuse to replace an existing file.

    Example
    -------
    >>> import os, tempfile, jax.numpy as jnp, brainunit as u, brainx
    >>> w = brainx.ParamState(jnp.arange(3.0) * u.mV)
    >>> path = os.path.join(tempfile.mkdtemp(), "w.msgpack")
    >>> brainx.io.save(path, {"w": w})
    >>> w.value = w.value * 0
    >>> _ = brainx.io.load(path, {"w": w})
    >>> w.value
    Quantity([0. 1. 2.], "mV")
    """
    path = os.fspath(path)
    if not overwrite and os.path.exists(path):
        raise FileExistsError(f"brainx.io.save: {path!r} exists; pass overwrite=True to replace it.")
    states, modules = _collect(target, "brainx.io.save")
    records = []
    for name, state in states.items():
        leaves, _ = _leaves(state.value, name, "brainx.io.save")
        records.append({"path": name, "type": type(state).__name__,
                        "leaves": _encoded(leaves, f"state {name!r}")})
    header: Dict[str, Any] = {"format": FORMAT, "version": VERSION, "states": records}
    if modules:
        header["arrays"] = [_module_arrays(p, m) for p, m in modules.items()]
    if environ:
        header["environ"] = {}
        for key, value in brainx_environ.all().items():
            if not isinstance(key, str):
                raise TypeError(f"brainx.io.save(environ=True): setting {key!r} has a non-string "
                                "key; save with environ=False or pop it.")
            try:
                header["environ"][key] = encode_leaf(value)
            except TypeError as e:
                raise TypeError(f"brainx.io.save(environ=True): setting {key!r}: {e} Save with "
                                "environ=False or pop the setting.") from None
    with atomic_file(path) as f:
        msgpack_stream.write(f, header)


def _read(path: str) -> Dict[str, Any]:
    header, intact = msgpack_stream.read(path)
    if intact is False:  # first: a flipped bit may have changed the format tag or version
        raise CheckpointError(f"brainx.io.load: {path!r} is damaged: its bytes differ from "
                              f"what was saved (its CRC-32 does not match); {_damage(header)}. "
                              "Nothing was loaded: load a backup, or save again.")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CheckpointError(f"brainx.io.load: {path!r} is not a brainx checkpoint "
                              "(no 'brainx.io' format tag).")
    version = header.get("version", 0)
    if isinstance(version, int) and version > VERSION:
        raise CheckpointError(f"brainx.io.load: {path!r} has format version {version}; "
                              f"this brainx reads up to {VERSION}. Upgrade brainx.")
    if intact is None and version != 1:
        raise CheckpointError(f"brainx.io.load: {path!r} has lost its checksum (format version "
                              f"{version!r}, no 'crc32' entry): it is damaged or truncated. "
                              "Load a backup, or save again.")
    return header


def _damage(header: Dict[str, Any]) -> str:
    """Where a damaged file differs: the arrays whose own CRC-32 fails, else its metadata."""
    found = []
    with contextlib.suppress(Exception):  # a damaged file may not have the expected layout
        for section, label in (("states", "state"), ("arrays", "arrays of")):
            for entry in header.get(section, []):
                for key, rec in entry["leaves"]:
                    if damaged_arrays(rec):
                        found.append(f"{label} {entry['path']!r}, leaf {key or 'value'}")
        for key, rec in header.get("environ", {}).items():
            if damaged_arrays(rec):
                found.append(f"setting {key!r}")
    if found:
        return "the bytes of " + "; ".join(found) + " changed"
    return "its metadata changed (names, shapes, units or numbers; no array's bytes did)"


def _check_state(name: str, state: State, value: Any, saved: Dict[str, Any], path: str) -> tuple:
    """The decoded leaves for ``state`` (validated against it), in its own leaf order."""
    leaves, treedef = _leaves(value, name, "brainx.io.load")
    keys = [k for k, _ in leaves]
    saved_keys = [k for k, _ in saved["leaves"]]
    if keys != saved_keys:
        missing = [k for k in keys if k not in saved_keys]
        extra = [k for k in saved_keys if k not in keys]
        raise CheckpointError(
            f"brainx.io.load: state {name!r} has a different structure in {path!r}: the target's "
            f"value has leaves {keys}, the file's {saved_keys} (missing from the file: {missing}, "
            f"only in the file: {extra}). Build the model the way it was built when saved.")
    records = [(k, as_key_record(rec, x)) for (_, x), (k, rec) in zip(leaves, saved["leaves"])]
    for (key, x), (_, rec) in zip(leaves, records):
        have, got = spec(x), spec_of_record(rec)
        if have != got:
            raise CheckpointError(
                f"brainx.io.load: state {name!r}, leaf {key or 'value'}: the file has "
                f"{describe_record(rec)}, the target holds {describe_leaf(x)}. "
                + _what_to_do(state, have, got))
    return treedef, leaves, records


def _what_to_do(state: State, have: Spec, got: Spec) -> str:
    """The fix for a leaf that differs: named when only a leading batch axis differs."""
    (have_dtype, have_shape, have_dim), (got_dtype, got_shape, got_dim) = have, got
    generic = "Build the model with the sizes, dtypes and units it was saved with."
    if isinstance(state, ParamState) or (have_dtype, have_dim) != (got_dtype, got_dim):
        return generic
    if got_shape[1:] == have_shape and got_shape:
        why = (f"the saved model was initialised with batch_size={got_shape[0]}, the target "
               "without a batch axis")
        init = f"brainx.nn.init_all_states(model, batch_size={got_shape[0]})"
    elif have_shape[1:] == got_shape and have_shape:
        why = (f"the target was initialised with batch_size={have_shape[0]}, the saved model "
               "without a batch axis")
        init = "brainx.nn.init_all_states(model) with no batch_size"
    elif len(have_shape) == len(got_shape) > 0 and have_shape[1:] == got_shape[1:]:
        why = f"the saved model has batch_size={got_shape[0]}, the target {have_shape[0]}"
        init = f"brainx.nn.init_all_states(model, batch_size={got_shape[0]})"
    else:
        return generic
    return (f"Only the batch axis differs: {why}. Initialise the target as the saved model was "
            f"({init}), or load only the parameters, which have no batch axis: "
            "brainx.io.load(path, model.states(brainx.ParamState), "
            "strict=False), then initialise the other states for any batch size.")


def load(path: str | os.PathLike, target: Any, *, environ: bool = False,
         strict: bool = True) -> Any:
    """Load the values saved by :func:`save` into the states of ``target``; return ``target``.

    Arguments
    ---------
    path : str or PathLike
        A file written by :func:`save` (any format version: see the module).
    target : Module, State, or dict/list/tuple of these
        Built the same way as the saved one (a fresh model and optimiser).
    environ : bool
        Also restore the saved ``brainx.environ`` settings (they must have been
        saved with ``environ=True``).
    strict : bool
        If True (default), the file and the target must hold the same state
        paths, and every module that saves arrays must find its own in the file
        (or accept their absence). If False, states and modules only in the
        target keep their values, and those only in the file are ignored. A
        state in both must match.

    Raises
    ------
    CheckpointError
        Naming the file and the state path (and leaf), or the module, that
        differs or is damaged; or, when a write failed (a state hook refused
        it), the state, with the cause chained. Nothing was changed: a load is
        all or nothing.

    Example
    -------
    See :func:`save`.
    """
    path = os.fspath(path)
    header = _read(path)
    saved = {s["path"]: s for s in header["states"]}
    saved_arrays = {a["path"]: a for a in header.get("arrays", [])}
    states, modules = _collect(target, "brainx.io.load")
    if environ and "environ" not in header:
        raise CheckpointError(f"brainx.io.load(environ=True): {path!r} was saved without "
                              "environ=True; load with environ=False.")
    if strict:
        _check_same_paths(path, states, saved, modules, saved_arrays, target)
    old = {name: state.value for name, state in states.items() if name in saved}
    plan = {name: _check_state(name, states[name], value, saved[name], path)
            for name, value in old.items()}
    try:
        values = {name: jax.tree_util.tree_unflatten(
                      treedef, [decode_leaf(rec, like) for (_, like), (_, rec)
                                in zip(leaves, records)])
                  for name, (treedef, leaves, records) in plan.items()}
        settings = ({k: decode_leaf(r) for k, r in header["environ"].items()}
                    if environ else {})
    except ValueError as e:
        raise CheckpointError(f"brainx.io.load: {path!r}: {e} Nothing was loaded.") from None
    installs = _prepare(path, modules, saved_arrays, strict)
    _commit(path, states, old, values, installs, settings)
    return target


def _check_same_paths(path: str, states: dict, saved: dict, modules: dict, saved_arrays: dict,
                      target: Any) -> None:
    missing = [p for p in states if p not in saved]
    extra = [p for p in saved if p not in states]
    if missing or extra:
        hint = (" " + _INIT_HINT) if extra and not missing else ""
        raise CheckpointError(
            f"brainx.io.load: {path!r} does not hold the target's states. In the target only: "
            f"{missing}; in the file only: {extra}. Rebuild the target as it was saved, or "
            f"pass strict=False to load the states both hold.{hint}")
    only_file = [p for p in saved_arrays if p not in modules]
    if only_file:
        raise CheckpointError(
            f"brainx.io.load: {path!r} holds the arrays (connectivity, tables) of modules the "
            f"target does not have: {only_file}. Rebuild the target as it was saved, or pass "
            "strict=False to leave them out.")


def _prepare(path: str, modules: dict, saved_arrays: dict,
             strict: bool) -> List[Tuple[str, Any, Callable[[], None], bool]]:
    """Each module's check of its arrays in the file: ``(path, module, install, derived)``, a
    derived module's (one that saved no array) last; nothing installed yet."""
    installs = []
    for name, module in modules.items():
        entry = saved_arrays.get(name)
        if entry is None and not strict:
            continue
        where = f"{type(module).__name__} {name!r}"
        try:
            arrays = None if entry is None else {k: decode_leaf(r) for k, r in entry["leaves"]}
            install = module.prepare_arrays(arrays)
        except ValueError as e:
            raise CheckpointError(f"brainx.io.load: {path!r}, {where}: {e} Nothing was "
                                  "loaded.") from None
        if install is not None:
            installs.append((name, module, install, not (entry and entry["leaves"])))
    # those of modules that saved no array last: they derive theirs from others' (a group
    # fusing its layers' synapses), which must be in place first
    return sorted(installs, key=lambda i: i[3])


def _put_back(state: State, value: Any) -> None:
    """Undo a load's write of ``state``: ``restore_value``, its hooks told; if one of them
    raises, the value is put back without them (a rollback must not stop half-way)."""
    try:
        state.restore_value(value)
    except Exception:
        state._value = value


def _reinstall(module: Any, arrays: Dict[str, Any]) -> None:
    install = module.prepare_arrays(arrays)
    if install is not None:
        install()


def _commit(path: str, states: dict, old: dict, values: dict, installs: list,
            settings: dict) -> None:
    """Write the states, install the arrays, set the settings; on a failure, undo all."""
    undo: List[Callable[[], None]] = []
    derived: List[Callable[[], None]] = []  # undone last: they derive from the others
    doing = ""
    try:
        for name, value in values.items():
            doing = f"writing state {name!r}"
            state = states[name]
            state.value = value
            undo.append(lambda s=state, v=old[name]: _put_back(s, v))
        for name, module, install, is_derived in installs:
            doing = f"installing the arrays of {type(module).__name__} {name!r}"
            before = module.saved_arrays()
            install()
            (derived if is_derived else undo).append(lambda m=module, a=before: _reinstall(m, a))
        if installs:
            structure_changed()  # compiled steps hold the old arrays as constants: trace again
        for key, value in settings.items():
            doing = f"setting brainx.environ's {key!r}"
            before = brainx_environ.all().get(key, _UNSET)
            brainx_environ.set(**{key: value})
            undo.append(lambda k=key, b=before: brainx_environ.pop(k, None) if b is _UNSET
                        else brainx_environ.set(**{k: b}))
    except BaseException as e:
        for step in list(reversed(undo)) + derived:
            with contextlib.suppress(Exception):
                step()
        if installs:
            structure_changed()
        if not isinstance(e, Exception):
            raise
        raise CheckpointError(
            f"brainx.io.load: {path!r}: {doing} failed ({type(e).__name__}: {e}). The load "
            "was undone: every state, array and setting written before it has its value from "
            "before the load.") from e
