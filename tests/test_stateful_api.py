"""brainstate's `StatefulFunction` methods, checked against the function run eagerly."""

import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform


def make():
    w = brainx.ParamState(jnp.array([1.0, 2.0]), name="w")
    h = brainx.HiddenState(jnp.zeros(2), name="h")

    def step(x, scale=1.0):
        h.value = h.value * 0.5 + w.value * x * scale
        return h.value.sum()

    return w, h, step


def test_make_jaxpr_caches_and_reports_states():
    w, h, step = make()
    sf = transform.StatefulFunction(step, static_argnames="scale")
    assert sf.make_jaxpr(jnp.ones(2)) is sf
    sf.make_jaxpr(jnp.ones(2))
    stats = sf.get_cache_stats()["compilation_cache"]
    assert stats["size"] == 1 and stats["hits"] == 1 and stats["misses"] == 1
    assert sf.get_states(jnp.ones(2)) == (h, w)
    assert sf.get_read_states(jnp.ones(2)) == (w,)
    assert sf.get_write_states(jnp.ones(2)) == (h,)
    trace = sf.get_state_trace(jnp.ones(2))
    assert trace.get_write_states() == (h,) and trace.get_read_states() == (w,)
    key = sf.get_arg_cache_key(jnp.ones(2))
    assert sf.validate_states(key)
    with pytest.raises(ValueError, match="no trace"):
        sf.get_states(jnp.ones(3), compile_if_miss=False)


def test_jaxpr_call_matches_the_eager_function():
    w, h, step = make()
    sf = transform.StatefulFunction(step)
    x = jnp.array([3.0, 4.0])
    new_states, out = sf.jaxpr_call([jnp.ones(2), w.value], x)
    assert new_states[1] is None                           # w is not written
    np.testing.assert_allclose(new_states[0], 0.5 + w.value * x)
    np.testing.assert_allclose(out, (0.5 + w.value * x).sum())
    assert float(h.value.sum()) == 0.0                     # jaxpr_call changes no state
    out = sf.jaxpr_call_auto(x)
    np.testing.assert_allclose(h.value, w.value * x)
    np.testing.assert_allclose(out, (w.value * x).sum())
    all_states = transform.StatefulFunction(step, return_only_write=False)
    new_states, _ = all_states.jaxpr_call([jnp.zeros(2), w.value], x)
    np.testing.assert_allclose(new_states[1], w.value)


def test_get_jaxpr_and_out_shapes_in_brainstate_layout():
    w, h, step = make()
    sf = transform.StatefulFunction(step)
    x = jnp.ones(2)
    jaxpr = sf.get_jaxpr(x)
    # inputs: x, then the values of (h, w); outputs: the sum, then h's new value
    assert len(jaxpr.in_avals) == 3 and len(jaxpr.out_avals) == 2
    outs = jax.core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, x, jnp.ones(2), w.value)
    np.testing.assert_allclose(outs[1], 0.5 + w.value)
    out_shapes, state_shapes = sf.get_out_shapes(x)
    assert out_shapes.shape == () and state_shapes[0].shape == (2,) and state_shapes[1] is None
    assert sf.get_out_treedef(x).num_leaves == 2


def test_debug_call_runs_python():
    w, h, step = make()
    sf = transform.StatefulFunction(step)
    states, out = sf.debug_call([jnp.ones(2), w.value], jnp.ones(2))
    np.testing.assert_allclose(states[0], 0.5 + w.value)


# -- a jitted function's traces, by cache key; jitted_fun, trace and compile -----------------
def _jitted_pair():
    a = brainx.State(jnp.zeros(3))
    b = brainx.State(jnp.arange(3.0))

    @brainx.transform.jit
    def f(x):
        a.value = a.value + b.value * x
        return a.value.sum()

    return a, b, f


def test_jit_calls_file_their_traces_by_cache_key():
    a, b, f = _jitted_pair()
    f(2.0)
    sf = f.stateful_fun
    key = sf.get_arg_cache_key(2.0)
    assert sf.get_states_by_cache(key) == (a, b)
    assert sf.get_write_states_by_cache(key) == (a,)
    assert sf.get_read_states_by_cache(key) == (b,)
    jaxpr = sf.get_jaxpr_by_cache(key)
    assert sf.get_jaxpr_by_cache(key) is jaxpr and sf.get_jaxpr(2.0) is jaxpr
    out, new_a = jax.core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, 3.0, jnp.ones(3), b.value)
    np.testing.assert_allclose(new_a, 1.0 + 3.0 * np.arange(3.0))
    np.testing.assert_allclose(out, new_a.sum())
    shapes = sf.get_out_shapes_by_cache(key)
    assert shapes[0].shape == () and shapes[1][0].shape == (3,) and shapes[1][1] is None
    assert sf.get_state_trace_by_cache(key).get_write_states() == (a,)
    with pytest.raises(ValueError, match="no trace under this cache key"):
        sf.get_states_by_cache(sf.get_arg_cache_key(jnp.ones(2)))


def test_jit_cache_holds_its_states_weakly():
    class Holder:
        pass

    holder = Holder()
    holder.h = brainx.State(jnp.zeros(2))

    @brainx.transform.jit
    def f(x):
        holder.h.value = holder.h.value + x

    f(1.0)
    key = f.stateful_fun.get_arg_cache_key(1.0)
    assert f.stateful_fun.get_states_by_cache(key) == (holder.h,)
    ref = weakref.ref(holder.h)
    holder.h = brainx.State(jnp.ones(2))         # the old state is garbage now
    gc.collect()
    assert ref() is None
    with pytest.raises(ValueError, match="no trace"):
        f.stateful_fun.get_states_by_cache(key)  # forgotten with its state
    f(1.0)
    assert f.stateful_fun.get_states_by_cache(key) == (holder.h,)


def test_jitted_fun_trace_and_compile_leave_states_alone():
    a, b, f = _jitted_pair()
    before = np.asarray(a.value)
    (new_a, unwritten), out = f.jitted_fun([a.value, b.value], 2.0)
    assert unwritten is None
    np.testing.assert_allclose(new_a, 2.0 * np.arange(3.0))
    np.testing.assert_allclose(out, new_a.sum())
    traced = f.trace(2.0)
    assert len(traced.jaxpr.in_avals) == 3          # the two states' values, then x
    compiled = f.compile(2.0)
    np.testing.assert_allclose(a.value, before)     # nothing ran yet
    np.testing.assert_allclose(compiled(2.0), 6.0)
    np.testing.assert_allclose(a.value, 2.0 * np.arange(3.0))


# -- brainstate's make_jaxpr layout, staleness, calling, returned states -----------------------

def test_make_jaxpr_has_brainstates_layout_and_evaluates_like_the_function():
    read, acc = brainx.State(jnp.full(2, 3.0)), brainx.State(jnp.zeros(2))

    def step(x):
        acc.value = acc.value + read.value * x
        return acc.value.sum()

    jaxpr, states = transform.make_jaxpr(step)(2.0)
    assert set(states) == {read, acc}
    values = [s.value for s in states]
    out, *new = jax.core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, 2.0, *values)
    expected = {read: read.value, acc: acc.value + read.value * 2.0}
    assert float(out) == 12.0
    for s, v in zip(states, new):                      # every state's value, in states order
        np.testing.assert_array_equal(v, expected[s])
    only_written, states2 = transform.make_jaxpr(step, return_only_write=True)(2.0)
    assert len(only_written.out_avals) == 2            # out, then acc's new value
    assert transform.make_jaxpr(step).__name__ == "step"
    np.testing.assert_array_equal(acc.value, jnp.zeros(2))


def test_a_state_that_changed_shape_makes_a_new_trace_not_a_stale_answer():
    st = brainx.State(jnp.ones(3))

    def mean(x):
        v = st.value
        return v.sum() / v.shape[0] + x * 0.0

    sf = transform.StatefulFunction(mean)
    assert float(sf(0.0)) == 1.0
    st.value = jnp.arange(6.0)
    assert float(sf(0.0)) == 2.5 == float(sf.jaxpr_call_auto(0.0))
    jaxpr = sf.make_jaxpr(0.0).get_jaxpr(0.0)
    assert jaxpr.in_avals[-1].shape == (6,)
    with pytest.raises(ValueError, match="shapes and dtypes"):
        sf.jaxpr_call([jnp.ones(4)], 0.0)


def test_stateful_function_call_writes_back_and_validate_all_states():
    h = brainx.State(jnp.zeros(2))

    def step(x):
        h.value = h.value + x
        return h.value

    sf = transform.StatefulFunction(step)
    np.testing.assert_array_equal(sf(1.0), jnp.ones(2))
    np.testing.assert_array_equal(sf(1.0), 2 * jnp.ones(2))
    np.testing.assert_array_equal(h.value, 2 * jnp.ones(2))
    assert list(sf.validate_all_states().values()) == [True]


def test_returning_a_state_from_a_transform_is_a_clear_error():
    a = brainx.State(jnp.ones(3))
    with pytest.raises(ValueError, match="cannot return a State"):
        transform.jit(lambda: a)()
    with pytest.raises(ValueError, match="cannot return a State"):
        transform.StatefulFunction(lambda x: brainx.State(x)).make_jaxpr(1.0)
    np.testing.assert_array_equal(a.value, jnp.ones(3))


def test_a_state_passed_as_an_argument_is_refused_with_its_path():
    a = brainx.State(jnp.ones(2))

    def f(s, x):
        s.value = s.value + x
        return s.value.sum()

    with pytest.raises(ValueError, match=r"cannot be an instance of State \(\[0\]\[0\]"):
        transform.jit(f)(a, 1.0)
    with pytest.raises(ValueError, match=r"\[1\]\['d'\]\['s'\]"):
        transform.StatefulFunction(lambda *, d: d["s"].value).make_jaxpr(d={"s": a})
    np.testing.assert_array_equal(a.value, jnp.ones(2))
    # the supported way: the function reaches the state itself
    assert float(transform.jit(lambda x: f(a, x))(1.0)) == 4.0


def test_jaxpr_call_and_debug_call_refuse_a_wrong_number_of_state_values():
    a, b = brainx.State(jnp.ones(2)), brainx.State(jnp.full(2, 2.0))

    def f(x):
        a.value = a.value + x
        b.value = b.value + x
        return a.value.sum()

    sf = transform.StatefulFunction(f)
    x = jnp.ones(2)
    sf.make_jaxpr(x)
    for method in ("jaxpr_call", "debug_call"):
        call = getattr(sf, method)
        with pytest.raises(ValueError, match=rf"State length mismatch: .*\.{method} expected "
                                             r"values for 2 states .*got 1"):
            call([jnp.zeros(2)], x)
        with pytest.raises(ValueError, match=r"None at index \[1\]"):
            call([jnp.zeros(2), None], x)
        np.testing.assert_array_equal(a.value, [1.0, 1.0])  # no state changed
        np.testing.assert_array_equal(b.value, [2.0, 2.0])


def test_debug_call_gives_the_states_back_when_the_function_raises():
    a = brainx.State(jnp.ones(2))
    calls = []

    def f(x):
        a.value = a.value + x
        if calls:
            raise RuntimeError("boom")
        calls.append(1)
        return a.value.sum()

    sf = transform.StatefulFunction(f)
    sf.make_jaxpr(jnp.ones(2))
    with pytest.raises(RuntimeError, match="boom"):
        sf.debug_call([jnp.zeros(2)], jnp.ones(2))
    np.testing.assert_array_equal(a.value, [1.0, 1.0])
    assert not isinstance(a.value, jax.core.Tracer)
    # And on success, the states keep what the function left (as brainstate's debug_call).
    calls.clear()
    sf2 = transform.StatefulFunction(lambda x: a.__setattr__("value", a.value * x))
    sf2.make_jaxpr(2.0)
    new, _ = sf2.debug_call([jnp.full(2, 3.0)], 2.0)
    np.testing.assert_array_equal(a.value, [6.0, 6.0])
    np.testing.assert_array_equal(new[0], [6.0, 6.0])


def test_a_rebound_module_state_makes_a_new_trace_not_a_write_to_the_old_state():
    class M(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.s = brainx.State(jnp.zeros(2))

    m = M()

    def g(x):
        m.s.value = m.s.value + x
        return x

    sf = transform.StatefulFunction(g)
    sf(1.0)
    old = m.s
    m.s = brainx.State(jnp.zeros(2))            # the function now reaches another state
    sf(1.0)
    np.testing.assert_array_equal(m.s.value, jnp.ones(2))
    np.testing.assert_array_equal(old.value, jnp.ones(2))
    maker = transform.make_jaxpr(g)
    assert maker(1.0)[1] == (m.s,)
    m.s = brainx.State(jnp.zeros(2))
    assert maker(1.0)[1] == (m.s,)


def test_debug_call_puts_every_value_back_even_after_a_changed_tree():
    a, b = brainx.State(jnp.zeros(2)), brainx.State(jnp.zeros(2))
    broken = [False]

    def g(x):
        if broken[0]:
            a.value = {"oops": x}                 # another tree, then an error
            b.value = b.value + 5
            raise RuntimeError("boom")
        a.value = a.value + x
        b.value = b.value + 5
        return x

    sf = transform.StatefulFunction(g)
    sf.make_jaxpr(1.0)
    broken[0] = True
    with pytest.raises(RuntimeError, match="boom"):
        sf.debug_call([jnp.ones(2), jnp.ones(2)], 1.0)
    np.testing.assert_array_equal(a.value, jnp.zeros(2))
    np.testing.assert_array_equal(b.value, jnp.zeros(2))


def test_returning_a_module_or_a_string_from_a_transform_is_a_clear_error():
    m = brainx.nn.Linear(2, 3)
    with pytest.raises(TypeError, match=r"returns Linear.*only arrays, numbers and pytrees"):
        transform.jit(lambda: m)()
    with pytest.raises(TypeError, match=r"returns 'abc' \(a str\)"):
        transform.jit(lambda: "abc")()
    out = transform.jit(lambda: (1, 2.0, None))()
    assert out[2] is None and float(out[1]) == 2.0




def test_a_trace_made_outside_is_reused_in_a_custom_vjp_rule_under_jit_and_grad():
    # A custom_vjp forward rule under grad in a jit runs under an empty abstract mesh, plain code
    # under none: the same setting, so a trace made outside is used there (braintrace asks for a
    # StatefulFunction's output tree in such a rule; the mesh made it RetraceNeeded)
    w, h, step = make()
    sf = transform.StatefulFunction(step)
    sf.make_jaxpr(jnp.ones(2))
    key = sf.get_arg_cache_key(jnp.ones(2))
    seen = []

    @jax.custom_vjp
    def f(x):
        return x * 2.0

    def fwd(x):
        seen.append(sf.get_out_treedef_by_cache(key))
        return x * 2.0, None

    f.defvjp(fwd, lambda _, g: (g * 2.0,))
    grad = transform.jit(lambda x: transform.grad(lambda x: f(x).sum())(x))
    np.testing.assert_allclose(grad(jnp.ones(3)), jnp.full(3, 2.0))
    # (once; twice under BRAINX_CHECK_CACHES, whose fresh trace runs the rule again)
    assert seen and all(tree == sf.get_out_treedef(jnp.ones(2)) for tree in seen)


def test_cache_key_is_a_named_tuple_of_static_values_and_dynamic_types():
    from brainx.transform.core.stateful_api import CacheKey
    sf = brainx.transform.StatefulFunction(lambda x, n, scale=1.0: x * n * scale,
                                           static_argnums=1)
    key = sf.get_arg_cache_key(jnp.ones(3), 2, scale=jnp.float32(2.0))
    assert isinstance(key, CacheKey) and key.static_args == ((1, int, 2),)
    assert key == sf.get_arg_cache_key(jnp.zeros(3), 2, scale=jnp.float32(5.0))
    assert key != sf.get_arg_cache_key(jnp.zeros(3), 3, scale=jnp.float32(5.0))
    assert key != sf.get_arg_cache_key(jnp.zeros(4), 2, scale=jnp.float32(5.0))
    assert key != sf.get_arg_cache_key(jnp.zeros(3), 2.0, scale=jnp.float32(5.0))  # 2 vs 2.0
    with pytest.raises(AttributeError):
        key.static_args = ()


def test_an_unknown_cache_key_names_itself_and_the_known_ones():
    from brainx.transform.core.stateful_api import CacheKey
    sf = brainx.transform.StatefulFunction(lambda x: x * 2)
    with pytest.raises(ValueError, match=r"(?s)Requested key: CacheKey.*Available keys \(0.*none"):
        sf.get_jaxpr_by_cache(CacheKey((), (), (), ()))
    sf.make_jaxpr(jnp.ones(2))
    with pytest.raises(ValueError, match=r"(?s)make_jaxpr\(\).*Available keys \(1.*float32\[2\]"):
        sf.get_out_shapes_by_cache(CacheKey((), (), (), ()))
