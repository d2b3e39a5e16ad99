"""Brainstate's smaller State API: stack levels, repr, replace, restore, metadata wrappers,
stand-ins, trace assignment, hidden-state value checks and group-state keys."""

import brainunit as u
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.state import NewStateCatcher, NonBatchState, StateMetadata


def test_stack_level_can_be_moved_and_never_goes_below_zero():
    s = brainx.State(1.0)
    assert s.stack_level == 0
    s.increase_stack_level()
    s.increase_stack_level()
    assert s.stack_level == 2
    s.decrease_stack_level()
    assert s.stack_level == 1
    s.stack_level = 0
    s.decrease_stack_level()
    assert s.stack_level == 0


def test_repr_shows_tags_and_replace_takes_brainstates_name_key():
    s = brainx.State(jnp.ones(2), name="a", tag="fast")
    s.add_tag("beta")
    assert repr(s) == "State(f32[2], name='a', tag={'beta', 'fast'})"   # tags sorted
    r = s.replace(_name="b")
    assert r.name == "b" and s.name == "a"
    other = s.replace({"w": jnp.zeros(3)})        # replace may change the structure
    assert other.value["w"].tolist() == [0.0] * 3 and s.value.tolist() == [1.0, 1.0]


def test_restore_value_refuses_another_structure_and_keeps_the_value():
    s = brainx.State({"a": jnp.ones(2)}, name="p")
    with pytest.raises(brainx.StateTypeError, match="name='p'.*another tree structure"):
        s.restore_value({"a": jnp.ones(2), "b": jnp.ones(2)})
    assert list(s.value) == ["a"]
    s.restore_value({"a": jnp.zeros(5)})           # same structure, any shape
    assert s.value["a"].shape == (5,)


def test_state_metadata_unwraps_into_value_and_attributes():
    s = brainx.ParamState(StateMetadata(jnp.ones(2), {"unit_name": "mV"}), name="w")
    assert s.value.tolist() == [1.0, 1.0] and s.unit_name == "mV" and s.name == "w"


def test_fake_state_is_a_plain_holder_no_trace_sees():
    fake = brainx.FakeState(jnp.ones(2), name="f")
    with brainx.StateTraceStack() as trace:
        fake.value = fake.value + 1
    assert trace.states == () and fake.value.tolist() == [2.0, 2.0]
    fake.name = "g"
    assert fake.name == "g" and repr(brainx.FakeState(3)) == "FakedState(value=3)"


def test_non_batch_state_is_a_short_term_state():
    nb = NonBatchState(jnp.zeros(3))
    assert isinstance(nb, brainx.ShortTermState) and nb.value.shape == (3,)


def test_check_state_jax_tracer_is_accepted_and_brainx_always_checks():
    import jax
    s = brainx.State(jnp.zeros(2))
    with brainx.check_state_jax_tracer():
        jax.jit(lambda x: setattr(s, "value", x))(jnp.ones(2))
        with pytest.raises(brainx.TracerLeakError):
            s.value
    assert s.value.tolist() == [0.0, 0.0]


def test_assign_state_vals_writes_written_and_restores_read_states():
    read, written = brainx.State(jnp.zeros(2)), brainx.State(jnp.zeros(2))
    with brainx.StateTraceStack() as trace:
        written.value = read.value + 1
    log = []
    read.register_hook("restore", lambda ctx: log.append("restore read"))
    written.register_hook("write_after", lambda ctx: log.append("write written"))
    trace.assign_state_vals([jnp.full(2, 5.0), jnp.full(2, 7.0)])   # order: trace.states
    assert trace.states == (read, written)
    assert read.value.tolist() == [5.0, 5.0] and written.value.tolist() == [7.0, 7.0]
    assert log == ["restore read", "write written"]
    trace.assign_state_vals_v2([jnp.ones(2), None], [None, jnp.full(2, 9.0)])
    assert read.value.tolist() == [1.0, 1.0] and written.value.tolist() == [9.0, 9.0]
    with pytest.raises(ValueError, match="one value per state"):
        trace.assign_state_vals([jnp.ones(2)])


def test_new_state_catcher_speaks_brainstates_dialect():
    catcher = NewStateCatcher(state_tag="t")
    a, b = brainx.State(jnp.ones(2)), brainx.State(jnp.zeros(2))
    b.stack_level = 3
    for s in (a, a, b):
        catcher.append(s)
    assert catcher.get_states() == [a, b] and a.tag == {"t"}
    assert [v.tolist() for v in catcher.values] == [[1.0, 1.0], [0.0, 0.0]]
    catcher.decrease_stack_level()
    assert (a.stack_level, b.stack_level) == (0, 2)


@pytest.mark.parametrize("bad", [[1, 2, 3], {"a": 1}, "v"])
def test_hidden_state_holds_one_array(bad):
    with pytest.raises(TypeError, match=f"HiddenState: its value must be one array.*got "
                                        f"{type(bad).__name__}"):
        brainx.HiddenState(bad)
    for good in (0.0, np.zeros(2), jnp.zeros(2), jnp.zeros(2) * u.mV):
        assert np.shape(brainx.HiddenState(good).value) == np.shape(good)


def test_group_state_set_value_checks_keys_ranges_and_shapes():
    g = brainx.HiddenGroupState(np.zeros((4, 3)), name="g")   # a NumPy value
    g.set_value({0: np.ones(4), "2": jnp.full(4, 2.0)})
    np.testing.assert_allclose(g.value, np.stack([np.ones(4), np.zeros(4), np.full(4, 2.0)], -1))
    with pytest.raises(TypeError, match="name='g'.*should be int or str, got 1.5"):
        g.set_value({1.5: jnp.ones(4)})
    with pytest.raises(ValueError, match="index 3 is out of range.*0 to 2"):
        g.set_value({3: jnp.ones(4)})
    with pytest.raises(ValueError, match="out of range"):
        g.set_value({-1: jnp.ones(4)})                 # writing takes no negative index
    assert g.get_value(-1).tolist() == [2.0] * 4       # reading does
    with pytest.raises(IndexError, match="out of range"):
        g.get_value(7)
    with pytest.raises(ValueError, match="shape of the hidden state, \\(4,\\)"):
        g.set_value({0: jnp.ones((2, 2))})
    with pytest.raises(TypeError, match="set_value takes a dictionary of hidden states"):
        g.set_value(5)


def test_tree_state_units_and_value_checks():
    t = brainx.HiddenTreeState({"v": jnp.zeros(3) * u.mV, "i": jnp.ones(3) * u.mA})
    assert t.name2unit == {"v": u.mV, "i": u.mA} and t.index2unit == {0: u.mV, 1: u.mA}
    with pytest.raises(KeyError, match=r"no variable .*w.* \(not found among \[.*v.*, .*i.*\]\)"):
        t.get_value("w")
    with pytest.raises(TypeError, match="dictionary/sequence"):
        brainx.HiddenTreeState(3)
    with pytest.raises(TypeError, match="variable 'v' must be one array"):
        brainx.HiddenTreeState({"v": [1, 2, 3], "i": jnp.ones(3)})


def test_brainstates_error_classes_catch_ours():
    # brainstate raises ValueError for a State given as a value and for a changed tree,
    # and TraceContextError for reading a state whose tracer's trace has ended
    a, b = brainx.State(jnp.zeros(2), name="a"), brainx.State(jnp.ones(2))
    with pytest.raises(ValueError, match="cannot hold another State"):
        a.value = b
    with brainx.check_state_value_tree():
        with pytest.raises(ValueError, match="another structure"):
            a.value = {"x": jnp.zeros(2)}
    np.testing.assert_array_equal(a.value, [0.0, 0.0])
    assert issubclass(brainx.StateTypeError, TypeError)  # still what brainx said before

    holder = {}

    @brainx.transform.jit
    def f(x):
        holder.setdefault("s", brainx.ShortTermState(x * 2.0))
        return x

    f(jnp.ones(2))
    with pytest.raises(brainx.TraceContextError, match="created inside"):
        _ = holder["s"].value
    assert issubclass(brainx.ExpiredStateError, RuntimeError)


def test_group_state_num_state_refuses_names_out_of_step_with_the_value():
    t = brainx.HiddenTreeState({"v": jnp.ones((4, 3)), "i": jnp.zeros((4, 3))})
    assert t.num_state == 2
    t.name2index.pop("i")
    with pytest.raises(ValueError, match="name2index.*'v'"):
        _ = t.num_state
    g = brainx.HiddenGroupState(jnp.zeros((4, 3)))
    g.name2index["1"] = 0  # two names for index 0, none for 1
    with pytest.raises(ValueError, match="holds 3 variables"):
        g.get_value(0)


# -- state references (TreefyState) ----------------------------------------------------------

def test_to_state_ref_snapshots_and_update_from_ref_writes_back():
    import jax
    w = brainx.ParamState(jnp.ones(3), name="w", tag="fast")
    ref = w.to_state_ref()
    assert isinstance(ref, brainx.TreefyState) and ref.type is brainx.ParamState
    assert ref.name == "w" and ref.get_metadata()["_name"] == "w"
    w.value = jnp.zeros(3)                          # the snapshot does not follow the state
    np.testing.assert_array_equal(ref.value, jnp.ones(3))
    doubled = jax.tree.map(lambda x: 2 * x, ref)
    other = brainx.ParamState(jnp.zeros(3))
    other.update_from_ref(doubled)
    np.testing.assert_array_equal(other.value, 2 * jnp.ones(3))
    assert other.name == "w" and other.tag == {"fast"}


def test_update_from_ref_inside_jit_is_a_recorded_write():
    s = brainx.State(jnp.zeros(2))
    ref = brainx.TreefyState(brainx.State, jnp.ones(2), _name="s")

    @brainx.transform.jit
    def f():
        s.update_from_ref(ref.replace(s.value + 5.0))

    f()
    np.testing.assert_array_equal(s.value, 5.0 * jnp.ones(2))
    with pytest.raises(TypeError, match="TreefyState"):
        s.update_from_ref(jnp.ones(2))


def test_treefy_state_takes_brainstates_name_key_and_rebuilds_the_type():
    ref = brainx.TreefyState(brainx.ShortTermState, jnp.arange(3.0), _name="x")
    assert ref.name == "x"
    ref.name = "y"
    state = ref.to_state()
    assert type(state) is brainx.ShortTermState and state.name == "y"
    np.testing.assert_array_equal(state.value, jnp.arange(3.0))
    assert brainx.TreefyState(brainx.State, 1.0, name="z").name == "z"
    with pytest.raises(TypeError, match="not a brainx State"):
        brainx.TreefyState(dict, 1.0).to_state()


def test_identical_refs_share_a_treedef_so_jit_traces_once():
    import jax
    traces = []

    @jax.jit
    def f(ref):
        traces.append(1)
        return ref

    f(brainx.ParamState(jnp.ones(3)).to_state_ref())
    f(brainx.ParamState(jnp.zeros(3)).to_state_ref())
    assert len(traces) == 1


def test_update_from_ref_refuses_a_snapshot_of_an_unrelated_kind_of_state():
    w = brainx.ParamState(jnp.ones(2))
    key_ref = brainx.random.RandomState(0).to_state_ref()
    with pytest.raises(TypeError, match="unrelated kind of state"):
        w.update_from_ref(key_ref)
    np.testing.assert_array_equal(w.value, jnp.ones(2))
    w.update_from_ref(brainx.State(jnp.zeros(2)).to_state_ref())     # a base class: fine
    np.testing.assert_array_equal(w.value, jnp.zeros(2))


def test_brainstates_smaller_state_methods_init_checks_and_source_errors():
    import jax
    h = brainx.HiddenState.init(jnp.zeros, 3, batch_size=2, tag="h")
    assert h.value.shape == (2, 3) and h.tag == {"h"}
    np.testing.assert_array_equal(brainx.ParamState.init(0.5, (3,)).value, 0.5 * np.ones(3))
    s = brainx.State(jnp.ones(2))
    s.check_if_deleted()
    s.check_valid_trace(lambda: "unused")
    jax.jit(lambda v: v + 0, donate_argnums=0)(s.value)
    if s._value.is_deleted():
        with pytest.raises(RuntimeError, match="deleted"):
            s.check_if_deleted()
    with pytest.raises(KeyError, match="boom"):
        s.raise_error_with_source_info(KeyError("boom"))
    made = []
    brainx.transform.jit(lambda x: made.append(brainx.State(x)) or x)(1.0)
    with pytest.raises(brainx.TraceContextError, match="gone"):
        made[0].check_valid_trace(lambda: "gone")
