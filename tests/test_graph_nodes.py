"""brainx.graph: the node registry, Node rules, GraphDef equality, update/pop semantics, walk."""

import copy
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import ParamState, graph, nn
from brainx.util import FlattedDict, NestedDict


class Box(graph.Node):
    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


def test_graph_modules_do_not_import_nn():
    import brainx.graph.structure, brainx.graph.node, brainx.graph.walk   # noqa: F401
    for mod in (brainx.graph.walk, brainx.graph.node, brainx.graph.structure, graph.operations,
                graph.convert):
        lines = open(mod.__file__).read().splitlines()
        assert not [ln for ln in lines if ln.startswith(("from brainx.nn", "import brainx.nn"))]
        assert not [ln for ln in lines if ln.startswith("        from brainx")]   # no deferred ones
    assert brainx.nn.Module.__mro__[1:].count(graph.Node) == 1    # nn builds on graph's Node


def test_register_graph_node_type_makes_a_foreign_class_a_node():
    class Bag:
        def __init__(self):
            self.items = {}

    graph.register_graph_node_type(
        Bag, flatten=lambda b: (list(b.items.items()), None),
        set_key=lambda b, k, v: b.items.__setitem__(k, v), pop_key=lambda b, k: b.items.pop(k),
        create_empty=lambda meta: Bag(), clear=lambda b: b.items.clear())
    bag = Bag()
    bag.items["w"] = ParamState(jnp.ones(2))
    bag.items["n"] = 3
    outer = Box(bag=bag, again=bag)
    assert list(graph.states(outer)) == ["bag.w"]
    assert [str(p) for p in graph.nodes(outer)] == ["", "bag"]
    twin = graph.clone(outer)
    assert type(twin.bag) is Bag and twin.bag is twin.again and twin.bag.items["n"] == 3
    assert twin.bag.items["w"] is not bag.items["w"]
    popped = graph.pop_states(outer, ParamState)
    assert list(popped.to_flat()) == ["bag.w"] and "w" not in bag.items
    with pytest.raises(TypeError, match="expected a class"):
        graph.register_graph_node_type(bag, None, None, None, None, None)


def test_node_repr_deepcopy_and_invisible_attrs():
    class Table(graph.Node):
        graph_invisible_attrs = ("cache",)

        def __init__(self):
            self.w = ParamState(jnp.ones(2))
            self._scale = 2.0
            self.unit = None
            self.cache = brainx.State(jnp.zeros(2))

    t = Table()
    assert repr(t) == "Table(w=ParamState(f32[2]), _scale=2.0)  # 2 params (8 B)"
    assert t.__pretty_repr_item__("unit", None) is None
    assert t.__pretty_repr_item__("cache", 1) is None
    assert t.__pretty_repr_item__("w", 1) == ("w", 1)
    c = copy.deepcopy(t)
    assert type(c) is Table and c.w is not t.w and c._scale == 2.0
    assert c.cache is t.cache                     # not the node's: kept as it is
    c.w.value = jnp.zeros(2)
    np.testing.assert_array_equal(t.w.value, jnp.ones(2))


def test_check_valid_context_passes_for_live_states():
    holder = Box(w=ParamState(jnp.ones(2)), sub=nn.Linear(2, 2))
    assert holder.check_valid_context(lambda: "stale") is None
    assert Box(tag="x").check_valid_context(lambda: "stale") is None


def test_graphdef_equality_hash_and_type():
    net = nn.Linear(2, 3)
    g1, g2 = graph.graphdef(net), graph.treefy_split(net)[0]
    assert g1 == g2 and hash(g1) == hash(g2) and len({g1, g2}) == 1
    assert g1.type is nn.Linear
    assert graph.graphdef(Box(a=1)) == graph.graphdef(Box(a=1))
    assert graph.graphdef(Box(a=1)) != graph.graphdef(Box(a=2))
    assert graph.graphdef(Box(a=1)) != graph.graphdef(Box(b=1))
    cyc = Box()
    cyc.me = cyc
    assert graph.graphdef(cyc) == graph.graphdef(cyc)


def test_containers_are_values_nodes_and_states_are_shared():
    shared = {"a": 1, "b": ParamState(2.0)}
    g = [shared, 3, shared, ParamState(4.0)]
    gdef, snap = graph.treefy_split(g)
    back = graph.treefy_merge(gdef, snap)
    assert back[0] is not back[2] and back[0] == {"a": 1, "b": back[2]["b"]}
    node = Box(w=ParamState(1.0))
    back = graph.clone([node, node])
    assert back[0] is back[1]
    with pytest.raises(ValueError, match="Expected key"):
        graph.unflatten(gdef, NestedDict({}))


def test_update_states_readds_popped_and_refuses_wrong_targets():
    net = Box(w=ParamState(jnp.ones(2)), b=ParamState(jnp.zeros(2)), tag="plain", sub=Box())
    popped = graph.pop_states(net, ParamState)
    assert not hasattr(net, "w")
    graph.update_states(net, popped)                       # State objects: put back as they are
    assert net.w is popped["w"] and len(graph.states(net)) == 2
    snap = graph.treefy_states(net)
    graph.pop_states(net, ParamState)
    graph.update_states(net, snap)                         # TreefyState: new live states
    assert isinstance(net.w, ParamState) and len(graph.states(net)) == 2
    graph.update_states(net, FlattedDict({"w": jnp.full(2, 5.0)}))     # a plain value into an existing state
    np.testing.assert_array_equal(net.w.value, jnp.full(2, 5.0))
    for bad, match in [  # noqa: B007({"tag": ParamState(jnp.zeros(2))}, "not a state"),
                       ({"sub": ParamState(1.0).replace()}, "node or container"),
                       ({"typo": 1.0}, "typo is not a state of Box"),
                       ({"tag": 1.0}, "tag is not a state")]:
        with pytest.raises(ValueError, match=match):
            graph.update_states(net, FlattedDict(bad))
    with pytest.raises(ValueError, match="cannot add 3"):
        graph.update_states((1, 2, ParamState(3)), FlattedDict({3: ParamState(1)}))
    with pytest.raises(ValueError, match="not a state"):
        graph.update_states((1, 2, ParamState(3)), NestedDict({0: graph.TreefyState(int, 10)}))


def test_pop_states_removes_every_alias():
    s = ParamState(jnp.zeros(1))
    two = Box(a=s, b=s, d={"c": s})
    popped = graph.pop_states(two, ParamState)
    assert list(popped.to_flat()) == ["a"]
    assert not hasattr(two, "a") and not hasattr(two, "b") and two.d == {}
    tied = Box(x=nn.Linear(2, 2), y=nn.Linear(2, 2))
    tied.y.weight = tied.x.weight
    assert len(graph.pop_states(tied, ParamState).to_flat()) == 1
    assert graph.states(tied) == {} and not hasattr(tied.y, "weight")
    in_list = Box(a=s, items=[s])
    with pytest.raises(ValueError, match="held by a list"):
        graph.pop_states(in_list, ParamState)
    assert in_list.a is s                                   # nothing removed
    with pytest.raises(ValueError, match="Expected at least one filter"):
        graph.pop_states(in_list)


class Pair(NamedTuple):
    w: ParamState
    n: int


def test_walk_looks_inside_pytrees_and_none_is_empty():
    m = Box(pair=Pair(ParamState(jnp.ones(1)), 3), nothing=None, dims=(0, 1), a=1)
    assert list(graph.states(m)) == ["pair.0"]     # a NamedTuple is a tuple: index paths
    leaves = [(str(p), x) for p, x in graph.iter_leaf([m, m])]
    assert [p for p, _ in leaves] == ["0.pair.0", "0.pair.1", "0.dims.0", "0.dims.1", "0.a"]
    twin = graph.clone(m)
    assert type(twin.pair) is Pair and twin.pair.w is not m.pair.w and twin.pair.n == 3
    assert twin.nothing is None and twin.dims == (0, 1)


def test_graph_to_tree_checks_nested_aliasing_and_broadcast_prefix():
    inner = Box(w=ParamState(jnp.ones(2)))
    with pytest.raises(ValueError, match="two prefixes"):
        graph.graph_to_tree([Box(inner=inner), Box(inner=inner)], prefix=[0, 1])
    tree, _ = graph.graph_to_tree([Box(inner=inner), Box(inner=inner)], prefix=[0, 0])
    back = graph.tree_to_graph(tree)
    assert back[0].inner is back[1].inner
    assert graph.broadcast_prefix(7, {"a": 1, "b": (2, 3)}) == [7, 7, 7]
    assert graph.broadcast_prefix([0, None], [{"a": 1}, [2, 3]],
                                  prefix_is_leaf=lambda x: x is None) == [0, None, None]


def test_module_nodes_include_graph_nodes_that_are_not_modules():
    """braincell keeps ion channels (graph Nodes, not Modules) as attributes, set after
    construction, and finds them with ``cell.nodes(IonChannel, allowed_hierarchy=(1, 1))``."""
    class Channel(brainx.graph.Node):
        def __init__(self):
            self.p = brainx.HiddenState(jnp.zeros(1))

    class Cell(brainx.nn.Module):
        pass

    cell = Cell()
    assert list(cell.nodes(Channel, allowed_hierarchy=(1, 1))) == []
    cell.na = Channel()
    found = cell.nodes(Channel, allowed_hierarchy=(1, 1))
    assert list(found) == ["na"] and found["na"] is cell.na
    assert cell.nodes() == brainx.graph.nodes(cell)
    assert list(cell.states()) == ["na.p"]
