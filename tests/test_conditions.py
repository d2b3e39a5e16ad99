"""cond, switch and ifelse against plain JAX with explicit state passing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import brainx
from brainx.transform import cond, for_loop, grad, ifelse, jit, switch


class Model:
    def __init__(self):
        self.a = brainx.State(jnp.array([1.0, 2.0]), name="a")       # written by one branch
        self.b = brainx.State(jnp.array(0.5), name="b")              # written by the other
        self.w = brainx.ParamState(jnp.array([0.3, -0.7]), name="w")  # read only

    def values(self):
        return self.a.value, self.b.value

    def up(self, x):
        self.a.value = self.a.value * self.w.value + x
        return jnp.sum(self.a.value)

    def down(self, x):
        self.b.value = self.b.value - x * self.w.value.sum()
        return self.b.value * 2

    def reset(self, x):
        self.a.value = jnp.zeros(2)
        self.b.value = jnp.array(-1.0)
        return x * 0.0


def ref_up(w, a, b, x):
    a = a * w + x
    return (a, b), jnp.sum(a)


def ref_down(w, a, b, x):
    b = b - x * w.sum()
    return (a, b), b * 2


def ref_reset(w, a, b, x):
    return (jnp.zeros(2), jnp.array(-1.0)), x * 0.0


def assert_close(a, b, **kw):
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-6, **kw)


# -- values ----------------------------------------------------------------------------------

@pytest.mark.parametrize("wrap", ["eager", "jit"])
@pytest.mark.parametrize("pred", [True, False])
def test_cond_matches_lax_cond_with_states_written_by_one_branch(pred, wrap):
    m = Model()
    w, a, b = m.w.value, *m.values()
    (a_ref, b_ref), out_ref = jax.lax.cond(pred, lambda x: ref_up(w, a, b, x),
                                           lambda x: ref_down(w, a, b, x), 1.5)
    run = lambda p, x: cond(p, m.up, m.down, x)
    out = (jit(run) if wrap == "jit" else run)(jnp.asarray(pred) if wrap == "jit" else pred, 1.5)
    assert_close((out, m.values()), (out_ref, (a_ref, b_ref)))


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 7])
def test_switch_matches_lax_switch_and_clamps(index):
    m = Model()
    w, a, b = m.w.value, *m.values()
    refs = [ref_up, ref_down, ref_reset]
    (a_ref, b_ref), out_ref = jax.lax.switch(index, [lambda x, f=f: f(w, a, b, x) for f in refs], 2.0)
    out = jit(lambda i, x: switch(i, [m.up, m.down, m.reset], x))(index, 2.0)
    assert_close((out, m.values()), (out_ref, (a_ref, b_ref)))


@pytest.mark.parametrize("x", [7.0, 3.0, -1.0, 0.0])
def test_ifelse_first_true_wins_and_last_is_default(x):
    for traced in (False, True):
        m = Model()
        w, a, b = m.w.value, *m.values()
        # first true wins: x > 5 also satisfies x > 0; nothing true -> last branch
        k = 0 if x > 5 else 1 if x > 0 else 2
        (a_ref, b_ref), out_ref = [ref_up, ref_down, ref_reset][k](w, a, b, x)

        def run(x):
            return ifelse([x > 5, x > 0, x < -100], [m.up, m.down, m.reset], x)

        out = jit(run)(x) if traced else run(x)
        assert_close((out, m.values()), (out_ref, (a_ref, b_ref)))


def test_ifelse_check_cond():
    m = Model()
    before = m.values()
    with pytest.raises(ValueError, match="exactly one true condition"):
        ifelse([True, True], [m.up, m.down], 1.0, check_cond=True)
    assert_close(m.values(), before)
    assert float(ifelse([False, True], [m.up, m.down], 1.0, check_cond=True)) == \
        pytest.approx(2 * (0.5 + 0.4))
    run = jit(lambda x: ifelse([x > 0, x > 1], [m.up, m.down], x, check_cond=True))
    jax.block_until_ready(run(0.5))          # exactly one true: fine
    before = m.values()
    with pytest.raises(Exception, match="exactly one true condition"):
        jax.block_until_ready(run(2.0))
    assert_close(m.values(), before)


_PROPERTY_MODEL = Model()
_REF_BRANCHES = [lambda w, a, b, x, f=f: f(w, a, b, x) for f in (ref_up, ref_down, ref_reset)]


@settings(max_examples=10, deadline=None)
@given(index=st.integers(-2, 4), x=st.floats(-3, 3), a0=st.floats(-2, 2))
def test_property_switch_equals_lax_switch(index, x, a0):
    m = _PROPERTY_MODEL            # one model (one compiled switch) for every example
    m.a.value, m.b.value = jnp.array([a0, 1.0]), jnp.array(0.5)
    w, a, b = m.w.value, *m.values()
    (a_ref, b_ref), out_ref = jax.jit(jax.lax.switch, static_argnums=1)(
        index, tuple(_REF_BRANCHES), w, a, b, x)
    out = switch(index, [m.up, m.down, m.reset], x)
    assert_close((out, m.values()), (out_ref, (a_ref, b_ref)))


def test_single_branch_and_concrete_paths_under_disable_jit():
    m = Model()
    assert float(switch(5, [m.down], 1.0)) == pytest.approx(2 * (0.5 + 0.4))
    with jax.disable_jit():
        m2 = Model()
        _ = cond(1, m2.up, m2.down, 1.0)            # numbers are predicates too
        out2 = switch(1, [m2.up, m2.down], 1.0)
    (a_ref, b_ref), _ = ref_up(m.w.value, jnp.array([1.0, 2.0]), jnp.array(0.5), 1.0)
    (a_ref, b_ref), out2_ref = ref_down(m.w.value, a_ref, b_ref, 1.0)
    assert_close((out2, m2.values()), (out2_ref, (a_ref, b_ref)))


# -- gradients -------------------------------------------------------------------------------

@pytest.mark.parametrize("pred", [True, False])
def test_grad_through_cond_wrt_state_and_argument(pred):
    m = Model()

    def loss(x):
        return cond(pred, m.up, m.down, x) ** 2 + m.b.value

    def loss_ref(w, x):
        (a, b), out = jax.lax.cond(pred, lambda x: ref_up(w, *m.values(), x),
                                   lambda x: ref_down(w, *m.values(), x), x)
        return out ** 2 + b

    g_ref = jax.grad(loss_ref, argnums=(0, 1))(m.w.value, 0.7)
    g = jit(grad(loss, grad_states=m.w, argnums=0))(0.7)
    assert_close(g, g_ref)


def test_loops_inside_branches_and_branches_inside_loops():
    m = Model()
    xs = jnp.linspace(-1, 1, 5)

    def body(x):
        return cond(x > 0, m.up, m.down, x)

    ys = jit(lambda xs: for_loop(body, xs))(xs)

    def ref_body(c, x):
        a, b = c
        return jax.lax.cond(x > 0, lambda x: ref_up(m.w.value, a, b, x),
                            lambda x: ref_down(m.w.value, a, b, x), x)

    (a, b), ys_ref = jax.lax.scan(ref_body, (jnp.array([1.0, 2.0]), jnp.array(0.5)), xs)
    assert_close((ys, m.values()), (ys_ref, (a, b)))

    m2 = Model()
    out = switch(1, [lambda xs: jnp.float32(0.0), lambda xs: for_loop(m2.up, xs).sum()], xs)
    (a, b), ys_ref = jax.lax.scan(lambda c, x: ref_up(m2.w.value, *c, x),
                                  (jnp.array([1.0, 2.0]), jnp.array(0.5)), xs)
    assert_close((out, m2.values()), (ys_ref.sum(), (a, b)))


# -- errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["shape", "dtype", "tree"])
@pytest.mark.parametrize("where", ["cond", "switch", "jit"])
def test_branch_changing_a_state_type_names_it_and_changes_nothing(where, bad):
    m = Model()
    new = {"shape": lambda: jnp.zeros(3), "dtype": lambda: jnp.zeros(2, jnp.int32),
           "tree": lambda: (jnp.zeros(2), jnp.zeros(2))}[bad]

    def broken(x):
        m.b.value = m.b.value + 1.0          # a valid write, undone by the error
        m.a.value = new()
        return x

    runs = {"cond": lambda: cond(True, broken, m.down, 1.0),
            "switch": lambda: switch(0, [m.up, m.down, broken], 1.0),
            "jit": jit(lambda: cond(jnp.array(False), m.up, broken, 1.0))}
    before = m.values()
    with pytest.raises(brainx.StateTypeError) as err:
        runs[where]()
    msg = str(err.value)
    assert "State(f32[2], name='a')" in msg and "before float32[2]" in msg
    assert {"shape": "after float32[3]", "dtype": "after int32[2]",
            "tree": "(float32[2], float32[2])"}[bad] in msg
    assert_close(m.values(), before)


def test_bad_arguments_are_refused_before_tracing():
    m = Model()
    traced = []
    f = lambda x: traced.append(1) or x
    with pytest.raises(TypeError, match="scalar"):
        cond(jnp.array([True, False]), f, f, 1.0)
    with pytest.raises(TypeError, match="callable"):
        cond(True, f, 3, 1.0)
    with pytest.raises(TypeError, match="integer"):
        switch(1.5, [f, f], 1.0)
    with pytest.raises(ValueError, match="empty"):
        switch(0, [], 1.0)
    with pytest.raises(ValueError, match="one condition per branch"):
        ifelse([True], [f, f], 1.0)
    assert not traced
    before = m.values()
    with pytest.raises(TypeError):          # branch outputs of different types: JAX's error
        cond(True, m.up, lambda x: jnp.zeros(3), 1.0)
    assert_close(m.values(), before)


@pytest.mark.counts_traces
def test_cond_and_switch_outside_jit_compile_once():
    m = Model()
    traces = []

    def up(x):
        traces.append(1)
        return m.up(x)

    compiles = []
    listener = lambda name, *a, **k: compiles.append(name) if name.endswith(
        "backend_compile_duration") else None
    xs = [jnp.float32(v) for v in (0.5, 1.5, -2.0)]
    cond(True, up, m.down, xs[0])
    switch(1, [up, m.down, m.reset], xs[0])
    n_traces = len(traces)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        w, a, b = m.w.value, *m.values()
        out1 = cond(False, up, m.down, xs[1])
        out2 = cond(True, up, m.down, xs[2])
        out3 = switch(0, [up, m.down, m.reset], xs[1])
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert not compiles and len(traces) == n_traces
    (a, b), ref1 = ref_down(w, a, b, xs[1])
    (a, b), ref2 = ref_up(w, a, b, xs[2])
    (a, b), ref3 = ref_up(w, a, b, xs[1])
    assert_close(((out1, out2, out3), m.values()), ((ref1, ref2, ref3), (a, b)))


def test_switch_under_a_raw_jax_trace_is_a_cond_of_that_trace():
    # outside every brainx transform but inside jax.make_jaxpr: no compiled jit around the
    # switch (as brainstate), so the outer jaxpr holds the cond itself
    def f(x, i):
        return switch(i, [jnp.sin, jnp.cos, jnp.tanh], x)

    eqns = jax.make_jaxpr(jax.grad(f))(0.5, 1).jaxpr.eqns
    assert [e.primitive.name for e in eqns].count("cond") == 2     # forward and backward
    assert float(jax.grad(f)(0.5, 1)) == pytest.approx(-np.sin(0.5))
