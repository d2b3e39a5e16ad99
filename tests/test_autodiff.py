"""The autodiff family against JAX applied to the same computation with explicit state passing."""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brainx
from brainx import transform as bt

KEY = jax.random.PRNGKey(0)


def close(a, b, **kw):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, **kw), a, b)


class Net:
    """h <- tanh(W x + b + h); loss = sum(h**2); counts its calls."""

    def __init__(self, n=3, m=2, seed=0):
        k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
        self.W = brainx.ParamState(jax.random.normal(k1, (n, m)), name="W")
        self.b = brainx.ParamState(jax.random.normal(k2, (n,)), name="b")
        self.h = brainx.HiddenState(jnp.full((n,), 0.1), name="h")
        self.calls = brainx.State(jnp.zeros(()), name="calls")

    def loss(self, x, scale=1.0):
        self.calls.value = self.calls.value + 1
        self.h.value = jnp.tanh(self.W.value @ x + self.b.value + self.h.value)
        return scale * jnp.sum(self.h.value ** 2)

    def values(self):
        return [s.value for s in (self.W, self.b, self.h, self.calls)]


def pure_loss(W, b, h, x, scale=1.0):
    """The same step with explicit state: returns (loss, new h)."""
    h = jnp.tanh(W @ x + b + h)
    return scale * jnp.sum(h ** 2), h


X = jnp.array([0.5, -1.0])


def expected_after(net, x=X):
    _, h = pure_loss(net.W.value, net.b.value, net.h.value, x)
    return h, net.calls.value + 1


# --- grad -----------------------------------------------------------------------------

def test_grad_argnums_int_and_tuple():
    net = Net()
    W, b, h = net.W.value, net.b.value, net.h.value
    g = bt.grad(net.loss)(X, 2.0)
    close(g, jax.grad(lambda x: pure_loss(W, b, h, x, 2.0)[0])(X))
    net.h.value = h
    g = bt.grad(net.loss, argnums=(0, 1))(X, 2.0)
    close(g, jax.grad(lambda x, s: pure_loss(W, b, h, x, s)[0], argnums=(0, 1))(X, 2.0))
    assert isinstance(g, tuple) and len(g) == 2


@pytest.mark.parametrize("form", ["single", "list", "tuple", "dict"])
def test_grad_states_structures(form):
    net = Net()
    W, b, h = net.W.value, net.b.value, net.h.value
    gW, gb = jax.grad(lambda W, b: pure_loss(W, b, h, X)[0], argnums=(0, 1))(W, b)
    spec = {"single": net.W, "list": [net.W, net.b], "tuple": (net.W, net.b),
            "dict": {"w": net.W, "b": net.b}}[form]
    g = bt.grad(net.loss, grad_states=spec)(X)
    want = {"single": gW, "list": [gW, gb], "tuple": (gW, gb), "dict": {"w": gW, "b": gb}}[form]
    assert jax.tree.structure(g) == jax.tree.structure(want)
    close(g, want)


@pytest.mark.parametrize("has_aux", [False, True])
@pytest.mark.parametrize("return_value", [False, True])
@pytest.mark.parametrize("with_args", [False, True])
def test_grad_result_layout(has_aux, return_value, with_args):
    net = Net()
    W, b, h = net.W.value, net.b.value, net.h.value

    def f(x):
        loss = net.loss(x)
        return (loss, net.h.value * 2) if has_aux else loss

    def pure(W, x):
        loss, h_new = pure_loss(W, b, h, x)
        return loss, h_new * 2

    (gW, gx), _ = jax.grad(pure, argnums=(0, 1), has_aux=True)(W, X)
    value, aux = pure(W, X)
    out = bt.grad(f, grad_states={"W": net.W}, argnums=0 if with_args else None,
                  has_aux=has_aux, return_value=return_value)(X)
    grads = ({"W": gW}, gx) if with_args else {"W": gW}
    want = (grads,) + ((value,) if return_value else ()) + ((aux,) if has_aux else ())
    want = want[0] if len(want) == 1 else want
    assert jax.tree.structure(out) == jax.tree.structure(want)
    close(out, want)


def test_grad_writes_back_primal_values():
    net = Net()
    h_new, calls = expected_after(net)
    bt.grad(net.loss, grad_states=[net.W, net.h])(X)
    close(net.h.value, h_new)
    assert float(net.calls.value) == float(calls)


def test_grad_of_a_state_that_is_also_written():
    net = Net()
    W, b, h = net.W.value, net.b.value, net.h.value
    g = bt.grad(net.loss, grad_states=net.h)(X)
    close(g, jax.grad(lambda h: pure_loss(W, b, h, X)[0])(h))
    close(net.h.value, pure_loss(W, b, h, X)[1])


def test_nested_grad():
    w = brainx.ParamState(jnp.array(1.5))
    def f(x):
        return jnp.sin(w.value * x) * x ** 2
    d2x = bt.grad(bt.grad(f))(0.7)
    assert np.allclose(d2x, jax.grad(jax.grad(lambda x: jnp.sin(1.5 * x) * x ** 2))(0.7))
    # d/dw of d/dx
    dwdx = bt.grad(lambda x: bt.grad(f)(x), grad_states=w)(0.7)
    want = jax.grad(lambda w_: jax.grad(lambda x: jnp.sin(w_ * x) * x ** 2)(0.7))(1.5)
    assert np.allclose(dwdx, want)


def test_grad_under_jit_matches_and_threads_states():
    net, ref = Net(), Net()
    step = bt.jit(lambda x: bt.grad(ref.loss, grad_states=[ref.W, ref.b], argnums=0)(x))
    for _ in range(3):
        W, b, h = net.W.value, net.b.value, net.h.value
        (gW, gb), gx = step(X)
        want = jax.grad(lambda W, b, x: pure_loss(W, b, h, x)[0], argnums=(0, 1, 2))(W, b, X)
        close((gW, gb, gx), want)
        net.h.value = pure_loss(W, b, h, X)[1]
        close(ref.h.value, net.h.value)
    assert float(ref.calls.value) == 3.0


def test_grad_through_checkpoint_matches_plain():
    net = Net()
    ck = bt.checkpoint(net.loss)
    before = net.values()
    g_plain = bt.grad(net.loss, grad_states=[net.W, net.b], argnums=0)(X)
    after_plain = net.values()
    for s, v in zip((net.W, net.b, net.h, net.calls), before):
        s.value = v
    g_ck = bt.grad(ck, grad_states=[net.W, net.b], argnums=0)(X)
    close(g_ck, g_plain)
    close(net.values(), after_plain)


def test_grad_of_scan_over_checkpointed_step():
    """BPTT with lax.scan inside grad; the step is a brainx.checkpoint writing a state."""
    W = brainx.ParamState(jnp.eye(2) * 0.5, name="W")
    h = brainx.HiddenState(jnp.zeros(2), name="h")

    @bt.checkpoint
    def step(x):
        h.value = jnp.tanh(W.value @ h.value + x)
        return jnp.sum(h.value)

    xs = jnp.linspace(-1, 1, 10).reshape(5, 2)

    def loss():
        def body(carry, x):
            h.value = carry
            y = step(x)
            return h.value, y
        final, ys = jax.lax.scan(body, h.value, xs)
        h.value = final
        return jnp.sum(ys ** 2)

    def pure(W_, h0):
        def body(c, x):
            c = jnp.tanh(W_ @ c + x)
            return c, jnp.sum(c)
        final, ys = jax.lax.scan(jax.checkpoint(body), h0, xs)
        return jnp.sum(ys ** 2), final

    (want_g, want_h) = jax.grad(pure, has_aux=True)(W.value, h.value)
    g = bt.jit(bt.grad(loss, grad_states=W))()
    close(g, want_g)
    close(h.value, want_h)


def test_grad_errors_leave_states_unchanged():
    net = Net()
    unused = brainx.ParamState(jnp.ones(2), name="unused")
    before = net.values()
    with pytest.raises(ValueError, match="unused"):
        bt.grad(net.loss, grad_states=[net.W, unused])(X)
    close(net.values(), before)
    with pytest.raises(ValueError, match="argnums"):
        bt.grad(net.loss, argnums=3)(X)
    close(net.values(), before)
    with pytest.raises(TypeError, match="has_aux"):
        bt.grad(net.loss, has_aux=True)(X)
    close(net.values(), before)
    with pytest.raises(TypeError, match="grad_states"):
        bt.grad(net.loss, grad_states=[net.W, jnp.ones(2)])
    with pytest.raises(TypeError, match="Quantity"):
        bt.grad(lambda x: net.loss(x) * u.mV, grad_states=net.W)(X)
    close(net.values(), before)


def test_check_states_false_gives_zeros():
    net = Net()
    unused = brainx.ParamState(jnp.ones(2), name="unused")
    gW, gu = bt.grad(net.loss, grad_states=[net.W, unused], check_states=False)(X)
    assert gu.shape == (2,) and not np.any(gu)
    assert np.any(gW)


def test_grad_sees_state_added_after_first_call():
    """The cached state set is rediscovered when a grad state appears later."""
    a = brainx.ParamState(jnp.array(2.0))
    b = brainx.ParamState(jnp.array(3.0))
    use_b = [False]
    def f(x):
        return a.value * x + (b.value * x if use_b[0] else 0.0)
    assert float(bt.grad(f)(1.0)) == 2.0
    use_b[0] = True
    g = bt.grad(f, grad_states=b)
    assert float(g(1.0)) == 1.0


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(-2, 2), min_size=3, max_size=3),
       st.lists(st.floats(-2, 2), min_size=3, max_size=3))
def test_grad_property(wv, xv):
    w = brainx.ParamState(jnp.array(wv))
    x = jnp.array(xv)
    def f(x):
        return jnp.sum(jnp.sin(w.value * x) + w.value ** 2)
    gw, gx = bt.grad(f, grad_states=w, argnums=0)(x)
    want = jax.grad(lambda w_, x_: jnp.sum(jnp.sin(w_ * x_) + w_ ** 2), argnums=(0, 1))(
        jnp.array(wv), x)
    close((gw, gx), want)


# --- vector_grad, jacrev, jacfwd, hessian -------------------------------------------------

def _vector_pure(W, b, h, x):
    h = jnp.tanh(W @ x + b + h)
    return h * x.sum(), h


def _vector_stateful(net):
    def f(x):
        net.h.value = jnp.tanh(net.W.value @ x + net.b.value + net.h.value)
        return net.h.value * x.sum()
    return f


@pytest.mark.parametrize("name", ["vector_grad", "jacrev", "jacobian", "jacfwd"])
def test_first_order_family_matches_jax(name):
    net = Net()
    W, b, h = net.W.value, net.b.value, net.h.value
    pure = lambda W, b, x: _vector_pure(W, b, h, x)[0]  # noqa: E731
    if name == "vector_grad":
        def jax_t(f, argnums):
            def run(*args):
                y, vjp_fn = jax.vjp(f, *args)
                return tuple(vjp_fn(jnp.ones_like(y))[i] for i in argnums)
            return run
    else:
        jax_t = {"jacrev": jax.jacrev, "jacobian": jax.jacrev, "jacfwd": jax.jacfwd}[name]
    want = jax_t(pure, argnums=(0, 1, 2))(W, b, X)
    (gW, gb), gx = getattr(bt, name)(_vector_stateful(net), grad_states=[net.W, net.b],
                                     argnums=0)(X)
    close((gW, gb, gx), tuple(want))
    close(net.h.value, _vector_pure(W, b, h, X)[1])


@pytest.mark.parametrize("name", ["jacrev", "jacfwd", "vector_grad"])
def test_first_order_family_aux_and_value(name):
    w = brainx.ParamState(jnp.array([1.0, 2.0]))
    def f(x):
        y = w.value * x ** 2
        return y, {"m": y.mean()}
    grads, value, aux = getattr(bt, name)(f, grad_states=w, has_aux=True, return_value=True)(3.0)
    close(value, jnp.array([9.0, 18.0]))
    close(aux["m"], 13.5)
    if name == "vector_grad":
        close(grads, jnp.array([9.0, 9.0]))
    else:
        close(grads, jnp.diag(jnp.array([9.0, 9.0])))


def test_hessian_matches_jax_with_states_and_args():
    a = brainx.ParamState(jnp.array([1.0, 2.0]), name="a")
    c = brainx.ParamState(jnp.array(3.0), name="c")
    def f(x):
        return jnp.sum(a.value ** 2 * x) * c.value ** 2 + jnp.sum(x ** 3) + jnp.sum(a.value ** 3)
    def pure(av, cv, x):
        return jnp.sum(av ** 2 * x) * cv ** 2 + jnp.sum(x ** 3) + jnp.sum(av ** 3)
    x = jnp.array([1.0, -2.0])
    H = jax.hessian(pure, argnums=(0, 1, 2))(a.value, c.value, x)
    # states only: H[s1][s2] in the structure of grad_states
    Hs = bt.hessian(f, grad_states={"a": a, "c": c})(x)
    close(Hs, {"a": {"a": H[0][0], "c": H[0][1]}, "c": {"a": H[1][0], "c": H[1][1]}})
    # args only: jax's layout
    close(bt.hessian(f)(x), H[2][2])
    # both: ((H_ss, H_sa), (H_as, H_aa)), each state block again (states, args)
    (Hss_a, Hss_c), Hxx = bt.hessian(f, grad_states=[a, c], argnums=0)(x)
    close(Hss_a, ([H[0][0], H[0][1]], H[0][2]))
    close(Hss_c, ([H[1][0], H[1][1]], H[1][2]))
    close(Hxx, ([H[2][0], H[2][1]], H[2][2]))


def test_hessian_return_value_and_aux():
    w = brainx.ParamState(jnp.array([1.0, 2.0]))
    h, value, aux = bt.hessian(lambda: (jnp.sum(w.value ** 3), w.value.sum()), w,
                               has_aux=True, return_value=True)()
    close(h, jnp.diag(6 * w.value))
    close(value, 9.0)
    close(aux, 3.0)


def test_jacfwd_and_hessian_allow_random_draws():
    """jax.jacfwd batches the function internally: that vmap is brainx's own, not an error."""
    rng = brainx.random.RandomState(3)
    w = brainx.ParamState(jnp.array([1.0, 2.0]))
    key = rng.value
    noise = jax.random.normal(jax.random.split(key)[1], (2,))
    j = bt.jacfwd(lambda: w.value * rng.normal(size=2), w)()
    close(j, jnp.diag(noise))
    close(jax.random.key_data(rng.value), jax.random.key_data(jax.random.split(key)[0]))
    hess = bt.hessian(lambda: jnp.sum(w.value ** 2 * rng.normal(size=2)), w)()
    assert hess.shape == (2, 2)


# --- units ----------------------------------------------------------------------------

def test_unit_aware_grad_against_brainunit_and_by_hand():
    w = brainx.ParamState(jnp.array([1.0, 2.0]) * u.mV, name="w")
    x = jnp.array([3.0, 4.0]) * u.ms
    def f(x):
        return u.math.sum(w.value ** 2 * x)
    gw, gx = bt.grad(f, grad_states=w, argnums=0, unit_aware=True)(x)
    want = u.autograd.grad(lambda w_, x_: u.math.sum(w_ ** 2 * x_), argnums=(0, 1))(w.value, x)
    assert gw.unit == want[0].unit == u.mV * u.ms     # unit(y) / unit(w) = mV^2 ms / mV
    assert gx.unit == want[1].unit == u.mV ** 2        # mV^2 ms / ms
    close(gw.mantissa, want[0].mantissa)
    close(gw.mantissa, 2 * w.value.mantissa * x.mantissa)
    close(gx.mantissa, want[1].mantissa)


@pytest.mark.parametrize("name", ["vector_grad", "jacrev", "jacfwd"])
def test_unit_aware_first_order(name):
    w = brainx.ParamState(jnp.array([1.0, 2.0]) * u.mV)
    x = 2.0 * u.ms
    g = getattr(bt, name)(lambda x: w.value * x, grad_states=w, unit_aware=True)(x)
    bu = {"vector_grad": u.autograd.vector_grad, "jacrev": u.autograd.jacrev,
          "jacfwd": u.autograd.jacfwd}[name]
    want = bu(lambda w_: w_ * x)(w.value)
    assert g.unit == want.unit == u.ms
    close(g.mantissa, want.mantissa)


def test_unit_aware_hessian():
    w = brainx.ParamState(jnp.array([1.0, 2.0]) * u.mV)
    h = bt.hessian(lambda: u.math.sum(w.value ** 3), w, unit_aware=True)()
    want = u.autograd.hessian(lambda w_: u.math.sum(w_ ** 3))(w.value)
    assert h.unit == want.unit == u.mV                 # mV^3 / mV^2
    close(h.mantissa, jnp.diag(6 * jnp.array([1.0, 2.0])))


def test_not_unit_aware_gradients_are_jax_s_cotangents():
    """Without unit_aware, a Quantity's gradient is what jax.grad gives (and brainstate): the
    cotangent of its mantissa in the primal's own unit, so `w - lr * g` keeps w's unit."""
    w = brainx.ParamState(jnp.array([1.0, 2.0]) * u.mV)
    x = jnp.array([0.5, -1.0]) * u.ms
    g_w, g_x = bt.grad(lambda x: u.math.sum(w.value ** 2 * (x / u.ms)).mantissa, w,
                       argnums=0)(x)
    want_w, want_x = jax.grad(lambda w_, x_: u.math.sum(w_ ** 2 * (x_ / u.ms)).mantissa,
                              argnums=(0, 1))(w.value, x)
    assert g_w.unit == want_w.unit == u.mV and g_x.unit == want_x.unit == u.ms
    close(g_w.mantissa, want_w.mantissa)
    close(g_x.mantissa, want_x.mantissa)
    unused = brainx.ParamState(jnp.ones(2) * u.mS)        # read, no influence: zeros in mS
    g = bt.grad(lambda: jnp.sum(0.0 * unused.value.mantissa) + 1.0, unused)()
    assert g.unit == u.mS and not jnp.any(g.mantissa)
    w.value = w.value - 0.1 * g_w                          # an update keeps the unit


# --- vjp, jvp ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["args", "states", "both"])
def test_vjp_matches_jax(mode):
    net = Net()
    W, b, h = net.W.value, net.b.value, net.h.value
    f = _vector_stateful(net)
    kwargs = dict(grad_states={"W": net.W, "b": net.b}) if mode != "args" else {}
    if mode == "states":
        kwargs["argnums"] = None
    y, vjp_fn = bt.vjp(f, X, **kwargs)
    y_want, pull = jax.vjp(lambda W, b, x: _vector_pure(W, b, h, x)[0], W, b, X)
    close(y, y_want)
    close(net.h.value, _vector_pure(W, b, h, X)[1])
    ct = jnp.array([1.0, -2.0, 0.5])
    gW, gb, gx = pull(ct)
    want = {"args": gx, "states": {"W": gW, "b": gb}, "both": ({"W": gW, "b": gb}, gx)}[mode]
    h_after = net.h.value
    close(vjp_fn(ct), want)
    close(net.h.value, h_after)                          # the pullback touches no state


def test_vjp_has_aux_tuple_argnums_and_errors():
    w = brainx.ParamState(jnp.array(2.0))
    y, vjp_fn, aux = bt.vjp(lambda x, z: (w.value * x * z, x + z), 3.0, 4.0, argnums=(0, 1),
                            has_aux=True)
    assert float(aux) == 7.0
    close(vjp_fn(1.0), (8.0, 6.0))
    with pytest.raises(ValueError, match="nothing to differentiate"):
        bt.vjp(lambda: w.value * 2)


def test_jvp_matches_jax_and_state_tangents():
    net = Net()
    W, b, h = net.W.value, net.b.value, net.h.value
    f = _vector_stateful(net)
    t = jnp.array([1.0, 0.5])
    y, y_dot = bt.jvp(f, (X,), (t,))
    y_want, dot_want = jax.jvp(lambda x: _vector_pure(W, b, h, x)[0], (X,), (t,))
    close((y, y_dot), (y_want, dot_want))
    close(net.h.value, _vector_pure(W, b, h, X)[1])
    net.h.value = h
    tW = jnp.ones_like(W)
    y, y_dot = bt.jvp(f, (X,), (t,), grad_states={"W": net.W}, state_tangents={"W": tW})
    _, dot_want = jax.jvp(lambda W_, x: _vector_pure(W_, b, h, x)[0], (W, X), (tW, t))
    close(y_dot, dot_want)


def test_jvp_has_aux_and_errors():
    w = brainx.ParamState(jnp.array(2.0))
    y, y_dot, aux = bt.jvp(lambda x: (w.value * x ** 2, x), (3.0,), (1.0,), has_aux=True)
    assert (float(y), float(y_dot), float(aux)) == (18.0, 12.0, 3.0)
    with pytest.raises(ValueError, match="tangents"):
        bt.jvp(lambda x: x, (1.0,), (1.0, 2.0))
    with pytest.raises(ValueError, match="together"):
        bt.jvp(lambda x: w.value * x, (1.0,), (1.0,), grad_states=w)
    with pytest.raises(TypeError, match="tuples or lists"):
        bt.jvp(lambda x: x, 1.0, 1.0)


def test_a_transform_of_a_transform_keeps_both():
    """The outer transform wraps the inner one (it does not take over its attributes)."""
    def f(x):
        return jnp.sin(x)
    ck = bt.checkpoint(f)
    j = bt.jit(ck)
    assert j.stateful.fun is ck
    assert bt.grad(bt.grad(f)).stateful.fun.__class__ is bt.GradientTransform
    close(bt.grad(bt.grad(f))(0.3), -jnp.sin(0.3))


def test_vector_grad_of_a_quantity_output_is_the_gradient_of_its_mantissa():
    # as brainstate: no unit_aware needed; grad of a Quantity loss stays refused (above)
    w = brainx.ParamState(jnp.array([1.0, 2.0, 3.0]))
    x = jnp.array([0.5, -1.0, 2.0])
    g, y = bt.vector_grad(lambda x: w.value * x ** 2 * u.mV, grad_states=w, argnums=0,
                          return_value=True)(x)
    gw, gx = g
    want_w, want_x = jax.vjp(lambda w_, x_: w_ * x_ ** 2, w.value, x)[1](jnp.ones(3))
    assert not isinstance(gw, u.Quantity) and not isinstance(gx, u.Quantity)
    close(gw, want_w)
    close(gx, want_x)
    assert y.unit == u.mV
    close(y.mantissa, w.value * x ** 2)
