"""brainx.util's repr options, array summaries and size summaries (brainstate 0.6.0's API).

The expected texts are those brainstate 0.6.0 documents in its docstrings (``f32[3,4]``,
``'1.5 KiB'``, ``'26 params (104 B)'``) or prints for the same call."""

import dataclasses
import threading

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.util import (
    ReprOptions, ReprSummary, format_array_like, format_bytes, get_repr_options, repr_options,
    set_repr_options,
)


@pytest.fixture(autouse=True)
def _defaults():
    old = set_repr_options(ReprOptions())
    yield
    set_repr_options(old)


def test_names_are_exported():
    for name in ("repr_options", "set_repr_options", "get_repr_options", "ReprOptions",
                 "ReprSummary", "pretty_format", "pretty_repr_object", "format_bytes",
                 "format_array_like"):
        assert name in brainx.util.__all__ and getattr(brainx.util, name) is not None


def test_defaults_and_validation():
    opts = ReprOptions()
    assert (opts.width, opts.max_depth, opts.max_items, opts.summary, opts.color,
            opts.short_dtypes) == (88, None, 64, True, False, True)
    for bad in (dict(width=0), dict(width="88"), dict(max_depth=-1), dict(max_items=0),
                dict(max_items=2.5)):
        with pytest.raises(ValueError):
            ReprOptions(**bad)
    with pytest.raises(TypeError, match="summary must be True or False"):
        ReprOptions(summary="no")
    with pytest.raises(TypeError, match="Unknown repr option"):
        ReprOptions().replace(colour=True)
    with pytest.raises(TypeError):
        with repr_options(nope=1):
            pass
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.width = 3


def test_blocks_nest_restore_and_are_per_thread():
    with repr_options(width=50) as outer:
        assert outer is get_repr_options() and outer.width == 50
        with repr_options(max_depth=2):
            assert (get_repr_options().width, get_repr_options().max_depth) == (50, 2)
        assert get_repr_options().max_depth is None
        with pytest.raises(RuntimeError):
            with repr_options(width=10):
                raise RuntimeError
        assert get_repr_options().width == 50
        seen = []
        t = threading.Thread(target=lambda: seen.append(get_repr_options().width))
        t.start()
        t.join()
        assert seen == [88]  # another thread does not see this block
    assert get_repr_options() == ReprOptions()


def test_set_repr_options_changes_the_defaults_and_returns_the_old_ones():
    old = set_repr_options(width=33)
    assert old == ReprOptions() and get_repr_options().width == 33
    with repr_options(width=44):
        assert get_repr_options().width == 44
    assert get_repr_options().width == 33
    seen = []
    t = threading.Thread(target=lambda: seen.append(get_repr_options().width))
    t.start()
    t.join()
    assert seen == [33]  # the defaults are process-wide
    set_repr_options(**dataclasses.asdict(old))  # brainstate's way back
    assert get_repr_options() == ReprOptions()
    set_repr_options(width=20)
    set_repr_options(old)  # and brainx's
    assert get_repr_options() == ReprOptions()
    with pytest.raises(TypeError, match="Expected a ReprOptions"):
        set_repr_options({"width": 3})


@pytest.mark.parametrize("dtype, short", [
    (np.float16, "f16"), (np.float32, "f32"), (np.float64, "f64"), (np.int8, "i8"),
    (np.int32, "i32"), (np.uint8, "u8"), (np.complex64, "c64"), (np.bool_, "bool"),
    (jnp.bfloat16, "bf16"),
])
def test_short_dtype_names(dtype, short):
    x = np.zeros((2, 3), dtype=dtype)
    assert format_array_like(x) == f"{short}[2,3]"
    assert format_array_like(x, short_dtypes=False) == f"{np.dtype(dtype).name}[2,3]"
    with repr_options(short_dtypes=False):
        assert format_array_like(x) == f"{np.dtype(dtype).name}[2,3]"


def test_format_array_like_kinds():
    assert format_array_like(jnp.asarray(0.5, jnp.float32)) == "f32(0.5)"  # a concrete scalar
    assert format_array_like(np.bool_(True)) == "bool(True)"
    assert format_array_like(jax.ShapeDtypeStruct((), jnp.float32)) == "f32[]"
    assert format_array_like(jax.ShapeDtypeStruct((4, 5), jnp.int32)) == "i32[4,5]"
    assert format_array_like(jax.api_util.shaped_abstractify(jnp.zeros(2))) == "f32[2]"
    assert format_array_like(jax.random.key(0)) == "key<fry>[]"
    assert format_array_like(jax.random.split(jax.random.key(0), 3)) == "key<fry>[3]"
    texts = []
    jax.jit(lambda x: texts.append(format_array_like(x)) or x)(jnp.zeros((2, 2)))
    assert texts == ["f32[2,2]"]  # a tracer: its type
    assert format_array_like(jnp.ones(3) * u.mV) == "f32[3] mV"
    assert format_array_like(u.Quantity(jnp.ones(2))) == "f32[2]"  # unitless: no unit
    assert format_array_like(5. * u.ms) == "5. ms"
    assert format_array_like(jnp.asarray(2.0) * u.mV) == "2. mV"
    for other in (1, 1.5, "x", [1], None, object()):
        assert format_array_like(other) is None


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (104, "104 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
    (5 * 1024 ** 2, "5.0 MiB"), (3 * 1024 ** 3, "3.0 GiB"), (2048 * 1024 ** 3, "2048.0 GiB"),
])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


def test_format_bytes_refuses_negative():
    with pytest.raises(ValueError, match="count >= 0"):
        format_bytes(-1)


def test_repr_summary_wording():
    assert ReprSummary(26, 104).footer() == "26 params (104 B)"
    assert ReprSummary(26, 104).comment() == "26 params"
    assert ReprSummary(1, 4).comment() == "1 param"
    assert ReprSummary(1, 4, 2, 8).footer() == "1 param (4 B), 2 state values (8 B)"
    assert ReprSummary(0, 0, 1, 4).footer() == "1 state value (4 B)"
    assert ReprSummary(0, 0, 3, 12).comment() == "3 state values"
    assert ReprSummary(1234, 4936).footer() == "1,234 params (4.8 KiB)"
    assert ReprSummary().footer() == ReprSummary().comment() == ""
