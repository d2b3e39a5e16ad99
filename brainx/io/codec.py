"""One leaf of a state's value to a msgpack-ready record and back, exactly.

A record is a plain dict of msgpack types. Arrays keep their dtype, shape and
bytes (a view of the array's memory, streamed to the file by
:mod:`brainx.io.msgpack_stream`) and the CRC-32 of those bytes; a weakly typed JAX
array (``jnp.asarray(1.0)``, the value of ``State(0.5)`` after a jitted step) is
marked ``"weak": True`` and loads weakly typed again (a record without the mark,
as in every file written before it, loads strongly typed, as it always did); a
brainunit Quantity keeps its mantissa and its unit (the SI exponents, scale, base,
factor and names, so ``mV / ms`` comes back as ``mV / ms``); a typed PRNG key
keeps its key data and implementation; Python numbers stay Python numbers.
:func:`spec` describes a record or a live value the same way, so a file can be
checked against a model before anything is decoded.
"""

from __future__ import annotations

import zlib
from typing import Any, Dict, List, Optional, Tuple, Union

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx.io.msgpack_stream import as_bytes
from brainx.transform.core.value_types import cast_leaf

__all__ = ["encode_leaf", "decode_leaf", "spec", "spec_of_record", "describe_leaf",
           "describe_record",
           "as_key_record", "damaged_arrays"]

_SI = ("m", "kg", "s", "A", "K", "mol", "cd")
_PYTHON = (bool, int, float, str, type(None))

Spec = Tuple[str, Tuple[int, ...], Optional[Tuple[float, ...]]]  # (dtype, shape, SI exponents)


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _encode_array(x: Any) -> Dict[str, Any]:
    """The array's record: its bytes as a view (written to the file from memory) and their CRC."""
    a = np.asarray(x, order="C")
    data = as_bytes(a)
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": data,
            "crc32": zlib.crc32(memoryview(data))}


def _joined(data: Union[bytes, List[bytes]]) -> Union[bytes, np.ndarray]:
    """The bytes of an array saved as one bin or as a list of chunks (over 4 GiB)."""
    if not isinstance(data, list):
        return data
    out = np.empty(sum(len(c) for c in data), np.uint8)
    start = 0
    for chunk in data:
        out[start:start + len(chunk)] = np.frombuffer(chunk, np.uint8)
        start += len(chunk)
    return out


def _decode_array(rec: Dict[str, Any], copy: bool = True) -> np.ndarray:
    """The array of a record; without ``copy``, read-only over the file's bytes."""
    dtype = jnp.dtype(rec["dtype"])
    data = _joined(rec["data"])
    if len(data) != int(np.prod(rec["shape"], dtype=np.int64)) * dtype.itemsize:
        raise ValueError(f"the record of a {rec['dtype']}{list(rec['shape'])} array holds "
                         f"{len(data)} bytes: the file is damaged.")
    a = np.frombuffer(data, dtype=dtype).reshape(rec["shape"])
    return a.copy() if copy else a


def damaged_arrays(rec: Any) -> int:
    """How many arrays in a record (nested: a Quantity's mantissa, a key's data) have
    bytes that differ from their saved CRC-32 (records of version 1 have none)."""
    if not isinstance(rec, dict):
        return 0
    if "crc32" in rec and "data" in rec:
        data = _joined(rec["data"])
        return int(isinstance(data, (bytes, np.ndarray)) and zlib.crc32(data) != rec["crc32"])
    return sum(damaged_arrays(v) for v in rec.values() if isinstance(v, dict))


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
        return jax.random.wrap_key_data(jnp.asarray(_decode_array(rec["data"], copy=False)),
                                        impl=rec["impl"])
    if kind == "jax":
        where = like.sharding if isinstance(like, jax.Array) and not _is_key(like) else None
        x = jax.device_put(_decode_array(rec, copy=False), where)  # device_put copies or holds
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
