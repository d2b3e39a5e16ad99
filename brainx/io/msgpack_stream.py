"""One checked msgpack file: streamed out of memory, read back with its checksum verified.

:func:`write` packs a tree of dicts, lists, scalars and NumPy arrays into the same
bytes :func:`msgpack.packb` would, but streams them to a file: an array's bytes go
to the file straight from its memory, with no copy into a packed buffer, as one
``bin`` (or, above msgpack's 4 GiB ``bin``, a list of ``bin`` chunks of
``CHUNK`` bytes). The last entry of the top-level map is ``"crc32"``: the CRC-32
of every byte before it, in a fixed 11-byte encoding at the very end of the file.

:func:`read` maps the file into memory, parses it and checks that CRC over the
whole file (metadata and arrays, one pass at about 1.5 GB/s) before anything is
decoded. A file with no ``"crc32"`` entry (format version 1) is read unchecked.

Example
-------
>>> import io, numpy as np
>>> from brainx.io import msgpack_stream
>>> buffer = io.BytesIO()
>>> msgpack_stream.write(buffer, {"a": np.arange(3, dtype=np.int8), "n": 1})
>>> header = msgpack_stream.unpack(buffer.getvalue())
>>> header["a"], header["n"], msgpack_stream.intact(buffer.getvalue(), header)
(b'\\x00\\x01\\x02', 1, True)
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from typing import Any, BinaryIO, Dict, Optional, Tuple

import msgpack
import numpy as np

from brainx.io.errors import CheckpointError

__all__ = ["write", "read", "unpack", "intact", "as_bytes", "CHUNK"]

CHUNK = 1 << 31                      # bytes per bin of an array over msgpack's 4 GiB bin
_BIN_MAX = (1 << 32) - 1
_TRAILER_KEY = b"\xa5crc32\xce"      # fixstr "crc32", then the uint32 marker
_TRAILER = len(_TRAILER_KEY) + 4
_HEADERS = msgpack.Packer()


def as_bytes(a: np.ndarray) -> np.ndarray:
    """The bytes of ``a`` (C order) as a flat ``uint8`` array, a view when ``a`` is contiguous."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


class _Sink:
    """Writes to ``f`` and keeps the CRC-32 of everything written."""

    def __init__(self, f: BinaryIO):
        self.f, self.crc = f, 0
        self.pack = msgpack.Packer(use_bin_type=True).pack

    def raw(self, data: Any) -> None:
        self.crc = zlib.crc32(data, self.crc)
        self.f.write(data)

    def bin(self, data: np.ndarray) -> None:
        n = data.nbytes
        head = (b"\xc4" + struct.pack(">B", n) if n < 1 << 8 else
                b"\xc5" + struct.pack(">H", n) if n < 1 << 16 else b"\xc6" + struct.pack(">I", n))
        self.raw(head)
        self.raw(memoryview(data))

    def array_header(self, n: int) -> None:
        self.raw(_HEADERS.pack_array_header(n))


def _emit(sink: _Sink, obj: Any) -> None:
    if isinstance(obj, dict):
        sink.raw(_HEADERS.pack_map_header(len(obj)))
        for key, value in obj.items():
            sink.raw(sink.pack(key))
            _emit(sink, value)
    elif isinstance(obj, (list, tuple)):
        sink.array_header(len(obj))
        for value in obj:
            _emit(sink, value)
    elif isinstance(obj, np.ndarray):
        data = as_bytes(obj)
        if data.nbytes <= min(CHUNK, _BIN_MAX):
            sink.bin(data)
        else:                         # over one bin: a list of chunks
            starts = range(0, data.nbytes, CHUNK)
            sink.array_header(len(starts))
            for start in starts:
                sink.bin(data[start:start + CHUNK])
    else:
        sink.raw(sink.pack(obj))


def write(f: BinaryIO, header: Dict[str, Any]) -> None:
    """Stream ``header`` (a dict; arrays as NumPy arrays) to ``f``, then its ``"crc32"``."""
    sink = _Sink(f)
    sink.raw(_HEADERS.pack_map_header(len(header) + 1))
    for key, value in header.items():
        sink.raw(sink.pack(key))
        _emit(sink, value)
    f.write(_TRAILER_KEY + struct.pack(">I", sink.crc))


def unpack(data: Any) -> Any:
    """The object in ``data`` (bytes or a buffer); bins come back as ``bytes``."""
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def intact(data: Any, header: Any) -> Optional[bool]:
    """Whether ``data``'s CRC matches its ``"crc32"`` entry; ``None`` when it has none."""
    if not isinstance(header, dict) or "crc32" not in header:
        return None
    with memoryview(data) as view:
        if len(view) < _TRAILER or bytes(view[-_TRAILER:-4]) != _TRAILER_KEY:
            return False
        with view[:-_TRAILER] as body:
            return zlib.crc32(body) == header["crc32"]


def read(path: str) -> Tuple[Any, Optional[bool]]:
    """``(the parsed file, intact(...))``; a file msgpack cannot parse is a CheckpointError."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            raise CheckpointError(f"brainx.io.load: {path!r} is empty (a save that never "
                                  "finished?); it is not a brainx checkpoint.")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            try:
                header = unpack(mapped)
            except Exception as e:
                raise CheckpointError(
                    f"brainx.io.load: {path!r} is not a brainx checkpoint, or is damaged "
                    f"(msgpack could not read it: {e}).") from None
            return header, intact(mapped, header)
