"""JAX's own caches survive brainx traces: the trace-cache key moves only after a raw capture."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import monitoring

import brainx
from brainx import transform
from brainx.transform.core import jaxpr_builder

_COMPILES = [0]


def _count(name, duration, **kwargs):
    if name == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


monitoring.register_event_duration_secs_listener(_count)


def _compiles_over(calls, f, *args):
    f(*args)  # the first call compiles what it needs
    before = _COMPILES[0]
    for _ in range(calls):
        f(*args)
    return _COMPILES[0] - before


W = brainx.ParamState(jnp.array([0.5, -2.0, 3.0]), name="W")


def _loss(x):
    return jnp.sum(jnp.clip(W.value * x, -1.0, 1.0) ** 2)   # jnp.clip is jitted inside jax


def _pure_loss(w, x):
    return jnp.sum(jnp.clip(w * x, -1.0, 1.0) ** 2)


@pytest.mark.parametrize("kind", ["grad", "vmap", "checkpoint"])
def test_eager_transforms_calling_jnp_compile_nothing_after_the_first_call(kind):
    x = jnp.array([1.0, 0.25, -0.5])
    if kind == "grad":
        f, args = transform.grad(_loss, grad_states=W), (x,)
        expected = jax.grad(_pure_loss)(W.value, x)
    elif kind == "vmap":
        f, args = transform.vmap(lambda x: jnp.clip(W.value * x, -1.0, 1.0)), (jnp.stack([x, 2 * x]),)
        expected = jax.vmap(lambda x: jnp.clip(W.value * x, -1.0, 1.0))(args[0])
    else:
        f, args = transform.checkpoint(_loss), (x,)
        expected = jax.checkpoint(_pure_loss)(W.value, x)
    np.testing.assert_allclose(f(*args), expected, rtol=1e-6)
    assert _compiles_over(300, f, *args) == 0   # benchmarks/eager_transform_memory.py: more


def test_the_key_stays_while_no_raw_trace_reads_a_state():
    h = brainx.HiddenState(jnp.zeros(3))

    @transform.jit
    def step(x):
        for _ in range(3):
            h.value = jnp.clip(h.value + x, -5.0, 5.0)   # writes: no raw capture, no new key
        return h.value

    key = jaxpr_builder._KEY.id
    step(jnp.ones(3))
    transform.grad(lambda x: jnp.sum(jnp.clip(h.value * x, 0.0, 1.0)))(jnp.ones(3))
    assert jaxpr_builder._KEY.id == key
    np.testing.assert_allclose(h.value, np.full(3, 3.0))


def test_the_key_moves_after_a_raw_helper_read_a_state():
    s = brainx.State(jnp.array(2.0))

    @jax.jit
    def raw(x):                       # captures s's traced value inside the brainx trace
        return s.value * x

    @transform.jit
    def step(x):
        first = raw(x)
        s.value = s.value + 1.0       # the boundary after the capture: raw is traced again
        return first + raw(x)

    key = jaxpr_builder._KEY.id
    assert float(step(1.0)) == 2.0 + 3.0
    assert jaxpr_builder._KEY.id != key
    assert float(step(1.0)) == 3.0 + 4.0


# -- a re-trace that computes the same keeps the compiled function --------------------------------

def _compiles_of(f, *args):
    before = _COMPILES[0]
    out = f(*args)
    return _COMPILES[0] - before, out


def test_a_retrace_with_the_same_computation_compiles_nothing():
    s = brainx.State(jnp.zeros(3), name="s")
    other = brainx.State(jnp.zeros(3), name="other")

    @transform.jit
    def f(x):
        s.value = s.value + x
        return s.value

    f(jnp.ones(3))
    brainx.state.structure_changed()                       # a rebind somewhere else
    assert _compiles_of(f, jnp.ones(3))[0] == 0
    handle = other.register_hook("write_before", lambda ctx: None)   # a hook elsewhere
    try:
        assert _compiles_of(f, jnp.ones(3))[0] == 0
    finally:
        handle.remove()
    np.testing.assert_allclose(s.value, np.full(3, 3.0))


def test_a_retrace_that_computes_otherwise_compiles_and_applies():
    s = brainx.State(jnp.zeros(3), name="s")

    @transform.jit
    def f(x):
        s.value = s.value + x
        return s.value

    f(jnp.ones(3))

    def clip(ctx):
        ctx.transformed_value = jnp.minimum(ctx.transformed_value, 1.5)

    handle = s.register_hook("write_before", clip)
    try:
        compiles, out = _compiles_of(f, jnp.ones(3))         # 1 + 1 clipped to 1.5
        assert compiles >= 1
        np.testing.assert_allclose(out, np.full(3, 1.5))
    finally:
        handle.remove()
    compiles, out = _compiles_of(f, jnp.ones(3))             # the hook is gone: 1.5 + 1
    np.testing.assert_allclose(out, np.full(3, 2.5))


def _reference(c):
    if np.ndim(c) == 0:
        return np.float32(1.0) / (np.float32(c) * np.ones(3, np.float32))
    return np.asarray(c, np.float32)


@pytest.mark.parametrize("old,new", [(2.0, 3.0), (0.0, -0.0), (np.ones(3), np.arange(3.0))],
                         ids=["literal", "signed-zero", "constant-array"])
def test_a_retrace_seeing_another_python_value_computes_with_it(old, new):
    s = brainx.State(jnp.ones(3), name="s")
    box = {"c": old}

    @transform.jit
    def f():
        c = box["c"]
        s.value = 1.0 / (c * jnp.ones(3)) if np.ndim(c) == 0 else jnp.asarray(c, jnp.float32)
        return s.value

    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(f(), _reference(old))
        box["c"] = new
        brainx.state.structure_changed()                      # makes f trace again
        np.testing.assert_array_equal(f(), _reference(new))   # not the old compiled one


def test_a_retrace_reading_another_state_in_the_same_roles_compiles_anew():
    a = brainx.State(jnp.array([1.0, 2.0]), name="a")
    b = brainx.State(jnp.array([10.0, 20.0]), name="b")
    mode = {"old": True}

    def reference(a0, b0, old):
        t = a0 if old else b0
        return t, t * 2.0, t * 3.0

    @transform.jit
    def step():
        if mode["old"]:
            t = a.value                       # a read, b written
        else:
            a.value = jnp.zeros(2)            # a written before any read, b read
            t = b.value
        a.value, b.value = t * 2.0, t * 3.0   # both written either way, the same jaxpr shape
        return t

    step()
    mode["old"] = False
    brainx.state.structure_changed()
    a.value, b.value = jnp.array([1.0, 2.0]), jnp.array([10.0, 20.0])
    out = step()
    for got, want in zip((out, a.value, b.value),
                         reference(np.array([1.0, 2.0]), np.array([10.0, 20.0]), False)):
        np.testing.assert_allclose(got, want)


class _Leaky(brainx.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = brainx.ParamState(jnp.linspace(-0.5, 0.5, 9).reshape(3, 3))
        self.decay = 0.9

    def init_state(self, batch_size=None, **kwargs):
        self.v = brainx.HiddenState(jnp.zeros(3))

    def update(self, x):
        self.v.value = self.v.value * self.decay + jnp.tanh(x @ self.w.value)
        return self.v.value


def _leaky_reference(w, decay, xs):
    v, outs = np.zeros(3), []
    for x in np.asarray(xs):
        v = v * decay + np.tanh(x @ np.asarray(w))
        outs.append(v)
    return np.sum(outs)


def test_eager_checkpoint_of_a_loop_compiles_nothing_after_the_first_call():
    # Traced on every call (its Python may change); an equal trace keeps the previous jaxpr
    # objects, which JAX's caches of derived jaxprs and executables are keyed by.
    net = _Leaky()
    brainx.nn.init_all_states(net)
    xs = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
    f = transform.checkpoint(lambda xs: transform.for_loop(net.update, xs).sum())
    np.testing.assert_allclose(f(xs), _leaky_reference(net.w.value, 0.9, xs), rtol=1e-5)

    def fresh_states_then_f(xs):
        brainx.nn.init_all_states(net)           # new HiddenState objects each call
        return f(xs)

    assert _compiles_over(20, f, xs) == 0
    assert _compiles_over(20, fresh_states_then_f, xs) == 0
    np.testing.assert_allclose(fresh_states_then_f(xs), _leaky_reference(net.w.value, 0.9, xs),
                               rtol=1e-5)
    net.decay = 0.5                              # eager: the next call sees it
    np.testing.assert_allclose(fresh_states_then_f(xs), _leaky_reference(net.w.value, 0.5, xs),
                               rtol=1e-5)
