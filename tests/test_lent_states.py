"""A state lent to a raw JAX trace while it runs (braintrace's pattern), and what happens
when the trace ends with the state still holding its tracer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.state.lending import LENT, set_ended_write_policy


def test_custom_vjp_forward_writes_then_restores_a_state():
    # braintrace writes parameters inside its custom_vjp forward rule and puts them back
    w = brainx.ParamState(jnp.array([1.0, 2.0]), name="w")

    @jax.custom_vjp
    def f(x):
        return jnp.sum(w.value * x)

    def f_fwd(x):
        before = w.value
        w.value = before * 2.0                  # a tracer of the forward trace
        out = jnp.sum(w.value * x) / 2.0        # read back inside the same trace
        w.restore_value(before)
        return out, x

    def f_bwd(x, g):
        return (g * w.value,)

    f.defvjp(f_fwd, f_bwd)
    x = jnp.array([3.0, 4.0])
    grad = jax.jit(jax.grad(f))(x)
    np.testing.assert_allclose(grad, jax.grad(lambda x: jnp.sum(jnp.array([1.0, 2.0]) * x))(x))
    np.testing.assert_array_equal(w.value, [1.0, 2.0])
    assert id(w) not in LENT


def test_raw_scan_body_writes_and_restores():
    h = brainx.HiddenState(jnp.zeros(3), name="h")

    def body(carry, x):
        before = h.value
        h.value = carry + x
        new = h.value * 2
        h.restore_value(before)
        return new, new.sum()

    carry, ys = jax.lax.scan(body, jnp.ones(3), jnp.arange(4.0))
    ref_carry, ref_ys = jnp.ones(3), []
    for x in range(4):
        ref_carry = (ref_carry + x) * 2
        ref_ys.append(ref_carry.sum())
    np.testing.assert_allclose(carry, ref_carry)
    np.testing.assert_allclose(ys, ref_ys)
    np.testing.assert_array_equal(h.value, np.zeros(3))


def test_a_state_left_holding_a_dead_tracer_is_put_back_on_read():
    w = brainx.ParamState(jnp.ones(2), name="w")

    @jax.jit
    def forgets(x):
        w.value = w.value * x          # never restored
        return w.value.sum()

    assert float(forgets(3.0)) == 6.0
    with pytest.raises(brainx.TracerLeakError, match="'w'.*has ended.*put back"):
        w.value
    np.testing.assert_array_equal(w.value, [1.0, 1.0])   # the value from before the write
    assert id(w) not in LENT
    # the next brainx transform reads the put-back value
    np.testing.assert_array_equal(brainx.transform.jit(lambda: w.value * 2)(), [2.0, 2.0])


@pytest.fixture
def restore_policy():
    previous = set_ended_write_policy("restore")
    yield
    set_ended_write_policy(previous)


def test_the_restore_policy_reads_the_value_from_before_the_raw_write(restore_policy):
    """braincell's solvers: states written with jax.vjp's tracers, read for their shapes,
    then overwritten; the result equals the same step with explicit values."""
    x = brainx.HiddenState(jnp.array([1.0, 2.0]), name="x")
    tau = jnp.array([2.0, 4.0])

    def field(y):
        x.value = y                        # a raw trace's tracer in the state, never put back
        return -x.value / tau

    dt = 0.1
    y0 = x.value
    f0, vjp = jax.vjp(field, y0)
    J = jax.vmap(vjp)(jnp.eye(2))[0]
    shape = x.value.shape                  # braincell reads it for the structure only
    assert shape == (2,)
    np.testing.assert_array_equal(x.value, y0)   # the value from before the raw write
    x.value = y0 + jnp.linalg.solve(jnp.eye(2) - dt * J, dt * f0)
    expected = np.asarray(y0) / (1 + dt / np.asarray(tau))   # backward Euler of -y / tau
    np.testing.assert_allclose(x.value, expected, rtol=1e-6)
    assert id(x) not in LENT


def test_the_policy_is_checked_and_the_default_raises():
    with pytest.raises(ValueError, match="policy must be one of"):
        set_ended_write_policy("ignore")
    assert set_ended_write_policy("error") == "error"          # the default


def test_a_brainx_transform_reading_a_dead_lent_state_gets_the_error():
    w = brainx.ParamState(jnp.ones(2), name="w")
    jax.jit(lambda x: setattr(w, "value", w.value + x) or x)(1.0)
    with pytest.raises(brainx.TracerLeakError, match="'w'"):
        brainx.transform.jit(lambda: w.value * 2)()
    np.testing.assert_array_equal(w.value, [1.0, 1.0])


def test_writing_a_tracer_of_a_trace_that_ended_is_refused_at_once():
    w = brainx.ParamState(jnp.zeros(2), name="w")
    leaked = []
    jax.jit(lambda x: leaked.append(x) or x)(jnp.ones(2))
    with pytest.raises(brainx.TracerLeakError, match="not running here"):
        w.value = leaked[0]
    np.testing.assert_array_equal(w.value, [0.0, 0.0])
    assert id(w) not in LENT


def test_lent_then_given_a_real_value_inside_the_trace_is_no_longer_lent():
    w = brainx.ParamState(jnp.zeros(2), name="w")

    @jax.jit
    def f(x):
        w.value = x
        w.value = np.full(2, 5.0, np.float32)   # a real value before the trace ends
        return x

    f(jnp.ones(2))
    assert id(w) not in LENT
    np.testing.assert_array_equal(w.value, [5.0, 5.0])


def test_lending_does_not_keep_a_state_alive():
    import gc
    import weakref

    w = brainx.ParamState(jnp.zeros(2), name="w")
    jax.jit(lambda x: setattr(w, "value", x) or x)(jnp.ones(2))
    ref = weakref.ref(w)
    assert id(w) in LENT
    key = id(w)
    del w
    gc.collect()
    assert ref() is None and key not in LENT


def test_a_transform_call_gives_back_what_a_custom_vjp_forward_left_lent():
    # braintrace: transform.grad runs a custom_vjp whose forward rule writes a parameter and
    # its backward rule reads the parameter's shape; at the end of the call (as brainstate
    # restores the states a transform read) the parameter has its value back, silently
    w = brainx.ParamState(jnp.array([1.0, 2.0, 3.0]), name="w")

    @jax.custom_vjp
    def f(x):
        return x * w.value

    def f_fwd(x):
        w.value = w.value * 1.0               # not put back
        return x * w.value, x

    def f_bwd(x, g):
        assert w.value.shape == (3,)          # read while the call runs: the old value
        return (g * jnp.array([1.0, 2.0, 3.0]),)

    f.defvjp(f_fwd, f_bwd)
    x = jnp.ones(3)
    g = brainx.transform.grad(lambda x: f(x).sum())(x)
    np.testing.assert_array_equal(g, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(w.value, [1.0, 2.0, 3.0])
    assert id(w) not in LENT
    # grad_states given: the same, and the gradient of the loss w.r.t. w is the plain one
    grads = brainx.transform.grad(lambda x: (x * w.value).sum(), grad_states=w)(x)
    np.testing.assert_array_equal(grads, x)


def test_outside_a_transform_call_a_custom_vjp_forward_left_lent_is_an_error():
    h = brainx.HiddenState(jnp.zeros(3), name="h")

    @jax.custom_vjp
    def f(x):
        return x * 2

    def f_fwd(x):
        h.value = x * 2                       # not put back
        return x * 2, None

    def f_bwd(_, g):
        return (g * 2 + h.value,)             # jit's tracer: its trace still runs

    f.defvjp(f_fwd, f_bwd)
    g = jax.jit(jax.grad(lambda x: f(x).sum()))(jnp.ones(3))
    np.testing.assert_array_equal(g, [4.0, 4.0, 4.0])
    with pytest.raises(brainx.TracerLeakError, match="'h'.*has ended"):
        h.value                               # after jax.jit: refused, and given back
    np.testing.assert_array_equal(h.value, np.zeros(3))
    assert id(h) not in LENT


def test_a_custom_vjp_forward_traced_by_grad_inside_a_loop_leaves_the_loop_state_as_it_was():
    # braintrace: transform.grad inside transform.scan; the custom_vjp forward rule (traced when
    # grad differentiates, after grad's own trace scope closed) writes the hidden state
    h = brainx.HiddenState(jnp.zeros(2), name="h")
    w = brainx.ParamState(jnp.array([1.0, -1.0]), name="w")

    @jax.custom_vjp
    def cell(x):
        return jnp.tanh(w.value * x + h.value)

    def cell_fwd(x):
        y = jnp.tanh(w.value * x + h.value)
        h.value = y                               # left in the forward rule
        return y, (x, y)

    def cell_bwd(res, g):
        x, y = res
        return (g * (1 - y ** 2) * w.value,)

    cell.defvjp(cell_fwd, cell_bwd)

    def body(total, x):
        g = brainx.transform.grad(lambda x: cell(x).sum())(x)
        return total + g, g

    xs = jnp.array([[0.5, 1.0], [2.0, -1.0]])
    total, gs = brainx.transform.scan(body, jnp.zeros(2), xs)
    want = jax.vmap(jax.grad(lambda x: jnp.tanh(jnp.array([1.0, -1.0]) * x).sum()))(xs)
    np.testing.assert_allclose(gs, want, rtol=1e-6)
    np.testing.assert_allclose(total, want.sum(0), rtol=1e-6)
    np.testing.assert_array_equal(h.value, np.zeros(2))       # as it was, no tracer


@pytest.fixture
def raise_policy():
    from brainx.state.lending import set_raw_write_policy
    previous = set_raw_write_policy("raise")
    yield
    set_raw_write_policy(previous)


def test_brainstates_raw_write_rule_refuses_at_the_write_outside_brainx_calls(raise_policy):
    # install_as_brainstate's rule: `state.value = tracer` of a raw trace with no brainx
    # call running raises at the write (brainstate's TraceContextError), the state unchanged
    w = brainx.ParamState(jnp.array([1.0, 2.0]), name="w")
    with pytest.raises(brainx.TraceContextError, match="'w'.*raw JAX transform"):
        jax.jit(lambda x: setattr(w, "value", w.value * x))(3.0)
    np.testing.assert_array_equal(w.value, [1.0, 2.0])
    with pytest.raises(brainx.TracerLeakError):
        jax.vmap(lambda x: setattr(w, "value", x))(jnp.ones((4, 2)))
    np.testing.assert_array_equal(w.value, [1.0, 2.0])
    assert id(w) not in LENT
    # restore_value is not refused (brainstate does not check it): lent, then put back
    def scaled_sum(x):
        before = w.value
        w.restore_value(before * x)
        out = w.value.sum()
        w.restore_value(before)
        return out

    assert float(jax.jit(scaled_sum)(3.0)) == 9.0
    np.testing.assert_array_equal(w.value, [1.0, 2.0])


def test_brainstates_raw_write_rule_still_lends_inside_a_brainx_call(raise_policy):
    # braintrace's pattern under install_as_brainstate: a custom_vjp forward rule run by
    # transform.grad writes a parameter; inside a brainx call it is lent, as in brainstate
    w = brainx.ParamState(jnp.array([1.0, 2.0, 3.0]), name="w")

    @jax.custom_vjp
    def f(x):
        return x * w.value

    def f_fwd(x):
        before = w.value
        w.value = before * 2.0
        out = x * w.value / 2.0
        w.restore_value(before)
        return out, x

    def f_bwd(x, g):
        return (g * w.value,)

    f.defvjp(f_fwd, f_bwd)
    g = brainx.transform.grad(lambda x: f(x).sum())(jnp.ones(3))
    np.testing.assert_array_equal(g, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(w.value, [1.0, 2.0, 3.0])
    assert id(w) not in LENT


def test_the_raw_write_policy_is_checked_and_the_default_lends():
    from brainx.state.lending import set_raw_write_policy
    with pytest.raises(ValueError, match="policy must be one of"):
        set_raw_write_policy("strict")
    assert set_raw_write_policy("lend") == "lend"


def test_brainstates_raw_write_rule_refuses_a_brainx_calls_write_back_inside_a_raw_one(
        raise_policy):
    # brainstate's rule covers a brainstate transform called inside a raw one: its results are
    # the raw trace's tracers, refused at the write-back, every state as it was
    s = brainx.State(jnp.asarray(1.0), name="s")
    t = brainx.State(jnp.asarray(5.0), name="t")

    def f(x):
        t.value = t.value * 2
        s.value = s.value + x
        return s.value

    with pytest.raises(brainx.TraceContextError, match="raw JAX transform"):
        jax.jit(lambda x: brainx.transform.checkify(f)(x)[1])(jnp.asarray(2.0))
    with pytest.raises(brainx.TraceContextError):
        jax.vmap(lambda x: brainx.transform.grad(lambda x: f(x) * x)(x))(jnp.arange(3.0))
    assert float(s.value) == 1.0 and float(t.value) == 5.0
    assert id(s) not in LENT and id(t) not in LENT
    # inside brainx's jit the same call writes the states
    brainx.transform.jit(lambda x: brainx.transform.checkify(f)(x)[1])(jnp.asarray(2.0))
    assert float(s.value) == 3.0 and float(t.value) == 10.0


def test_brainstates_raw_write_rule_lets_a_state_made_inside_a_raw_transform_take_tracers(
        raise_policy):
    # A state created inside jax.grad (under jax.jit) lives in that trace: it may take the
    # outer jit's tracers too, under either rule, as brainstate exempts such states
    def f(x, y):
        def g(y):
            s = brainx.State(jnp.zeros(()))
            s.value = x * 2.0
            s.value = s.value + y
            return s.value
        return jax.grad(g)(y)

    assert float(jax.jit(f)(1.0, 2.0)) == 1.0
