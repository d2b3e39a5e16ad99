"""brainx.io's file format: checksums verified on load, files of version 1, streamed arrays."""

import os
import zlib

import brainunit as u
import jax
import jax.numpy as jnp
import ml_dtypes
import msgpack
import numpy as np
import pytest

import brainx
from brainx.io import CheckpointError, load, msgpack_stream, save
from brainx.io.codec import encode_leaf

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "io_files")


def _target():
    return {"w": brainx.ParamState(jnp.arange(64.0).reshape(8, 8) * u.mV, name="w"),
            "b": brainx.ParamState(jnp.full(16, 0.25), name="b"),
            "rng": brainx.random.RandomState(jax.random.key(0))}


def _flip(path, offset, bit=0):
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


def test_a_flipped_bit_in_a_weight_names_the_file_and_the_array_and_changes_nothing(tmp_path):
    path = tmp_path / "w.msgpack"
    save(path, _target())
    w_bytes = np.asarray(jnp.arange(64.0, dtype=jnp.float32)).tobytes()
    offset = path.read_bytes().index(w_bytes) + 100          # inside the weights' bytes
    for bit in (0, 5):
        save(path, _target())
        _flip(path, offset, bit)
        fresh = {"w": brainx.ParamState(jnp.zeros((8, 8)) * u.mV), "b": brainx.ParamState(jnp.ones(16)),
                 "rng": brainx.random.RandomState(jax.random.key(1))}
        with pytest.raises(CheckpointError) as e:
            load(path, fresh)
        assert repr(str(path)) in str(e.value)
        assert "the bytes of state 'w', leaf ['mantissa'] changed" in str(e.value) or \
            "the bytes of state 'w', leaf value changed" in str(e.value)
        assert "state 'b'" not in str(e.value)
        assert float(fresh["w"].value.mantissa.sum()) == 0.0 and float(fresh["b"].value.sum()) == 16


def test_every_single_bit_flip_is_caught(tmp_path):
    """Any one flipped bit, anywhere (metadata, array bytes, the checksum itself), is refused."""
    path = tmp_path / "s.msgpack"
    save(path, {"x": brainx.State(jnp.asarray([1.0, 2.0, 3.0]))})
    data = path.read_bytes()
    rng = np.random.RandomState(0)
    for offset in sorted(set(rng.randint(0, len(data), 60).tolist()) | {0, len(data) - 1}):
        bad = bytearray(data)
        bad[offset] ^= 1 << int(rng.randint(8))
        path.write_bytes(bytes(bad))
        x = brainx.State(jnp.zeros(3))
        with pytest.raises(CheckpointError):
            load(path, {"x": x})
        assert float(x.value.sum()) == 0.0, offset


def test_metadata_damage_is_named_as_such(tmp_path):
    path = tmp_path / "u.msgpack"
    save(path, {"v": brainx.State(jnp.ones(3) * u.mV)})
    data = path.read_bytes()
    _flip(path, data.index(b"mV"), 0)                                 # the unit's name: not an array's bytes
    with pytest.raises(CheckpointError, match="its metadata changed"):
        load(path, {"v": brainx.State(jnp.zeros(3) * u.mV)})


def test_a_truncated_or_empty_file_is_refused(tmp_path):
    path = tmp_path / "t.msgpack"
    save(path, _target())
    data = path.read_bytes()
    for cut in (len(data) - 1, len(data) - 11, len(data) // 2, 0):
        path.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match=repr(str(path))[1:-1]):
            load(path, _target())


def test_the_stream_writes_the_bytes_packb_writes(tmp_path):
    """The same msgpack as packb (arrays as bins), then the checksum entry over what precedes."""
    header = {"a": [1, 2.5, None, "s", True, {"k": np.arange(300, dtype=np.float32)}],
              "big": np.arange(70_000, dtype=np.uint8) % 251, "empty": np.zeros(0),
              "scalar": np.array(3.0), "bf16": np.arange(5, dtype=ml_dtypes.bfloat16)}
    as_packb = {k: v for k, v in header.items()}
    as_packb["a"] = header["a"][:5] + [{"k": header["a"][5]["k"].tobytes()}]
    for k in ("big", "empty", "scalar", "bf16"):
        as_packb[k] = header[k].tobytes()
    as_packb["crc32"] = 0
    expected = msgpack.packb(as_packb, use_bin_type=True)[:-1]      # all but the 0's byte
    path = tmp_path / "raw"
    with open(path, "wb") as f:
        msgpack_stream.write(f, header)
    data = path.read_bytes()
    body = data[:-11]
    assert body == expected[:len(body)] and data[len(body):len(body) + 7] == b"\xa5crc32\xce"
    assert int.from_bytes(data[-4:], "big") == zlib.crc32(body)
    assert msgpack_stream.read(str(path))[1] is True


def test_an_array_over_one_bin_is_saved_as_chunks_and_loads_equal(tmp_path, monkeypatch):
    monkeypatch.setattr(msgpack_stream, "CHUNK", 1000)     # stands for msgpack's 4 GiB bin
    value = jnp.arange(1001, dtype=jnp.int32)              # 4004 bytes: 5 chunks
    path = tmp_path / "c.msgpack"
    save(path, {"x": brainx.State(value)})
    raw = msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)
    assert [len(c) for c in raw["states"][0]["leaves"][0][1]["data"]] == [1000] * 4 + [4]
    x = brainx.State(jnp.zeros(1001, jnp.int32))
    load(path, {"x": x})
    np.testing.assert_array_equal(x.value, value)
    raw_bad = bytearray(path.read_bytes())
    raw_bad[raw_bad.index(np.arange(600, 700, dtype=np.int32).tobytes())] ^= 2
    path.write_bytes(bytes(raw_bad))
    with pytest.raises(CheckpointError, match=r"the bytes of state 'x', leaf value changed"):
        load(path, {"x": x})


def test_save_does_not_copy_an_arrays_bytes(tmp_path):
    """The record holds a view of the array's memory (its bytes are streamed from there)."""
    a = np.arange(1 << 16, dtype=np.float32)
    rec = encode_leaf(a)
    assert np.shares_memory(rec["data"], a) and rec["crc32"] == zlib.crc32(a.tobytes())
    path = tmp_path / "n.msgpack"
    save(path, {"a": brainx.State(a)})
    out = brainx.State(np.zeros_like(a))
    load(path, {"a": out})
    np.testing.assert_array_equal(out.value, a)


# -- files written by brainx before this format (version 1, tests/io_files) ------------------
def test_a_version_1_file_loads_as_it_did():
    with open(os.path.join(HERE, "v1_model.msgpack"), "rb") as f:
        raw = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)
    assert raw["version"] == 1 and "crc32" not in raw
    target = {
        "lin": brainx.nn.Linear(3, 2, w_init=jnp.zeros((3, 2)) * u.mA, b_init=jnp.zeros(2) * u.mA),
        "rng": brainx.random.RandomState(jax.random.key(99)),
        "weak": brainx.State(jnp.asarray(0.0)),
        "bf16": brainx.State(jnp.zeros(4, dtype=ml_dtypes.bfloat16)),
        "np": brainx.State(np.zeros((2, 3), dtype=np.int16)),
        "py": brainx.State({"n": 0, "s": "", "f": 0.0, "none": None}),
    }
    before_dt = brainx.environ.get("dt", None)
    try:
        load(os.path.join(HERE, "v1_model.msgpack"), target, environ=True)
        assert brainx.environ.get_dt() == 0.25 * u.ms
    finally:
        if before_dt is None:
            brainx.environ.pop("dt", None)
        else:
            brainx.environ.set(dt=before_dt)
    w = target["lin"].weight.value
    np.testing.assert_array_equal(w["weight"].mantissa, np.arange(6.0).reshape(3, 2) / 8)
    np.testing.assert_array_equal(w["bias"].mantissa, [-1.0, 2.0])
    assert w["weight"].unit == u.mA
    np.testing.assert_array_equal(jax.random.key_data(target["rng"].value),
                                  jax.random.key_data(jax.random.key(3)))
    assert target["bf16"].value.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(np.asarray(target["bf16"].value, np.float32), np.arange(4))
    np.testing.assert_array_equal(target["np"].value, np.arange(6).reshape(2, 3))
    assert target["np"].value.dtype == np.int16
    assert target["py"].value == {"n": 3, "s": "text", "f": 2.5, "none": None}
    assert float(target["weak"].value) == 0.5


def test_a_version_1_file_of_a_seeded_event_layer_loads_into_that_layer():
    conn = brainx.nn.EventFixedProb(20, 10, conn_num=3, conn_weight=0.5, seed=5)
    load(os.path.join(HERE, "v1_conn_seeded.msgpack"), {"conn": conn})
    assert float(conn.weight.value) == 0.25
