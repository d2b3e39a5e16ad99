"""A neuron step traces to the equations a hand-written step has: no ``1 * x``, no ``0 + x``.

Every equation is paid by each trace of a step (discovery, the loop body, the
JVP, the transpose, the lowering), so parameters known when the step is traced
(``R = 1``, ``V_rest = 0``, ``V_th - V_reset = 1``, a surrogate's ``alpha``)
must not become equations or constant inputs.
"""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.nn.trace_time_values import as_literal, plus, times
from brainx.nn.surrogate import Arctan, Sigmoid


def _count(jaxpr) -> int:
    """Equations of the step itself (those inside a custom rule's own jaxpr are not traced again)."""
    return len(jaxpr.eqns)


def test_times_and_plus_leave_out_only_what_changes_nothing():
    x32 = jnp.ones(3, jnp.float32)
    assert times(1.0, x32) is x32 and times(np.float32(1), x32) is x32
    assert plus(0.0, x32) is x32 and plus(x32, 0) is x32
    assert times(2.0, x32).tolist() == [2.0] * 3
    xi = jnp.ones(3, jnp.int32)
    assert times(1.0, xi).dtype == jnp.result_type(1.0 * xi)       # int * float converts
    q = jnp.ones(2) * u.mV
    assert times(1.0, q) is q
    assert u.get_unit(times(1.0 * u.ohm, jnp.ones(2) * u.mA)) == u.mV   # a unit: multiplied
    if not jax.config.jax_enable_x64:
        assert times(np.float64(1), x32) is x32   # float64 cannot widen without x64


def test_as_literal_keeps_the_value_and_weak_type():
    strong = jnp.asarray(0.5, jnp.float32)
    weak = jnp.exp(-0.1)
    assert as_literal(strong).dtype == np.float32 and float(as_literal(strong)) == 0.5
    assert isinstance(as_literal(weak), float)
    x = jnp.ones(2, jnp.bfloat16)
    assert (x * as_literal(weak)).dtype == (x * weak).dtype
    tracer_seen = []
    jax.jit(lambda a: tracer_seen.append(as_literal(a) is a))(strong)
    assert tracer_seen == [True]


def _lif_hand(W, V, x):
    spk = (V >= 1.0).astype(V.dtype)
    V = V - spk
    I = jnp.concatenate([x, spk], -1) @ W
    return I + (V - I) * np.exp(-0.1).astype(np.float32)


def test_lif_step_gradient_traces_to_the_hand_written_equations():
    n_in, n = 3, 4
    W0 = jnp.asarray(np.random.RandomState(0).randn(n_in + n, n), jnp.float32)
    x = jnp.asarray(np.random.RandomState(1).randn(2, n_in), jnp.float32)
    V0 = jnp.asarray(np.random.RandomState(2).rand(2, n) * 1.5, jnp.float32)

    with brainx.environ.context(dt=1.0):
        lif = brainx.nn.LIF(n, R=1.0, tau=10.0, V_th=1.0, V_reset=0.0, V_rest=0.0,
                            V_initializer=brainx.nn.init.Constant(0.0), spk_fun=Arctan(alpha=2.0))
        brainx.nn.init_all_states(lif, batch_size=2)
        W = brainx.ParamState(W0)

        def step(x):
            lif.V.value = V0
            I = jnp.concatenate([x, lif.get_spike()], -1) @ W.value
            return lif(I).sum()

        jaxpr = brainx.transform.make_jaxpr(brainx.transform.grad(step, grad_states=W))(x)[0]
        g = brainx.transform.grad(step, grad_states=W)(x)

    def hand(W, x):
        spk_fn = lambda v: Arctan(alpha=2.0)(v - 1.0)       # the surrogate as written by hand
        V = V0 - spk_fn(V0)
        I = jnp.concatenate([x, spk_fn(V0)], -1) @ W
        V = I + (V - I) * np.exp(-0.1).astype(np.float32)
        return spk_fn(V).sum()

    want = jax.grad(hand)(W0, x)
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
    hand_jaxpr = jax.make_jaxpr(jax.grad(hand))(W0, x)
    assert all(np.ndim(c) > 0 for c in jaxpr.consts)   # no parameter became a constant input
    # brainx may not add equations to what the hand-written gradient traces to
    assert _count(jaxpr.jaxpr) <= _count(hand_jaxpr.jaxpr)


@pytest.mark.parametrize("cls,params", [(Arctan, (2.0,)), (Sigmoid, (4.0,))])
def test_known_and_traced_surrogate_parameters_give_the_same_gradient(cls, params):
    v = jnp.linspace(-1.0, 3.0, 9)
    known = jax.grad(lambda v: cls(*params).spike_at(v, 1.0, 2.0).sum())(v)

    def traced(v, p, th, scale):
        return cls(*p).spike_at(v, th, scale).sum()

    via_arrays = jax.jit(jax.grad(traced))(v, tuple(jnp.asarray(p) for p in params),
                                           jnp.asarray(1.0), jnp.asarray(2.0))
    np.testing.assert_allclose(known, via_arrays, rtol=1e-6)
    direct = jax.grad(lambda v: cls(*params)((v - 1.0) / 2.0).sum())(v)
    np.testing.assert_allclose(known, direct, rtol=1e-6)


def test_a_known_threshold_spike_has_one_operand_and_a_soft_reset_no_unused_comparison():
    # The forward pass of a spike against a known threshold and scale is one custom_jvp call
    # on the potential alone (the hand-written form: no threshold input, no symbolic zeros),
    # and a soft-reset LIF step traces no `V >= V_th` that only a hard reset would use.
    v = jnp.linspace(-1.0, 3.0, 9)
    spike = jax.make_jaxpr(lambda v: Arctan(alpha=2.0).spike_at(v, 1.0, 2.0))(v).jaxpr
    calls = [e for e in spike.eqns if e.primitive.name == "custom_jvp_call"]
    assert len(spike.eqns) == 1 and len(calls) == 1 and len(calls[0].invars) == 1
    assert not calls[0].params["symbolic_zeros"]
    g = jax.grad(lambda v: (Arctan(alpha=2.0).spike_at(v, 1.0, 2.0) * v).sum())(v)
    want = (v >= 1.0) + v * Arctan.surrogate_grad(Arctan(alpha=2.0), (v - 1.0) / 2.0) / 2.0
    np.testing.assert_allclose(g, want, rtol=1e-6)

    with brainx.environ.context(dt=1.0):
        lif = brainx.nn.LIF(4, R=1.0, tau=10.0, V_th=1.0, V_reset=0.0, V_rest=0.0,
                            V_initializer=brainx.nn.init.Constant(0.0), spk_fun=Arctan(2.0))
        brainx.nn.init_all_states(lif, batch_size=2)
        body = brainx.transform.StatefulFunction(lif).discover((), (jnp.ones((2, 4)),), {})
    # discovery's trace: what a loop body copies and every derivative traces again
    jaxpr = body.trace.jaxpr
    read = {id(v) for e in jaxpr.eqns for v in e.invars} | {id(v) for v in jaxpr.outvars}
    unused = [e for e in jaxpr.eqns if not any(id(o) in read for o in e.outvars)]
    assert not unused, unused


def test_exp_decay_of_known_numbers_is_computed_by_numpy_in_their_type():
    import math
    from brainx.nn import exp_decay
    with brainx.environ.context(dt=1.0 * u.ms):
        weak = exp_decay(10.0 * u.ms)                   # Python numbers: a weak Python float
        strong = exp_decay(np.float32(10.0) * u.ms)     # a float32 parameter: a float32 scalar
        traced = jax.make_jaxpr(lambda t: exp_decay(t * u.ms))(10.0)  # traced: JAX's exp
    assert isinstance(weak, float) and weak == math.exp(-0.1)
    assert isinstance(strong, np.float32) and strong == np.float32(math.exp(-0.1))
    assert [e.primitive.name for e in traced.jaxpr.eqns].count("exp") == 1
