"""State containers, the state trace and the tracer-leak guard."""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform


def test_kinds_are_states():
    for kind in (brainx.ShortTermState, brainx.LongTermState, brainx.ParamState,
                 brainx.HiddenState, brainx.BatchState):
        s = kind(jnp.zeros(2))
        assert isinstance(s, brainx.State)
    assert issubclass(brainx.ParamState, brainx.LongTermState)
    assert issubclass(brainx.HiddenState, brainx.ShortTermState)


def test_value_roundtrip_any_pytree():
    tree = {"a": jnp.ones(3), "b": (jnp.zeros((2, 2)), 3.0 * u.mV)}
    s = brainx.State(tree)
    assert s.value is tree
    s.value = {"a": 2 * jnp.ones(3), "b": (jnp.ones((2, 2)), 1.0 * u.mV)}
    assert float(s.value["a"][0]) == 2.0
    assert s.value["b"][1].unit == u.mV


def test_repr_shows_type_name_shape_dtype_and_unit():
    assert repr(brainx.HiddenState(jnp.zeros((2, 3)), name="V")) == \
        "HiddenState(name='V', shape=(2, 3), dtype=float32)"
    r = repr(brainx.ParamState(jnp.zeros(4, dtype=jnp.int32)))
    assert r == "ParamState(shape=(4,), dtype=int32)"
    q = repr(brainx.State(jnp.zeros(3) * u.mV, name="v"))
    assert "shape=(3,)" in q and "unit=mV" in q and "name='v'" in q
    tree = repr(brainx.State({"w": jnp.zeros(2), "b": jnp.zeros((), jnp.int32)}))
    assert "float32[2]" in tree and "int32[]" in tree


def test_state_cannot_hold_a_state():
    a = brainx.State(jnp.zeros(2), name="a")
    b = brainx.State(jnp.ones(2), name="b")
    with pytest.raises(brainx.StateTypeError, match="name='a'.*name='b'|cannot hold another State"):
        b.value = a
    assert np.array_equal(b.value, jnp.ones(2))
    with pytest.raises(brainx.StateTypeError):
        brainx.State(a)
    with pytest.raises(brainx.StateTypeError, match="cannot hold another State"):
        b.value = (a, 1.0)
    assert np.array_equal(b.value, jnp.ones(2))


def test_trace_stack_records_reads_and_writes_in_order():
    a, b, c = (brainx.State(jnp.zeros(())) for _ in range(3))
    with brainx.StateTraceStack() as trace:
        _ = b.value
        a.value = c.value + 1
    assert trace.states == (b, c, a)
    assert trace.get_read_states() == (b, c)
    assert trace.get_write_states() == (a,)
    assert float(a.value) == 1.0  # a plain scope only records


def test_nested_scopes_are_seen_by_every_enclosing_one():
    a, b = brainx.State(jnp.zeros(())), brainx.State(jnp.zeros(()))
    with brainx.StateTraceStack() as outer:
        with brainx.StateTraceStack() as inner:
            a.value = b.value + 1
        assert inner.get_write_states() == (a,)
    assert outer.get_read_states() == (b,)
    assert outer.get_write_states() == (a,)


def test_inner_transform_reads_and_writes_reach_the_enclosing_scope():
    a, b = brainx.State(jnp.zeros(())), brainx.State(jnp.ones(()))

    @transform.jit
    def f():
        a.value = a.value + b.value

    f()  # compile outside
    with brainx.StateTraceStack() as outer:
        f()
    assert set(outer.get_read_states()) == {a, b}
    assert outer.get_write_states() == (a,)
    assert float(a.value) == 2.0


def test_restoring_scope_puts_values_back_even_after_an_exception():
    a = brainx.State(jnp.zeros(()))
    with pytest.raises(ZeroDivisionError):
        with brainx.StateTraceStack(restore=True):
            a.value = jnp.ones(())
            1 / 0
    assert float(a.value) == 0.0


def test_catch_new_states():
    with brainx.catch_new_states("init") as catcher:
        a = brainx.HiddenState(jnp.zeros(2))
        b = brainx.ParamState(jnp.ones(2))
    brainx.State(jnp.zeros(1))  # after the block: not caught
    assert catcher.get_states() == (a, b)
    assert len(catcher) == 2 and catcher.tag == "init"
    assert [float(v.sum()) for v in catcher.get_state_values()] == [0.0, 2.0]


@pytest.mark.parametrize("raw", ["jit", "grad", "vmap", "scan"])
def test_raw_jax_transform_writing_a_state_is_refused_and_the_state_is_kept(raw):
    h = brainx.HiddenState(jnp.ones(3), name="h")

    def f(x):
        h.value = h.value * x
        return jnp.sum(x)

    with pytest.raises(brainx.TracerLeakError, match="name='h'.*brainx.transform"):
        if raw == "jit":
            jax.jit(f)(jnp.ones(3))
        elif raw == "grad":
            jax.grad(f)(jnp.ones(3))
        elif raw == "vmap":
            jax.vmap(f)(jnp.ones((2, 3)))
        else:
            jax.lax.scan(lambda c, x: (c, f(x)), 0.0, jnp.ones((2, 3)))
    assert np.array_equal(h.value, jnp.ones(3)) and not isinstance(h.value, jax.core.Tracer)


def test_raw_jax_transform_writing_through_a_brainx_transform_is_refused():
    h = brainx.HiddenState(jnp.ones(3), name="h")

    @transform.jit
    def step(x):
        h.value = h.value * x
        return jnp.sum(h.value)

    with pytest.raises(brainx.TracerLeakError, match="name='h'"):
        jax.grad(step)(jnp.ones(3))
    with pytest.raises(brainx.TracerLeakError, match="name='h'"):
        jax.jit(step)(jnp.ones(3))
    assert np.array_equal(h.value, jnp.ones(3))


def test_raw_jax_transform_that_only_reads_states_is_fine():
    w = brainx.ParamState(jnp.arange(3.0))
    g = jax.grad(lambda x: jnp.sum(w.value * x))(jnp.ones(3))
    assert np.array_equal(g, jnp.arange(3.0))
    assert float(jax.jit(lambda x: jnp.sum(w.value * x))(jnp.ones(3))) == 3.0


def test_reading_a_state_created_inside_a_transform_after_it_ended():
    holder = {}

    @transform.jit
    def f(x):
        holder["s"] = brainx.ShortTermState(x * 2, name="made_inside")
        return holder["s"].value.sum()

    assert float(f(jnp.ones(2))) == 4.0
    with pytest.raises(brainx.ExpiredStateError, match="made_inside.*created inside jit"):
        holder["s"].value
    holder["s"].value = jnp.zeros(2)  # assigning a concrete value revives it
    assert float(holder["s"].value.sum()) == 0.0


def test_state_created_inside_with_a_concrete_value_stays_usable():
    holder = {}

    @transform.jit
    def f(x):
        holder["s"] = brainx.State(np.ones(2))
        return x

    f(1.0)
    assert np.array_equal(holder["s"].value, np.ones(2))


def test_a_user_scope_does_not_make_tracers_safe():
    s = brainx.State(jnp.zeros(()), name="s")
    with brainx.StateTraceStack():
        with pytest.raises(brainx.TracerLeakError, match="name='s'"):
            jax.jit(lambda x: setattr(s, "value", x))(1.0)
    assert float(s.value) == 0.0


def test_creating_a_state_from_a_tracer_under_a_raw_transform_is_refused():
    with pytest.raises(brainx.TracerLeakError, match="ParamState"):
        jax.jit(lambda x: brainx.ParamState(x * 2) and x)(1.0)


def test_a_scope_closed_out_of_order_still_restores_everything():
    h = brainx.HiddenState(jnp.zeros(()), name="h")

    def suspended():
        with brainx.StateTraceStack():
            yield

    alive = []

    @transform.jit
    def step(x):
        h.value = h.value + x
        alive.append(suspended())
        next(alive[-1])  # leaves a scope open inside the transform
        return h.value

    with pytest.raises(brainx.errors.BrainxError, match="closed while an inner"):
        step(1.0)
    assert float(h.value) == 0.0
    assert brainx.state.active_traces() == []
    assert not brainx.state.trace.inside_transform()
    alive.clear()  # closing the generator later is harmless
    assert brainx.state.active_traces() == []


def test_a_write_through_a_scope_left_open_never_reaches_the_state():
    """The write goes through a user scope still open when the transform ends (a suspended
    generator): the transform's overlay holds it, the state never sees the tracer."""
    h = brainx.HiddenState(jnp.zeros(()), name="h")

    def suspended():
        with brainx.StateTraceStack():
            yield

    alive = []

    @transform.jit
    def step(x):
        alive.append(suspended())
        next(alive[-1])
        h.value = h.value + x      # recorded by the open user scope, passed to the transform
        return h.value

    with pytest.raises(brainx.errors.BrainxError, match="closed while an inner"):
        step(1.0)
    assert float(h.value) == 0.0
    assert not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(h._value))
    alive.clear()
    assert brainx.state.active_traces() == []
