"""brainx.nn deep-learning layers, part 1: activations, Sequential, dropout, reshape,
embedding, collective helpers; each against plain JAX."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import HiddenState, ParamState, environ, nn
from brainx.transform import grad

X = jnp.linspace(-3.0, 3.0, 13)


# -- activations ---------------------------------------------------------------------------
FUNCTIONS = [
    (nn.relu, jax.nn.relu), (nn.sigmoid, jax.nn.sigmoid), (nn.tanh, jnp.tanh),
    (nn.silu, jax.nn.silu), (nn.swish, jax.nn.silu), (nn.softplus, jax.nn.softplus),
    (nn.elu, jax.nn.elu), (nn.selu, jax.nn.selu), (nn.celu, jax.nn.celu),
    (nn.gelu, lambda x: jax.nn.gelu(x, approximate=True)), (nn.mish, jax.nn.mish),
    (nn.log_sigmoid, jax.nn.log_sigmoid), (nn.soft_sign, lambda x: x / (1 + jnp.abs(x))),
    (nn.relu6, lambda x: jnp.clip(x, 0, 6)), (nn.hard_sigmoid, lambda x: jnp.clip(x + 3, 0, 6) / 6),
    (nn.hard_swish, lambda x: x * jnp.clip(x + 3, 0, 6) / 6),
    (nn.leaky_relu, lambda x: jnp.where(x >= 0, x, 0.01 * x)),
    (nn.hard_tanh, lambda x: jnp.clip(x, -1, 1)),
    (nn.tanh_shrink, lambda x: x - jnp.tanh(x)),
    (nn.hard_shrink, lambda x: jnp.where(jnp.abs(x) > 0.5, x, 0.0)),
    (nn.soft_shrink, lambda x: jnp.sign(x) * jnp.maximum(jnp.abs(x) - 0.5, 0.0)),
    (nn.prelu, lambda x: jnp.where(x >= 0, x, 0.25 * x)),
    (nn.softmax, lambda x: jnp.exp(x) / jnp.exp(x).sum()),
    (nn.log_softmax, lambda x: x - jnp.log(jnp.exp(x).sum())),
    (nn.softmin, lambda x: jnp.exp(-x) / jnp.exp(-x).sum()),
    (nn.sparse_plus, jax.nn.sparse_plus), (nn.squareplus, lambda x: (x + jnp.sqrt(x * x + 4)) / 2),
]


@pytest.mark.parametrize("fn,ref", FUNCTIONS, ids=[f.__name__ for f, _ in FUNCTIONS])
def test_activation_functions_match_references(fn, ref):
    np.testing.assert_allclose(fn(X), ref(X), rtol=1e-5, atol=1e-6)


LAYERS = [
    (nn.ReLU(), jax.nn.relu), (nn.Sigmoid(), jax.nn.sigmoid), (nn.Tanh(), jnp.tanh),
    (nn.GELU(), lambda x: jax.nn.gelu(x, approximate=False)),
    (nn.GELU(approximate=True), lambda x: jax.nn.gelu(x, approximate=True)),
    (nn.LeakyReLU(0.2), lambda x: jnp.where(x >= 0, x, 0.2 * x)),
    (nn.ELU(0.5), lambda x: jax.nn.elu(x, 0.5)), (nn.SiLU(), jax.nn.silu),
    (nn.Softplus(), jax.nn.softplus), (nn.ReLU6(), jax.nn.relu6),
    (nn.Hardtanh(-2.0, 1.0), lambda x: jnp.clip(x, -2, 1)),
    (nn.Threshold(0.5, -1.0), lambda x: jnp.where(x > 0.5, x, -1.0)),
    (nn.Softshrink(1.0), lambda x: jnp.sign(x) * jnp.maximum(jnp.abs(x) - 1.0, 0.0)),
    (nn.Softmax(), jax.nn.softmax), (nn.LogSoftmax(), jax.nn.log_softmax),
    (nn.Softmin(), lambda x: jax.nn.softmax(-x)), (nn.Identity(), lambda x: x),
]


@pytest.mark.parametrize("layer,ref", LAYERS, ids=[repr(l) for l, _ in LAYERS])
def test_activation_layers_match_references(layer, ref):
    x = X.reshape(1, 13)
    np.testing.assert_allclose(layer(x), ref(x), rtol=1e-5, atol=1e-6)
    assert isinstance(layer, nn.ElementWiseBlock)


def test_softmax_dims_and_glu():
    x = jnp.arange(12.0).reshape(3, 4) / 5
    np.testing.assert_allclose(nn.Softmax(dim=0)(x), jax.nn.softmax(x, axis=0), rtol=1e-6)
    np.testing.assert_allclose(nn.Softmax2d()(x.reshape(3, 2, 2)),
                               jax.nn.softmax(x.reshape(3, 2, 2), axis=0), rtol=1e-6)
    a, b = x[:, :2], x[:, 2:]
    np.testing.assert_allclose(nn.GLU()(x), a * jax.nn.sigmoid(b), rtol=1e-6)
    with pytest.raises(ValueError, match="max_val"):
        nn.Hardtanh(1.0, 0.0)


def test_prelu_slope_is_a_parameter_with_the_right_gradient():
    layer = nn.PReLU(num_parameters=13, init=0.1)
    g = grad(lambda: jnp.sum(layer(X) ** 2), grad_states=layer.weight)()
    ref = jax.grad(lambda a: jnp.sum(jnp.where(X >= 0, X, a * X) ** 2))(jnp.full(13, 0.1))
    np.testing.assert_allclose(g, ref, rtol=1e-6)


def test_rrelu_draws_slopes_in_range_from_brainx_random():
    brainx.random.seed(3)
    y = nn.RReLU(0.1, 0.3)(-jnp.ones(200))
    assert float(y.max()) <= -0.1 and float(y.min()) >= -0.3 and len(set(y.tolist())) > 100


# -- Sequential ------------------------------------------------------------------------------
def test_sequential_chains_layers_and_functions_like_plain_jax():
    brainx.random.seed(0)
    net = nn.Sequential(nn.Linear(3, 5), jax.nn.relu, nn.Linear.desc(out_size=2), nn.Tanh())
    assert (net.in_size, net.out_size, net[2].in_size) == ((3,), (2,), (5,))
    p0, p2 = net[0].weight.value, net[2].weight.value
    x = jnp.arange(6.0).reshape(2, 3) / 4

    def ref(p0, p2):
        h = jax.nn.relu(x @ p0["weight"] + p0["bias"])
        return jnp.tanh(h @ p2["weight"] + p2["bias"])

    np.testing.assert_allclose(net(x), ref(p0, p2), rtol=1e-6)
    params = net.states(ParamState)
    assert list(params) == ["layers.0.weight", "layers.2.weight"]
    g = grad(lambda: jnp.sum(net(x) ** 2), grad_states=params)()
    g_ref = jax.grad(lambda a, b: jnp.sum(ref(a, b) ** 2), argnums=(0, 1))(p0, p2)
    for got, want in zip(g.values(), g_ref):
        jax.tree.map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6), got,
                     want)


def test_sequential_indexing_and_growing():
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    assert isinstance(net[0], nn.Linear) and len(net[:1]) == 1 and len(net[[0, 1]]) == 2
    assert net[1:][0] is net[1] or len(net[5:]) == 0
    assert len(net[5:]) == 0
    net.append(nn.Linear.desc(out_size=2))
    assert net.out_size == (2,) and net[2].in_size == (3,)
    net.extend([nn.Sigmoid(), nn.Linear.desc(out_size=6)])
    assert net.out_size == (6,)
    net.insert(-1, nn.Dropout(0.5))
    assert isinstance(net[-2], nn.Dropout) and net.out_size == (6,)
    net.insert(1, nn.Linear.desc(out_size=7))
    assert net[1].in_size == (3,) and net[1].out_size == (7,)
    with pytest.raises(TypeError, match="first layer must be a built Module"):
        nn.Sequential(jax.nn.relu)
    with pytest.raises(ValueError, match="no out_size"):
        nn.Sequential(nn.MaxPool1d(2), nn.Linear.desc(out_size=3))


def test_sequential_error_names_the_failing_layer():
    net = nn.Sequential(nn.Linear(3, 2), nn.Linear(5, 1))
    with pytest.raises(TypeError) as info:
        net(jnp.ones(3))
    assert "layer 1 of Sequential" in "".join(getattr(info.value, "__notes__", []))


def test_sequential_under_jit_keeps_states():
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    f = brainx.transform.jit(lambda x: net(x))
    np.testing.assert_allclose(f(jnp.ones(2)), net(jnp.ones(2)), rtol=1e-6)


# -- dropout -----------------------------------------------------------------------------------
def test_dropout_keeps_with_prob_and_scales_only_when_fitting():
    drop = nn.Dropout(prob=0.8)
    brainx.random.seed(1)
    with environ.context(fit=True):
        y = drop(jnp.ones((50, 40)))
    kept = np.asarray(y) > 0
    assert set(np.unique(np.asarray(y)).round(4)) == {0.0, 1.25}
    assert abs(kept.mean() - 0.8) < 0.03
    with environ.context(fit=False):
        np.testing.assert_array_equal(drop(jnp.ones(5)), jnp.ones(5))
    with pytest.raises(KeyError, match="fit"):
        drop(jnp.ones(3))
    with pytest.raises(ValueError, match="probability to keep"):
        nn.Dropout(1.5)


def test_dropout_mask_is_the_same_for_value_and_gradient():
    brainx.random.seed(2)
    x = brainx.ParamState(jnp.linspace(1.0, 2.0, 30))
    drop = nn.Dropout(prob=0.5)
    def loss():
        y = drop(x.value)
        return jnp.sum(y), y

    with environ.context(fit=True):
        g, y = grad(loss, grad_states=x, has_aux=True)()
    np.testing.assert_allclose(g, (np.asarray(y) > 0) / 0.5)


def test_dropout_broadcast_dims_and_channel_dropout():
    brainx.random.seed(4)
    with environ.context(fit=True):
        y = np.asarray(nn.Dropout(0.5, broadcast_dims=(0,))(jnp.ones((6, 20))))
        z = np.asarray(nn.Dropout2d(0.5)(jnp.ones((3, 4, 4, 8))))   # N, H, W, C
    assert (y == y[0]).all()                                 # one mask shared by the rows
    assert ((z == z[:, :1, :1, :]).all())                    # a whole channel at once
    assert 0 < (z[:, 0, 0, :] > 0).mean() < 1
    with pytest.raises(ValueError, match="3-D input"):
        nn.Dropout2d()(jnp.ones((2, 3)))


def test_dropout_under_vmap_draws_per_lane():
    brainx.random.seed(5)
    drop = nn.Dropout(0.5)
    with environ.context(fit=True):
        y = brainx.transform.vmap(drop)(jnp.ones((4, 64)))
    assert not np.array_equal(np.asarray(y[0]), np.asarray(y[1]))


# -- Flatten / Unflatten -------------------------------------------------------------------------
def test_flatten_unflatten_batched_and_not():
    x = jnp.arange(2 * 3 * 4 * 5.0).reshape(2, 3, 4, 5)
    flat = nn.Flatten(in_size=(3, 4, 5))
    np.testing.assert_array_equal(flat(x), x.reshape(2, 60))
    np.testing.assert_array_equal(flat(x[0]), x[0].reshape(60))
    np.testing.assert_array_equal(nn.Flatten(1, 2)(x), x.reshape(2, 12, 5))
    np.testing.assert_array_equal(nn.Flatten()(x), x.reshape(-1))
    un = nn.Unflatten(-1, (3, 20), in_size=(60,))
    assert un.out_size == (3, 20)
    np.testing.assert_array_equal(un(x.reshape(2, 60)), x.reshape(2, 3, 20))
    with pytest.raises(ValueError, match="expected inputs ending in shape"):
        flat(jnp.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="do not match"):
        un(jnp.ones(7))


# -- Embedding ------------------------------------------------------------------------------------
TABLE = jnp.arange(12.0).reshape(6, 2) / 3
IDX = jnp.array([[1, 4, 1], [0, 5, 1]])


def test_embedding_lookup_and_gradient():
    emb = nn.Embedding(6, 2, embedding_init=TABLE)
    np.testing.assert_array_equal(emb(IDX), TABLE[IDX])
    assert emb(IDX[0, 0]).shape == (2,)
    w = jnp.arange(12.0).reshape(2, 3, 2)
    g = grad(lambda: jnp.sum(emb(IDX) * w), grad_states=emb.weight)()
    np.testing.assert_allclose(g, jax.grad(lambda t: jnp.sum(t[IDX] * w))(TABLE))
    with pytest.raises(TypeError, match="integers"):
        emb(jnp.array([0.5]))


def test_embedding_padding_idx_freq_scaling_and_freeze():
    emb = nn.Embedding(6, 2, embedding_init=TABLE, padding_idx=1, scale_grad_by_freq=True)
    np.testing.assert_array_equal(emb.weight.value[1], 0.0)
    g = grad(lambda: jnp.sum(emb(IDX)), grad_states=emb.weight)()
    counts = np.bincount(np.ravel(IDX), minlength=6)
    want = np.where(counts[:, None] > 0, 1.0, 0.0) * np.ones((6, 2))   # sum / count = 1 per row
    want[1] = 0.0                                                     # padding row: no gradient
    np.testing.assert_allclose(g, want)
    frozen = nn.Embedding.from_pretrained(TABLE)
    g = grad(lambda: jnp.sum(frozen(IDX)), grad_states=frozen.weight)()
    np.testing.assert_array_equal(g, 0.0)


def test_embedding_max_norm_renormalises_used_rows_and_writes_them_back():
    emb = nn.Embedding(6, 2, embedding_init=TABLE, max_norm=1.0)
    out = emb(jnp.array([5, 0]))
    norms = np.linalg.norm(np.asarray(emb.weight.value), axis=1)
    assert norms[5] <= 1.0 + 1e-6 and norms[0] < 1.0
    np.testing.assert_allclose(norms[2], np.linalg.norm(TABLE[2]))  # unused row untouched
    np.testing.assert_allclose(out[0], TABLE[5] / np.linalg.norm(TABLE[5]), rtol=1e-5)


# -- collective helpers -------------------------------------------------------------------------
class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = ParamState(jnp.ones(3))

    def init_state(self, batch_size=None):
        self.h = HiddenState(brainx.random.normal(size=(3,)))

    def reset_state(self, batch_size=None):
        self.h.value = brainx.random.normal(size=(3,))


def test_vmap_init_and_reset_give_each_lane_its_own_values():
    brainx.random.seed(0)
    net = nn.Sequential(Counter(), Counter())
    nn.vmap_init_all_states(net, axis_size=4)
    h = net[0].h
    assert h.value.shape == (4, 3) and net[0].w.value.shape == (3,)
    assert not np.allclose(h.value[0], h.value[1])
    before = np.asarray(h.value)
    nn.vmap_reset_all_states(net, axis_size=4)
    assert net[0].h is h and h.value.shape == (4, 3)
    assert not np.allclose(h.value, before) and not np.allclose(h.value[0], h.value[1])
    with pytest.raises(ValueError, match="axis_size"):
        nn.vmap_init_all_states(net)


def test_vmap_init_all_states_of_rnn_cells_with_batch():
    cell = nn.vmap_init_all_states(nn.LSTMCell(2, 3), batch_size=5, axis_size=4,
                                   state_to_exclude=lambda s: s.name == "c")
    assert cell.h.value.shape == (4, 5, 3) and cell.c.value.shape == (5, 3)


def test_call_order_and_call_all_fns():
    log = []

    class A(nn.Module):
        def __init__(self, tag, child=None):
            super().__init__()
            self.tag, self.child = tag, child

        def init_state(self):
            log.append(self.tag)

    class Late(A):
        @nn.call_order(2)
        def init_state(self):
            log.append(self.tag)

    class Later(A):
        @nn.call_order(5)
        def init_state(self):
            log.append(self.tag)

    nn.init_all_states(A("root", [Later("z"), Late("y"), A("x")]))
    assert log == ["x", "root", "y", "z"]
    with pytest.raises(ValueError, match="level"):
        nn.call_order(10)
    with pytest.raises(AttributeError, match="has no forward"):
        nn.call_all_fns(A("a"), "forward")
    assert nn.call_all_fns(A("a"), "forward", fn_if_not_exist="pass") is not None
    log.clear()
    nn.init_all_states(A("root", [A("x")]), node_to_exclude="child.*")
    assert log == ["root"]


def test_assign_state_values_round_trip():
    net = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    saved = {k: jax.tree.map(lambda v: v + 1.0, s.value) for k, s in net.states().items()}
    unexpected, missing = nn.assign_state_values(net, saved, {("extra", "w"): 1.0})
    assert (unexpected, missing) == (["extra.w"], [])
    np.testing.assert_array_equal(net[1].weight.value["bias"], saved["layers", 1, "weight"]["bias"])


def test_count_parameters(capsys):
    net = nn.Sequential(nn.Conv1d((8, 2), 4, 3, b_init=nn.init.ZeroInit()), nn.Flatten(in_size=(8, 4)),
                        nn.Linear.desc(out_size=1000))
    table, total = nn.count_parameters(net, return_table=True)
    assert total == 3 * 2 * 4 + 4 + 32 * 1000 + 1000
    assert "33.03K" in table and "Total" in capsys.readouterr().out
