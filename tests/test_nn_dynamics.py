"""brainx.nn.Dynamics: exp_euler_step vs exact solutions, keyed inputs, hooks, synapses vs plain JAX."""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import environ, nn

DT = 0.1  # ms


@pytest.fixture(autouse=True)
def dt_context():
    with environ.context(dt=DT * u.ms):
        yield


# -- exp_euler_step ------------------------------------------------------------------------
def test_exp_euler_is_exact_for_a_linear_ode_with_units():
    a_ms = np.array([-2.0, -0.5, 0.0, 0.3, -40.0])             # per ms: zero and stiff included
    b_ms = np.array([1.0, -3.0, 2.0, 0.5, 10.0])               # mV per ms
    x0 = np.array([-70.0, 5.0, 1.0, -1.0, 0.0])                # mV
    a, b = jnp.asarray(a_ms) / u.ms, jnp.asarray(b_ms) * u.mV / u.ms
    got = jnp.asarray(x0) * u.mV
    for _ in range(20):
        got = nn.exp_euler_step(lambda v: a * v + b, got)
    t = 20 * DT
    # x(t) = x0 e^{a t} + b (e^{a t} - 1) / a, and x0 + b t when a = 0
    growth = np.where(a_ms == 0, t, np.expm1(a_ms * t) / np.where(a_ms == 0, 1, a_ms))
    exact = x0 * np.exp(a_ms * t) + b_ms * growth
    assert got.unit == u.mV
    np.testing.assert_allclose(got.to_decimal(u.mV), exact, rtol=2e-5, atol=1e-5)


def test_exp_euler_passes_extra_arguments_and_is_second_order_for_nonlinear_drift():
    with environ.context(dt=0.01):
        x1 = nn.exp_euler_step(lambda x, k, c=0.0: -k * x + c, jnp.ones(2), 3.0, c=1.0)
    np.testing.assert_allclose(x1, 1 / 3 + (2 / 3) * np.exp(-0.03), rtol=1e-6)
    # dx/dt = -x^2 from 1: x(t) = 1 / (1 + t). With the Jacobian in the exponent the scheme is
    # exponential Rosenbrock-Euler, second order: the error after t = 1 quarters as dt halves.
    errors = []
    for dt in (0.1, 0.05):
        with environ.context(dt=dt):
            x = jnp.ones(())
            for _ in range(int(round(1 / dt))):
                x = nn.exp_euler_step(lambda v: -v * v, x)
        errors.append(abs(float(x) - 0.5))
    assert 3.5 < errors[0] / errors[1] < 4.5


def test_exp_euler_sde_adds_scaled_gaussian_noise():
    brainx.random.seed(0)
    with environ.context(dt=0.04):
        x = nn.exp_euler_step(lambda v: -v, lambda v: 0.5 * jnp.ones_like(v), jnp.ones(20000))
    x = np.asarray(x)
    assert abs(x.mean() - np.exp(-0.04)) < 0.01
    assert abs(x.std() - 0.5 * np.sqrt(0.04)) < 0.005


def test_exp_euler_errors():
    with pytest.raises(u.UnitMismatchError, match="unit of x per time"):
        nn.exp_euler_step(lambda v: -v, jnp.ones(2))          # dt in ms, drift unitless
    with pytest.raises(TypeError, match="floats"):
        nn.exp_euler_step(lambda v: -v / u.ms, jnp.ones(2, jnp.int32))
    with pytest.raises(TypeError, match="give the state x"):
        nn.exp_euler_step(lambda v: v)
    with pytest.raises(u.UnitMismatchError, match="diffusion"):
        nn.exp_euler_step(lambda v: -v / u.ms, lambda v: 1.0, jnp.ones(2) * u.mV)


# -- keyed inputs ----------------------------------------------------------------------------
def test_current_and_delta_inputs_callables_values_labels():
    d = nn.Dynamics(3)
    assert d.varshape == (3,) and d.out_size == (3,)
    assert d.sum_current_inputs(1.5) == 1.5                 # nothing registered
    seen = []
    drive = lambda v: seen.append(v) or 2.0 * v              # noqa: E731
    d.add_current_input("drive", drive)
    d.add_current_input("once", jnp.asarray([1.0, 2.0, 3.0]))
    d.add_current_input("ampa", lambda v: 10.0, label="exc")
    d.add_current_input("drive", drive)                      # the same object again: fine
    np.testing.assert_allclose(d.sum_current_inputs(0.0, jnp.ones(3)), [13.0, 14.0, 15.0])
    np.testing.assert_allclose(d.sum_current_inputs(0.0, jnp.ones(3)), [12.0] * 3)  # once: gone
    assert len(seen) == 2
    assert float(d.sum_current_inputs(0.0, 1.0, label="exc")) == 10.0
    assert d.get_input("[exc] ampa")(0) == 10.0
    d.add_delta_input("kick", 0.5)
    assert d.sum_delta_inputs(1.0) == 1.5 and d.sum_delta_inputs(1.0) == 1.0
    with pytest.raises(ValueError, match="already has a current input 'drive'"):
        d.add_current_input("drive", lambda v: v)
    with pytest.raises(KeyError, match="no current or delta input 'none'"):
        d.get_input("none")
    d.add_current_input("bad", lambda v: jnp.ones(4))
    with pytest.raises(Exception) as info:
        d.sum_current_inputs(jnp.zeros(3), jnp.ones(3))
    assert "bad" in str(info.value) + "".join(getattr(info.value, "__notes__", []))
    with pytest.raises(ValueError, match="in_size"):
        nn.Dynamics(None)


def test_hooks_run_around_update_in_order_with_inputs_and_outputs():
    log = []

    class Counter(nn.Dynamics):
        def update(self, x):
            log.append(("update", x))
            return x * 10

    c = Counter(1)
    c.add_before_update("plain", lambda: log.append(("before",)))
    c.add_before_update("with-input", nn.receive_update_input(
        type("H", (), {"__call__": lambda self, x: log.append(("before-x", x))})()))
    c.add_after_update("out", lambda y: log.append(("after", y)))
    c.add_after_update("no-out", nn.not_receive_update_output(
        type("H", (), {"__call__": lambda self: log.append(("after-",))})()))
    assert c(3) == 30
    assert log == [("before",), ("before-x", 3), ("update", 3), ("after", 30), ("after-",)]
    assert c.has_before_update("plain") and not c.has_after_update("plain")
    with pytest.raises(KeyError, match="already registered in after_updates"):
        c.add_after_update("out", print)
    with pytest.raises(KeyError, match="not registered in before_updates"):
        c.get_before_update("nope")
    assert c.update(1) == 10 and len(log) == 6             # update() alone runs no hook


# -- neurons and synapses with registered inputs ------------------------------------------------
def test_lif_with_a_coba_input_matches_the_exact_conductance_solution():
    """``tau dV/dt = V_rest - V + R g (E - V)`` is linear in V: exp-Euler is its exact step."""
    n, tau, E, R = 4, 5.0, 3.0, 1.0
    g_seq = np.random.RandomState(0).uniform(0, 2, size=(60, n)).astype(np.float32)
    lif = nn.init_all_states(nn.LIF(n, R=R * u.ohm, tau=tau * u.ms, V_th=1.0 * u.mV,
                                    spk_reset="hard"))
    out = nn.COBA(E=E * u.mV)
    lif.add_current_input("coba", out)

    def step(g):
        out.bind_cond(g * u.siemens)
        return lif(), lif.V.value

    spikes, V = brainx.transform.for_loop(step, jnp.asarray(g_seq))
    V_ref, s_ref, v = [], [], np.zeros(n)
    for g in g_seq.astype(np.float64):
        v = np.where(v >= 1.0, 0.0, v)
        v_inf = (0.0 + R * g * E) / (1 + R * g)
        v = v_inf + (v - v_inf) * np.exp(-DT * (1 + R * g) / tau)
        V_ref.append(v)
        s_ref.append(v >= 1.0)
    np.testing.assert_allclose(V.to_decimal(u.mV), np.stack(V_ref), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(spikes) > 0, np.stack(s_ref))
    assert 0 < np.asarray(spikes).sum() < spikes.size


def test_lif_delta_and_cuba_inputs_add_to_the_step():
    lif = nn.init_all_states(nn.LIF(2, tau=10.0 * u.ms, V_th=100.0 * u.mV))
    cuba = nn.CUBA()
    cuba.bind_cond(jnp.asarray([1.0, 2.0]) * u.mA)
    lif.add_current_input("cuba", cuba)
    lif.add_delta_input("jump", jnp.asarray([0.5, 0.0]) * u.mV)
    lif(0.5 * u.mA)
    decay = np.exp(-DT / 10.0)
    np.testing.assert_allclose(lif.V.value.to_decimal(u.mV),
                               np.array([1.5, 2.5]) * (1 - decay) + [0.5, 0.0], rtol=1e-5)
    with pytest.raises(ValueError, match="bind_cond"):
        nn.COBA(E=0 * u.mV)(0 * u.mV)


def test_expon_with_a_current_drive_is_exact():
    syn = nn.init_all_states(nn.Expon(3, tau=2.0 * u.ms))
    syn.add_current_input("drive", lambda g: jnp.asarray([1.0, 0.0, -2.0]))
    g = [np.asarray(syn()) for _ in range(15)]
    t = DT * np.arange(1, 16)[:, None]
    np.testing.assert_allclose(np.stack(g), np.array([1.0, 0.0, -2.0]) * -np.expm1(-t / 2.0),
                               rtol=1e-5, atol=1e-7)


def test_alpha_and_dual_exponential_synapses_match_their_equations():
    tau, td, tr = 2.0, 5.0, 1.0
    alpha = nn.init_all_states(nn.Alpha(1, tau=tau * u.ms), batch_size=2)
    dual = nn.init_all_states(nn.DualExpon(1, tau_decay=td * u.ms, tau_rise=tr * u.ms))
    xs = [1.0] + [None] * 79
    ga = np.stack([np.asarray(alpha(x)) for x in xs])[:, 0, 0]
    gd = np.stack([np.asarray(dual(x)) for x in xs])[:, 0]
    # Alpha, as plain recurrences: g steps with the h of the step's start, h decays
    e = np.exp(-DT / tau)
    g, h, ref = 0.0, 0.0, []
    for x in xs:
        g = h + (g - h) * e
        h = h * e + (x or 0.0)
        ref.append(g)
    np.testing.assert_allclose(ga, ref, rtol=1e-5, atol=1e-7)
    t = DT * np.arange(80)                       # close to (t / tau) e^{-t / tau} (first order)
    np.testing.assert_allclose(ga, t / tau * np.exp(-t / tau), atol=0.03)
    # DualExpon: exactly A (e^{-t / td} - e^{-t / tr}), with peak 1
    ratio = tr / td
    A = 1 / (ratio ** (tr / (td - tr)) * (1 - ratio))
    np.testing.assert_allclose(gd, A * (np.exp(-t / td) - np.exp(-t / tr)), rtol=1e-4, atol=1e-6)
    t_peak = td * tr / (td - tr) * np.log(td / tr)
    assert abs(gd.max() - 1.0) < 1e-3 and abs(t[gd.argmax()] - t_peak) <= DT


def test_synapses_need_init_state_and_reset_puts_back_initial_values():
    for syn in (nn.Alpha(2), nn.DualExpon(2), nn.Expon(2)):
        with pytest.raises(RuntimeError, match="init_state"):
            syn(1.0)
        nn.init_all_states(syn)
        syn(1.0)
        nn.reset_all_states(syn)
        assert all(np.all(np.asarray(s.value) == 0) for s in syn.states().values())
    assert isinstance(nn.LIF(2), nn.Dynamics) and isinstance(nn.Expon(2), nn.Synapse)


def test_gradient_through_dynamics_inputs_matches_plain_jax():
    """A weight on a current input: its gradient through 30 LIF steps equals plain JAX's."""
    from brainx.nn import surrogate as sg

    w0 = jnp.asarray([0.8, 1.2, 1.6])
    w = brainx.ParamState(w0)
    lif = nn.init_all_states(nn.LIF(3, tau=2.0 * u.ms, spk_fun=sg.Sigmoid(4.0)))
    xs = jnp.asarray(np.random.RandomState(1).uniform(0.5, 3.0, size=(30, 3)).astype(np.float32))
    lif.add_current_input("w", lambda v: w.value * u.mA)

    def loss():
        nn.reset_all_states(lif)
        return brainx.transform.for_loop(lambda x: lif(x * u.mA), xs).sum()

    grad = brainx.transform.grad(loss, grad_states=w)()

    def ref(wv):
        @jax.custom_jvp
        def heav(x):
            return (x >= 0).astype(x.dtype)

        @heav.defjvp
        def _(p, t):
            s = jax.nn.sigmoid(4.0 * p[0])
            return heav(p[0]), 4.0 * s * (1 - s) * t[0]

        def step(V, x):
            V = V - heav(V - 1.0)
            V_inf = x + wv
            V = V_inf + (V - V_inf) * np.exp(-DT / 2.0)
            return V, heav(V - 1.0)

        return jax.lax.scan(step, jnp.zeros(3), xs)[1].sum()

    np.testing.assert_allclose(grad, jax.grad(ref)(w0), rtol=1e-4, atol=1e-5)
    assert np.all(np.asarray(grad) != 0)


def test_gradient_in_a_traced_rate_is_exact_to_the_dtype_near_zero_and_away():
    """d/da of one step of dv/dt = a v + b, ``a`` traced: ``x h e^z + b h^2 psi(z)``, ``z = a h``,
    ``psi(z) = (z e^z - e^z + 1) / z^2``, against the exact series summed in rationals: within
    1e-13 in float64 (a 5-term series of psi for |z| < 0.1 was off by 1e-8 here), 1e-6 in float32."""
    from fractions import Fraction

    h = 0.1
    mag = np.concatenate([np.geomspace(1e-4, 0.09, 12), [0.3, 0.99, 1.0, 1.5, 4.0, 10.0]])
    z = np.concatenate([[0.0], mag, -mag])

    def exact(a, x, b):         # x h e^z + b h^2 sum_n (n + 1) z^n / (n + 2)!, summed in rationals
        zq, hq = Fraction(float(a)) * Fraction(h), Fraction(h)
        e = psi = Fraction(0)
        fact, n = 1, 0                                    # fact = n!
        while n < 8 or abs(zq) ** n / fact > Fraction(1, 10 ** 30):
            e += zq ** n / fact
            psi += (n + 1) * zq ** n / (fact * (n + 1) * (n + 2))
            n += 1
            fact *= n
        return float(Fraction(float(x)) * hq * e + Fraction(float(b)) * hq * hq * psi)

    def grad(a, x, b):
        step = lambda a: nn.exp_euler_step(lambda v: a * v + b, x).sum()   # noqa: E731
        return np.asarray(jax.jit(jax.grad(step))(a), np.float64)

    for precision, dtype, rtol in [(64, np.float64, 1e-13), (32, np.float32, 1e-6)]:
        with environ.context(dt=h, precision=precision):
            a = jnp.asarray(z / h, dtype)
            x = jnp.full(z.shape, 0.5, dtype)
            b = jnp.full(z.shape, 20.0, dtype)
            assert a.dtype == dtype
            got = grad(a, x, b)
            want = np.array([exact(*v) for v in zip(np.asarray(a), np.asarray(x), np.asarray(b))])
            np.testing.assert_allclose(got, want, rtol=rtol, err_msg=f"float{precision}")


def test_population_shape_is_an_int_or_a_non_empty_sequence_of_ints():
    assert nn.Dynamics(7).in_size == nn.Dynamics(np.int64(7)).varshape == (7,)
    assert nn.Dynamics([2, 3]).in_size == nn.Dynamics((2, 3)).out_size == (2, 3)
    for bad in (None, [], (), "invalid", 3.5, (1.5, 2), True):
        with pytest.raises(ValueError, match="in_size must be an int or a non-empty"):
            nn.Dynamics(bad)


def test_module_init_all_states_is_the_function_and_returns_the_states_made():
    """``module.init_all_states(...)`` (brainstate's method) calls every module's init_state
    as ``nn.init_all_states`` does, children first, and catches (and tags) the states made."""
    order = []

    class Leaf(nn.Module):
        def init_state(self, batch_size=None):
            order.append("leaf")
            self.x = brainx.ShortTermState(jnp.zeros((batch_size or 1, 2)))

    class Root(nn.Module):
        def __init__(self):
            super().__init__()
            self.leaf = Leaf()

        def init_state(self, batch_size=None):
            order.append("root")
            self.y = brainx.HiddenState(jnp.ones(batch_size or 1))

    root = Root()
    made = root.init_all_states(batch_size=3, state_tag="fresh")
    assert order == ["leaf", "root"]
    assert made.get_states() == (root.leaf.x, root.y)
    assert root.leaf.x.value.shape == (3, 2) and root.y.value.shape == (3,)
    assert list(root.states("fresh").values()) == [root.leaf.x, root.y]   # tagged
    twin = nn.init_all_states(Root(), batch_size=3)
    assert jax.tree.map(jnp.shape, twin.states().to_dict_values()) == \
        jax.tree.map(jnp.shape, root.states().to_dict_values())


def test_brainstates_deprecated_nn_names_warn_and_give_the_new_ones():
    with pytest.warns(DeprecationWarning, match="DynamicsGroup is deprecated .* brainx.nn.Module"):
        assert nn.DynamicsGroup is nn.Module
    with pytest.warns(DeprecationWarning, match="ModuleMapper is deprecated .* brainx.nn.Map"):
        assert nn.ModuleMapper is nn.Map
    with pytest.raises(AttributeError, match="no attribute 'NoSuchLayer'"):
        nn.NoSuchLayer
