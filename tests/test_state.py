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
    # brainstate 0.6.0's form: the value's summary first, then the metadata that is set
    assert repr(brainx.HiddenState(jnp.zeros((2, 3)), name="V")) == "HiddenState(f32[2,3], name='V')"
    assert repr(brainx.ParamState(jnp.zeros(4, dtype=jnp.int32))) == "ParamState(i32[4])"
    assert repr(brainx.State(jnp.zeros(3) * u.mV, name="v")) == "State(f32[3] mV, name='v')"
    tree = repr(brainx.State({"w": jnp.zeros(2), "b": jnp.zeros((), jnp.int32)}))
    assert tree == "State{b: i32[], w: f32[2]}"


def test_state_cannot_hold_a_state():
    a = brainx.State(jnp.zeros(2), name="a")
    b = brainx.State(jnp.ones(2), name="b")
    with pytest.raises(brainx.StateTypeError, match="name='a'.*name='b'|cannot hold another State"):
        b.value = a
    assert np.array_equal(b.value, jnp.ones(2))
    c = brainx.State(a)                      # as brainstate: a State's value, not the State
    assert c is not a and np.array_equal(c.value, a.value)
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
    assert outer.get_read_states() == (b,)          # read-only, as brainstate counts them
    assert outer.was_read(a) and outer.states == (a, b)
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

    # the state is lent to the raw trace while it runs; read after it, it is refused
    if raw == "jit":
        jax.jit(f)(jnp.ones(3))
    elif raw == "grad":
        jax.grad(f)(jnp.ones(3))
    elif raw == "vmap":
        jax.vmap(f)(jnp.ones((2, 3)))
    else:
        jax.lax.scan(lambda c, x: (c, f(x)), 0.0, jnp.ones((2, 3)))
    with pytest.raises(brainx.TracerLeakError, match="name='h'.*has ended.*brainx.transform"):
        h.value
    assert np.array_equal(h.value, jnp.ones(3)) and not isinstance(h.value, jax.core.Tracer)


def test_raw_jax_transform_writing_through_a_brainx_transform_is_refused():
    h = brainx.HiddenState(jnp.ones(3), name="h")

    @transform.jit
    def step(x):
        h.value = h.value * x
        return jnp.sum(h.value)

    jax.grad(step)(jnp.ones(3))
    with pytest.raises(brainx.TracerLeakError, match="name='h'"):
        h.value
    assert np.array_equal(h.value, jnp.ones(3))
    jax.jit(step)(jnp.ones(3))
    with pytest.raises(brainx.TracerLeakError, match="name='h'"):
        step(jnp.ones(3))                   # a brainx transform reading it: refused too
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
        jax.jit(lambda x: setattr(s, "value", x))(1.0)
    with pytest.raises(brainx.TracerLeakError, match="name='s'"):
        s.value
    assert float(s.value) == 0.0


def test_a_state_created_under_a_raw_transform_lives_in_its_trace_and_dies_with_it():
    kept = []

    def f(x):
        s = brainx.ParamState(x * 2)         # born in jit's trace: allowed there
        s.value = s.value + 1
        kept.append(s)
        return s.value

    assert float(jax.jit(f)(1.0)) == 3.0
    with pytest.raises(jax.errors.UnexpectedTracerError):
        kept[0].value + 1                    # escaped: JAX refuses its dead tracer


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


# -- brainstate's State API --------------------------------------------------------------------

def test_metadata_tags_copy_replace_and_copy_from():
    s = brainx.ParamState(jnp.ones(3), name="w", tag="fast", unit_hint="mV")
    assert s.tag == {"fast"} and s.unit_hint == "mV" and s.numel() == 3
    s.add_tag("trainable")
    assert s.tag == {"fast", "trainable"}
    c = s.copy()
    assert type(c) is brainx.ParamState and c is not s and c.tag == s.tag and c.name == "w"
    c.value = jnp.zeros(3)
    assert float(s.value.sum()) == 3.0                       # a copy is independent
    r = s.replace(jnp.zeros(2), name="r")
    assert r.name == "r" and r.value.shape == (2,) and s.value.shape == (3,)
    assert s.replace(c) is c
    with pytest.raises(ValueError, match="expected a ParamState"):
        s.copy_from(brainx.State(jnp.zeros(3)))
    t = brainx.ParamState(jnp.zeros(1))
    t.copy_from(s)
    assert t.name == "w" and t.tag == s.tag and np.array_equal(t.value, s.value)
    assert brainx.maybe_state(s) is s.value and brainx.maybe_state(3) == 3
    assert s.value_call(lambda x: x * 2).tolist() == [2.0, 2.0, 2.0]
    assert s.source_info is not None and s.stack_level == 0


def test_stack_level_and_restore_value_inside_a_transform():
    h = brainx.State(jnp.zeros(()))
    levels = []

    @transform.jit
    def f(x):
        levels.append(brainx.State(x).stack_level)
        before = h.value
        h.value = h.value + x
        h.restore_value(before)            # put back without a write
        return x

    f(1.0)
    assert levels == [1] and float(h.value) == 0.0


def test_trace_stack_queries_as_brainstate_names_them():
    a, b, c = (brainx.State(jnp.full((), float(i))) for i in range(3))
    with brainx.StateTraceStack() as t1:
        a.value = b.value + 1
    with brainx.StateTraceStack() as t2:
        _ = c.value
    assert t1.states == (b, a)                        # first-touch order: b is read first
    assert t1.get_read_states(replace_writen=True) == (b, None)
    assert t1.get_write_states(replace_read=True) == (None, a)
    assert t1.been_writen == (False, True)
    assert [float(v) for v in t1.get_write_state_values()] == [2.0]
    writes, reads = t1.get_state_values(separate=True)
    assert [float(v) for v in writes] == [2.0] and [float(v) for v in reads] == [1.0]
    assert float(t1.original_state_values[1]) == 0.0
    both = t1 + t2
    assert both.states == (b, a, c) and both.get_write_states() == (a,)
    assert both.state_subset(brainx.State) == [b, a, c]
    t1.recovery_original_values()
    assert float(a.value) == 0.0


def test_catcher_tags_excludes_and_indexes():
    with brainx.catch_new_states("init", state_to_exclude=brainx.ParamState) as catcher:
        h = brainx.HiddenState(jnp.zeros(2))
        brainx.ParamState(jnp.zeros(2))
    assert len(catcher) == 1 and catcher[0] is h and h in catcher
    assert catcher.get_by_tag("init") == [h] and h.tag == {"init"}


def test_check_state_value_tree_refuses_a_new_shape():
    s = brainx.State(jnp.zeros(2))
    with brainx.check_state_value_tree():
        s.value = jnp.ones(2)
        with pytest.raises(brainx.StateTypeError, match="another structure or shape"):
            s.value = jnp.ones(3)
    s.value = jnp.ones(3)                      # off again outside the block
    assert s.value.shape == (3,)


def test_hidden_group_and_tree_states():
    import brainunit as u
    g = brainx.HiddenGroupState(jnp.zeros((3, 2)))
    assert g.varshape == (3,) and g.num_state == 2
    g.set_value({"1": jnp.ones(3)})
    assert g.get_value(1).tolist() == [1.0] * 3 and g.get_value(0).tolist() == [0.0] * 3
    with pytest.raises(IndexError):
        g.get_value(2)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        brainx.HiddenGroupState(jnp.zeros(3))
    t = brainx.HiddenTreeState({"v": jnp.zeros(2) * u.mV, "i": jnp.ones(2) * u.mA})
    assert t.num_state == 2 and t.varshape == (2,)
    t.set_value({"v": jnp.full(2, 3.0) * u.mV})
    assert u.math.allclose(t.get_value("v"), jnp.full(2, 3.0) * u.mV)
    assert u.math.allclose(t.get_value("i"), jnp.ones(2) * u.mA)

    @transform.jit
    def step():
        t.set_value({"i": t.get_value("i") * 2})

    step()
    assert u.math.allclose(t.get_value("i"), jnp.full(2, 2.0) * u.mA)


def test_deepcopy_of_states_and_models_is_independent_and_shares_the_creation_record():
    """``copy.deepcopy`` of states (alone, in dicts, in a StateDictManager) and of models (a
    target network, a snapshot): JAX's traceback in a state's creation record cannot be
    copied; a copied State shares the record and copies everything else."""
    import copy

    import brainunit as u

    with brainx.environ.context(dt=0.1 * u.ms):
        net = brainx.nn.Sequential(brainx.nn.Linear(3, 4), brainx.nn.ReLU())
        lif = brainx.nn.init_all_states(brainx.nn.LIF(4))
        pair = {"net": net, "lif": lif, "again": net}          # one module under two names
        twin = copy.deepcopy(pair)
        assert twin["net"] is twin["again"] and twin["net"] is not net
        w, w2 = net.states(brainx.ParamState), twin["net"].states(brainx.ParamState)
        assert list(w) == list(w2)
        for path in w:
            assert w2[path] is not w[path]
            assert w2[path].name == w[path].name and type(w2[path]) is type(w[path])
        twin["lif"].V.value = twin["lif"].V.value + 5.0 * u.mV        # the copy moves alone
        assert np.all(u.get_mantissa(lif.V.value) == 0.0)
        x = jnp.ones(3)
        np.testing.assert_array_equal(brainx.transform.jit(twin["net"])(x), net(x))
        tags = brainx.State(jnp.ones(2), tag={"a"})
        states = copy.deepcopy({"s": tags, "also": tags, "mgr": brainx.StateDictManager(s=tags)})
        copied = states["s"]
        assert states["also"] is copied and states["mgr"]["s"] is copied and copied is not tags
        assert copied.source_info is tags.source_info                 # shared, not copied
        copied.tag.add("b")
        copied.value = jnp.zeros(2)
        assert tags.tag == {"a"} and float(tags.value.sum()) == 2.0
