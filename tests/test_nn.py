"""brainx.nn: state collection, init/reset, and each layer against plain JAX."""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import HiddenState, ParamState, ShortTermState, environ, nn
from brainx.nn import surrogate as sg

DT = 0.5  # ms


@pytest.fixture(autouse=True)
def dt_context():
    with environ.context(dt=DT * u.ms):
        yield


# -- a small module tree ---------------------------------------------------------------
class Cell(nn.Module):
    def __init__(self, n, log=None):
        super().__init__()
        self.n = n
        self.record = log.append if log is not None else None  # a method: not walked
        self.w = ParamState(jnp.ones(n))

    def init_state(self, batch_size=None):
        if self.record is not None:
            self.record(("init", self, batch_size))
        self.h = HiddenState(jnp.zeros((n_batch(batch_size) + (self.n,))))

    def reset_state(self, batch_size=None):
        self.h.value = jnp.zeros(n_batch(batch_size) + (self.n,))

    def update(self, x):
        self.h.value = 0.5 * self.h.value + self.w.value * x
        return self.h.value


def n_batch(b):
    return () if b is None else (b,)


class Net(nn.Module):
    def __init__(self, log=None):
        super().__init__()
        self.enc = Cell(2, log)
        self.blocks = [Cell(2, log), (Cell(2, log),)]
        self.heads = {"left": Cell(2, log), "right": Cell(2, log)}
        self.shared = self.enc.w           # the same state again: listed once
        self.scale = ShortTermState(jnp.ones(()))
        self.not_a_state = jnp.zeros(3)
        self.record = log.append if log is not None else None

    def init_state(self, batch_size=None):
        if self.record is not None:
            self.record(("init", self, batch_size))


def test_states_paths_cover_attributes_lists_tuples_dicts_in_order():
    net = nn.init_all_states(Net())
    assert list(net.states()) == [
        "enc.w", "enc.h", "blocks.0.w", "blocks.0.h", "blocks.1.0.w", "blocks.1.0.h",
        "heads.left.w", "heads.left.h", "heads.right.w", "heads.right.h", "scale"]
    assert net.states()["heads.right.h"] is net.heads["right"].h
    assert list(net.nodes()) == ["", "enc", "blocks.0", "blocks.1.0", "heads.left", "heads.right"]


def test_states_filters():
    net = nn.init_all_states(Net())
    params = net.states(ParamState)
    assert list(params) == ["enc.w", "blocks.0.w", "blocks.1.0.w", "heads.left.w", "heads.right.w"]
    assert list(net.states(HiddenState)) == ["enc.h", "blocks.0.h", "blocks.1.0.h",
                                             "heads.left.h", "heads.right.h"]
    assert list(net.states("heads.*.h")) == ["heads.left.h", "heads.right.h"]
    assert list(net.states(lambda path, s: path[-1] == "w" and "blocks" in path)) == [
        "blocks.0.w", "blocks.1.0.w"]
    assert list(net.states((HiddenState, "scale"))) == [
        "enc.h", "blocks.0.h", "blocks.1.0.h", "heads.left.h", "heads.right.h", "scale"]
    p, h, rest = net.states(ParamState, HiddenState, ...)
    assert (len(p), len(h), list(rest)) == (5, 5, ["scale"])
    with pytest.raises(TypeError, match="Unsupported filter"):
        net.states(3)


def test_init_all_states_children_first_batch_size_and_exclude():
    log = []
    net = nn.init_all_states(Net(log), batch_size=4)
    assert log[-1][1] is net and len(log) == 6
    assert net.states()["heads.left.h"].value.shape == (4, 2)
    log.clear()
    nn.init_all_states(net, 3, exclude="heads.*")
    assert len(log) == 4 and net.heads["left"].h.value.shape == (4, 2)
    assert net.enc.h.value.shape == (3, 2)


def test_reset_all_states_assigns_in_place_and_keeps_the_compiled_step():
    net = nn.init_all_states(Net())
    traces = []

    @brainx.transform.jit
    def step(x):
        traces.append(1)
        return net.enc(x) + net.heads["left"](x)

    step(jnp.ones(2))
    n_traces = len(traces)
    h = net.enc.h
    nn.reset_all_states(net)
    assert net.enc.h is h and np.all(np.asarray(h.value) == 0)
    out = step(jnp.ones(2))
    assert len(traces) == n_traces                 # no re-discovery, no retrace
    np.testing.assert_allclose(out, 2 * np.ones(2))


def test_reset_before_init_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"(?s)LIF.*no state V.*init_all_states"):
        nn.LIF(3).reset_state()
    with pytest.raises(RuntimeError, match="no state V"):
        nn.LIF(3).update(1.0 * u.mA)


# -- neuron models against plain JAX -----------------------------------------------------
def _heav(x, alpha=4.0):
    """Heaviside with a sigmoid surrogate, written independently of brainx."""
    @jax.custom_jvp
    def f(x):
        return (x >= 0).astype(x.dtype)

    @f.defjvp
    def f_jvp(p, t):
        s = jax.nn.sigmoid(alpha * p[0])
        return f(p[0]), alpha * s * (1 - s) * t[0]

    return f(x)


def lif_reference(x_seq, tau=5.0, V_th=1.0, V_reset=0.0, V_rest=0.0, R=1.0, reset="soft",
                  tau_ref=None, V0=None):
    """LIF in plain JAX, units stripped: mV, ms, mA, ohm."""
    n = x_seq.shape[-1]
    V = jnp.zeros(n) if V0 is None else V0
    t_ref = jnp.zeros(n)
    decay = np.exp(-DT / tau)
    outs, Vs = [], []
    for x in x_seq:
        spk = _heav((V - V_th) / (V_th - V_reset))
        amount = (V_th - V_reset) if reset == "soft" else jax.lax.stop_gradient(V) - V_reset
        V_after = V - amount * spk
        V_inf = V_rest + R * x
        V_new = V_inf + (V_after - V_inf) * decay
        if tau_ref is not None:
            t_ref = jnp.where(spk > 0, tau_ref, t_ref)
            V_new = jnp.where(t_ref > DT / 2, V_reset, V_new)
            t_ref = jnp.maximum(t_ref - DT, 0.0)
        V = V_new
        Vs.append(V)
        outs.append(_heav((V - V_th) / (V_th - V_reset)))
    return jnp.stack(outs), jnp.stack(Vs)


X_SEQ = jnp.asarray(np.random.RandomState(0).uniform(0.5, 3.5, size=(40, 5)).astype(np.float32))


def _run_lif(lif, x_seq, jit=True):
    nn.init_all_states(lif)

    def step(x):
        spk = lif(x * u.mA)
        return spk, lif.V.value

    step = brainx.transform.jit(step) if jit else step
    outs = [step(x) for x in x_seq]
    return jnp.stack([o[0] for o in outs]), u.math.stack([o[1] for o in outs])


@pytest.mark.parametrize("reset", ["soft", "hard"])
@pytest.mark.parametrize("tau_ref", [None, 1.5])
def test_lif_matches_plain_jax(reset, tau_ref):
    lif = nn.LIF(5, tau=4.0 * u.ms, V_th=1.0 * u.mV, V_reset=-0.5 * u.mV, V_rest=0.2 * u.mV,
                 tau_ref=None if tau_ref is None else tau_ref * u.ms, spk_fun=sg.Sigmoid(4.0),
                 spk_reset=reset)
    spikes, V = _run_lif(lif, X_SEQ)
    ref_spikes, ref_V = lif_reference(X_SEQ, tau=4.0, V_reset=-0.5, V_rest=0.2, reset=reset,
                                      tau_ref=tau_ref)
    assert V.unit == u.mV
    np.testing.assert_allclose(V.to_decimal(u.mV), ref_V, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(spikes, ref_spikes)
    assert 0 < float(spikes.sum()) < spikes.size


def test_lif_refractory_holds_v_at_reset_for_tau_ref():
    lif = nn.init_all_states(nn.LIF(1, tau=1.0 * u.ms, tau_ref=2.0 * u.ms))
    spikes = [int(lif(50.0 * u.mA)[0]) for _ in range(12)]
    # spike, then 4 steps (2 ms / 0.5 ms) clamped at V_reset, then one step to fire again
    assert spikes == [1, 0, 0, 0, 0] * 2 + [1, 0]
    assert isinstance(lif.t_ref, ShortTermState) and lif.t_ref.value.unit == u.ms


def test_lifref_has_refractory_by_default():
    lif = nn.init_all_states(nn.LIFRef(2))
    assert lif.tau_ref == 5.0 * u.ms and "t_ref" in lif.states()


def test_lif_gradient_through_time_matches_plain_jax():
    w0 = jnp.linspace(0.5, 1.5, 5)
    lif = nn.LIF(5, tau=4.0 * u.ms, spk_fun=sg.Sigmoid(4.0))
    w = ParamState(w0)
    nn.init_all_states(lif)

    @brainx.transform.checkpoint
    def step(x):
        return lif(w.value * x * u.mA)

    def loss(xs):
        nn.reset_all_states(lif)
        return sum(step(x).sum() for x in xs)

    g = brainx.transform.jit(brainx.transform.grad(loss, grad_states=w))(X_SEQ[:15])
    ref = jax.grad(lambda wv: lif_reference(X_SEQ[:15] * wv, tau=4.0)[0].sum())(w0)
    np.testing.assert_allclose(g, ref, rtol=1e-4, atol=1e-6)
    assert np.all(np.isfinite(g)) and np.any(np.asarray(g) != 0)


def alif_reference(x_seq, tau=5.0, tau_a=20.0, V_th=1.0, beta=0.3):
    V = jnp.zeros(x_seq.shape[-1])
    a = jnp.zeros_like(V)
    outs, As = [], []
    for x in x_seq:
        spk = _heav((V - V_th - beta * a) / V_th)
        V = V - V_th * spk
        a = a + spk
        V = x + (V - x) * np.exp(-DT / tau)
        a = a * np.exp(-DT / tau_a)
        outs.append(_heav((V - V_th - beta * a) / V_th))
        As.append(a)
    return jnp.stack(outs), jnp.stack(As)


def test_alif_matches_plain_jax_and_adapts():
    alif = nn.init_all_states(nn.ALIF(5, tau=5.0 * u.ms, tau_a=20.0 * u.ms, beta=0.3 * u.mV,
                                      spk_fun=sg.Sigmoid(4.0)))
    step = brainx.transform.jit(lambda x: (alif(x * u.mA), alif.a.value))
    outs = [step(x) for x in X_SEQ]
    spikes, a = jnp.stack([o[0] for o in outs]), jnp.stack([o[1] for o in outs])
    ref_spikes, ref_a = alif_reference(X_SEQ)
    np.testing.assert_array_equal(spikes, ref_spikes)
    np.testing.assert_allclose(a, ref_a, rtol=1e-5, atol=1e-6)
    # adaptation lowers the rate compared with the same LIF
    lif_spikes, _ = lif_reference(X_SEQ)
    assert float(spikes.sum()) < float(lif_spikes.sum())


def test_expon_matches_plain_jax_with_units():
    syn = nn.init_all_states(nn.Expon(3, tau=2.0 * u.ms, g_initializer=0.0 * u.mA), batch_size=2)
    xs = np.random.RandomState(1).rand(10, 2, 3).astype(np.float32)
    step = brainx.transform.jit(lambda x: syn(x * u.mA))
    got = [step(x) for x in xs]
    g, ref = np.zeros((2, 3), np.float32), []
    for x in xs:
        g = g * np.exp(-DT / 2.0) + x
        ref.append(g.copy())
    assert got[-1].unit == u.mA
    np.testing.assert_allclose(np.stack([q.to_decimal(u.mA) for q in got]), np.stack(ref),
                               rtol=1e-5)
    assert syn.update().unit == u.mA      # no input: decay only


def test_linear_matches_plain_jax_with_mask_and_units():
    W = np.random.RandomState(2).randn(4, 3).astype(np.float32)
    mask = np.ones((4, 3), np.float32)
    mask[0] = 0
    layer = nn.Linear(4, 3, w_init=W * u.mA, b_init=jnp.arange(3.0) * u.mA, w_mask=mask)
    x = jnp.asarray(np.random.RandomState(3).rand(5, 4).astype(np.float32))
    y = brainx.transform.jit(layer)(x)
    np.testing.assert_allclose(y.to_decimal(u.mA), x @ (W * mask) + np.arange(3.0), rtol=1e-5)
    assert list(layer.states(ParamState)) == ["weight"]
    assert set(layer.weight.value) == {"weight", "bias"}
    assert "bias" not in nn.Linear(4, 3, b_init=None).weight.value
    with pytest.raises(ValueError, match=r"shape \(2, 2\), expected \(4, 3\)"):
        nn.Linear(4, 3, w_init=jnp.ones((2, 2)))


def test_units_survive_jit_grad_and_checkpoint():
    lin = nn.Linear(3, 2, w_init=nn.init.KaimingNormal(unit=u.mA, ), b_init=None)
    lif = nn.init_all_states(nn.LIF(2, tau=2.0 * u.ms, spk_fun=sg.Arctan()), batch_size=4)
    params = lin.states(ParamState)

    @brainx.transform.checkpoint
    def step(x):
        return lif(lin(x))

    def loss(xs):
        return sum(step(x).mean() for x in xs) + u.get_mantissa(lif.V.value).mean()

    xs = jnp.asarray(np.random.RandomState(4).rand(6, 4, 3).astype(np.float32)) * 3
    grads, value = brainx.transform.jit(
        brainx.transform.grad(loss, grad_states=params, return_value=True))(xs)
    # a plain dict keyed by path tuples, as brainstate
    assert set(grads[("weight",)]) == {"weight"}            # the param's structure
    # jax.grad's cotangent: the weight's unit on the derivative w.r.t. its mantissa
    assert grads[("weight",)]["weight"].unit == lin.weight.value["weight"].unit == u.mA
    assert lif.V.value.unit == u.mV and lif.V.value.shape == (4, 2)
    assert np.isfinite(float(value))

    # the same gradient without the checkpoint and without jit
    nn.reset_all_states(lif, batch_size=4)
    plain = brainx.transform.grad(
        lambda xs: sum(lif(lin(x)).mean() for x in xs) + u.get_mantissa(lif.V.value).mean(),
        grad_states=params)
    nn.reset_all_states(lif, batch_size=4)
    jitted_again = brainx.transform.grad(loss, grad_states=params)
    g2 = plain(xs)
    nn.reset_all_states(lif, batch_size=4)
    g3 = jitted_again(xs)
    np.testing.assert_allclose(g2[("weight",)]["weight"].mantissa,
                               g3[("weight",)]["weight"].mantissa, rtol=1e-5, atol=1e-7)
    nn.reset_all_states(lif, batch_size=4)
    g4 = brainx.transform.grad(loss, grad_states=params, unit_aware=True)(xs)
    assert g4[("weight",)]["weight"].unit == u.mA ** -1   # unit(loss) / unit(W)
    np.testing.assert_allclose(g4[("weight",)]["weight"].mantissa,
                               g3[("weight",)]["weight"].mantissa, rtol=1e-5, atol=1e-7)


def test_neuron_argument_errors():
    with pytest.raises(ValueError, match="spk_reset"):
        nn.LIF(2, spk_reset="sometimes")
    with pytest.raises(TypeError, match="spk_fun"):
        nn.LIF(2, spk_fun=3)
    with pytest.raises(ValueError, match="does not broadcast"):
        nn.LIF(3, tau=jnp.ones(4) * u.ms)
    lif = nn.init_all_states(nn.LIF(2))
    before = lif.V.value
    with pytest.raises(u.UnitMismatchError):
        lif(1.0 * u.second)
    assert lif.V.value is before


@pytest.mark.parametrize("neuron", [lambda: nn.LIF(3, name="exc"), lambda: nn.ALIF(3, name="exc")])
def test_an_input_that_is_no_current_says_to_pass_a_current(neuron):
    with environ.context(dt=0.1 * u.ms):
        cell = nn.init_all_states(neuron())
        before = cell.V.value
        kind = type(cell).__name__
        with pytest.raises(u.UnitMismatchError,
                           match=rf"^{kind} 'exc': the input has no unit, but R \* input must be a "
                                 r"voltage like V_rest \(mV\) with R = 1\. ohm: pass a current, "
                                 r"e\.g\. x \* u\.mA \(or give R, V_th"):
            cell(jnp.ones(3))
        with pytest.raises(u.UnitMismatchError, match=r"the input has unit mV, .*x \* u\.mA\.$"):
            brainx.transform.jit(cell)(jnp.ones(3) * u.mV)
        assert cell.V.value is before                        # nothing written, no tracer left
        # R in megaohm: the current to pass is in nA
        big_r = nn.init_all_states(nn.LIF(3, R=1.0 * u.Mohm))
        with pytest.raises(u.UnitMismatchError, match=r"x \* u\.nA"):
            big_r(jnp.ones(3))
        plain = nn.init_all_states(nn.LIF(3, R=1.0, V_th=1.0, V_reset=0.0, V_rest=0.0,
                                          V_initializer=nn.init.Constant(0.0)))
        with pytest.raises(u.UnitMismatchError, match="pass a unitless input"):
            plain(jnp.ones(3) * u.mA)
        # what the messages ask for runs, and as the unit-free computation does
        spikes = cell(2.0 * jnp.ones(3) * u.mA)
        assert spikes.shape == (3,)
        plain(jnp.ones(3))
        np.testing.assert_allclose(plain.V.value, 1.0 - np.exp(-0.1 / 5.0), rtol=1e-6)


def test_module_repr_and_name():
    assert repr(nn.Module(name="exc")) == "Module(name='exc')"
    assert repr(nn.LIF(3, name="exc")).startswith("LIF(\n  (3,) -> (3,),\n  name='exc',\n")
    with pytest.raises(TypeError, match="name must be a string"):
        nn.Module(name=3)
    with pytest.raises(NotImplementedError, match="update"):
        nn.Module()()


# -- core regression: a transform wrapping another transform ---------------------------
def test_core_transform_of_transform_keeps_its_own_function():
    # functools.update_wrapper used to copy the inner transform's __dict__ (its `fun`
    # and `stateful`) over the outer one, so jit(grad(f)) computed f, not its gradient.
    w = ParamState(jnp.ones(3))

    def loss(x):
        return (w.value * x).sum()

    x = jnp.arange(3.0)
    g = brainx.transform.grad(loss, grad_states=w)
    np.testing.assert_array_equal(brainx.transform.jit(g)(x), x)
    np.testing.assert_array_equal(brainx.transform.checkpoint(g)(x), x)
    np.testing.assert_array_equal(
        brainx.transform.grad(brainx.transform.jit(loss), grad_states=w)(x), x)


def test_lif_in_checkpointed_for_loop_matches_plain_jax():
    # also a regression test for discovery of a loop step called with abstract slices
    w0 = jnp.linspace(0.5, 1.5, 5)
    lif = nn.init_all_states(nn.LIF(5, tau=4.0 * u.ms, spk_fun=sg.Sigmoid(4.0)))
    w = ParamState(w0)

    @brainx.transform.checkpoint
    def step(x):
        return lif(w.value * x * u.mA), lif.V.value

    def loss(xs):
        nn.reset_all_states(lif)
        spikes, V = brainx.transform.for_loop(step, xs)
        return spikes.sum(), (spikes, V)

    g, (spikes, V) = brainx.transform.jit(
        brainx.transform.grad(loss, grad_states=w, has_aux=True))(X_SEQ)
    ref_spikes, ref_V = lif_reference(X_SEQ * w0, tau=4.0)
    assert V.unit == u.mV and V.shape == (40, 5)
    np.testing.assert_array_equal(spikes, ref_spikes)
    np.testing.assert_allclose(V.to_decimal(u.mV), ref_V, rtol=1e-5, atol=1e-5)
    ref_g = jax.grad(lambda wv: lif_reference(X_SEQ * wv, tau=4.0)[0].sum())(w0)
    np.testing.assert_allclose(g, ref_g, rtol=1e-4, atol=1e-6)


def test_scalar_initial_values_get_the_population_shape():
    syn = nn.init_all_states(nn.Expon(3, g_initializer=0.0 * u.mA))
    assert syn.g.value.shape == (3,) and syn.g.value.unit == u.mA
    lif = nn.init_all_states(nn.LIF((2, 2), V_initializer=-1.0 * u.mV), batch_size=5)
    assert lif.V.value.shape == (5, 2, 2)
    assert not lif.V.value.mantissa.weak_type      # no recompiles after the first write


def test_print_shows_the_module_tree_with_each_state():
    # brainstate 0.6.0's pretty repr: print(net) is repr(net), laid out to the width, a shared
    # child marked as such, each sub-module's size noted and the total at the end
    import brainunit as u

    class Net(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.seq = brainx.nn.Sequential(brainx.nn.Linear(3, 4), brainx.nn.ReLU())
            self.lif = brainx.nn.LIF(4)
            self.same = self.lif                      # a shared child is shown once

    net = brainx.nn.init_all_states(Net())
    lines = str(net).splitlines()
    assert str(net) == repr(net) and lines[0] == "Net("
    assert lines[1:6] == [
        "  seq=Sequential(",
        "    (3,) -> (4,),",
        "    layers=[",
        "      [0] Linear((3,) -> (4,), weight=ParamState{bias: f32[4], weight: f32[3,4]}),"
        "  # 16 params",
        "      [1] ReLU(),"]
    assert "    V=HiddenState(f32[4] mV)," in lines and net.lif.V.value.unit == u.mV
    assert "  ),  # 4 state values" in lines
    assert lines[-2:] == ["  same=<shared: .lif>,", ")  # 16 params (64 B), 4 state values (16 B)"]
