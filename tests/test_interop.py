"""brainx.interop: converted models compute what the originals compute, in both directions."""

import subprocess
import sys

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import interop, nn

TOL = dict(rtol=1e-5, atol=1e-5)


def _randomize(layer, seed=0):
    """Give every parameter and running statistic random values (variances stay positive)."""
    for i, (path, st) in enumerate(sorted(layer.states().items(), key=lambda kv: str(kv[0]))):
        leaves, tree = jax.tree_util.tree_flatten(st.value)
        new = []
        for j, a in enumerate(leaves):
            r = _numbers(jnp.shape(a), 1000 * seed + 100 * i + j)
            new.append(jnp.asarray(np.abs(r) + 0.5 if "var" in str(path) else r))
        st.value = jax.tree_util.tree_unflatten(tree, new)
    return layer


def _eval(model, x):
    with brainx.environ.context(fit=False):
        return model(x)


def _run_foreign(framework, model, x):
    if framework == "nnx":
        return model(x)
    if framework == "linen":
        module, variables = model
        return module.apply(variables, x)
    return jax.vmap(model)(x)


def _to(framework, layer):
    if framework == "nnx":
        from flax import nnx
        return interop.to_nnx(layer, rngs=nnx.Rngs(1))
    if framework == "linen":
        return interop.to_linen(layer)
    return interop.to_equinox(layer, key=jax.random.PRNGKey(1))


def _from(framework, model, sample_input=None):
    if framework == "nnx":
        return interop.from_nnx(model, sample_input=sample_input)
    if framework == "linen":
        return interop.from_linen(*model, sample_input=sample_input)
    return interop.from_equinox(model, sample_input=sample_input)


def _needs(framework):
    pytest.importorskip("equinox" if framework == "equinox" else "flax")


def _numbers(shape, seed):
    """Standard normal float32 numbers from NumPy: jax.random would compile a sampler for each
    shape (in every xdist worker, at collection for the inputs below)."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _normal(*shape, seed=3):
    return jnp.asarray(_numbers(shape, seed))


# (name, brainx layer factory, input, frameworks)
ALL = ("nnx", "linen", "equinox")
FLAX = ("nnx", "linen")
CASES = [
    ("linear", lambda: nn.Linear(5, 3), _normal(4, 5), ALL),
    ("linear-nobias", lambda: nn.Linear(5, 3, b_init=None), _normal(4, 5), ALL),
    ("linear-mask", lambda: nn.Linear(4, 4, w_mask=1 - jnp.eye(4)), _normal(2, 4), ALL),
    ("layernorm", lambda: nn.LayerNorm(6, epsilon=1e-3), _normal(4, 6), ALL),
    ("layernorm-noscale", lambda: nn.LayerNorm(6, use_scale=False), _normal(4, 6), ALL),
    ("rmsnorm", lambda: nn.RMSNorm(6, epsilon=1e-4), _normal(4, 6), ALL),
    ("groupnorm", lambda: nn.GroupNorm(8, num_groups=4), _normal(3, 8), ALL),
    ("groupnorm-spatial", lambda: nn.GroupNorm((4, 4, 8), num_groups=2), _normal(3, 4, 4, 8), ALL),
    ("embedding", lambda: nn.Embedding(10, 4), jnp.array([0, 3, 9, 3]), ALL),
    ("dropout", lambda: nn.Dropout(0.7), _normal(4, 5), ALL),
    ("conv1d", lambda: nn.Conv1d((9, 3), 4, 3, stride=2, b_init=brainx.nn.init.ZeroInit()),
     _normal(2, 9, 3), ALL),
    ("conv2d", lambda: nn.Conv2d((8, 8, 4), 6, (3, 2), padding="VALID", rhs_dilation=2, groups=2,
                                 b_init=brainx.nn.init.ZeroInit()), _normal(2, 8, 8, 4), ALL),
    ("conv2d-pads", lambda: nn.Conv2d((7, 7, 3), 2, 3, padding=((1, 2), (0, 1)), stride=2),
     _normal(2, 7, 7, 3), ALL),
    ("conv2d-chfirst", lambda: nn.Conv2d((3, 8, 8), 4, 3, channel_first=True,
                                         b_init=brainx.nn.init.ZeroInit()), _normal(2, 3, 8, 8), ALL),
    ("conv1d-lhs", lambda: nn.Conv1d((5, 2), 2, 3, padding=1, lhs_dilation=2), _normal(2, 5, 2),
     FLAX),
    ("conv3d", lambda: nn.Conv3d((5, 5, 5, 2), 3, 2), _normal(2, 5, 5, 5, 2), ALL),
    ("batchnorm0d", lambda: nn.BatchNorm0d((5,)), _normal(4, 5), FLAX),
    ("batchnorm1d", lambda: nn.BatchNorm1d((6, 5), momentum=0.9), _normal(4, 6, 5), FLAX),
    ("batchnorm2d", lambda: nn.BatchNorm2d((4, 4, 3), epsilon=1e-3), _normal(2, 4, 4, 3), FLAX),
    ("batchnorm2d-noaffine", lambda: nn.BatchNorm2d((3, 3, 4), affine=False), _normal(2, 3, 3, 4),
     FLAX),
    ("seq", lambda: nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 2),
                                  nn.Softmax()), _normal(3, 4), ALL),
    ("seq-conv", lambda: nn.Sequential(nn.Conv2d((6, 6, 2), 4, 3), nn.ReLU(),
                                       nn.GroupNorm((6, 6, 4), num_groups=2),
                                       nn.Conv2d((6, 6, 4), 2, 3, stride=2)),
     _normal(2, 6, 6, 2), ALL),
]
PARAMS = [pytest.param(fw, name, make, x, id=f"{fw}-{name}")
          for name, make, x, fws in CASES for fw in fws]


@pytest.mark.parametrize("framework,name,make,x", PARAMS)
def test_round_trip_computes_the_same(framework, name, make, x):
    _needs(framework)
    layer = _randomize(make())
    expected = _eval(layer, x)
    foreign = _to(framework, layer)
    np.testing.assert_allclose(_run_foreign(framework, foreign, x), expected, **TOL)
    back = _from(framework, foreign, sample_input=x[0] if x.ndim > 1 else None)
    assert type(back) is type(layer)
    np.testing.assert_allclose(_eval(back, x), expected, **TOL)


@pytest.mark.parametrize("framework", FLAX)
def test_batchnorm_running_statistics_carry_over(framework):
    _needs(framework)
    bn = nn.BatchNorm1d((3, 4), momentum=0.5)
    with brainx.environ.context(fit=True):
        bn(_normal(8, 3, 4) * 3 + 1)           # moves the running statistics
    foreign = _to(framework, bn)
    back = _from(framework, foreign, sample_input=(3, 4))
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(back, name).value, getattr(bn, name).value, **TOL)
    assert float(jnp.abs(bn.running_mean.value).max()) > 0.1
    # and the foreign layer evaluates with them
    x = _normal(5, 3, 4)
    np.testing.assert_allclose(_run_foreign(framework, foreign, x), _eval(bn, x), **TOL)


# -- flax.nnx ------------------------------------------------------------------------------

def test_how_to_notebook_flow():
    pytest.importorskip("flax")
    pytest.importorskip("equinox")
    from flax import nnx
    import brainx as brainstate
    layers = interop.supported_layers()
    assert set(layers) == {"nnx", "linen", "equinox"} and "Linear" in layers["equinox"]
    model = brainstate.nn.Sequential(brainstate.nn.Linear(4, 8), brainstate.nn.LayerNorm(8),
                                     brainstate.nn.Linear(8, 2))
    x = brainstate.random.randn(3, 4)
    ref = model(x)
    nnx_model = interop.to_nnx(model, rngs=nnx.Rngs(0))
    np.testing.assert_allclose(nnx_model(x), ref, **TOL)
    np.testing.assert_allclose(interop.from_nnx(nnx_model)(x), ref, **TOL)
    linen_module, params = interop.to_linen(model)
    np.testing.assert_allclose(linen_module.apply(params, x), ref, **TOL)
    np.testing.assert_allclose(interop.from_linen(linen_module, params)(x), ref, **TOL)
    eqx_model = interop.to_equinox(model, key=jax.random.PRNGKey(0))
    np.testing.assert_allclose(jax.vmap(eqx_model)(x), ref, **TOL)
    np.testing.assert_allclose(interop.from_equinox(eqx_model)(x), ref, **TOL)
    conv = nnx.Conv(in_features=3, out_features=4, kernel_size=(3, 3), rngs=nnx.Rngs(0))
    bst_conv = interop.from_nnx(conv, sample_input=(8, 8, 3))
    xi = brainstate.random.randn(2, 8, 8, 3)
    assert bst_conv(xi).shape == (2, 8, 8, 4)
    np.testing.assert_allclose(bst_conv(xi), conv(xi), **TOL)


def test_from_nnx_native_layers():
    pytest.importorskip("flax")
    from flax import nnx
    r = nnx.Rngs(0)
    model = nnx.Sequential(
        nnx.Conv(3, 8, (3, 3), strides=2, padding=1, feature_group_count=1, rngs=r), nnx.relu,
        nnx.BatchNorm(8, momentum=0.8, rngs=r), nnx.GroupNorm(8, num_groups=4, rngs=r),
        nnx.Conv(8, 4, (2, 2), padding="VALID", kernel_dilation=(1, 2), feature_group_count=4,
                 use_bias=False, rngs=r),
        lambda y: y.reshape(y.shape[0], -1), nnx.Linear(4 * 3 * 2, 5, rngs=r),
        nnx.Dropout(0.3, rngs=r), nnx.RMSNorm(5, rngs=r))
    x = _normal(4, 8, 8, 3)
    model(x)                                        # a training step moves the running stats
    model.eval()
    net = interop.from_nnx(model, sample_input=(8, 8, 3))
    assert isinstance(net, nn.Sequential) and isinstance(net[2], nn.BatchNorm2d)
    assert isinstance(net[1], nn.ReLU)
    np.testing.assert_allclose(net[2].running_mean.value.ravel(), model.layers[2].mean[...], **TOL)
    np.testing.assert_allclose(_eval(net, x), model(x), **TOL)


def test_nnx_embed_and_layernorm_import():
    pytest.importorskip("flax")
    from flax import nnx
    r = nnx.Rngs(2)
    model = nnx.Sequential(nnx.Embed(7, 4, rngs=r), nnx.LayerNorm(4, use_bias=False, rngs=r))
    idx = jnp.array([[1, 6, 0], [2, 2, 5]])
    net = interop.from_nnx(model)
    np.testing.assert_allclose(net(idx), model(idx), **TOL)


def test_gradients_match_nnx():
    pytest.importorskip("flax")
    from flax import nnx
    model = _randomize(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.LayerNorm(6), nn.Linear(6, 1)))
    other = interop.to_nnx(model)
    x = _normal(5, 4)
    weights = model.states(brainx.ParamState)
    g_bx = brainx.transform.grad(lambda: jnp.sum(model(x) ** 2), grad_states=weights)()
    g_bx = {str(k): v for k, v in g_bx.items()}
    g_nnx = nnx.grad(lambda m: jnp.sum(m(x) ** 2))(other)
    np.testing.assert_allclose(g_bx["layers.0.weight"]["weight"], g_nnx.layers[0].kernel[...], **TOL)
    np.testing.assert_allclose(g_bx["layers.2.weight"]["scale"], g_nnx.layers[2].scale[...], **TOL)
    np.testing.assert_allclose(g_bx["layers.3.weight"]["bias"], g_nnx.layers[3].bias[...], **TOL)


def test_nnx_conv_needs_sample_input():
    pytest.importorskip("flax")
    from flax import nnx
    conv = nnx.Conv(3, 4, (3, 3), rngs=nnx.Rngs(0))
    with pytest.raises(interop.MissingShapeError, match="sample_input"):
        interop.from_nnx(conv)
    with pytest.raises(interop.ConversionError, match="3 input channels"):
        interop.from_nnx(conv, sample_input=(8, 8, 5))


def test_nnx_unsupported_structures_and_settings():
    pytest.importorskip("flax")
    from flax import nnx

    class Residual(nnx.Module):
        def __init__(self, rngs):
            self.lin = nnx.Linear(3, 3, rngs=rngs)

        def __call__(self, x):
            return x + self.lin(x)

    with pytest.raises(interop.UnsupportedStructureError, match="Residual.*forward pass"):
        interop.from_nnx(nnx.Sequential(nnx.Linear(3, 3, rngs=nnx.Rngs(0)),
                                        Residual(nnx.Rngs(0))))
    with pytest.raises(interop.UnsupportedStructureError, match="LSTMCell.*register_layer_mapping"):
        interop.from_nnx(nnx.LSTMCell(3, 4, rngs=nnx.Rngs(0)))
    with pytest.raises(interop.UnmappedLayerError, match="LinearGeneral.*register_layer_mapping"):
        interop.from_nnx(nnx.LinearGeneral(3, (2, 2), rngs=nnx.Rngs(0)))
    with pytest.raises(interop.UnsupportedLayerError, match="CIRCULAR"):
        interop.from_nnx(nnx.Conv(3, 4, (3,), padding="CIRCULAR", rngs=nnx.Rngs(0)),
                         sample_input=(8, 3))
    with pytest.raises(interop.UnmappedLayerError, match="ConvTranspose2d"):
        interop.to_nnx(nn.ConvTranspose2d((4, 4, 2), 3, 3))
    with pytest.raises(interop.UnsupportedLayerError, match="track_running_stats"):
        interop.to_nnx(nn.BatchNorm0d((4,), track_running_stats=False))
    with pytest.raises(interop.UnsupportedLayerError, match="max_norm"):
        interop.to_nnx(nn.Embedding(5, 2, max_norm=1.0))
    with pytest.raises(interop.UnsupportedLayerError, match="reduction_axes"):
        interop.to_nnx(nn.LayerNorm((3, 4), reduction_axes=(-2, -1)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(2, 2), nn.Linear(2, 2)

        def update(self, x):
            return self.a(x) * self.b(x)

    with pytest.raises(interop.UnsupportedStructureError, match="Block"):
        interop.to_nnx(nn.Sequential(nn.Linear(2, 2), Block()))


def test_weights_with_units_raise():
    pytest.importorskip("flax")
    layer = nn.Linear(2, 3, w_init=brainx.nn.init.KaimingNormal(unit=u.mA))
    with pytest.raises(interop.ConversionError, match="unit"):
        interop.to_nnx(layer)


# -- flax.linen ----------------------------------------------------------------------------

def test_from_linen_native_model_with_batch_stats():
    pytest.importorskip("flax")
    import flax.linen as ln
    module = ln.Sequential([ln.Conv(4, (3,), strides=(2,)), ln.BatchNorm(use_running_average=False),
                            ln.relu, ln.Dense(3), ln.LayerNorm(), ln.Dropout(0.5, deterministic=True)])
    x = _normal(6, 10, 2)
    variables = module.init(jax.random.PRNGKey(0), x)
    _, updates = module.apply(variables, x * 2 + 1, mutable=["batch_stats"])
    variables = {**variables, **updates}
    net = interop.from_linen(module, variables, sample_input=(10, 2))
    assert isinstance(net[1], nn.BatchNorm1d)
    evaluated = ln.Sequential([module.layers[0], ln.BatchNorm(use_running_average=True),
                               *module.layers[2:]])
    np.testing.assert_allclose(_eval(net, x), evaluated.apply(variables, x), **TOL)


def test_linen_params_only_and_missing_batch_stats():
    pytest.importorskip("flax")
    import flax.linen as ln
    dense = ln.Dense(3)
    variables = dense.init(jax.random.PRNGKey(0), jnp.ones((1, 2)))
    layer = interop.from_linen(dense, variables["params"])      # the bare params also work
    x = _normal(4, 2)
    np.testing.assert_allclose(layer(x), dense.apply(variables, x), **TOL)
    bn = ln.BatchNorm(use_running_average=True)
    v = bn.init(jax.random.PRNGKey(0), jnp.ones((2, 3)))
    with pytest.raises(interop.ConversionError, match="batch_stats"):
        interop.from_linen(bn, v["params"], sample_input=(3,))
    # a module without parameters: init returns only the "batch_stats" collection
    plain_bn = ln.BatchNorm(use_running_average=True, use_scale=False, use_bias=False)
    v = plain_bn.init(jax.random.PRNGKey(0), jnp.ones((2, 3)))
    assert "params" not in v
    stats = {"mean": jnp.array([1.0, -2.0, 0.5]), "var": jnp.array([4.0, 0.25, 1.0])}
    v = {"batch_stats": stats}
    layer = interop.from_linen(plain_bn, v, sample_input=(3,))
    np.testing.assert_allclose(layer.running_mean.value.ravel(), stats["mean"])
    x = _normal(4, 3)
    np.testing.assert_allclose(_eval(layer, x), plain_bn.apply(v, x), **TOL)


# -- equinox -------------------------------------------------------------------------------

def test_from_equinox_channels_first_conv_and_groupnorm():
    pytest.importorskip("equinox")
    import equinox as eqx
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    model = eqx.nn.Sequential([eqx.nn.Conv2d(3, 4, 3, padding=1, stride=2, key=k[0]),
                               eqx.nn.Lambda(jax.nn.relu),
                               eqx.nn.Conv(2, 4, 2, 2, groups=2, use_bias=False, key=k[1])])
    x = _normal(5, 3, 8, 8)
    net = interop.from_equinox(model, sample_input=(3, 8, 8))
    assert net[0].channel_first and isinstance(net[1], nn.ReLU) and isinstance(net[2], nn.Conv2d)
    np.testing.assert_allclose(net(x), jax.vmap(model)(x), **TOL)
    gn = eqx.nn.GroupNorm(2, 6)
    gn = eqx.tree_at(lambda m: (m.weight, m.bias), gn, (_normal(6), _normal(6, seed=4)))
    v = _normal(4, 6)
    np.testing.assert_allclose(interop.from_equinox(gn)(v), jax.vmap(gn)(v), **TOL)
    with pytest.raises(interop.UnsupportedLayerError, match="channels last"):
        interop.from_equinox(gn, sample_input=(6, 4, 4))


def test_gradients_match_equinox():
    pytest.importorskip("equinox")
    import equinox as eqx
    model = _randomize(nn.Sequential(nn.Linear(3, 5), nn.SiLU(), nn.Linear(5, 2)))
    other = interop.to_equinox(model)
    x = _normal(6, 3)
    weights = model.states(brainx.ParamState)
    g_bx = brainx.transform.grad(lambda: jnp.mean(model(x) ** 2), grad_states=weights)()
    g_bx = {str(k): v for k, v in g_bx.items()}
    g_eqx = eqx.filter_grad(lambda m: jnp.mean(jax.vmap(m)(x) ** 2))(other)
    np.testing.assert_allclose(g_bx["layers.0.weight"]["weight"], g_eqx.layers[0].weight.T, **TOL)
    np.testing.assert_allclose(g_bx["layers.2.weight"]["bias"], g_eqx.layers[2].bias, **TOL)


@pytest.mark.parametrize("make", [lambda: nn.Linear((3, 4), (3, 5)), lambda: nn.LayerNorm((3, 6)),
                                  lambda: nn.RMSNorm((3, 6))])
def test_equinox_refuses_layers_built_for_several_axes(make):
    # eqx.nn.Linear/LayerNorm/RMSNorm take one feature vector: the model could not run
    pytest.importorskip("equinox")
    layer = make()
    with pytest.raises(interop.UnsupportedLayerError, match=r"in_size=\(3, "):
        interop.to_equinox(layer)
    assert interop.to_nnx(layer) is not None       # flax takes any leading axes


def test_equinox_batchnorm_is_unsupported():
    pytest.importorskip("equinox")
    import equinox as eqx
    with pytest.raises(interop.UnsupportedLayerError, match="BatchNorm2d.*eqx.nn.State"):
        interop.to_equinox(nn.BatchNorm2d((4, 4, 3)))
    bn, _ = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
    with pytest.raises(interop.UnsupportedLayerError, match="to_nnx"):
        interop.from_equinox(bn)
    with pytest.raises(interop.UnsupportedLayerError, match="lhs_dilation"):
        interop.to_equinox(nn.Conv1d((5, 2), 2, 3, padding=1, lhs_dilation=2))


# -- registry and dependencies ---------------------------------------------------------------

class Scale(nn.Module):
    """A custom layer: multiplies by a learnt vector."""

    def __init__(self, n):
        super().__init__()
        self.in_size = self.out_size = (n,)
        self.w = brainx.ParamState(jnp.arange(1.0, n + 1.0))

    def update(self, x):
        return x * self.w.value


def test_register_layer_mapping_for_a_custom_layer():
    pytest.importorskip("flax")
    from flax import nnx

    class NnxScale(nnx.Module):
        def __init__(self, w):
            self.w = nnx.Param(w)

        def __call__(self, x):
            return x * self.w[...]

    def to_bst(m, ctx):
        layer = Scale(m.w[...].shape[0])
        layer.w.value = jnp.asarray(m.w[...])
        return layer

    interop.register_layer_mapping(interop.LayerMapping(
        Scale, "nnx", NnxScale, to_bst=to_bst, to_foreign=lambda layer, ctx: NnxScale(layer.w.value)))
    assert "Scale" in interop.supported_layers("nnx")["nnx"]
    model = _randomize(nn.Sequential(nn.Linear(3, 4), Scale(4)))
    out = interop.to_nnx(model)
    assert isinstance(out.layers[1], NnxScale)
    x = _normal(2, 3)
    np.testing.assert_allclose(out(x), model(x), **TOL)
    back = interop.from_nnx(out)
    assert isinstance(back[1], Scale)
    np.testing.assert_allclose(back(x), model(x), **TOL)
    with pytest.raises(ValueError, match="framework"):
        interop.LayerMapping(Scale, "torch", NnxScale, to_bst, to_bst)


def test_missing_dependency_says_what_to_install(monkeypatch):
    from brainx.interop import registry
    monkeypatch.setattr(registry, "_LOADED", {})
    monkeypatch.setitem(sys.modules, "equinox", None)       # import equinox -> ImportError
    with pytest.raises(interop.MissingDependencyError, match=r"pip install .*brainx-jax\[interop\]"):
        interop.to_equinox(nn.Linear(2, 2))
    assert "equinox" not in interop.supported_layers()      # listed only when installed


def test_import_brainx_does_not_import_flax_or_equinox():
    code = ("import sys, brainx; import brainx.interop; "
            "print(any(m in sys.modules for m in ('flax', 'equinox')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
