"""Bad input gets an error that names the problem, and every state keeps its value."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform


@pytest.fixture
def states():
    return [brainx.HiddenState(jnp.arange(3.0), name="h"),
            brainx.ParamState(jnp.ones(3), name="w"),
            brainx.State(jnp.zeros((), jnp.int32), name="count")]


def snapshot(states):
    return [s.value for s in states]


def assert_unchanged(states, before):
    for s, v in zip(states, before):
        assert s.value is v or np.array_equal(s.value, v)
        assert not any(isinstance(l, jax.core.Tracer) for l in jax.tree.leaves(s.value))


def make_step(states, fail=False):
    h, w, count = states

    def step(x, flag=True):
        h.value = h.value * w.value + x
        count.value = count.value + 1
        if fail:
            raise ValueError("user error inside the step")
        return h.value.sum()

    return step


TRANSFORMS = {
    "jit": lambda f, **kw: transform.jit(f, **kw),
    "checkpoint": lambda f, **kw: transform.checkpoint(f, **kw),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_unhashable_static_argument(states, name):
    before = snapshot(states)
    f = TRANSFORMS[name](make_step(states), static_argnums=1)
    with pytest.raises(ValueError, match=r"Static positional argument 1 .* must be hashable.*list"):
        f(1.0, [1, 2])
    g = TRANSFORMS[name](make_step(states), static_argnames="flag")
    with pytest.raises(ValueError, match=r"keyword argument 'flag'.*hashable"):
        g(1.0, flag={"a": 1})
    assert_unchanged(states, before)


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_static_argnums_out_of_range(states, name):
    with pytest.raises(ValueError, match=r"contains index 5 .*out of range.*takes 2 positional"):
        TRANSFORMS[name](make_step(states), static_argnums=5)
    with pytest.raises(ValueError, match=r"contains index -3 .*out of range"):
        TRANSFORMS[name](make_step(states), static_argnums=-3)


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_negative_static_argnums_with_varargs_is_ambiguous(name):
    def f(*args):
        return args[0]

    with pytest.raises(ValueError, match="negative index, which is ambiguous"):
        TRANSFORMS[name](f, static_argnums=-1)


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_static_argument_missing_from_a_varargs_call(states, name):
    before = snapshot(states)

    def f(x, *rest):
        return x + rest[0]

    g = TRANSFORMS[name](f, static_argnums=1)
    with pytest.raises(ValueError, match=r"static_argnums=\(1,\).*only 1 positional"):
        g(1.0)
    assert float(g(1.0, 2)) == 3.0
    assert_unchanged(states, before)


def test_state_written_with_a_state(states):
    h, w, _ = states
    before = snapshot(states)

    @transform.jit
    def f():
        h.value = w

    with pytest.raises(brainx.StateTypeError, match="name='w'.*name='h'"):
        f()
    assert_unchanged(states, before)


def test_reading_a_state_created_inside_after_the_transform(states):
    made = []

    @transform.checkpoint
    def f(x):
        made.append(brainx.ShortTermState(x + states[0].value, name="temp"))
        return made[-1].value.sum()

    transform.grad(f, argnums=0)(jnp.ones(3))
    with pytest.raises(brainx.ExpiredStateError, match="temp"):
        made[-1].value


@pytest.mark.parametrize("name", ["jit", "checkpoint", "grad", "grad_in_jit"])
def test_exception_inside_the_function_leaves_every_state_as_it_was(states, name):
    before = snapshot(states)
    step = make_step(states, fail=True)
    if name == "jit":
        f = transform.jit(step)
    elif name == "checkpoint":
        f = transform.checkpoint(step)
    elif name == "grad":
        f = transform.grad(step, grad_states=states[1])
    else:
        f = transform.jit(transform.grad(step, grad_states=states[1]))
    with pytest.raises(ValueError, match="user error inside the step"):
        f(1.0)
    assert_unchanged(states, before)
    # and the states still work afterwards
    ok = transform.jit(make_step(states))
    ok(1.0)
    assert int(states[2].value) == 1


def test_exception_on_a_later_call_after_caching(states):
    fail = {"now": False}
    h = states[0]

    @transform.checkpoint
    def step(x):
        h.value = h.value + x
        if fail["now"]:
            raise KeyError("late failure")
        return h.value.sum()

    step(1.0)
    before = snapshot(states)
    fail["now"] = True
    with pytest.raises(KeyError, match="late failure"):
        step(1.0)
    assert_unchanged(states, before)


def test_grad_state_never_read(states):
    h, w, count = states
    before = snapshot(states)

    def loss(x):
        h.value = h.value * x
        return jnp.sum(h.value)

    with pytest.raises(ValueError, match="name='w'.*never reads.*check_states=False"):
        transform.grad(loss, grad_states=[w])(2.0)
    assert_unchanged(states, before)
    g = transform.grad(loss, grad_states=[w], check_states=False)(2.0)
    assert np.array_equal(g[0], jnp.zeros(3))


def test_grad_states_must_be_states():
    with pytest.raises(TypeError, match="grad_states must be a State"):
        transform.grad(lambda: 0.0, grad_states=[jnp.ones(2)])


def test_non_callable():
    with pytest.raises(TypeError, match="Expected a callable"):
        transform.jit(3)


def test_function_touching_different_states_each_call():
    """One trace per call: the states a call touches are the ones its trace found."""
    pool = [brainx.State(jnp.zeros(())) for _ in range(5)]
    it = iter(pool)

    @transform.checkpoint
    def f():
        s = next(it)
        s.value = s.value + 1

    f()
    f()
    assert [float(s.value) for s in pool] == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_a_tracer_leak_is_brainstates_trace_context_error_and_changes_nothing():
    s = brainx.State(jnp.zeros(2))

    def f(x):
        s.value = x
        return x

    jax.jit(f)(jnp.ones(2))
    with pytest.raises(brainx.TraceContextError, match="tracer"):
        s.value
    assert float(s.value.sum()) == 0.0


def test_unhashable_static_argument_is_also_a_type_error():
    # ValueError as jax.jit raises, TypeError as brainstate raises: either except clause works
    f = transform.StatefulFunction(lambda x, cfg: x, static_argnums=(1,))
    with pytest.raises(TypeError, match="Static positional argument 1") as info:
        f.make_jaxpr(1.0, [1, 2])
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, brainx.errors.UnhashableStaticError)


def test_map_over_a_scalar_says_it_is_0_d():
    with pytest.raises(ValueError, match="0-d"):
        transform.map(lambda x: x, jnp.float32(5.0))
