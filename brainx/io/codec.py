"""One leaf of a state's value to a msgpack-ready record and back, exactly.

A record is a plain dict of msgpack types. Arrays keep their dtype, shape and
bytes; a weakly typed JAX array (``jnp.asarray(1.0)``, the value of
``State(0.5)`` after a jitted step) is marked ``"weak": True`` and loads weakly
typed again (a record without the mark, as in every file written before it,
loads strongly typed, as it always did); a brainunit Quantity keeps its
mantissa and its unit (the SI exponents, scale, base, factor and names, so
``mV / ms`` comes back as ``mV / ms``); a typed PRNG key keeps its key data
and implementation; Python numbers stay Python numbers. :func:`spec` describes
a record or a live value the same way, so a file can be checked against a model
before anything is decoded.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx.transform.core.value_types import cast_leaf

__all__ = ["encode_leaf", "decode_leaf", "spec", "spec_of_record", "describe_leaf",
           "describe_record",
           "as_key_record"]

_SI = ("m", "kg", "s", "A", "K", "mol", "cd")
_PYTHON = (bool, int, float, str, type(None))

Spec = Tuple[str, Tuple[int, ...], Optional[Tuple[float, ...]]]  # (dtype, shape, SI exponents)


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _encode_array(x: Any) -> Dict[str, Any]:
    a = np.asarray(x, order="C")
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": a.tobytes()}


def _decode_array(rec: Dict[str, Any]) -> np.ndarray:
    return np.frombuffer(rec["data"], dtype=jnp.dtype(rec["dtype"])).reshape(rec["shape"]).copy()


def _encode_unit(unit: u.Unit) -> Dict[str, Any]:
    plain = lambda v: v.item() if isinstance(v, np.generic) else v  # noqa: E731
    return {"dim": [float(unit.dim.get_dimension(s)) for s in _SI], "scale": plain(unit.scale),
            "base": plain(unit.base), "factor": plain(unit.factor), "name": unit.name,
            "dispname": unit.dispname}


def _decode_unit(rec: Dict[str, Any]) -> u.Unit:
    dim = u.get_or_create_dimension(rec["dim"])
    if dim.is_dimensionless and rec["scale"] == 0 and rec["factor"] == 1:
        return u.UNITLESS
    return u.Unit(dim=dim, scale=rec["scale"], base=rec["base"], factor=rec["factor"],
                  name=rec["name"], dispname=rec["dispname"])


def encode_leaf(x: Any) -> Dict[str, Any]:
    """A msgpack-ready record of one leaf (array, Quantity, PRNG key or Python scalar)."""
    if isinstance(x, u.Quantity):
        return {"kind": "quantity", "unit": _encode_unit(x.unit),
                "mantissa": encode_leaf(x.mantissa)}
    if _is_key(x):
        return {"kind": "key", "impl": str(jax.random.key_impl(x)), "dtype": str(x.dtype),
                "shape": list(x.shape), "data": _encode_array(jax.random.key_data(x))}
    if isinstance(x, jax.Array):
        rec = {"kind": "jax", **_encode_array(x)}
        if jax.typeof(x).weak_type:  # only when set: files without the flag load strongly typed
            rec["weak"] = True
        return rec
    if isinstance(x, (np.ndarray, np.generic)):
        return {"kind": "numpy", "scalar": isinstance(x, np.generic), **_encode_array(x)}
    if isinstance(x, _PYTHON):
        return {"kind": "python", "value": x}
    raise TypeError(f"cannot save a {type(x).__name__} ({x!r}); saved values are arrays, "
                    "brainunit Quantities, PRNG keys, numbers, strings and None.")


def decode_leaf(rec: Dict[str, Any], like: Any = None) -> Any:
    """The value of a record; a JAX array goes where ``like`` (a JAX array) is placed."""
    kind = rec["kind"]
    if kind == "quantity":
        inner = like.mantissa if isinstance(like, u.Quantity) else None
        return u.Quantity(decode_leaf(rec["mantissa"], inner), unit=_decode_unit(rec["unit"]))
    if kind == "key":
        return jax.random.wrap_key_data(jnp.asarray(_decode_array(rec["data"])), impl=rec["impl"])
    if kind == "jax":
        where = like.sharding if isinstance(like, jax.Array) and not _is_key(like) else None
        x = jax.device_put(_decode_array(rec), where)
        return cast_leaf(x, x.dtype, True) if rec.get("weak") else x
    if kind == "numpy":
        a = _decode_array(rec)
        return a[()] if rec["scalar"] else a
    if kind == "python":
        return rec["value"]
    raise ValueError(f"unknown record kind {kind!r}: the file was written by a newer brainx?")


def as_key_record(rec: Dict[str, Any], like: Any) -> Dict[str, Any]:
    """``rec`` read as a typed key when ``like`` is one and ``rec`` holds its raw key data.

    brainx kept raw ``uint32[2]`` keys before 2026-11-26; a generator saved
    then loads into one that holds a typed key, bit for bit.
    """
    if not (_is_key(like) and rec.get("kind") in ("jax", "numpy")):
        return rec
    raw = jax.random.key_data(like)
    if rec["dtype"] != np.dtype(raw.dtype).name or tuple(rec["shape"]) != raw.shape:
        return rec
    return {"kind": "key", "impl": str(jax.random.key_impl(like)), "dtype": str(like.dtype),
            "shape": list(like.shape), "data": {k: rec[k] for k in ("dtype", "shape", "data")}}


def spec(x: Any) -> Spec:
    """``(dtype, shape, SI exponents or None)`` of a live leaf."""
    if isinstance(x, u.Quantity):
        dtype, shape, _ = spec(x.mantissa)
        return dtype, shape, tuple(float(x.unit.dim.get_dimension(s)) for s in _SI)
    if isinstance(x, _PYTHON):
        return type(x).__name__, (), None
    return str(x.dtype) if _is_key(x) else np.dtype(x.dtype).name, tuple(np.shape(x)), None


def spec_of_record(rec: Dict[str, Any]) -> Spec:
    """:func:`spec` of the value a record decodes to, without decoding it."""
    if rec["kind"] == "quantity":
        dtype, shape, _ = spec_of_record(rec["mantissa"])
        return dtype, shape, tuple(rec["unit"]["dim"])
    if rec["kind"] == "python":
        return type(rec["value"]).__name__, (), None
    return rec["dtype"], tuple(rec["shape"]), None


def _describe(dtype: str, shape: Tuple[int, ...], unit: Optional[u.Unit]) -> str:
    text = f"{dtype}[{', '.join(map(str, shape))}]"
    if unit is None:
        return text
    if unit.is_unitless:
        return text + " (a unitless Quantity)"
    return f"{text} {unit}"


def describe_leaf(x: Any) -> str:
    """``float32[16, 200] mV``: a live leaf for an error message, its unit as the user wrote it."""
    dtype, shape, _ = spec(x)
    return _describe(dtype, shape, x.unit if isinstance(x, u.Quantity) else None)


def describe_record(rec: Dict[str, Any]) -> str:
    """:func:`describe_leaf` of the value a record decodes to, without decoding it."""
    dtype, shape, _ = spec_of_record(rec)
    return _describe(dtype, shape, _decode_unit(rec["unit"]) if rec["kind"] == "quantity" else None)
