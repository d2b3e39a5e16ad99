"""scan, for_loop, while_loop and bounded_while_loop against plain JAX with explicit state passing."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import brainx
from brainx._jax.names import scan_num_consts_carry
from brainx.transform import (
    bounded_while_loop, checkpoint, cond, for_loop, grad, jit, scan, while_loop,
)

from loop_models import (  # noqa: E402 - shared with test_loop_tools.py
    N, CompileCounter, Net, assert_tree_close, assert_unchanged, inputs, ref_for_loop, ref_scan, ref_step, snapshot,
)

# lengths 1, primes and powers of two, forwards and backwards
LENGTHS = [(1, False), (1, True), (2, True), (7, False), (8, True), (13, True), (16, False)]


# -- values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("length,reverse", LENGTHS)
def test_for_loop_matches_lax_scan(length, reverse):
    net, xs = Net(), inputs(length)
    (v, count), ys_ref = ref_for_loop(net.params(), net.states(), xs, reverse)
    ys = for_loop(net.step, xs, reverse=reverse)
    assert_tree_close(ys, ys_ref)
    assert_tree_close(net.states(), (v, count))


@pytest.mark.parametrize("length,reverse", [(1, True), (7, False), (16, True)])
def test_scan_matches_lax_scan_and_under_jit(length, reverse):
    xs = inputs(length)
    ref = ref_scan(Net().params(), Net().states(), jnp.float32(0.5), xs, reverse)
    for wrap in (lambda f: f, jit):
        net = Net()
        run = wrap(lambda acc, xs: scan(net.scan_step, acc, xs, reverse=reverse))
        acc, vs = run(jnp.float32(0.5), xs)
        assert_tree_close((net.states(), acc, vs), ref)


def test_for_loop_several_xs_pytrees_and_length_without_xs():
    net = Net()
    xs = {"a": inputs(5), "b": inputs(5, seed=2)}
    ys = for_loop(lambda x, t: net.step(x["a"] * t + x["b"]), xs, jnp.arange(5.0))
    ref_net = Net()
    (_, _), ys_ref = ref_for_loop(ref_net.params(), ref_net.states(),
                                  xs["a"] * jnp.arange(5.0)[:, None] + xs["b"])
    assert_tree_close(ys, ys_ref)
    # no xs: length gives the number of steps
    net = Net()
    ys = for_loop(lambda: net.step(jnp.ones(N)), length=4)
    (_, count), ys_ref = ref_for_loop(Net().params(), Net().states(), jnp.ones((4, N)))
    assert_tree_close(ys, ys_ref)
    assert int(net.count.value) == 4


def test_read_only_states_are_constants_not_carried():
    net = Net()
    jaxpr, states = brainx.transform.make_jaxpr(lambda xs: for_loop(net.step, xs))(inputs(4))
    (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
    assert scan_num_consts_carry(eqn.params) == (2, 2)  # w and b constant; v and count carried
    assert set(states) == {net.v, net.count, net.w, net.b}


def test_state_values_are_read_fresh_on_every_call():
    net, xs = Net(), inputs(4)
    for_loop(net.step, xs)
    net.v.value = jnp.full(N, 0.3)
    net.w.value = net.w.value * 2
    ys = for_loop(net.step, xs)
    _, ys_ref = ref_for_loop(net.params(), (jnp.full(N, 0.3), jnp.int32(4)), xs)
    assert_tree_close(ys, ys_ref)


# -- gradients ------------------------------------------------------------------------------

def _loss_ref(params, xs, reverse=False):
    states = (jnp.zeros(N), jnp.int32(0))
    (v, _), ys = ref_for_loop(params, states, xs, reverse)
    return jnp.sum(ys ** 2) + jnp.sum(v)


@pytest.mark.parametrize("length,reverse,body", [(1, False, "plain"), (8, False, "checkpoint"),
                                                 (13, True, "plain"), (13, True, "checkpoint")])
def test_grad_through_for_loop(length, reverse, body):
    net, xs = Net(), inputs(length)
    step = net.step if body == "plain" else checkpoint(net.step)

    def loss(xs):
        ys = for_loop(step, xs, reverse=reverse)
        return jnp.sum(ys ** 2) + jnp.sum(net.v.value)

    g_ref = jax.grad(_loss_ref, argnums=(0, 1))(net.params(), xs, reverse)
    for wrap in (lambda f: f, jit):
        net.v.value, net.count.value = jnp.zeros(N), jnp.int32(0)
        (gw, gb), gx = wrap(grad(loss, grad_states=(net.w, net.b), argnums=0))(xs)
        assert_tree_close(((gw, gb), gx), g_ref, rtol=1e-4, atol=1e-5)
        # the states hold the primal values of the loop afterwards
        (v, count), _ = ref_for_loop(net.params(), (jnp.zeros(N), jnp.int32(0)), xs, reverse)
        assert_tree_close(net.states(), (v, count))


def test_grad_through_scan_carry_and_states():
    net, xs = Net(), inputs(6)

    def loss(acc0):
        acc, vs = scan(net.scan_step, acc0, xs)
        return acc + vs.sum()

    def loss_ref(params, acc0):
        _, acc, vs = ref_scan(params, (jnp.zeros(N), jnp.int32(0)), acc0, xs)
        return acc + vs.sum()

    g_ref = jax.grad(loss_ref, argnums=(0, 1))(net.params(), 0.25)
    g = grad(loss, grad_states=(net.w, net.b), argnums=0)(0.25)
    assert_tree_close(g, g_ref, rtol=1e-4, atol=1e-5)


def test_nested_loops_and_checkpointed_inner_loop():
    net, xs = Net(), inputs(12).reshape(3, 4, N)

    def trial(x_trial):
        net.v.value = jnp.zeros(N)          # reset per trial, written in the outer loop too
        return for_loop(checkpoint(net.step), x_trial).mean()

    def loss():
        return jnp.sum(for_loop(trial, xs) ** 2)

    def loss_ref(params):
        def outer(count, x_trial):
            (v, count), ys = ref_for_loop(params, (jnp.zeros(N), count), x_trial)
            return count, (ys.mean(), v)
        count, (m, vs) = jax.lax.scan(outer, jnp.int32(0), xs)
        return jnp.sum(m ** 2), (count, vs[-1])

    (gw, gb), (count, v) = jax.grad(loss_ref, has_aux=True)(net.params())
    g = jit(grad(loss, grad_states=(net.w, net.b)))()
    assert_tree_close(g, (gw, gb), rtol=1e-4, atol=1e-5)
    assert int(net.count.value) == int(count) == 12
    assert_tree_close(net.v.value, v)


def test_cond_inside_loop_and_loop_inside_cond():
    net, xs = Net(), inputs(7)

    def step(t, x):
        return cond(t % 2 == 0, net.step, lambda x: 0.0 * x.sum(), x)

    ys = jit(lambda xs: for_loop(step, jnp.arange(7), xs))(xs)

    def ref_body(states, tx):
        t, x = tx
        return jax.lax.cond(t % 2 == 0, lambda s: ref_step(net.params(), s, x),
                            lambda s: (s, 0.0 * x.sum()), states)

    states, ys_ref = jax.lax.scan(ref_body, (jnp.zeros(N), jnp.int32(0)), (jnp.arange(7), xs))
    assert_tree_close(ys, ys_ref)
    assert_tree_close(net.states(), states)

    net2 = Net()
    run = jit(lambda p, xs: cond(p, lambda xs: for_loop(net2.step, xs).sum(),
                                 lambda xs: jnp.float32(0.0), xs))
    assert float(run(False, xs)) == 0.0
    assert int(net2.count.value) == 0
    out = run(True, xs)
    (v, count), ys_ref = ref_for_loop(net2.params(), (jnp.zeros(N), jnp.int32(0)), xs)
    assert_tree_close((out, net2.states()), (ys_ref.sum(), (v, count)))


@pytest.mark.parametrize("loop", ["while_loop", "bounded_while_loop", "checkpointed_while_loop"])
def test_disable_jit_with_a_batched_predicate_falls_back_to_the_primitive(loop):
    # Under vmap the predicate is a tracer Python cannot branch on: the loop
    # is then run as a primitive, as jax.lax.while_loop does.
    kw = {"max_steps": 10} if loop == "bounded_while_loop" else {}
    run = getattr(brainx.transform, loop)
    init = jnp.array([0, 1, 2])
    want = jax.vmap(lambda v: jax.lax.while_loop(lambda v: v < 3, lambda v: v + 1, v))(init)
    with jax.disable_jit():
        out = jax.vmap(lambda v: run(lambda v: v < 3, lambda v: v + 1, v, **kw))(init)
    np.testing.assert_array_equal(out, want)

    # With a state, through brainx's vmap (a raw jax.vmap may not write states).
    s = brainx.State(jnp.zeros(3))

    def body(v):
        s.value = s.value + 1.0
        return v + 1

    with jax.disable_jit():
        out = brainx.transform.vmap(lambda v: run(lambda v: v < 3, body, v, **kw),
                                    in_states={0: s}, out_states={0: s})(init)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(s.value, [3.0, 2.0, 1.0])


def test_disable_jit_runs_the_same_loop_in_python():
    xs = inputs(5)
    net = Net()
    with jax.disable_jit():
        ys = for_loop(net.step, xs, reverse=True)
        acc, _ = scan(lambda a, x: (a + x.sum(), None), 0.0, xs)
    (v, count), ys_ref = ref_for_loop(Net().params(), Net().states(), xs, reverse=True)
    assert_tree_close((ys, net.states()), (ys_ref, (v, count)))
    assert np.isclose(float(acc), float(xs.sum()), rtol=1e-5)


_PROPERTY_NET = Net()


@settings(max_examples=6, deadline=None)
@given(length=st.integers(1, 9), reverse=st.booleans(), unroll=st.sampled_from([1, 2, 3, True]),
       seed=st.integers(0, 2 ** 16))
def test_property_for_loop_equals_lax_scan(length, reverse, unroll, seed):
    net, fresh = _PROPERTY_NET, Net(seed)   # one net (one compiled loop per length/options)
    net.w.value, net.b.value = fresh.w.value, fresh.b.value
    net.v.value, net.count.value = jnp.full(N, 0.1), jnp.int32(seed)
    xs = inputs(length, seed + 1)
    (v, count), ys_ref = jax.jit(ref_for_loop, static_argnums=3)(
        net.params(), net.states(), xs, reverse)
    ys = for_loop(net.step, xs, reverse=reverse, unroll=unroll)
    assert_tree_close((ys, net.states()), (ys_ref, (v, count)), rtol=1e-4, atol=1e-5)


# -- while loops -------------------------------------------------------------------------------

def test_while_loop_matches_lax_while_loop():
    x = brainx.State(jnp.array(1.0), name="x")
    limit = brainx.ParamState(jnp.array(50.0), name="limit")

    def body(n):
        x.value = x.value * 1.7 + 0.1
        return n + 1

    run = lambda: while_loop(lambda n: x.value < limit.value, body, 0)
    n = run()

    def ref_cond(c):
        return c[1] < 50.0

    n_ref, x_ref = jax.lax.while_loop(ref_cond, lambda c: (c[0] + 1, c[1] * 1.7 + 0.1), (0, 1.0))
    assert (int(n), float(x.value)) == (int(n_ref), pytest.approx(float(x_ref)))
    x.value = jnp.array(1.0)
    assert int(jit(run)()) == int(n_ref)
    assert float(x.value) == pytest.approx(float(x_ref))


@pytest.mark.parametrize("max_steps,base", [(1, None), (13, None), (13, 3), (16, 2), (40, None),
                                            (40, 3), (40, 16)])
def test_bounded_while_loop_values_and_grad(max_steps, base):
    w = brainx.ParamState(jnp.array(1.3), name="w")
    h = brainx.HiddenState(jnp.array(0.5), name="h")

    def body(k):
        h.value = h.value * w.value + 0.2
        return k + 1

    def loss():
        k = bounded_while_loop(lambda k: h.value < 20.0, body, 0, max_steps=max_steps, base=base)
        return h.value ** 2 + k

    def loss_ref(w):          # the same recursion unrolled in Python
        hv, k = 0.5, 0
        while k < max_steps and float(jax.lax.stop_gradient(hv)) < 20.0:
            hv, k = hv * w + 0.2, k + 1
        return hv ** 2 + k, (hv, k)

    (val_ref, (h_ref, k_ref)) = loss_ref(1.3)
    g_ref = jax.grad(lambda w: loss_ref(w)[0])(1.3)
    g, val = jit(grad(loss, grad_states=w, return_value=True))()
    assert float(val) == pytest.approx(float(val_ref), rel=1e-5)
    assert float(h.value) == pytest.approx(float(h_ref), rel=1e-5)
    assert float(g) == pytest.approx(float(g_ref), rel=1e-4)


def test_bounded_while_loop_stops_like_while_loop_when_it_ends_early():
    x = brainx.State(jnp.array(3.0))
    body = lambda n: (setattr(x, "value", x.value + 2.0), n + 1)[1]
    n1 = bounded_while_loop(lambda n: x.value < 20.0, body, 0, max_steps=100)
    x1 = x.value
    x.value = jnp.array(3.0)
    n2 = while_loop(lambda n: x.value < 20.0, body, 0)
    assert int(n1) == int(n2) == 9 and float(x1) == float(x.value) == 21.0
    assert bounded_while_loop(lambda n: n < 5, lambda n: n + 1, 0, max_steps=0) == 0


# -- errors ------------------------------------------------------------------------------------

def _shape_change(net):
    def step(x):
        net.v.value = jnp.concatenate([net.v.value, x])[:N + 1]
        return x
    return step


BAD_WRITES = {
    "shape": lambda s: jnp.zeros(N + 1),
    "dtype": lambda s: s.value.astype(jnp.int32),
    "tree": lambda s: {"v": s.value},
}


@pytest.mark.parametrize("change", list(BAD_WRITES))
@pytest.mark.parametrize("loop", ["for_loop", "scan", "while_loop", "bounded", "jit_for_loop"])
def test_type_change_names_the_state_and_leaves_states_unchanged(loop, change):
    net = Net()
    write = BAD_WRITES[change]

    def bad_step(x):
        net.step(x)
        net.v.value = write(net.v)
        return x.sum()

    runs = {
        "for_loop": lambda: for_loop(bad_step, inputs(4)),
        "scan": lambda: scan(lambda c, x: (c, bad_step(x)), 0.0, inputs(4)),
        "while_loop": lambda: while_loop(lambda n: n < 3, lambda n: (bad_step(jnp.ones(N)), n + 1)[1], 0),
        "bounded": lambda: bounded_while_loop(lambda n: n < 3, lambda n: (bad_step(jnp.ones(N)), n + 1)[1], 0, max_steps=5),
        "jit_for_loop": jit(lambda: for_loop(bad_step, inputs(4))),
    }
    states = (net.v, net.count, net.w, net.b)
    before = snapshot(*states)
    with pytest.raises(brainx.StateTypeError) as err:
        runs[loop]()
    msg = str(err.value)
    assert "name='v'" in msg and "before float32[3]" in msg
    assert {"shape": "after float32[4]", "dtype": "after int32[3]", "tree": "{'v': float32[3]}"}[change] in msg
    assert_unchanged(states, before)


@pytest.mark.parametrize("loop", ["while_loop", "bounded_while_loop"])
def test_while_condition_may_not_write_states(loop):
    x = brainx.State(jnp.array(0.0), name="written_by_cond")
    y = brainx.State(jnp.array(5.0), name="y")

    def cond_fun(n):
        x.value = x.value + 1
        return n < 3

    def body(n):
        y.value = y.value + 1
        return n + 1

    run = {"while_loop": lambda: while_loop(cond_fun, body, 0),
           "bounded_while_loop": lambda: bounded_while_loop(cond_fun, body, 0, max_steps=4)}[loop]
    for wrap in (lambda f: f, jit, jax.disable_jit):
        with pytest.raises(ValueError, match="cond_fun writes State\\(f32\\[\\], name='written_by_cond'\\)"):
            if wrap is jax.disable_jit:
                with jax.disable_jit():
                    run()
            else:
                wrap(run)()
        if wrap is not jax.disable_jit:
            assert float(x.value) == 0.0 and float(y.value) == 5.0


def test_bad_arguments():
    with pytest.raises(ValueError, match="different leading axis sizes"):
        for_loop(lambda a, b: a, jnp.ones(3), jnp.ones(4))
    with pytest.raises(ValueError, match="disagrees"):
        for_loop(lambda a: a, jnp.ones(3), length=4)
    with pytest.raises(ValueError, match="no xs"):
        scan(lambda c, x: (c, x), 0.0, None)
    with pytest.raises(TypeError, match="must return a pair"):
        scan(lambda c, x: c, 0.0, jnp.ones(3))
    with pytest.raises(TypeError, match="must be callable"):
        for_loop(3, jnp.ones(3))
    with pytest.raises(ValueError, match="max_steps"):
        bounded_while_loop(lambda v: True, lambda v: v, 0, max_steps=-1)
    with pytest.raises(TypeError, match="pbar"):
        for_loop(lambda x: x, jnp.ones(3), pbar="yes")


def test_core_fix_transform_of_a_transform_keeps_its_own_attributes():
    # functools.update_wrapper used to copy grad(f).__dict__ into jit(grad(f)), so the jit
    # called f itself and returned its value instead of the gradient.
    w = brainx.ParamState(jnp.array([1.0, 2.0]))
    loss = lambda x: jnp.sum(w.value * x) ** 2
    g = jit(grad(loss, grad_states=w))(jnp.ones(2))
    assert g.shape == (2,) and np.allclose(g, [6.0, 6.0])
    assert float(checkpoint(jit(loss))(jnp.ones(2))) == 9.0


def test_weakly_typed_state_keeps_its_type_so_the_loop_compiles_once():
    total = brainx.State(0.0, name="total")        # a Python float: weakly typed
    xs = jnp.arange(4.0)

    def step(x):
        total.value = total.value + x
        return total.value

    ys1 = for_loop(step, xs)
    with CompileCounter() as again:
        ys2 = for_loop(step, xs)
    assert again.count == 0
    np.testing.assert_allclose(ys1, jnp.cumsum(xs))
    np.testing.assert_allclose(ys2, jnp.cumsum(xs) + 6.0)
    assert float(total.value) == 12.0 and total.value.dtype == jnp.float32


def test_an_exception_in_the_step_leaves_every_state_unchanged():
    net = Net()
    for_loop(net.step, inputs(3))
    states = (net.v, net.count, net.w, net.b)
    before = snapshot(*states)

    def failing(x):
        net.step(x)
        raise RuntimeError("user bug")

    for run in (lambda: for_loop(failing, inputs(3)),
                jit(lambda: scan(lambda c, x: (c, failing(x)), 0.0, inputs(3))),
                lambda: while_loop(lambda n: n < 2, lambda n: failing(jnp.ones(N)), 0),
                lambda: cond(True, failing, net.step, jnp.ones(N))):
        with pytest.raises(RuntimeError, match="user bug"):
            run()
        assert_unchanged(states, before)
    assert bounded_while_loop(lambda n: n < 3, lambda n: n + 1, 0, max_steps=np.int64(5)) == 3


def test_core_fix_discovery_takes_abstract_arguments():
    # A loop discovers its step with the type of one slice of xs (there may be no slice at all),
    # so StatefulFunction discovery must trace a jax.ShapeDtypeStruct, not pass it through.
    h = brainx.State(jnp.zeros(2))

    def step(x):
        h.value = h.value + x
        return x * 2

    sf = brainx.transform.StatefulFunction(step)
    sig = sf.discover((), (jax.ShapeDtypeStruct((2,), jnp.float32),), {})
    assert sig.states == (h,) and sig.written == (True,)
    assert for_loop(step, jnp.zeros((0, 2))).shape == (0, 2)


def test_a_body_closing_over_outer_tracers_is_copied_with_its_source_lines():
    # Under jit(grad(...)) the weight a loop body reads is a tracer of the outer traces: it is
    # made a constant of lax.scan's trace and the body's equations copied, keeping the line
    # each came from (errors, debug_nan and profiles name the user's line).
    w = brainx.ParamState(jnp.array([0.5, -1.0, 2.0]))
    h = brainx.HiddenState(jnp.zeros(3))
    xs = jnp.linspace(0.0, 1.0, 12).reshape(4, 3)

    def step(x):
        h.value = jnp.tanh(h.value * w.value + x)  # the line the body's equations name
        return h.value

    def loss():
        h.value = jnp.zeros(3)
        return for_loop(step, xs).sum()

    def loss_ref(w):
        def body(v, x):
            v = jnp.tanh(v * w + x)
            return v, v
        return jax.lax.scan(body, jnp.zeros(3), xs)[1].sum()

    g = jit(grad(loss, grad_states=w))()
    np.testing.assert_allclose(g, jax.grad(loss_ref)(w.value), rtol=1e-6)
    np.testing.assert_array_equal(h.value, jax.lax.scan(
        lambda v, x: (jnp.tanh(v * w.value + x),) * 2, jnp.zeros(3), xs)[0])

    from jax._src import source_info_util
    jaxpr = jax.make_jaxpr(lambda: grad(loss, grad_states=w)())()
    bodies = [e.params["jaxpr"].jaxpr for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
    assert bodies
    lines = {source_info_util.summarize(e.source_info) for b in bodies for e in b.eqns
             if e.primitive.name in ("tanh", "mul")}
    assert any("test_loops.py" in line for line in lines), lines


def test_a_copied_jaxpr_keeps_the_weak_types_binding_would_give():
    # A jaxpr traced for a weakly typed input and run on a strongly typed one is bound, not
    # copied: its recorded output would stay weak, and a bfloat16 operand would then win.
    from brainx.transform.core.jaxpr_builder import eval_jaxpr
    traced = jax.make_jaxpr(lambda x: x * 2.0)(1.0)
    assert traced.jaxpr.invars[0].aval.weak_type
    strong = jnp.ones((), jnp.float32)

    def f(y):
        (out,) = eval_jaxpr(traced.jaxpr, traced.consts, strong)
        return out + jnp.ones((), jnp.bfloat16) + 0 * y

    assert jax.jit(f)(1.0).dtype == jnp.float32 == f(1.0).dtype
