"""`transform.checkpoint` against the same computation in plain JAX with explicit state passing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import checkpoint_name

import brainx
from brainx import transform

N, T = 16, 12


def _close(a, b, tol=1e-5):
    return jax.tree.all(jax.tree.map(lambda x, y: np.allclose(x, y, rtol=tol, atol=tol), a, b))


def pure_step(W, h, s, x):
    h = 0.9 * h * (1 - s) + W @ x
    s = jax.nn.sigmoid(5 * (h - 1))
    return h, s, jnp.mean((s - 0.1) ** 2)


def pure_loss(W, h, s, xs):
    total = 0.0
    for x in xs:
        h, s, err = pure_step(W, h, s, x)
        total = total + err
    return total, (h, s)


class Model:
    def __init__(self, key=0):
        k1, k2 = jax.random.split(jax.random.PRNGKey(key))
        self.W = brainx.ParamState(jax.random.normal(k1, (N, N)) / np.sqrt(N), name="W")
        self.h = brainx.HiddenState(jnp.zeros(N), name="h")
        self.s = brainx.HiddenState(jnp.zeros(N), name="s")
        self.xs = jax.random.normal(k2, (T, N))

    def step(self, x):
        h = 0.9 * self.h.value * (1 - self.s.value) + self.W.value @ x
        self.h.value = h
        self.s.value = jax.nn.sigmoid(5 * (h - 1))
        return jnp.mean((self.s.value - 0.1) ** 2)


POLICIES = {
    "none": None,
    "everything_saveable": jax.checkpoint_policies.everything_saveable,
    "nothing_saveable": jax.checkpoint_policies.nothing_saveable,
    "dots_saveable": jax.checkpoint_policies.dots_saveable,
    "dots_with_no_batch_dims_saveable": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "save_only_these_names": jax.checkpoint_policies.save_only_these_names("pre"),
    "save_any_names_but_these": jax.checkpoint_policies.save_any_names_but_these("pre"),
}


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("jit", [False, True])
def test_values_states_and_gradients_match_plain_jax(policy, jit):
    m = Model()

    @transform.checkpoint(policy=POLICIES[policy])
    def step(x):
        pre = checkpoint_name(m.W.value @ x, "pre")
        h = 0.9 * m.h.value * (1 - m.s.value) + pre
        m.h.value = h
        m.s.value = jax.nn.sigmoid(5 * (h - 1))
        return jnp.mean((m.s.value - 0.1) ** 2)

    def loss():
        return sum(step(x) for x in m.xs)

    f = transform.grad(loss, grad_states={"W": m.W}, return_value=True)
    if jit:
        f = transform.jit(f)
    grads, value = f()

    h0 = s0 = jnp.zeros(N)
    (pvalue, (ph, ps)), pgrad = jax.value_and_grad(pure_loss, has_aux=True)(m.W.value, h0, s0, m.xs)
    assert _close(value, pvalue)
    assert _close(grads["W"], pgrad)
    assert _close(m.h.value, ph) and _close(m.s.value, ps)


def test_decorator_with_and_without_arguments():
    m1, m2 = Model(), Model()
    plain = transform.checkpoint(m1.step)
    with_args = transform.checkpoint(prevent_cse=False)(m2.step)
    for x in m1.xs[:3]:
        assert _close(plain(x), with_args(x))
    assert _close(m1.h.value, m2.h.value)
    assert transform.remat is transform.checkpoint


@pytest.mark.counts_traces
def test_checkpoint_inside_lax_scan_inside_grad():
    m = Model()
    step = transform.checkpoint(m.step, prevent_cse=False)

    def loss():
        def body(carry, x):
            m.h.value, m.s.value = carry
            err = step(x)
            return (m.h.value, m.s.value), err

        (m.h.value, m.s.value), errs = jax.lax.scan(body, (m.h.value, m.s.value), m.xs)
        return errs.sum()

    g = transform.jit(transform.grad(loss, grad_states=m.W))()
    pgrad = jax.grad(lambda W: pure_loss(W, jnp.zeros(N), jnp.zeros(N), m.xs)[0])(m.W.value)
    _, (ph, ps) = pure_loss(m.W.value, jnp.zeros(N), jnp.zeros(N), m.xs)
    assert _close(g, pgrad) and _close(m.h.value, ph) and _close(m.s.value, ps)


def test_nested_checkpoint():
    m = Model()
    inner = transform.checkpoint(m.step)

    @transform.checkpoint
    def two_steps(x1, x2):
        return inner(x1) + inner(x2)

    def loss():
        return sum(two_steps(m.xs[i], m.xs[i + 1]) for i in range(0, T, 2))

    g = transform.grad(loss, grad_states=m.W)()
    pgrad = jax.grad(lambda W: pure_loss(W, jnp.zeros(N), jnp.zeros(N), m.xs)[0])(m.W.value)
    assert _close(g, pgrad)


def test_under_disable_jit():
    m, ref = Model(), Model()
    step = transform.checkpoint(m.step)
    with jax.disable_jit():
        for x in m.xs[:4]:
            step(x)
    for x in ref.xs[:4]:
        ref.step(x)
    assert _close(m.h.value, ref.h.value) and _close(m.s.value, ref.s.value)
    assert not isinstance(m.h.value, jax.core.Tracer)


@pytest.mark.parametrize("jax_transform", ["grad", "vjp", "linearize"])
def test_under_raw_jax_autodiff_of_a_read_only_function(jax_transform):
    w = brainx.ParamState(jnp.array([1.0, -2.0, 0.5]))

    @transform.checkpoint
    def f(x):
        return jnp.sum(jnp.sin(w.value * x) ** 2)

    def pure(x):
        return jnp.sum(jnp.sin(w.value * x) ** 2)

    x = jnp.array([0.3, 0.2, 0.1])
    if jax_transform == "grad":
        assert _close(jax.grad(f)(x), jax.grad(pure)(x))
    elif jax_transform == "vjp":
        y, vjp = jax.vjp(f, x)
        assert _close(vjp(jnp.ones(()))[0], jax.grad(pure)(x))
    else:
        y, lin = jax.linearize(f, x)
        assert _close(lin(jnp.ones(3)), jax.jvp(pure, (x,), (jnp.ones(3),))[1])


def test_static_argnums_positional_or_keyword_with_python_control_flow():
    m = Model()
    traces = []

    @transform.checkpoint(static_argnums=1, static_argnames="scale")
    def step(x, training, scale=1.0):
        traces.append((training, scale))
        err = m.step(x)
        if training:  # Python control flow on a static argument
            err = err * scale
        return err

    a = step(m.xs[0], True, scale=2.0)
    b = step(m.xs[0], training=False)  # static_argnums=1 may be passed by keyword too
    assert traces[-1] == (False, 1.0) and (True, 2.0) in traces
    assert float(a) > 0 and float(b) > 0

    g_train = transform.grad(lambda: step(m.xs[1], True, scale=3.0), grad_states=m.W)()
    g_eval = transform.grad(lambda: step(m.xs[1], False), grad_states=m.W)()
    assert not _close(g_train, g_eval)


def test_sees_changed_attribute_and_closed_over_array():
    class Neuron:
        tau = 10.0

    neuron = Neuron()
    v = brainx.HiddenState(jnp.ones(()))
    glob = {"bias": jnp.zeros(())}

    @transform.checkpoint
    def step():
        v.value = v.value / neuron.tau + glob["bias"]
        return v.value

    assert np.isclose(step(), 0.1)
    neuron.tau = 1.0
    assert np.isclose(step(), 0.1)  # 0.1 / 1
    glob["bias"] = jnp.ones(())
    assert np.isclose(step(), 1.1)


def test_keeps_working_after_closing_over_an_outer_tracer():
    w = brainx.ParamState(jnp.ones(3))
    box = {}

    @transform.checkpoint
    def f(x):
        return jnp.sum(w.value * x * box["scale"])

    def outer(scale):
        box["scale"] = scale
        return f(jnp.ones(3))

    assert np.isclose(jax.grad(outer)(2.0), 3.0)
    box["scale"] = 5.0
    assert np.isclose(f(jnp.ones(3)), 15.0)
    assert np.isclose(jax.grad(outer)(1.0), 3.0)


def test_exception_inside_leaves_states_unchanged_and_no_tracer():
    m = Model()
    before = (m.h.value, m.s.value)

    @transform.checkpoint
    def bad(x):
        m.step(x)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        bad(m.xs[0])
    with pytest.raises(RuntimeError, match="boom"):
        transform.grad(lambda: bad(m.xs[0]), grad_states=m.W)()
    assert m.h.value is before[0] and m.s.value is before[1]


def _temp_bytes(fn, *args):
    return fn.lower(*args).compile().memory_analysis().temp_size_in_bytes


@pytest.mark.counts_traces
def test_temp_memory_equals_raw_jax_with_and_without_checkpoint():
    n, steps = 64, 60
    m = Model()
    m.W.value = jax.random.normal(jax.random.PRNGKey(1), (n, n)) / np.sqrt(n)
    xs = jax.random.normal(jax.random.PRNGKey(2), (steps, n))

    def raw(remat):  # explicit state passing: states in, new states out
        def loss(W, h, s, xs):
            def body(c, x):
                h, s, err = pure_step(W, *c, x)
                return (h, s), err
            body = jax.checkpoint(body, prevent_cse=False) if remat else body
            (h, s), errs = jax.lax.scan(body, (h, s), xs)
            return errs.mean(), (h, s)
        return jax.jit(jax.grad(loss, has_aux=True))

    def ours(remat):
        step = transform.checkpoint(m.step, prevent_cse=False) if remat else m.step

        def loss(xs):
            def body(c, x):
                m.h.value, m.s.value = c
                err = step(x)
                return (m.h.value, m.s.value), err
            (m.h.value, m.s.value), errs = jax.lax.scan(body, (m.h.value, m.s.value), xs)
            return errs.mean()
        return transform.jit(transform.grad(loss, grad_states=m.W))

    m.h.value, m.s.value = jnp.zeros(n), jnp.zeros(n)
    raw_args = (m.W.value, m.h.value, m.s.value, xs)
    for remat in (False, True):
        raw_bytes = _temp_bytes(raw(remat), *raw_args)
        our_bytes = _temp_bytes(ours(remat), xs)
        assert our_bytes == raw_bytes, (remat, our_bytes, raw_bytes)
    assert _temp_bytes(raw(True), *raw_args) < _temp_bytes(raw(False), *raw_args)
    pgrad, (ph, ps) = raw(False)(*raw_args)
    assert _close(ours(True)(xs), pgrad) and _close(m.h.value, ph) and _close(m.s.value, ps)


def test_method_decorator():
    class Cell:
        def __init__(self):
            self.w = brainx.ParamState(jnp.array(2.0))
            self.h = brainx.HiddenState(jnp.array(0.0))

        @transform.checkpoint(static_argnums=2)
        def step(self, x, double):
            self.h.value = self.h.value + self.w.value * x * (2 if double else 1)
            return self.h.value

    c = Cell()
    c.step(1.0, False)
    c.step(1.0, True)
    assert float(c.h.value) == 6.0
    g = transform.grad(lambda: c.step(1.0, True), grad_states=c.w)()
    assert float(g) == 2.0


def test_property_checkpoint_is_invisible_to_values_states_and_gradients():
    """Random programs over a few states: checkpointed == plain == explicit-state JAX."""
    from hypothesis import given, settings, strategies as st

    ops = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2),
                             st.sampled_from(["tanh", "mul", "add"])), min_size=1, max_size=5)

    @settings(max_examples=12, deadline=None)
    @given(program=ops, policy=st.sampled_from(list(POLICIES)))
    def check(program, policy):
        def run(vals, w, x):  # explicit-state reference: vals[i] <- op(vals[j], w * x)
            vals = list(vals)
            for i, j, op in program:
                v = w * x + vals[j]
                vals[i] = jnp.tanh(v) if op == "tanh" else (v * vals[i] if op == "mul" else v + 1.0)
            return sum(jnp.sum(v ** 2) for v in vals), vals

        init = [jnp.full(3, 0.1 * (k + 1)) for k in range(3)]
        w0, x = jnp.array([0.5, -1.0, 2.0]), jnp.float32(0.3)
        results = []
        for remat in (False, True):
            w = brainx.ParamState(w0)
            states = [brainx.State(v) for v in init]

            def step(x):
                vals = [s.value for s in states]
                out, new = run(vals, w.value, x)
                for s, v in zip(states, new):
                    s.value = v
                return out

            f = transform.checkpoint(step, policy=POLICIES[policy]) if remat else step
            g, value = transform.grad(f, grad_states=w, return_value=True)(x)
            results.append((g, value, [s.value for s in states]))
        (pv, pnew), pg = jax.value_and_grad(lambda w: run(init, w, x), has_aux=True)(w0)
        for g, value, new in results:
            assert _close(g, pg, 1e-4) and _close(value, pv, 1e-4) and _close(new, pnew, 1e-4)

    check()
