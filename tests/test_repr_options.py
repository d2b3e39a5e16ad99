"""brainx.util's repr options (brainstate 0.6.0's names): the options, the context manager,
the short forms, and the State / print(module) reprs that follow them."""

import collections
import dataclasses
import threading

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.util import (
    ReprOptions, ReprSummary, format_array_like, format_bytes, get_repr_options, pretty_format,
    pretty_repr_object, repr_options, set_repr_options,
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
        assert name in brainx.util.__all__
        assert getattr(brainx.util, name) is not None


def test_defaults():
    opts = get_repr_options()
    assert opts == ReprOptions()
    assert (opts.summary, opts.max_array_elements, opts.edge_items, opts.precision,
            opts.show_nbytes, opts.max_items, opts.max_depth, opts.indent, opts.width) == \
        (True, 10, 3, None, False, None, None, 2, 80)


def test_options_are_validated():
    with pytest.raises(TypeError, match="Unknown repr option.*'colour'"):
        ReprOptions().replace(colour=True)
    with pytest.raises(TypeError, match="summary must be True or False"):
        ReprOptions(summary=1)
    with pytest.raises(ValueError, match="max_array_elements must be >= 0"):
        ReprOptions(max_array_elements=-1)
    with pytest.raises(TypeError, match="width must be an int"):
        ReprOptions(width=None)
    with pytest.raises(TypeError):
        set_repr_options({"summary": False})
    with pytest.raises(dataclasses.FrozenInstanceError):
        ReprOptions().summary = False


def test_set_repr_options_returns_the_old_ones():
    old = set_repr_options(max_array_elements=100, summary=False)
    assert old == ReprOptions()
    assert get_repr_options() == ReprOptions(max_array_elements=100, summary=False)
    assert set_repr_options(old) == ReprOptions(max_array_elements=100, summary=False)
    assert get_repr_options() == ReprOptions()


def test_context_manager_restores_on_exit_and_on_exception():
    with repr_options(summary=False, width=40) as opts:
        assert opts is get_repr_options()
        assert (opts.summary, opts.width) == (False, 40)
        with repr_options(width=10):
            assert get_repr_options() == ReprOptions(summary=False, width=10)
        assert get_repr_options() == opts
    assert get_repr_options() == ReprOptions()

    with pytest.raises(RuntimeError, match="boom"):
        with repr_options(summary=False):
            set_repr_options(max_array_elements=1)  # inside a block: for the block only
            assert get_repr_options().max_array_elements == 1
            raise RuntimeError("boom")
    assert get_repr_options() == ReprOptions()

    with pytest.raises(TypeError):
        with repr_options(nope=1):
            pass
    assert get_repr_options() == ReprOptions()


def test_context_manager_is_per_thread():
    seen = []
    with repr_options(summary=False):
        t = threading.Thread(target=lambda: seen.append(get_repr_options().summary))
        t.start()
        t.join()
    assert seen == [True]
    set_repr_options(width=33)  # outside a block: every thread
    t = threading.Thread(target=lambda: seen.append(get_repr_options().width))
    t.start()
    t.join()
    assert seen == [True, 33]


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (1, "1 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
    (1024 ** 2, "1.0 MiB"), (int(2.25 * 1024 ** 2), "2.2 MiB"), (3 * 1024 ** 3, "3.0 GiB"),
    (5 * 1024 ** 4, "5.0 TiB"), (2048 * 1024 ** 5, "2048.0 PiB"), (1024 ** 2 - 1, "1.0 MiB"),
])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


def test_format_bytes_refuses_negative():
    with pytest.raises(ValueError):
        format_bytes(-1)


def test_repr_summary():
    s = ReprSummary.of(jnp.zeros((2, 3)))
    assert s == ReprSummary((2, 3), "float32", None, 24)
    assert repr(s) == str(s) == "float32[2,3]"
    assert repr(ReprSummary.of(np.zeros((), np.int8))) == "int8[]"
    assert repr(ReprSummary.of(jnp.ones(4) * u.mV)) == "float32[4] mV"
    assert repr(ReprSummary.of(jax.ShapeDtypeStruct((5,), jnp.float32))) == "float32[5]"
    assert ReprSummary.of(jax.ShapeDtypeStruct((5,), jnp.float32)).nbytes == 20
    assert repr(ReprSummary.of(jax.random.key(0))) == "key<fry>[]"
    with repr_options(show_nbytes=True):
        assert repr(s) == "float32[2,3] (24 B)"
    with pytest.raises(TypeError):
        ReprSummary.of([1, 2])


def test_format_array_like():
    full = ReprOptions(summary=False)
    assert format_array_like(jnp.zeros((2, 3))) == "float32[2,3]"
    assert format_array_like(jnp.arange(3.0), full) == "[0., 1., 2.]"
    assert format_array_like(jnp.arange(3.0) * u.mV, full) == "[0., 1., 2.] mV"
    assert format_array_like(jnp.arange(10), full) == "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
    assert format_array_like(jnp.arange(11), full) == "[ 0,  1,  2, ...,  8,  9, 10]"
    assert format_array_like(jnp.arange(11), full.replace(edge_items=1)) == "[ 0, ..., 10]"
    assert format_array_like(jnp.array([1 / 3]), full.replace(precision=2)) == "[0.33]"
    assert format_array_like(np.arange(4).reshape(2, 2), full) == "[[0, 1],\n [2, 3]]"
    assert format_array_like("text") == "'text'"
    assert format_array_like(3) == "3"
    with repr_options(summary=False):  # the options in force
        assert format_array_like(jnp.arange(2)) == "[0, 1]"
        # no values to show: summarised
        assert format_array_like(jax.ShapeDtypeStruct((2,), jnp.int32)) == "int32[2]"
        assert format_array_like(jax.random.key(0)) == "key<fry>[]"
        texts = []
        jax.jit(lambda x: texts.append(format_array_like(x)) or x)(jnp.zeros(3))
        assert texts == ["float32[3]"]


def test_pretty_format():
    tree = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}
    assert pretty_format(tree) == "{'w': float32[2,3], 'b': float32[3]}"
    assert pretty_format(tree, summary=False) == (
        "{\n"
        "  'w': [[0., 0., 0.],\n"
        "        [0., 0., 0.]],\n"
        "  'b': [0., 0., 0.]\n"
        "}")
    assert pretty_format({"layers": [1, 2, 3], "name": "net"}, width=30) == (
        "{\n"
        "  'layers': [1, 2, 3],\n"
        "  'name': 'net'\n"
        "}")
    assert pretty_format([[1, 2], [3, 4]], width=8) == (
        "[\n"
        "  [1, 2],\n"
        "  [3, 4]\n"
        "]")
    assert pretty_format(list(range(10)), max_items=3) == "[0, 1, 2, ...]"
    assert pretty_format({"a": {"b": {"c": 1}}, "l": [[1]]}, max_depth=1) == \
        "{'a': {...}, 'l': [...]}"
    assert pretty_format((1,)) == "(1,)"
    assert pretty_format(((), [], {}, set(), frozenset())) == \
        "((), [], {}, set(), frozenset())"
    assert pretty_format({3, 1, 2}) == "{1, 2, 3}"
    Pair = collections.namedtuple("Pair", "a b")
    assert pretty_format(Pair(jnp.ones(2), "x")) == "Pair(a=float32[2], b='x')"

    @dataclasses.dataclass
    class Cfg:
        lr: float
        shape: tuple

    assert pretty_format(Cfg(0.1, (3,))) == "Cfg(lr=0.1, shape=(3,))"
    cyclic = [1]
    cyclic.append(cyclic)
    assert pretty_format(cyclic) == "[1, ...]"
    shared = [1]
    assert pretty_format([shared, shared]) == "[[1], [1]]"  # shared, not cyclic
    with repr_options(indent=4, width=10):
        assert pretty_format([12345, 67890]) == "[\n    12345,\n    67890\n]"
    assert get_repr_options() == ReprOptions()


def test_pretty_repr_object_is_exported():
    assert pretty_repr_object(brainx.util.PrettyMapping({"a": 1})) == "{\n  'a': 1\n}"


def test_state_repr_follows_the_options():
    w = brainx.State(jnp.arange(3.0), name="w")
    t = brainx.ParamState({"w": jnp.ones((2, 2)), "b": jnp.zeros(2)})
    v = brainx.HiddenState(jnp.zeros(2) * u.mV)
    # the defaults: brainx's usual summaries
    assert repr(w) == "State(name='w', shape=(3,), dtype=float32)"
    assert repr(t) == "ParamState(value={'b': 'float32[2]', 'w': 'float32[2, 2]'})"
    assert repr(v) == "HiddenState(shape=(2,), dtype=float32, unit=mV)"
    with repr_options(summary=False):
        assert repr(w) == "State(name='w', shape=(3,), dtype=float32, value=[0., 1., 2.])"
        assert repr(t) == "ParamState(value={'b': [0., 0.], 'w': [[1., 1.], [1., 1.]]})"
        assert repr(v) == "HiddenState(shape=(2,), dtype=float32, unit=mV, value=[0., 0.] mV)"
    with repr_options(summary=False, max_array_elements=2, edge_items=1):
        assert repr(w) == "State(name='w', shape=(3,), dtype=float32, value=[0., ..., 2.])"
    with repr_options(show_nbytes=True):
        assert repr(w) == "State(name='w', shape=(3,), dtype=float32, nbytes=12 B)"
        assert repr(t) == "ParamState(value={'b': 'float32[2]', 'w': 'float32[2, 2]'}, nbytes=24 B)"
    assert repr(w) == "State(name='w', shape=(3,), dtype=float32)"


def test_print_module_follows_the_options():
    class Net(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = brainx.ParamState({"w": jnp.ones((2, 2)), "b": jnp.zeros(2)})
            self.h = brainx.HiddenState(jnp.zeros(2))

    net = Net()
    assert str(net) == (
        "Net()\n"
        "  p: ParamState(value={'b': float32[2], 'w': float32[2,2]})\n"
        "  h: HiddenState(shape=(2,), dtype=float32)")
    with repr_options(summary=False):
        assert str(net) == (
            "Net()\n"
            "  p: ParamState(value={'b': [0., 0.], 'w': [[1., 1.], [1., 1.]]})\n"
            "  h: HiddenState(shape=(2,), dtype=float32, value=[0., 0.])")
    with repr_options(show_nbytes=True):
        assert str(net) == (
            "Net()\n"
            "  p: ParamState(value={'b': float32[2] (8 B), 'w': float32[2,2] (16 B)})\n"
            "  h: HiddenState(shape=(2,), dtype=float32, nbytes=8 B)")
