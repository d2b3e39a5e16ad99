"""`save` and `load`: the values of a tree of states to one msgpack file and back.

``save`` walks the target (a module, a state, or dicts/lists/tuples of them)
the way :meth:`brainx.nn.Module.states` does, so every state gets a dotted path
(``"net.rec.weight"``, ``"opt.opt_state"``, ``"rng"``). Each state's value is
flattened into leaves (``"['weight']"``, ``"[0].mu['rec.weight']"``), and each
leaf is stored with its dtype, shape and unit (see :mod:`brainx.io.codec`).

``load`` walks the freshly built target the same way, checks the file against
it first (the same state paths, the same leaves, dtypes, shapes and unit
dimensions) and only then writes every state: a refused load changes nothing.
The structure comes from the target (optax's named tuples, dicts, units), the
numbers from the file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any, Dict, List, Tuple

import brainunit as u
import jax
import msgpack
from jax.core import Tracer

from brainx import environ as brainx_environ
from brainx.io.codec import (
    as_key_record, decode_leaf, describe_leaf, describe_record, encode_leaf, spec,
    spec_of_record,
)
from brainx.nn.modules.module import iter_tree
from brainx.io.codec import Spec
from brainx.state.state import ParamState, State

__all__ = ["save", "load", "CheckpointError"]

FORMAT, VERSION = "brainx.io", 1
ROOT = "<root>"  # the path of a target that is itself a State


class CheckpointError(ValueError):
    """The file does not fit the target (paths, leaves, dtypes, shapes, units) or is no checkpoint."""


def _is_quantity(x: Any) -> bool:
    return isinstance(x, u.Quantity)


def _states(target: Any, what: str) -> Dict[str, State]:
    if isinstance(target, State):
        return {ROOT: target}
    found = {".".join(p): s for p, s in iter_tree(target) if isinstance(s, State)}
    if not found:
        raise TypeError(f"{what}: no State found in {target!r}; pass a module, a State, or a "
                        "dict/list/tuple of them.")
    return found


def _leaves(state: State, path: str, what: str) -> Tuple[List[Tuple[str, Any]], Any]:
    pairs, treedef = jax.tree_util.tree_flatten_with_path(state.value, is_leaf=_is_quantity)
    leaves = [(jax.tree_util.keystr(k), x) for k, x in pairs]
    for key, x in leaves:
        if isinstance(x, Tracer) or (_is_quantity(x) and isinstance(x.mantissa, Tracer)):
            raise RuntimeError(f"{what}: state {path!r} holds a JAX tracer (leaf {key or 'value'}); "
                               "save and load outside jit/grad/loops, between steps.")
    return leaves, treedef


def _atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, os.stat(path).st_mode if os.path.exists(path) else 0o644)
        os.replace(tmp, path)  # atomic: readers see the old file or the new one, never half
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save(path: str | os.PathLike, target: Any, *, environ: bool = False,
         overwrite: bool = True) -> None:
    """Save the values of every state in ``target`` to ``path`` (msgpack).

    Arguments
    ---------
    path : str or PathLike
        The file. It is written to a temporary file in the same folder, then
        renamed over ``path``: a failed save leaves the previous file intact.
    target : Module, State, or dict/list/tuple of these
        E.g. ``{"net": net, "opt": opt, "rng": brainx.random.DEFAULT}``. Units,
        dtypes, PRNG keys and optimiser states are kept exactly.
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
    states = []
    for name, state in _states(target, "brainx.io.save").items():
        leaves, _ = _leaves(state, name, "brainx.io.save")
        records = []
        for key, x in leaves:
            try:
                records.append([key, encode_leaf(x)])
            except TypeError as e:
                raise TypeError(f"brainx.io.save: state {name!r}, leaf {key or 'value'}: {e}") from None
        states.append({"path": name, "type": type(state).__name__, "leaves": records})
    header: Dict[str, Any] = {"format": FORMAT, "version": VERSION, "states": states}
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
    _atomic_write(path, msgpack.packb(header, use_bin_type=True))


def _read(path: str) -> Dict[str, Any]:
    with open(path, "rb") as f:
        data = f.read()
    try:
        header = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:
        raise CheckpointError(f"brainx.io.load: {path!r} is not a brainx checkpoint "
                              f"(msgpack could not read it: {e}).") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CheckpointError(f"brainx.io.load: {path!r} is not a brainx checkpoint "
                              "(no 'brainx.io' format tag).")
    if header.get("version", 0) > VERSION:
        raise CheckpointError(f"brainx.io.load: {path!r} has format version {header['version']}; "
                              f"this brainx reads up to {VERSION}. Upgrade brainx.")
    return header


def _check_state(name: str, state: State, saved: Dict[str, Any], path: str) -> list:
    """The decoded leaves for ``state`` (validated against it), in its own leaf order."""
    leaves, treedef = _leaves(state, name, "brainx.io.load")
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
        A file written by :func:`save`.
    target : Module, State, or dict/list/tuple of these
        Built the same way as the saved one (a fresh model and optimiser).
    environ : bool
        Also restore the saved ``brainx.environ`` settings (they must have been
        saved with ``environ=True``).
    strict : bool
        If True (default), the file and the target must hold the same state
        paths. If False, states only in the target keep their values and
        states only in the file are ignored. A state in both must match.

    Raises
    ------
    CheckpointError
        Naming the state path (and leaf) that differs. Nothing was written.

    Example
    -------
    See :func:`save`.
    """
    path = os.fspath(path)
    header = _read(path)
    saved = {s["path"]: s for s in header["states"]}
    states = _states(target, "brainx.io.load")
    if environ and "environ" not in header:
        raise CheckpointError(f"brainx.io.load(environ=True): {path!r} was saved without "
                              "environ=True; load with environ=False.")
    if strict:
        missing = [p for p in states if p not in saved]
        extra = [p for p in saved if p not in states]
        if missing or extra:
            raise CheckpointError(
                f"brainx.io.load: {path!r} does not hold the target's states. In the target only: "
                f"{missing}; in the file only: {extra}. Rebuild the target as it was saved, or "
                "pass strict=False to load the states both hold.")
    plan = {name: _check_state(name, state, saved[name], path)
            for name, state in states.items() if name in saved}
    values = {name: jax.tree_util.tree_unflatten(
                  treedef, [decode_leaf(rec, like) for (_, like), (_, rec) in zip(leaves, records)])
              for name, (treedef, leaves, records) in plan.items()}
    if environ:
        brainx_environ.set(**{k: decode_leaf(r) for k, r in header["environ"].items()})
    for name, value in values.items():
        states[name].value = value
    return target
