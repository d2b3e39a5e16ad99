"""One test per error documented in docs/errors.md: it is raised, its message names the State
(or the argument) and the fix, and every state is unchanged afterwards."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform
from brainx.errors import BrainxError


def _np(x):
    """A leaf as numpy; a typed PRNG key (a RandomState's value) as its raw uint32 data."""
    if jnp.issubdtype(getattr(x, "dtype", np.float32), jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(x)


def values(*states):
    return [jax.tree.map(_np, s.value) for s in states]


def unchanged(before, *states):
    for old, s in zip(before, states):
        jax.tree.map(np.testing.assert_array_equal, old, jax.tree.map(_np, s.value))
    return True


def test_every_documented_class_is_a_brainx_error():
    for cls in (brainx.TracerLeakError, brainx.ExpiredStateError, brainx.StateTypeError,
                brainx.BatchAxisError):
        assert issubclass(cls, BrainxError)
    assert issubclass(brainx.StateTypeError, TypeError)
    assert issubclass(brainx.BatchAxisError, ValueError)
    assert issubclass(brainx.errors.StepOutputError, BrainxError)


def test_tracer_leak_raw_jit_writing_a_state():
    count = brainx.State(jnp.zeros(()), name="count")
    before = values(count)
    jax.jit(lambda x: setattr(count, "value", x))(1.0)    # lent to jit's trace while it runs
    with pytest.raises(brainx.TracerLeakError,
                       match=r"State\(.*name='count'.*raw JAX transform that has ended.*put back.*"
                             r"brainx.transform.jit"):
        count.value
    assert unchanged(before, count)


def test_tracer_leak_raw_jit_inside_a_brainx_transform():
    count = brainx.State(jnp.zeros(()), name="count")
    before = values(count)

    def inner(x):
        count.value = x * 2
        return x

    with pytest.raises(brainx.TracerLeakError,
                       match=r"State\(.*name='count'.*written inside a raw JAX transform.*"
                             r"No state was changed"):
        transform.jit(lambda x: jax.jit(inner)(x))(3.0)
    assert unchanged(before, count)


def test_expired_state_created_inside_jit():
    made = []
    keep = brainx.State(jnp.ones(()), name="keep")
    before = values(keep)

    @transform.jit
    def build(x):
        made.append(brainx.State(x * 2, name="tmp"))
        return x * keep.value

    build(1.0)
    with pytest.raises(brainx.ExpiredStateError,
                       match=r"State\(.*name='tmp'.*was created inside .*Create the state outside"):
        made[0].value
    assert unchanged(before, keep)


def test_state_type_error_state_inside_a_state():
    a, b = brainx.State(jnp.ones(2), name="a"), brainx.State(jnp.zeros(2), name="b")
    before = values(a, b)
    with pytest.raises(brainx.StateTypeError, match=r"inside State\(.*name='b'.*`target.value = "
                                                    r"source.value`"):
        b.value = a
    with pytest.raises(brainx.StateTypeError, match=r"cannot hold another State"):
        brainx.State((a, 1.0))                      # a State nested in a new state's value
    assert unchanged(before, a, b)


def test_state_type_error_shape_change_in_a_loop():
    v = brainx.State(jnp.zeros(3), name="v")
    before = values(v)
    with pytest.raises(brainx.StateTypeError,
                       match=r"for_loop .*State\(.*name='v'.*before float32\[3\], after "
                             r"float32\[4\].*No state was changed"):
        transform.for_loop(lambda x: setattr(v, "value", jnp.concatenate([v.value, x[None]])),
                           jnp.ones(5))
    assert unchanged(before, v)


def test_state_type_error_non_array_leaf_change_in_a_branch():
    tagged = brainx.State({"x": jnp.zeros(2), "tag": "start"}, name="tagged")
    other = brainx.State(jnp.zeros(()), name="other")
    before = values(other)

    def relabel():
        other.value = other.value + 1
        tagged.value = {"x": tagged.value["x"] + 1, "tag": "done"}

    with pytest.raises(brainx.StateTypeError,
                       match=r"State\(.*name='tagged'.*before \{'tag': 'start'.*after "
                             r"\{'tag': 'done'"):
        transform.cond(True, relabel, lambda: None)
    assert tagged.value["tag"] == "start" and float(tagged.value["x"].sum()) == 0.0
    assert unchanged(before, other)


def test_batch_axis_error_per_lane_write_to_a_shared_state():
    total = brainx.State(jnp.zeros(()), name="total")
    before = values(total)

    def accumulate(x):
        total.value = total.value + x
        return x

    with pytest.raises(brainx.BatchAxisError,
                       match=r"different value in each lane to State\(.*name='total'.*Declare it "
                             r"in out_states"):
        transform.vmap(accumulate)(jnp.arange(3.0))
    assert unchanged(before, total)


def test_batch_axis_error_two_axes_for_one_state():
    h = brainx.State(jnp.zeros((2, 3)), name="h")
    with pytest.raises(brainx.BatchAxisError,
                       match=r"State\(.*name='h'.*axis 0 in in_states but along axis 1"):
        transform.vmap(lambda x: x, in_states={0: h}, out_states={1: h})
    with pytest.raises(brainx.BatchAxisError, match=r"State\(.*name='h'.* two axes in in_states"):
        transform.vmap(lambda x: x, in_states={0: h, 1: [h]})


def test_batch_axis_error_random_state_under_raw_vmap():
    rng = brainx.random.RandomState(0)
    before = values(rng)
    with pytest.raises(brainx.BatchAxisError, match=r"raw jax.vmap.*transform.vmap"):
        jax.vmap(lambda x: rng.normal() + x)(jnp.ones(3))
    assert unchanged(before, rng)


def test_brainx_error_scopes_closed_out_of_order():
    s = brainx.State(jnp.zeros(()), name="s")
    before = values(s)
    outer, inner = brainx.StateTraceStack("outer"), brainx.StateTraceStack("inner")
    outer.__enter__()
    inner.__enter__()
    s.value = s.value + 0                      # recorded by both, nothing changes
    with pytest.raises(BrainxError, match=r"closed while an inner StateTraceStack was still open"):
        outer.__exit__(None, None, None)
    assert brainx.state.trace.active_traces() == []
    assert unchanged(before, s)


def test_jit_static_argnames_not_parameters_and_unhashable_static():
    with pytest.raises(ValueError, match=r"static_argnames \['nope'\] are not parameters"):
        transform.jit(lambda x: x, static_argnames="nope")
    scaled = transform.jit(lambda x, factors: x * sum(factors), static_argnums=1)
    with pytest.raises(ValueError, match=r"positional argument 1 .* must be hashable, got a list"):
        scaled(1.0, [1, 2])
    assert float(scaled(1.0, (1, 2))) == 3.0


def test_cond_predicate_and_branch_outputs():
    s = brainx.State(jnp.zeros(()), name="s")
    before = values(s)

    def write_and(v):
        def branch():
            s.value = s.value + 1
            return v
        return branch

    with pytest.raises(TypeError, match=r"cond: the predicate must be a scalar"):
        transform.cond(jnp.array([True, False]), write_and(1.0), write_and(2.0))
    with pytest.raises(TypeError, match=r"cond: the true branch returns int32\[\] but the false "
                                        r"branch returns float32\[\].*No state was changed"):
        transform.cond(True, write_and(jnp.int32(1)), write_and(jnp.float32(1.0)))
    assert unchanged(before, s)


def test_loop_carry_type_change():
    s = brainx.State(jnp.zeros(()), name="s")
    before = values(s)

    def step(c, x):
        s.value = s.value + x
        return c.astype(jnp.int32), x

    with pytest.raises(TypeError, match=r"returns a carry of type int32\[2\], but the carry it "
                                        r"was given has type float32\[2\]"):
        transform.scan(step, jnp.zeros(2), jnp.ones(3))
    assert unchanged(before, s)


@pytest.mark.parametrize("loop", ["scan", "checkpointed_scan"])
def test_step_output_error_not_a_pair(loop):
    s = brainx.State(jnp.zeros(()), name="s")
    before = values(s)

    def single(c, x):
        s.value = s.value + x
        return c + x

    def triple(c, x):
        s.value = s.value + x
        return c + x, x, x

    for step, got in ((single, "got DynamicJaxprTracer"), (triple, "got tuple")):
        with pytest.raises(brainx.errors.StepOutputError,
                           match=rf"the step of {loop} \(.*\) must return a pair \(new_carry, "
                                 rf"y\), {got}.*Return \(carry, None\)") as info:
            getattr(transform, loop)(step, 0.0, jnp.ones(3))
        assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
        assert unchanged(before, s)


def test_while_cond_fun_writes_a_state():
    flag = brainx.State(jnp.zeros(()), name="flag")
    before = values(flag)

    def checks_and_writes(n):
        flag.value = flag.value + 1
        return n < 3

    with pytest.raises(ValueError, match=r"cond_fun writes State\(.*name='flag'.*move the write "
                                         r"into body_fun. No state was changed"):
        transform.while_loop(checks_and_writes, lambda n: n + 1, 0)
    assert unchanged(before, flag)


def test_loop_xs_of_different_lengths():
    s = brainx.State(jnp.zeros(()), name="s")
    before = values(s)
    with pytest.raises(ValueError, match=r"for_loop: the leaves of xs have different leading "
                                         r"axis sizes \[3, 4\]"):
        transform.for_loop(lambda a, b: setattr(s, "value", s.value + a.sum()), jnp.ones(3),
                           jnp.ones(4))
    assert unchanged(before, s)


def test_grad_state_never_read():
    w = brainx.ParamState(jnp.array([1.0, 2.0]), name="w")
    unused = brainx.ParamState(jnp.zeros(2), name="unused")
    before = values(w, unused)
    with pytest.raises(ValueError, match=r"includes ParamState\(.*name='unused'.*never reads.*"
                                         r"check_states=False"):
        transform.grad(lambda x: jnp.sum(w.value * x), grad_states=[w, unused])(jnp.ones(2))
    assert unchanged(before, w, unused)


def test_jvp_state_tangent_shape_and_structure():
    w = brainx.ParamState(jnp.array([1.0, 2.0]), name="w")
    h = brainx.State(jnp.zeros(()), name="h")
    before = values(w, h)

    def loss(x):
        h.value = h.value + 1
        return jnp.sum(w.value * x)

    with pytest.raises(ValueError, match=r"tangent given for ParamState\(.*name='w'.* is "
                                         r"float32\[3\], but the state holds float32\[2\]"):
        transform.jvp(loss, (jnp.ones(2),), (jnp.ones(2),), grad_states=w,
                      state_tangents=jnp.ones(3))
    with pytest.raises(ValueError, match=r"structure of grad_states, PyTreeDef\(\{'w': \*\}\)"):
        transform.jvp(loss, (jnp.ones(2),), (jnp.ones(2),), grad_states={"w": w},
                      state_tangents=[jnp.ones(2)])
    assert unchanged(before, w, h)


def test_vmap_axis_sizes_differ():
    s = brainx.State(jnp.zeros(()), name="s")
    before = values(s)
    with pytest.raises(ValueError, match=r"mapped axes have different sizes.*No state was changed"):
        transform.vmap(lambda a, b: a + b + s.value)(jnp.ones(3), jnp.ones(4))
    assert unchanged(before, s)
