"""The native event kernel (brainx/nn/connectivity/native) against dense ``x @ W`` in plain JAX.

Every layout a layer can store (fixed number per presynaptic neuron, CSR with empty rows,
CSC, CSC with empty columns), shared and per-synapse weights, events and float products,
batches, ``jax.vmap``, units, and the derivatives in both modes; then the build: the cache, the
fallback without a compiler, and JAX's persistent compilation cache in a second process.
"""

import os
import subprocess
import sys
import textwrap

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn
from brainx.nn.connectivity.native import build
from brainx.nn.connectivity.native.product import dense_event_product, sparse_product
from brainx.nn.connectivity.native.rows import SynapseRows
from event_support import dense_of, spikes  # shared with the other event tests

pytestmark = pytest.mark.skipif(not nn.event_backend.has_native(),
                                reason=f"native kernels unavailable: {build.unavailable_reason()}")

LAYOUTS = [("post", 1.0), ("post", 0.6), ("pre", 1.0), ("pre", 0.5)]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def dense_fn(layer):
    """``w -> D(w)``: the dense matrix as a JAX function of the layer's weights (for jax.grad)."""
    idx = np.asarray(layer.indices)
    rows = np.broadcast_to(np.flatnonzero(layer.row_selected)[:, None], idx.shape)
    pre, post = (rows, idx) if layer.efferent_target == "post" else (idx, rows)
    shape = (layer.in_size[-1], layer.out_size[-1])

    def D(w):
        w = jnp.broadcast_to(w, idx.shape)
        return jnp.zeros(shape, w.dtype).at[pre.ravel(), post.ravel()].add(w.ravel())
    return D


@pytest.mark.parametrize("target,ratio", LAYOUTS)
@pytest.mark.parametrize("shared", [True, False])
def test_products_equal_the_dense_matrix(target, ratio, shared):
    w = 0.75 if shared else nn.init.Normal()
    ev = nn.EventFixedProb(30, 11, 4, w, efferent_target=target, afferent_ratio=ratio, seed=3)
    fl = nn.FixedNumConn(30, 11, 4, w, efferent_target=target, afferent_ratio=ratio, seed=3)
    assert ev.kernel == fl.kernel == "native" and ev.rows is not None
    D = dense_of(ev)
    s = spikes((30,), 0.4)
    np.testing.assert_allclose(ev(s), np.asarray(s, float) @ D, rtol=1e-5, atol=1e-5)
    s3 = spikes((2, 3, 30), 0.4, seed=1)                              # leading axes
    np.testing.assert_allclose(ev(s3), np.asarray(s3, float) @ D, rtol=1e-5, atol=1e-5)
    xf = np.random.RandomState(2).randn(4, 30).astype(np.float32)
    xf[:, ::3] = 0.0
    np.testing.assert_allclose(ev(jnp.asarray(xf)), (xf > 0) @ D, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fl(jnp.asarray(xf)), xf @ dense_of(fl), rtol=1e-5, atol=1e-5)


def test_the_native_kernel_gives_brainevents_results():
    for target, ratio in LAYOUTS:
        kw = dict(efferent_target=target, afferent_ratio=ratio, seed=5)
        native = nn.EventFixedProb(40, 9, 5, nn.init.Normal(), backend="native", **kw)
        theirs = nn.EventFixedProb(40, 9, 5, nn.init.Normal(), backend="jax_raw", **kw)
        theirs.weight.value = native.weight.value
        s = spikes((3, 40), 0.3, seed=7)
        np.testing.assert_allclose(native(s), theirs(s), rtol=1e-5, atol=1e-6)


def test_units_follow_the_weights_and_the_input():
    ev = nn.EventFixedProb(8, 5, 3, 0.5 * u.mS, seed=0)
    fl = nn.FixedNumConn(8, 5, 3, 2.0 * u.mS, seed=0)
    assert u.get_unit(ev(spikes((8,), 0.5))) == u.mS
    y = fl(jnp.ones(8) * u.mV)
    assert u.get_unit(y).dim == (u.mS * u.mV).dim
    np.testing.assert_allclose(u.get_mantissa(y.to(u.mS * u.mV)).sum(), 8 * 3 * 2.0, rtol=1e-6)


@pytest.mark.parametrize("target,ratio", LAYOUTS)
def test_gradients_in_reverse_and_forward_mode_are_those_of_x_at_w(target, ratio):
    layer = nn.EventFixedProb(16, 7, 3, nn.init.Normal(), efferent_target=target,
                              afferent_ratio=ratio, seed=4)
    D, w0 = dense_fn(layer), layer.weight.value
    x = spikes((16,), 0.5).astype(jnp.float32) * 1.5      # events where > 0; the value unused

    def loss(y):
        return jnp.sum(jnp.tanh(y) ** 2)

    def ours(w, x):
        layer.weight.value = w
        return loss(layer(x))

    def ref(w, x):   # the value at the events (x > 0), the derivative of x @ W
        events = x + jax.lax.stop_gradient((x > 0).astype(x.dtype) - x)
        return loss(events @ D(w))

    g, g_ref = jax.grad(ours, (0, 1))(w0, x), jax.grad(ref, (0, 1))(w0, x)
    layer.weight.value = w0
    for a, b in zip(g, g_ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    tw, tx = jnp.ones_like(w0) * 0.1, jnp.linspace(-1.0, 1.0, 16)
    _, t = jax.jvp(ours, (w0, x), (tw, tx))
    _, t_ref = jax.jvp(ref, (w0, x), (tw, tx))
    layer.weight.value = w0
    np.testing.assert_allclose(t, t_ref, rtol=1e-5, atol=1e-6)


def test_gradients_reach_the_weights_from_bool_and_integer_spikes():
    layer = nn.EventFixedProb(14, 6, 3, nn.init.Normal(), seed=2)
    D, w0 = dense_fn(layer), layer.weight.value
    s = spikes((3, 14), 0.4)
    g_ref = jax.grad(lambda w: jnp.sum(jnp.sin(s.astype(jnp.float32) @ D(w))))(w0)
    for x in (s, s.astype(jnp.int32)):
        g = brainx.transform.grad(lambda: jnp.sum(jnp.sin(layer(x))), grad_states=layer.weight)()
        np.testing.assert_allclose(g, g_ref, rtol=1e-5, atol=1e-6)


def test_bptt_through_a_native_projection_equals_the_dense_version():
    """A recurrent trace ``h' = 0.9 h + (s > 0) @ W`` over 20 steps, gradient w.r.t. W."""
    layer = nn.EventFixedProb(12, 12, 4, nn.init.Normal(), seed=6)
    D, w0 = dense_fn(layer), layer.weight.value
    train = spikes((20, 12), 0.3, seed=8).astype(jnp.float32)

    def run(project):
        def step(h, s):
            h = 0.9 * h + project(s)
            return h, jnp.sum(h ** 2)
        return jnp.sum(jax.lax.scan(step, jnp.zeros(12), train)[1])

    def ours():
        return run(layer)

    g = brainx.transform.jit(brainx.transform.grad(ours, grad_states=layer.weight))()
    g_ref = jax.grad(lambda w: run(lambda s: s @ D(w)))(w0)
    np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=1e-5)


def test_vmap_batches_spikes_and_weights():
    idx = np.random.RandomState(0).randint(0, 6, size=(10, 3)).astype(np.int32)
    rows = SynapseRows.fixed(jnp.asarray(idx), 6)
    w = jnp.asarray(np.random.RandomState(1).randn(30), jnp.float32)
    D = np.zeros((10, 6))
    np.add.at(D, (np.repeat(np.arange(10), 3), idx.ravel()), np.asarray(w))
    s = spikes((4, 5, 10), 0.4)
    f = jax.vmap(jax.vmap(lambda x: sparse_product(x, w, rows, True)))   # nested, shared w
    np.testing.assert_allclose(jax.jit(f)(s), np.asarray(s, float) @ D, rtol=1e-5, atol=1e-5)
    ws = jnp.stack([w, 2 * w, -w])                                         # weights batched
    out = jax.vmap(lambda ww: sparse_product(s[0], ww, rows, True))(ws)     # (3, 5, 6)
    for k, scale in enumerate([1, 2, -1]):
        np.testing.assert_allclose(out[k], scale * (np.asarray(s[0], float) @ D), rtol=1e-5,
                                   atol=1e-5)
    x = s[0, :3].astype(jnp.float32)
    both = jax.vmap(lambda x, ww: sparse_product(x, ww, rows, False))(x, ws)
    np.testing.assert_allclose(both[2], -(np.asarray(s[0, 2], float) @ D), rtol=1e-5, atol=1e-5)


def test_weights_in_other_float_types_are_added_in_float32():
    layer = nn.EventFixedProb(10, 4, 3, 0.5, seed=0)
    layer.weight.value = layer.weight.value.astype(jnp.bfloat16)
    y = layer(spikes((10,), 0.5))
    assert y.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(y, np.float32), np.asarray(spikes((10,), 0.5), float)
                               @ dense_of(layer), rtol=1e-2)


def test_the_group_on_the_native_kernel_equals_its_layers():
    exc = nn.EventFixedProb(30, 20, 4, 0.5 * u.nS, seed=0)
    inh = nn.EventFixedProb(10, 20, 4, 2.0 * u.nS, seed=1)
    both = nn.EventFixedProbGroup(exc, inh)
    assert both.kernel == "native"
    s = spikes((3, 40), 0.3)
    g_e, g_i = both(s)
    np.testing.assert_allclose(u.get_mantissa(g_e), u.get_mantissa(exc(s[:, :30])), rtol=1e-6)
    np.testing.assert_allclose(u.get_mantissa(g_i), u.get_mantissa(inh(s[:, 30:])), rtol=1e-6)


def test_the_step_has_no_host_callback():
    layer = nn.EventFixedProb(50, 20, 5, 0.5, seed=0)
    text = jax.jit(lambda s: layer(s)).lower(spikes((50,))).as_text()
    assert "brainx_event_csr" in text and "callback" not in text


def test_the_backend_choice():
    assert nn.get_event_backend() == "native"
    with nn.use_event_backend("jax_raw"):
        assert nn.get_event_backend() == "jax_raw"
        assert nn.EventFixedProb(5, 4, 2, 1.0, seed=0).kernel is None       # brainevent's
        assert nn.EventFixedProb(5, 4, 2, 1.0, seed=0, backend="native").kernel == "native"
    assert nn.get_event_backend() == "native"
    with pytest.raises(ValueError, match="unknown CPU backend 'cuda'"):
        nn.EventFixedProb(5, 4, 2, 1.0, seed=0, backend="cuda")


# -- the build -----------------------------------------------------------------------------------

def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "JAX_PLATFORMS": "cpu", **env})


def test_a_second_process_loads_the_cached_library(tmp_path):
    code = """
        import brainx, jax.numpy as jnp
        from brainx.nn.connectivity.native import build
        if {forbid}:
            def refuse(*args):
                raise AssertionError("built again")
            build._build = refuse
        layer = brainx.nn.EventFixedProb(6, 3, 2, 1.0, seed=0)
        print(layer.kernel, float(layer(jnp.ones(6, bool)).sum()), build.library_path())
    """
    first = _python(code.format(forbid=False), BRAINX_CACHE_DIR=str(tmp_path))
    assert first.returncode == 0, first.stderr[-2000:]
    kernel, total, path = first.stdout.split()
    assert kernel == "native" and float(total) == 12.0 and path.startswith(str(tmp_path))
    assert os.stat(path).st_mode & 0o005 == 0o005         # others sharing the cache can load it
    second = _python(code.format(forbid=True), BRAINX_CACHE_DIR=str(tmp_path),
                     CXX="/nonexistent/c++")               # no compiler needed to load it
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout.split() == [kernel, total, path]


def test_without_a_compiler_one_warning_and_brainevents_kernels(tmp_path):
    pytest.importorskip("brainevent")
    run = _python("""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import brainx, jax.numpy as jnp
            a = brainx.nn.EventFixedProb(6, 3, 2, 1.0, seed=0)
            b = brainx.nn.EventFixedProb(6, 3, 2, 1.0, seed=1)
            total = float(a(jnp.ones(6, bool)).sum())
        native = [str(w.message) for w in caught if "native event kernels" in str(w.message)]
        print(len(native), a.kernel, b.kernel, total)
        print(native[0])
    """, BRAINX_CACHE_DIR=str(tmp_path), CXX="/nonexistent/c++")
    assert run.returncode == 0, run.stderr[-2000:]
    first, message = run.stdout.splitlines()[:2]
    assert first.split() == ["1", "None", "None", "12.0"]
    assert "/nonexistent/c++" in message and "docs/event-driven.md" in message


def test_a_second_process_compiles_nothing_with_the_persistent_cache(tmp_path):
    code = """
        import jax
        jax.config.update("jax_compilation_cache_dir", {cache!r})
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        # XLA compiles: compile requests (a persistent-cache hit is one too) less cache hits
        compiles = []
        jax.monitoring.register_event_duration_secs_listener(
            lambda name, secs, **kw: compiles.append(1)
            if name == "/jax/core/compile/backend_compile_duration" else None)
        jax.monitoring.register_event_listener(
            lambda name, **kw: compiles.append(-1)
            if name == "/jax/compilation_cache/cache_hits" else None)
        import brainunit as u, jax.numpy as jnp, brainx, importlib.util
        spec = importlib.util.spec_from_file_location("coba", "benchmarks/coba.py")
        coba = importlib.util.module_from_spec(spec); spec.loader.exec_module(coba)
        brainx.environ.set(dt=coba.DT * u.ms)
        net = coba.build_brainx(400)
        before = sum(compiles)
        spikes = coba.brainx_run(net, 200)()
        print(sum(compiles) - before, int(spikes.sum()))
    """.format(cache=str(tmp_path / "jax-cache"))
    first = _python(code)
    assert first.returncode == 0, first.stderr[-2000:]
    second = _python(code)
    assert second.returncode == 0, second.stderr[-2000:]
    n_first, spikes_first = first.stdout.split()
    n_second, spikes_second = second.stdout.split()
    assert int(n_first) >= 1 and int(n_second) == 0 and spikes_first == spikes_second


@pytest.mark.parametrize("kind", ["CSR", "CSC", "COO"])
def test_sparse_linear_on_the_native_kernel_equals_the_dense_matrix(kind):
    rng = np.random.RandomState(0)
    dense = rng.randn(12, 7).astype(np.float32) * (rng.rand(12, 7) < 0.3)
    mat = getattr(u.sparse, kind).fromdense(jnp.asarray(dense))
    layer = nn.SparseLinear(mat, b_init=jnp.ones(7))
    assert layer.rows is not None
    x = jnp.asarray(rng.randn(3, 12), jnp.float32)
    np.testing.assert_allclose(layer(x), x @ dense + 1.0, rtol=1e-5, atol=1e-5)
    s = spikes((12,), 0.5)
    np.testing.assert_allclose(layer(s), np.asarray(s, np.float32) @ dense + 1.0, rtol=1e-5,
                               atol=1e-5)
    g = brainx.transform.grad(lambda: jnp.sum(jnp.tanh(layer(x))), grad_states=layer.weight)()
    rows, cols = (np.asarray(c) for c in layer._coords)

    def ref(data, bias):
        W = jnp.zeros((12, 7)).at[rows, cols].add(data)
        return jnp.sum(jnp.tanh(x @ W + bias))
    g_data, g_bias = jax.grad(ref, (0, 1))(layer.weight.value["weight"], layer.weight.value["bias"])
    np.testing.assert_allclose(g["weight"], g_data, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g["bias"], g_bias, rtol=1e-5, atol=1e-6)


def _copying_compiler(folder) -> str:
    """A "compiler" that copies the library this process loaded to its ``-o``: milliseconds,
    where g++ -O3 takes 10 CPU s (test_a_second_process_loads_the_cached_library runs g++)."""
    fake = folder / "fake-c++"
    copy = f"shutil.copyfile({build.load()._name!r}, sys.argv[sys.argv.index('-o') + 1])"
    fake.write_text(f"#!{sys.executable}\nimport shutil, sys\n{copy}\n")
    fake.chmod(0o755)
    return str(fake)


def test_a_read_only_cache_folder_builds_into_the_temporary_folder(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")            # the cache root cannot be made below a file
    (tmp_path / "tmp").mkdir()
    run = _python("""
        import brainx, jax.numpy as jnp
        from brainx.nn.connectivity.native import build
        layer = brainx.nn.EventFixedProb(6, 3, 2, 1.0, seed=0)
        print(layer.kernel, build._STATE["lib"]._name, float(layer(jnp.ones(6, bool)).sum()))
    """, BRAINX_CACHE_DIR=str(blocked / "cache"), TMPDIR=str(tmp_path / "tmp"),
        CXX=_copying_compiler(tmp_path))
    assert run.returncode == 0, run.stderr[-2000:]
    kernel, path, total = run.stdout.split()
    assert kernel == "native" and path.startswith(str(tmp_path / "tmp")) and float(total) == 12.0


def test_without_brainevent_the_native_layers_work():
    run = _python("""
        import sys; sys.modules["brainevent"] = None
        import jax, jax.numpy as jnp, brainx
        layer = brainx.nn.EventFixedProb(10, 4, 3, 1.0, seed=0)
        s = jnp.arange(10) % 2 == 0
        g = jax.grad(lambda x: layer(x).sum())(s.astype(float))
        print(brainx.nn.get_event_backend(), layer.kernel, float(layer(s).sum()), float(g.sum()))
    """)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["native", "native", "15.0", "30.0"]


def test_bad_connectivity_and_weights_are_refused_before_the_kernel_runs():
    with pytest.raises(ValueError, match="outside range"):
        SynapseRows.fixed(np.array([[0, 5]], np.int32), n_post=5)
    with pytest.raises(ValueError, match="int32"):
        SynapseRows.fixed(np.broadcast_to(np.int32(0), (2 ** 20, 2 ** 12)), n_post=1)
    layer = nn.EventFixedProb(20, 8, 3, nn.init.Normal(), efferent_target="pre", seed=0)
    layer.weight.value = jnp.ones(5)
    with pytest.raises(ValueError, match="5 weights"):
        layer(spikes((20,)))
    assert not isinstance(layer.weight.value, jax.core.Tracer)
    rows = SynapseRows.fixed(np.array([[0, 1]], np.int32), n_post=2)
    with pytest.raises(ValueError, match="last axis must have 1"):
        sparse_product(jnp.ones(3, bool), jnp.ones(2), rows, event=True)


def test_the_kernel_is_loaded_by_its_first_call():
    run = _python("""
        import numpy as np, jax.numpy as jnp
        from brainx.nn.connectivity.native.rows import SynapseRows
        from brainx.nn.connectivity.native.product import sparse_product
        rows = SynapseRows.fixed(np.array([[0, 1], [1, 1]], np.int32), n_post=2)
        print(sparse_product(jnp.array([True, True]), jnp.array([1., 2., 3., 4.]), rows, True))
    """)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["[1.", "9.]"]


def test_event_linear_on_the_native_kernel_equals_the_dense_product():
    rng = np.random.RandomState(3)
    W = rng.randn(30, 9).astype(np.float32)
    layer = nn.EventLinear(30, 9, W * u.mS)
    assert layer.kernel == "native"
    s = spikes((2, 4, 30), 0.3)
    np.testing.assert_allclose(u.get_mantissa(layer(s).to(u.mS)), np.asarray(s, np.float32) @ W,
                               rtol=1e-5, atol=1e-5)
    x = jnp.asarray(rng.randn(5, 30), jnp.float32)            # floats: events where > 0
    g = brainx.transform.grad(lambda: jnp.sum(jnp.tanh(layer(x).to_decimal(u.mS))),
                              grad_states=layer.weight)()
    events = (x > 0).astype(jnp.float32)
    g_ref = jax.grad(lambda w: jnp.sum(jnp.tanh(events @ w)))(jnp.asarray(W))
    np.testing.assert_allclose(u.get_mantissa(g), g_ref, rtol=1e-5, atol=1e-6)
    gx = jax.grad(lambda x: jnp.sum(jnp.tanh(layer(x).to_decimal(u.mS))))(x)
    gx_ref = jax.grad(lambda x: jnp.sum(jnp.tanh(
        (x + jax.lax.stop_gradient(events - x)) @ jnp.asarray(W))))(x)
    np.testing.assert_allclose(gx, gx_ref, rtol=1e-5, atol=1e-6)
    per_lane = jax.vmap(lambda w: dense_event_product(s[0, 0], w))(jnp.stack([W, -W]))
    np.testing.assert_allclose(per_lane[1], -(np.asarray(s[0, 0], np.float32) @ W), rtol=1e-5,
                               atol=1e-5)
    with nn.use_event_backend("jax_raw"):
        theirs = nn.EventLinear(30, 9, W * u.mS)
    assert theirs.kernel is None
    np.testing.assert_allclose(u.get_mantissa(theirs(s[0])), u.get_mantissa(layer(s[0])),
                               rtol=1e-5, atol=1e-5)


def test_integer_spikes_are_events_where_positive_on_every_kernel():
    W = np.arange(6, dtype=np.float32).reshape(3, 2) + 1.0
    x = jnp.array([2, -1, 0])
    outs = [nn.EventLinear(3, 2, W, backend=b)(x) for b in ("native", "jax_raw")]
    for y in outs:
        np.testing.assert_allclose(y, W[0], rtol=1e-6)


def test_a_temporary_folder_that_is_a_link_is_refused_with_one_warning(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    (tmp_path / "tmp").mkdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    os.symlink(tmp_path / "elsewhere", tmp_path / "tmp" / f"brainx-{os.getuid()}")
    run = _python("""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import brainx
            from brainx.nn.connectivity.native import build
            print(build.load() is None, sum("not available" in str(w.message) for w in caught))
    """, BRAINX_CACHE_DIR=str(blocked / "cache"), TMPDIR=str(tmp_path / "tmp"))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["True", "1"]
