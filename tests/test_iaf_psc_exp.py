"""`IafPscExp` against a float64 reference written here: the ODE's matrix exponential, NEST's order.

The reference integrates ``dv/dt = -v/tau_m + (I + I_e)/C_m``, ``dI/dt = -I/tau_syn`` exactly with
``scipy.linalg.expm`` of the linear system (not with the propagator formulas the neuron uses),
stepping through NEST's order: membrane with the old current unless refractory, current decay,
arrivals, threshold. The NEST comparison itself is in ``test_iaf_psc_exp_nest.py``.
"""

import re

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import brainx
from brainx import nn

H = 0.1  # ms
PARAMS = dict(C_m=250.0, tau_m=10.0, tau_syn=0.5, E_L=-65.0, V_th=-50.0, V_reset=-65.0,
              t_ref=2.0, I_e=300.0)


def reference(arrivals, V0, C_m, tau_m, tau_syn, E_L, V_th, V_reset, t_ref, I_e,
              arrivals_in=None, tau_syn_in=None):
    """Float64 trace (V after each step), spike steps: expm of the linear system, NEST's order."""
    tau_in = tau_syn if tau_syn_in is None else tau_syn_in
    A = np.array([[-1 / tau_m, 1 / C_m, 1 / C_m, I_e / C_m],
                  [0, -1 / tau_syn, 0, 0],
                  [0, 0, -1 / tau_in, 0],
                  [0, 0, 0, 0]])
    M = scipy.linalg.expm(A * H)
    v, I, I_in, r = V0 - E_L, 0.0, 0.0, 0
    refs = int(round(t_ref / H))
    trace, spikes = [], []
    for j, x in enumerate(arrivals):
        if r == 0:
            v = M[0] @ np.array([v, I, I_in, 1.0])
        else:
            r -= 1
        I = M[1, 1] * I + x
        I_in = M[2, 2] * I_in + (0.0 if arrivals_in is None else arrivals_in[j])
        if v >= V_th - E_L:
            spikes.append(j)
            v, r = V_reset - E_L, refs
        trace.append(v + E_L)
    return np.array(trace), spikes


def drive(n_steps=400):
    """Arrivals: excitatory and inhibitory jumps, a burst crossing threshold, one while refractory."""
    x = np.zeros(n_steps)
    x[20] += 800.0
    x[35] -= 1500.0
    x[60] += 5000.0            # crosses threshold (about step 62)
    x[70] += 9000.0            # arrives while refractory: decays, does not move the clamped V
    x[70] -= 1000.0            # two weights in one step
    x[150] += 6000.0
    x[152] += 6000.0           # a second crossing right after the clamp ends
    x[300] -= 3000.0
    return x


def run_neuron(x, V0=-60.0, batch=None, **over):
    p = dict(PARAMS, **over)
    with brainx.environ.context(dt=H * u.ms):
        n = nn.IafPscExp(1 if batch is None else (1,), C_m=p["C_m"] * u.pF, tau_m=p["tau_m"] * u.ms,
                         tau_syn_ex=p["tau_syn"] * u.ms, E_L=p["E_L"] * u.mV,
                         V_th=p["V_th"] * u.mV, V_reset=p["V_reset"] * u.mV,
                         t_ref=p["t_ref"] * u.ms, I_e=p["I_e"] * u.pA,
                         V_initializer=V0 * u.mV)
        nn.init_all_states(n)
        step = brainx.transform.jit(lambda xj: (n.update(xj * u.pA), n.V.value.to_decimal(u.mV)))
        trace, spikes = [], []
        for j, xj in enumerate(x):
            s, v = step(np.float32(xj))
            trace.append(float(v[0]))
            if float(s[0]):
                spikes.append(j)
    return np.array(trace), spikes


def test_propagators_match_the_spec_and_the_matrix_exponential():
    p = nn.iaf_psc_exp_propagators(0.1, 250.0, 10.0, 0.5)
    assert p["P22"] == pytest.approx(0.9900498337, abs=1e-10)
    assert p["P11"] == pytest.approx(0.8187307531, abs=1e-10)
    M = scipy.linalg.expm(np.array([[-1 / 10.0, 1 / 250.0, 1 / 250.0],
                                    [0, -1 / 0.5, 0], [0, 0, 0]]) * 0.1)
    assert p["P21"] == pytest.approx(M[0, 1], rel=1e-12)
    assert p["P20"] == pytest.approx(M[0, 2], rel=1e-12)
    # tau_syn == tau_m: the limit, continuous in tau_syn
    same = nn.iaf_psc_exp_propagators(0.1, 250.0, 10.0, 10.0)["P21"]
    near = nn.iaf_psc_exp_propagators(0.1, 250.0, 10.0, 10.0 + 1e-6)["P21"]
    assert same == pytest.approx(near, rel=1e-6)


def test_trace_matches_the_float64_reference():
    x = drive()
    want, want_spikes = reference(x, -60.0, **PARAMS)
    got, spikes = run_neuron(x)
    assert len(want_spikes) >= 2 and spikes == want_spikes
    assert np.max(np.abs(got - want)) < 2e-4          # float32 on potentials of ~65 mV
    # the clamp: 20 steps at V_reset after each spike, then free again
    for s in want_spikes:
        assert np.all(got[s:s + 21] == PARAMS["V_reset"])
        assert got[s + 21] != PARAMS["V_reset"]


def test_jitted_loop_equals_eager_steps_per_neuron_parameters():
    x = drive()
    I_e = np.array([0.0, 300.0, 380.0])
    V0 = np.array([-65.0, -55.0, -51.0])
    with brainx.environ.context(dt=H * u.ms):
        n = nn.init_all_states(nn.IafPscExp(3, tau_syn_ex=0.5 * u.ms, E_L=-65 * u.mV,
                                            V_th=-50 * u.mV, V_reset=-65 * u.mV,
                                            I_e=I_e * u.pA, V_initializer=V0 * u.mV))

        @brainx.transform.jit
        def run(xs):
            def step(xj):
                s = n.update(jnp.full(3, xj) * u.pA)
                return s, n.V.value.to_decimal(u.mV)
            return brainx.transform.for_loop(step, xs)

        spikes, V = run(jnp.asarray(x, jnp.float32))
    for i in range(3):
        want, want_spikes = reference(x, V0[i], **dict(PARAMS, I_e=I_e[i]))
        assert list(np.flatnonzero(np.asarray(spikes[:, i]))) == want_spikes
        assert np.max(np.abs(np.asarray(V[:, i]) - want)) < 2e-4


def test_separate_inhibitory_current_with_its_own_time_constant():
    x = drive()
    x_in = np.zeros_like(x)
    x_in[100] = -2000.0
    x_in[200] = -500.0
    want, want_spikes = reference(x, -60.0, arrivals_in=x_in, tau_syn_in=3.0, **PARAMS)
    with brainx.environ.context(dt=H * u.ms):
        n = nn.init_all_states(nn.IafPscExp(1, tau_syn_ex=0.5 * u.ms, tau_syn_in=3.0 * u.ms,
                                            E_L=-65 * u.mV, V_th=-50 * u.mV,
                                            V_reset=-65 * u.mV, I_e=300 * u.pA,
                                            V_initializer=-60 * u.mV))
        assert n.two_currents
        @brainx.transform.jit
        def run(xs, ys):
            def step(xy):
                n.update(xy[0] * u.pA, xy[1] * u.pA)
                return n.V.value.to_decimal(u.mV)[0]
            return brainx.transform.for_loop(step, jnp.stack([xs, ys], 1))
        got = np.asarray(run(jnp.asarray(x, jnp.float32), jnp.asarray(x_in, jnp.float32)))
    assert np.max(np.abs(got - want)) < 2e-4


def test_compiled_step_is_plain_arithmetic():
    """No exp, no unit work, no custom call in the step: the propagators are constants."""
    with brainx.environ.context(dt=H * u.ms):
        n = nn.init_all_states(nn.IafPscExp(1000, I_e=np.linspace(0, 400, 1000) * u.pA))
        step = brainx.transform.jit(lambda x: n.update(x))
        hlo = step.lower(jnp.zeros(1000)).compile().as_text()
    ops = set(re.findall(r"^\s*(?:ROOT )?%\S+ = \S+ ([\w-]+)\(", hlo, re.M))
    assert {"multiply", "add", "select", "compare"} <= ops, ops
    assert not ops & {"exponential", "custom-call", "log", "divide", "while"}, ops


def test_surrogate_gradient_of_the_subthreshold_trace_is_the_linear_map():
    """Below threshold V is linear in the inputs: d V_T / d w equals the reference's slope.

    The surrogate's support (width 0.5 of V_th - V_reset) stays clear of the trace, so no
    surrogate term enters through the reset.
    """
    x = np.zeros(100)
    x[10] = 1.0
    with brainx.environ.context(dt=H * u.ms):
        n = nn.init_all_states(nn.IafPscExp(1, tau_syn_ex=0.5 * u.ms, E_L=-65 * u.mV,
                                            V_th=-50 * u.mV, V_reset=-65 * u.mV,
                                            spk_fun=nn.surrogate.ReluGrad(width=0.5)))

        def final_v(w):
            n.reset_state()
            brainx.transform.for_loop(lambda xj: n.update(w * xj), jnp.asarray(x, jnp.float32))
            return n.V.value.to_decimal(u.mV)[0]

        g = brainx.transform.grad(final_v)(jnp.float32(100.0))
    a, _ = reference(x * 100.0, -65.0, **dict(PARAMS, I_e=0.0))
    b, _ = reference(x * 200.0, -65.0, **dict(PARAMS, I_e=0.0))
    assert float(g) == pytest.approx((b[-1] - a[-1]) / 100.0, rel=1e-4)


def test_bad_parameters_and_inputs_are_refused_clearly():
    with pytest.raises(ValueError, match="V_reset .* must be below V_th"):
        nn.IafPscExp(2, V_th=-60 * u.mV, V_reset=-55 * u.mV)
    with pytest.raises(ValueError, match="tau_m must be positive"):
        nn.IafPscExp(2, tau_m=0 * u.ms)
    with pytest.raises(u.UnitMismatchError, match="C_m must be in units like"):
        nn.IafPscExp(2, C_m=250 * u.mV)
    with pytest.raises(ValueError, match="does not broadcast"):
        nn.IafPscExp(2, I_e=np.zeros(3) * u.pA)
    n = nn.IafPscExp(2, name="L4E")
    with pytest.raises(RuntimeError, match="'L4E' has no state V"):
        n.update()
    with brainx.environ.context(dt=H * u.ms):
        nn.init_all_states(n)
        before = np.asarray(n.V.value.to_decimal(u.mV)).copy()
        with pytest.raises(u.UnitMismatchError, match="'L4E': x must be a current"):
            n.update(np.ones(2) * u.mV)
        assert np.array_equal(np.asarray(n.V.value.to_decimal(u.mV)), before)


def test_batch_and_plain_numbers_in_nest_units():
    with brainx.environ.context(dt=H * u.ms):
        n = nn.IafPscExp(4, tau_syn_ex=0.5, E_L=-65.0, V_th=-50.0, V_reset=-65.0, I_e=400.0)
        n.init_state(batch_size=3)
        assert n.V.value.shape == (3, 4) and n.V.value.unit == u.mV
        assert n.update(np.zeros((3, 4))).shape == (3, 4)          # one eager step
        run = brainx.transform.jit(lambda: brainx.transform.for_loop(
            lambda _: n.update(np.zeros((3, 4))), jnp.arange(399)))
        out = np.asarray(run())
    first = int(np.argmax(out[:, 0, 0])) + 1
    _, want = reference(np.zeros(400), -65.0, **dict(PARAMS, I_e=400.0))
    assert out[first - 1].all()
    assert first == want[0]
