"""The pretty-repr engine: width-fitting layout, shared and cyclic markers, limits, footers,
colours (the behaviour brainstate 0.6.0 documents for ``pretty_repr_object``)."""

import dataclasses
import os

import numpy as np
import pytest

from brainx.util import (
    MappingReprMixin, PrettyAttr, PrettyDict, PrettyList, PrettyMapping, PrettyObject,
    PrettyRepr, PrettyType, ReprSummary, pretty_format, pretty_repr_object, repr_options,
    yield_unique_pretty_repr_items,
)
from brainx.util.pretty import CONTEXT


class Box(PrettyRepr):
    """A PrettyRepr whose name and items are given."""

    def __init__(self, name="Box", **items):
        self._name, self._items = name, items

    def __pretty_repr__(self):
        yield PrettyType(self._name)
        for key, value in self._items.items():
            yield PrettyAttr(key, value)


class Sized(Box):
    def __init__(self, summary, **items):
        super().__init__("Sized", **items)
        self._summary = summary

    def __pretty_repr_summary__(self):
        return self._summary


@pytest.fixture
def colors(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    with repr_options(color=True):
        yield


def test_a_group_stays_on_one_line_while_it_fits():
    box = Box(a=1, b=2)  # 13 columns
    with repr_options(width=13):
        assert repr(box) == "Box(a=1, b=2)"
    with repr_options(width=12):
        assert repr(box) == "Box(\n  a=1,\n  b=2,\n)"


def test_only_the_groups_that_do_not_fit_break():
    box = Box(inner=Box("In", x=1), text="y" * 30)
    with repr_options(width=40):
        assert repr(box) == "Box(\n  inner=In(x=1),\n  text=" + "y" * 30 + ",\n)"
    box = Box(inner=Box("In", a="a" * 20, b="b" * 20))
    with repr_options(width=30):
        assert repr(box) == ("Box(\n  inner=In(\n    a=" + "a" * 20 + ",\n    b=" + "b" * 20
                             + ",\n  ),\n)")


def test_values_strings_containers_and_types():
    assert repr(Box()) == "Box()"
    assert repr(Box(t=(1,), l=[], d={"a": "x"}, s="verbatim", k=int, f=np.float32)) == \
        "Box(t=(1,), l=[], d={'a': 'x'}, s=verbatim, k=int, f=float32)"
    with repr_options(width=20):  # a broken one-tuple has one comma only
        assert repr(Box(t=("a" * 30,))) == "Box(\n  t=(\n    '" + "a" * 30 + "',\n  ),\n)"

    class Multi:
        def __repr__(self):
            return "one\ntwo"
    assert repr(Box(m=Multi(), k=1)) == "Box(\n  m=one\n  two,\n  k=1,\n)"


def test_positional_items_start_end_and_comments():
    class Items(PrettyRepr):
        def __pretty_repr__(self):
            yield PrettyType("Items")
            yield PrettyAttr("", "(3,) -> (4,)")
            yield PrettyAttr("k", 1, start="<", end=">", comment="note")
    assert repr(Items()) == "Items((3,) -> (4,), <k=1>)"
    with repr_options(width=10):
        assert repr(Items()) == "Items(\n  (3,) -> (4,),\n  <k=1>,  # note\n)"


def test_dataclasses_by_their_generated_repr_only():
    @dataclasses.dataclass
    class Cfg:
        lr: float
        name: str
        hidden: int = dataclasses.field(default=0, repr=False)

    @dataclasses.dataclass
    class Own:
        a: int

        def __repr__(self):
            return "own"
    assert repr(Box(c=Cfg(0.1, "x"), o=Own(1))) == "Box(c=Cfg(lr=0.1, name='x'), o=own)"


def test_shared_and_cyclic_references_are_marked_with_their_path():
    child = Box("Child", x=1)
    assert repr(Box(a=child, b=child)) == "Box(a=Child(x=1), b=<shared: .a>)"
    assert repr(Box(l=[child], d={"k": child})) == "Box(l=[Child(x=1)], d={'k': <shared: .l[0]>})"
    me = Box(x=1)
    me._items["me"] = me
    assert repr(me) == "Box(x=1, me=<cycle: .>)"
    inner = Box("In")
    inner._items["up"] = inner
    assert repr(Box(a=inner)) == "Box(a=In(up=<cycle: .a>))"
    lst, dct = [1], {"a": 1}
    lst.append(lst)
    dct["self"] = dct
    assert repr(Box(l=lst, d=dct)) == "Box(l=[1, <cycle: .l>], d={'a': 1, 'self': <cycle: .d>})"
    same = [1, 2]  # a plain container met twice is printed twice
    assert repr(Box(a=same, b=same)) == "Box(a=[1, 2], b=[1, 2])"


def test_header_ref_and_plain_iterables():
    class Ref(PrettyRepr):
        def __pretty_repr__(self):
            yield PrettyType("Ref", ref="<marker>")

    class AsList(PrettyRepr):
        def __pretty_repr__(self):
            return [PrettyType("L"), PrettyAttr("k", 1)]
    assert repr(Box(r=Ref())) == "Box(r=<marker>)"
    assert repr(AsList()) == "L(k=1)"


def test_errors_name_the_object():
    class NoHeader(PrettyRepr):
        def __pretty_repr__(self):
            yield PrettyAttr("x", 1)

    class BadItem(PrettyRepr):
        def __pretty_repr__(self):
            yield PrettyType("Bad")
            yield "oops"
    with pytest.raises(TypeError, match="First item must be PrettyType.*NoHeader"):
        repr(NoHeader())
    with pytest.raises(TypeError, match="Item must be Elem.*BadItem"):
        repr(BadItem())
    with pytest.raises(TypeError, match="not representable"):
        pretty_repr_object(object())

    class Boom(PrettyRepr):
        def __pretty_repr__(self):
            yield PrettyType("Boom")
            raise RuntimeError("boom")
    with pytest.raises(RuntimeError):
        repr(Boom())
    assert CONTEXT.render_depth == 0


def test_sequences_of_objects_are_numbered_when_broken():
    box = Box(layers=[Box("A", v="a" * 30), Box("B")])
    assert repr(box) == "Box(layers=[A(v=" + "a" * 30 + "), B()])"
    with repr_options(width=30):
        assert repr(box) == ("Box(\n  layers=[\n    [0] A(\n      v=" + "a" * 30
                             + ",\n    ),\n    [1] B(),\n  ],\n)")


def test_max_depth_and_max_items():
    box = Box(a=Box("A", b=Box("B", c=1)), l=[Box("C")])
    with repr_options(max_depth=0):
        assert repr(box) == "Box(a=A(...), l=[C(...)])"
    with repr_options(max_depth=1):
        assert repr(box) == "Box(a=A(b=B(...)), l=[C()])"
    assert repr(box) == "Box(a=A(b=B(c=1)), l=[C()])"
    with repr_options(max_items=2):
        assert repr(Box(**{f"k{i}": i for i in range(5)})) == "Box(k0=0, k1=1, ... (+3 more))"
        assert pretty_format(list(range(5))) == "[0, 1, ... (+3 more)]"
        assert pretty_format({1: 1, 2: 2, 3: 3}) == "{1: 1, 2: 2, ... (+1 more)}"


def test_size_footer_and_comments():
    sized = Sized(ReprSummary(26, 104), x=1)
    assert repr(sized) == "Sized(x=1)  # 26 params (104 B)"
    with repr_options(summary=False):
        assert repr(sized) == "Sized(x=1)"
    assert repr(Sized(ReprSummary())) == "Sized()"
    box = Box(a=Sized(ReprSummary(16, 64), w="w" * 20), b=Sized(ReprSummary(0, 0, 3, 12)))
    assert "#" not in repr(box)  # comments only on broken lines
    with repr_options(width=40):
        assert repr(box) == ("Box(\n  a=Sized(w=" + "w" * 20 + "),  # 16 params\n"
                             "  b=Sized(),  # 3 state values\n)")

    class Failing(Box):
        def __pretty_repr_summary__(self):
            raise RuntimeError
    assert repr(Failing("F")) == "F()"  # a summary never breaks a repr


def test_colours_in_str_only(colors):
    box = Box(a=np.zeros(2, np.float32), b=[Box("C")])
    assert "\x1b[" not in repr(box)
    text = str(box)
    assert "\x1b[1;36mBox\x1b[0m" in text and "\x1b[34ma\x1b[0m=" in text
    assert "\x1b[32mf32[2]\x1b[0m" in text
    assert "\x1b[" in str(PrettyList([Box("C")])) and "\x1b[" in str(PrettyDict(a=Box("C")))
    with repr_options(width=13):
        assert "\n" not in str(Box(a=1, b=2))  # the codes take no columns
    os.environ["NO_COLOR"] = "1"
    try:
        assert str(box) == repr(box)
    finally:
        del os.environ["NO_COLOR"]

    class Own(Box):
        def __repr__(self):
            return "own"
    assert str(Own()) == "own"
    assert "\x1b[" in pretty_format(Box(a=1), color=True)


def test_pretty_format_and_repr_object():
    assert pretty_format([np.zeros(2, np.float32), "a", {"k": (1,)}]) == "[f32[2], 'a', {'k': (1,)}]"
    assert pretty_format(3) == "3"
    assert pretty_format([10, 20], width=6) == "[\n  10,\n  20,\n]"
    m = PrettyMapping({"a": 1, "b": [1, 2]}, type_name="Cfg")
    assert pretty_repr_object(m) == "Cfg{'a': 1, 'b': [1, 2]}"
    with repr_options(width=16):
        assert pretty_repr_object(m) == "Cfg{\n  'a': 1,\n  'b': [1, 2],\n}"


def test_containers_and_objects():
    assert repr(PrettyDict(a=1, s="x", l=[1, {"b": 2}])) == "{'a': 1, 's': 'x', 'l': [1, {'b': 2}]}"
    assert repr(PrettyList([1, "x"])) == "[1, 'x']"

    class Run(PrettyObject):
        def __init__(self):
            self.name, self.steps, self.cache, self.me = "demo", 10, object(), self

        def __pretty_repr_item__(self, k, v):
            return None if k == "cache" else (k, v)
    assert repr(Run()) == "Run(name='demo', steps=10, me=<cycle: .>)"

    class Table(MappingReprMixin, PrettyRepr):
        def __getitem__(self, k):
            return {"a": 1}[k]

        def __iter__(self):
            return iter(["a"])

        def __len__(self):
            return 1
    assert repr(Table()) == "{'a': 1}"


def test_yield_unique_items_marks_a_repeat_within_one_call():
    class Node:
        def __init__(self):
            self.value, self.next = 1, None
    node = Node()
    CONTEXT.seen_modules_repr = {}
    try:
        first = list(yield_unique_pretty_repr_items(node))
        again = list(yield_unique_pretty_repr_items(node))
    finally:
        CONTEXT.seen_modules_repr = None
    assert [type(i).__name__ for i in first] == ["PrettyType", "PrettyAttr", "PrettyAttr"]
    assert len(again) == 1 and again[0].empty_repr == "..."
    list(yield_unique_pretty_repr_items(node))
    assert CONTEXT.seen_modules_repr is None  # the outermost call cleans up
