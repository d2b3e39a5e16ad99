"""brainx.graph and Module.states()/nodes() keys, on small hand-built models and brainx.nn layers."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import HiddenState, ParamState, ShortTermState, graph, nn
from brainx.util import DottedPath, FlattedDict, NestedDict, PathContains


class Cell(nn.Module):
    def __init__(self, n, scale=1.0):
        super().__init__()
        self.scale = scale
        self.w = ParamState(jnp.arange(n, dtype=jnp.float32) * scale)
        self.h = HiddenState(jnp.zeros(n), tag="rec")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Cell(2)
        self.blocks = [Cell(2, 2.0), (Cell(2, 3.0),)]
        self.heads = {"left": Cell(1), 5: Cell(1)}
        self.tied = self.enc.w                 # shared: listed once, under enc.w
        self.count = ShortTermState(jnp.zeros((), jnp.int32))


PATHS = [("enc", "w"), ("enc", "h"), ("blocks", 0, "w"), ("blocks", 0, "h"),
         ("blocks", 1, 0, "w"), ("blocks", 1, 0, "h"), ("heads", "left", "w"),
         ("heads", "left", "h"), ("heads", 5, "w"), ("heads", 5, "h"), ("count",)]


def obj_at(root, path):
    for part in path:
        root = root[part] if isinstance(root, (list, tuple, dict)) else getattr(root, part)
    return root


def test_module_states_keys_are_path_tuples_printed_with_dots():
    net = Net()
    found = net.states()
    assert type(found) is FlattedDict
    assert [tuple(p) for p in found] == PATHS                    # raw parts: ints stay ints
    assert list(found) == [".".join(map(str, p)) for p in PATHS]  # and they print dotted
    for p in PATHS:
        assert found[p] is obj_at(net, p) and found[".".join(map(str, p))] is obj_at(net, p)
    assert all(type(p) is DottedPath for p in found)
    nest = found.to_nest()
    assert nest["blocks"][1][0]["w"] is net.blocks[1][0].w and nest["heads"][5]["h"] is net.heads[5].h
    assert sorted(nest) == ["blocks", "count", "enc", "heads"]
    # brainstate-style uses of the keys
    assert [p for p in net.states(ParamState) if p[-1] == "w" and p[0] == "blocks"] == [
        ("blocks", 0, "w"), ("blocks", 1, 0, "w")]
    assert {"/".join(map(str, p)) for p in net.states("rec")} == {
        "enc/h", "blocks/0/h", "blocks/1/0/h", "heads/left/h", "heads/5/h"}


def test_module_nodes_and_hierarchy():
    net = Net()
    # the module itself too (depth 0), as brainstate's Module.nodes == graph.nodes
    assert list(net.nodes()) == ["", "enc", "blocks.0", "blocks.1.0", "heads.left", "heads.5"]
    assert net.nodes() == graph.nodes(net) and net.nodes()[()] is net
    assert list(net.nodes(allowed_hierarchy=(1, 1))) == [
        "enc", "blocks.0", "blocks.1.0", "heads.left", "heads.5"]
    assert net.nodes()["heads", 5] is net.heads[5]
    # depth 0: the states the root holds itself (the tied weight, reached only through `tied` now)
    assert list(net.states(allowed_hierarchy=(0, 0))) == ["tied", "count"]
    assert list(net.states(HiddenState, allowed_hierarchy=(1, 1))) == [
        "enc.h", "blocks.0.h", "blocks.1.0.h", "heads.left.h", "heads.5.h"]
    assert list(net.nodes(allowed_hierarchy=(2, 5))) == []


def test_graph_states_and_nodes_follow_brainstate():
    net = Net()
    assert graph.states(net) == net.states()
    p, h = graph.states(net, ParamState, HiddenState)
    assert list(p) == ["enc.w", "blocks.0.w", "blocks.1.0.w", "heads.left.w", "heads.5.w"]
    assert list(h) == ["enc.h", "blocks.0.h", "blocks.1.0.h", "heads.left.h", "heads.5.h"]
    left = graph.states(net, PathContains("left"))
    assert left == {"heads.left.w": net.heads["left"].w, "heads.left.h": net.heads["left"].h}
    assert dict(left) == {("heads", "left", "w"): net.heads["left"].w,
                          ("heads", "left", "h"): net.heads["left"].h}
    with pytest.raises(ValueError, match="can only be the last"):
        graph.states(net, ..., ParamState)
    nodes = graph.nodes(net)
    assert list(nodes) == ["", "enc", "blocks.0", "blocks.1.0", "heads.left", "heads.5"]
    assert nodes[()] is net and nodes["blocks", 1, 0] is net.blocks[1][0]
    # plain containers
    extra = HiddenState(jnp.ones(1))
    mixed = graph.states({"net": net.enc, "more": [extra, net.enc.w]})
    assert mixed == {"net.w": net.enc.w, "net.h": net.enc.h, "more.0": extra}


def test_states_of_brainx_nn_models():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    assert list(net.states()) == ["layers.0.weight", "layers.2.weight"]
    assert graph.states(net)["layers", 2, "weight"] is net.layers[2].weight
    lif = nn.init_all_states(nn.LIF(3))
    expect = {tuple(p) for p in graph.states(lif, HiddenState)}
    assert expect == {(name,) for name, v in vars(lif).items() if isinstance(v, HiddenState)}
    assert len(expect) >= 1


def loss_fn(net, x):
    y = x
    for layer in (net.layers[0], net.layers[2]):
        y = y @ layer.weight.value["weight"] + layer.weight.value["bias"]
    return jnp.sum(jnp.tanh(y) ** 2)


def test_grad_over_a_states_mapping_returns_one_keyed_alike():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    params = net.states(ParamState)
    x = jnp.linspace(-1.0, 1.0, 6).reshape(2, 3)
    grads = brainx.transform.grad(lambda: loss_fn(net, x), grad_states=params)()
    # a plain dict with the same keys, as brainstate returns (it sums with dicts of zeros)
    assert type(grads) is dict and list(grads) == ["layers.0.weight", "layers.2.weight"]

    def ref(ws):
        y = x
        for w in ws:
            y = y @ w["weight"] + w["bias"]
        return jnp.sum(jnp.tanh(y) ** 2)

    want = jax.grad(ref)([net.layers[0].weight.value, net.layers[2].weight.value])
    for got, w in zip((grads["layers", 0, "weight"], grads["layers", 2, "weight"]), want):
        np.testing.assert_allclose(got["weight"], w["weight"], rtol=1e-6)
        np.testing.assert_allclose(got["bias"], w["bias"], rtol=1e-6)


def test_treefy_states_are_snapshots():
    net = Net()
    snap = graph.treefy_states(net)
    assert type(snap) is NestedDict
    ref = snap["blocks"][1][0]["w"]
    assert isinstance(ref, graph.TreefyState) and ref.type is ParamState
    np.testing.assert_array_equal(ref.value, [0.0, 3.0])
    assert snap.enc.h.tag == {"rec"}
    net.blocks[1][0].w.value = jnp.zeros(2)
    np.testing.assert_array_equal(ref.value, [0.0, 3.0])        # a snapshot, not the state
    params = graph.treefy_states(net, ParamState)
    assert sorted(map(str, params.to_flat())) == sorted(
        ".".join(map(str, p)) for p in PATHS if p[-1] == "w")
    leaves = jax.tree.leaves(snap)
    assert len(leaves) == len(PATHS)


def test_split_merge_rebuilds_a_new_model_with_new_states():
    net = Net()
    gdef, params, rest = graph.treefy_split(net, ParamState, ...)
    assert sorted(map(str, params.to_flat())) == sorted(
        ".".join(map(str, p)) for p in PATHS if p[-1] == "w")
    doubled = jax.tree.map(lambda v: 2 * v, params)
    new = graph.treefy_merge(gdef, doubled, rest)
    assert type(new) is Net and type(new.blocks[1]) is tuple and set(new.heads) == {"left", 5}
    assert new.tied is new.enc.w and new.enc.w is not net.enc.w      # sharing kept, states new
    for p in PATHS:
        old, fresh = obj_at(net, p), obj_at(new, p)
        assert type(fresh) is type(old) and fresh is not old
        scale = 2 if p[-1] == "w" else 1
        np.testing.assert_array_equal(fresh.value, scale * np.asarray(old.value))
    assert new.blocks[0].scale == 2.0 and new.heads[5].h.tag == {"rec"}
    assert graph.states(new)["blocks", 0, "w"] is new.blocks[0].w
    with pytest.raises(ValueError, match="no state given for"):
        graph.treefy_merge(gdef, params)
    with pytest.raises(ValueError, match="leave out"):
        graph.treefy_split(net, ParamState)


def test_clone_graphdef_and_update_states():
    lin = nn.Linear(2, 3)
    twin = graph.clone(lin)
    assert twin.weight is not lin.weight and type(twin) is nn.Linear
    x = jnp.ones((1, 2))
    np.testing.assert_array_equal(twin(x), lin(x))
    assert graph.graphdef(lin).paths == ("weight",)
    zero = jax.tree.map(jnp.zeros_like, graph.treefy_states(lin))
    graph.update_states(lin, zero)
    np.testing.assert_array_equal(lin(x), np.zeros((1, 3)))
    graph.update_states(twin, FlattedDict({"weight": {"weight": jnp.ones((2, 3)),
                                                      "bias": jnp.ones(3)}}))
    np.testing.assert_array_equal(twin(x), np.full((1, 3), 3.0))
    with pytest.raises(ValueError, match="bias is not a state of Linear"):
        graph.update_states(lin, FlattedDict({"bias": jnp.ones(3)}))


def test_treefy_state_round_trip_keeps_type_and_metadata():
    s = HiddenState(jnp.ones(2), name="v", tag="rec", unit_hint=3)
    ref = graph.TreefyState.from_state(s)
    back = jax.tree.map(lambda v: v + 1, ref).to_state()
    assert type(back) is HiddenState and back.name == "v" and back.tag == {"rec"}
    assert back.unit_hint == 3 and back.value.tolist() == [2.0, 2.0]
    assert ref == graph.TreefyState.from_state(s) and ref != ref.replace(jnp.zeros(2))
    struct = jax.tree.structure(ref)
    assert struct == jax.tree.structure(graph.TreefyState.from_state(s))
    hash(struct)


# -- Node, pop_states, iter_leaf, flatten and graph_to_tree ---------------------------------
class _Table(brainx.graph.Node):
    """A plain node (not a module) that owns states."""

    graph_invisible_attrs = ("scratch",)

    def __init__(self, n):
        self.weights = brainx.ParamState(jnp.arange(float(n)))
        self.trace = brainx.HiddenState(jnp.zeros(n))
        self.scratch = brainx.State(jnp.ones(n))


def test_plain_node_states_are_found_and_threaded_by_jit():
    table = _Table(3)
    assert list(brainx.graph.states(table)) == ["weights", "trace"]

    @brainx.transform.jit
    def step(x):
        table.trace.value = table.trace.value + table.weights.value * x

    step(2.0)
    np.testing.assert_allclose(table.trace.value, 2.0 * np.arange(3.0))
    table.weights = brainx.ParamState(jnp.ones(3))   # rebinding: jit must see the new state
    step(1.0)
    np.testing.assert_allclose(table.trace.value, 2.0 * np.arange(3.0) + 1.0)
    twin = copy.deepcopy(table)
    assert twin.weights is not table.weights
    np.testing.assert_allclose(twin.trace.value, table.trace.value)


def test_pop_states_removes_from_nodes_and_dicts_and_refuses_lists():
    table = _Table(2)
    holder = {"t": table, "extra": brainx.HiddenState(jnp.zeros(1))}
    popped = brainx.graph.pop_states(holder, brainx.HiddenState)
    assert sorted(map(str, popped.to_flat())) == ["extra", "t.trace"]
    assert not hasattr(table, "trace") and "extra" not in holder
    assert list(brainx.graph.states(holder)) == ["t.weights"]
    in_list = [brainx.HiddenState(jnp.zeros(1))]
    with pytest.raises(ValueError, match="list"):
        brainx.graph.pop_states(in_list, brainx.HiddenState)
    assert len(in_list) == 1
    with pytest.raises(ValueError, match="at least one filter"):
        brainx.graph.pop_states(holder)


def test_iter_leaf_yields_states_and_plain_values_once():
    table = _Table(2)
    leaves = {str(p): x for p, x in brainx.graph.iter_leaf([table, table.weights, 7])}
    assert set(leaves) == {"0.weights", "0.trace", "2"}
    assert leaves["0.weights"] is table.weights and leaves["2"] == 7


def test_flatten_unflatten_round_trip_with_snapshots_and_with_states():
    net = brainx.nn.Sequential(brainx.nn.Linear(2, 3), brainx.nn.Linear(3, 1))
    gdef, snap = brainx.graph.flatten(net)
    new = brainx.graph.unflatten(gdef, jax.tree.map(lambda x: x + 1, snap))
    for a, b in zip(brainx.graph.states(net).values(), brainx.graph.states(new).values()):
        assert a is not b
        jax.tree.map(lambda x, y: np.testing.assert_allclose(x + 1, y), a.value, b.value)
    gdef, raw = brainx.graph.flatten(net, treefy_state=False)
    same = brainx.graph.unflatten(gdef, raw)
    assert same.layers[0].weight is net.layers[0].weight
    with pytest.raises(ValueError, match="is a State"):
        brainx.graph.flatten(net.layers[0].weight)


def test_graph_to_tree_through_jax_transforms_keeps_sharing():
    shared = brainx.nn.Linear(2, 2)
    other = brainx.nn.Linear(2, 2)
    other.weight = shared.weight                       # two modules, one state
    pure, found = brainx.graph.graph_to_tree((shared, other, shared))
    assert len(found) == 1 and next(iter(found.values())) is shared.weight

    @jax.jit
    def scale(tree):
        return jax.tree.map(lambda x: 3 * x, tree)

    a, b, c = brainx.graph.tree_to_graph(scale(pure))
    assert a is c and a.weight is b.weight and a.weight is not shared.weight
    jax.tree.map(lambda x, y: np.testing.assert_allclose(3 * x, y),
                 shared.weight.value, a.weight.value)
    with pytest.raises(ValueError, match="two prefixes"):
        brainx.graph.graph_to_tree((shared, shared), prefix=(0, 1))
    brainx.graph.graph_to_tree((shared, shared), prefix=(0, 0))
