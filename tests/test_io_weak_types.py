"""`brainx.io` loads a weakly typed value back weakly typed (old files as before)."""


import brainunit as u
import jax
import jax.numpy as jnp
import msgpack
import numpy as np
import pytest

import brainx
from brainx import transform as bt


def weak(x) -> bool:
    return bool(jax.typeof(x).weak_type)


# -- 1. brainx.io keeps weak types -------------------------------------------------------------
def test_io_loads_a_weakly_typed_value_weakly_typed(tmp_path):
    path = tmp_path / "w.msgpack"
    s = brainx.State(0.5, name="s")                  # a Python scalar: weakly typed in JAX

    @bt.jit
    def double():
        s.value = s.value * 2
    double()
    assert weak(s.value)                             # as JAX makes it: 0.5 * 2 stays weak
    strong = brainx.State(jnp.ones(2), name="strong")
    q = brainx.State(jnp.asarray(3.0) * u.mV, name="q")
    assert weak(q.value.mantissa)
    saved = {"s": s, "strong": strong, "q": q}
    before = {k: v.value for k, v in saved.items()}
    brainx.io.save(path, saved)

    fresh = {"s": brainx.State(jnp.zeros(())), "strong": brainx.State(jnp.zeros(2)),
             "q": brainx.State(jnp.zeros(()) * u.mV)}
    assert not weak(fresh["s"].value)
    brainx.io.load(path, fresh)
    assert weak(fresh["s"].value) and not weak(fresh["strong"].value)
    assert weak(fresh["q"].value.mantissa) and fresh["q"].value.unit == u.mV
    for k in saved:
        np.testing.assert_array_equal(u.get_mantissa(fresh[k].value), u.get_mantissa(before[k]))
    # promotes as the saved value does in plain JAX: weak float32 + bfloat16 -> bfloat16
    half = jnp.ones((), jnp.bfloat16)
    assert (fresh["s"].value + half).dtype == (before["s"] + half).dtype == jnp.bfloat16
    assert (fresh["strong"].value + half).dtype == (before["strong"] + half).dtype


@pytest.mark.counts_traces
def test_io_weak_value_does_not_retrace_after_load_and_old_files_load_strong(tmp_path):
    path = tmp_path / "w.msgpack"
    s = brainx.State(jnp.asarray(1.5), name="s")
    traces = []

    @bt.jit
    def step():
        traces.append(1)
        s.value = s.value + 1
    step()
    step()
    assert len(traces) == 1 and weak(s.value)
    brainx.io.save(path, {"s": s})
    s.value = jnp.asarray(0.0)
    brainx.io.load(path, {"s": s})
    step()
    assert len(traces) == 1 and float(s.value) == 4.5   # the same type: the same trace

    # a file written before the weak mark (the record without "weak") loads as before: strong
    with open(path, "rb") as f:
        header = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)
    leaf = header["states"][0]["leaves"][0][1]
    assert leaf.pop("weak") is True
    header.pop("crc32"), leaf.pop("crc32")          # and as format version 1 wrote it
    header["version"] = 1
    old = tmp_path / "old.msgpack"
    with open(old, "wb") as f:
        f.write(msgpack.packb(header, use_bin_type=True))
    brainx.io.load(old, {"s": s})
    assert not weak(s.value) and float(s.value) == 3.5
