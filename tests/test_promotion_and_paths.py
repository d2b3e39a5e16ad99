"""Regressions (issue 8, item 6): weak-type promotion in cond and loops, vmap of a cond that
writes one shared value, errors that name the State instead of a JAX tree path, jvp's
state_tangents, jit's static_argnames. Each compares with eager / plain JAX."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.transform import cond, for_loop, jit, jvp, scan, switch, vmap, while_loop


def snapshot(*states):
    return [jax.tree.map(np.asarray, s.value) for s in states]


def assert_same(before, states):
    for old, s in zip(before, states):
        jax.tree.map(np.testing.assert_array_equal, old, jax.tree.map(np.asarray, s.value))


# -- a weakly typed int state that a branch makes a float ------------------------------------

@pytest.mark.parametrize("pred", [True, False])
def test_cond_promotes_a_weak_int_state_like_eager(pred):
    eager = brainx.State(0)
    s = brainx.State(0)

    def bump(state):
        def branch():
            state.value = state.value + 0.5
        return branch

    (bump(eager) if pred else (lambda: None))()           # eager: plain Python
    cond(pred, bump(s), lambda: None)
    assert float(s.value) == float(eager.value)
    assert s.value.dtype == jnp.float32 and s.value.weak_type   # what 0 + 0.5 is in JAX


def test_cond_promotion_inside_jit_matches_plain_jax_select():
    s = brainx.State(0)

    def bump():
        s.value = s.value + 0.5

    f = jit(lambda p: cond(p, bump, lambda: None))
    f(jnp.array(True))
    f(jnp.array(False))
    f(jnp.array(True))
    assert float(s.value) == 1.0 and s.value.dtype == jnp.float32


def test_switch_promotes_a_weak_int_state_too():
    s = brainx.State(1)

    def half():
        s.value = s.value / 2

    switch(1, [lambda: None, half])
    assert float(s.value) == 0.5 and s.value.dtype == jnp.float32


def test_cond_still_refuses_a_strong_dtype_change():
    s = brainx.State(jnp.zeros((), jnp.int32), name="count")

    def bump():
        s.value = s.value + 0.5

    with pytest.raises(brainx.StateTypeError, match=r"State\(.*name='count'.*before int32\[\]"):
        cond(True, bump, lambda: None)
    assert s.value.dtype == jnp.int32


def test_for_loop_and_while_loop_promote_a_weak_int_state_like_jax():
    s = brainx.State(0)

    def step(x):
        s.value = s.value + 0.5

    for_loop(step, jnp.arange(3))
    ref = jax.lax.scan(lambda c, x: (c + 0.5, None), 0, jnp.arange(3))[0]
    assert float(s.value) == float(ref) == 1.5

    t = brainx.State(0)

    def body(n):
        t.value = t.value + 0.5
        return n + 1

    n = while_loop(lambda n: n < 4, body, 0)
    assert int(n) == 4 and float(t.value) == 2.0


def test_scan_and_while_promote_a_weak_carry_like_jax():
    out, _ = scan(lambda c, x: (c + 0.5, x), 0, jnp.ones(3))
    ref, _ = jax.lax.scan(lambda c, x: (c + 0.5, x), 0, jnp.ones(3))
    assert float(out) == float(ref) == 1.5
    assert float(while_loop(lambda c: c < 3, lambda c: c + 0.5, 0)) == float(
        jax.lax.while_loop(lambda c: c < 3, lambda c: c + 0.5, 0))


# -- vmap of a cond whose branches write one shared value ------------------------------------

def test_vmap_cond_both_branches_write_the_same_constant_to_a_shared_state():
    t = brainx.State(jnp.zeros(3))

    def f(x):
        def a():
            t.value = jnp.ones(3)
            return x + 1

        def b():
            t.value = jnp.ones(3)
            return x - 1

        return cond(x > 0, a, b)

    xs = jnp.array([-1.0, 2.0, -3.0, 4.0])
    out = vmap(f)(xs)
    np.testing.assert_allclose(out, jnp.where(xs > 0, xs + 1, xs - 1))
    np.testing.assert_array_equal(np.asarray(t.value), np.ones(3))


def test_vmap_cond_both_branches_write_the_same_shared_input():
    w = brainx.ParamState(jnp.array([2.0, 3.0]))
    t = brainx.State(jnp.zeros(2))

    def f(x):
        def a():
            t.value = w.value * 2
        cond(x > 0, a, a)
        return x

    vmap(f)(jnp.array([-1.0, 1.0]))
    np.testing.assert_array_equal(np.asarray(t.value), [4.0, 6.0])


def test_vmap_cond_different_constants_per_lane_is_still_refused():
    t = brainx.State(jnp.zeros(()), name="t")

    def f(x):
        def a():
            t.value = jnp.float32(1.0)

        def b():
            t.value = jnp.float32(2.0)
        cond(x > 0, a, b)
        return x

    with pytest.raises(brainx.BatchAxisError, match=r"State\(.*name='t'"):
        vmap(f)(jnp.array([-1.0, 1.0]))
    assert float(t.value) == 0.0
    vmap(f, out_states=t)(jnp.array([-1.0, 1.0]))        # declared per lane: what JAX computes
    np.testing.assert_array_equal(np.asarray(t.value), [2.0, 1.0])


def test_hoisting_a_shared_output_keeps_grad_and_jit_right():
    w = brainx.ParamState(jnp.array(3.0))

    def f(x):
        return cond(x > 0, lambda: w.value * x + 1.0, lambda: w.value * x - 1.0)

    for x in (2.0, -2.0):
        g = brainx.transform.grad(f, grad_states=w)(x)
        ref = jax.grad(lambda w: jax.lax.cond(x > 0, lambda: w * x + 1.0, lambda: w * x - 1.0))(3.0)
        assert float(g) == float(ref)


# -- errors that name the State, not a JAX tree path -----------------------------------------

def test_loop_that_changes_a_non_array_leaf_names_the_state_and_shows_it():
    u = brainx.State({"a": jnp.zeros(2), "tag": "hello"}, name="u")

    def step(x):
        u.value = {"a": u.value["a"] + x, "tag": "bye"}

    before = snapshot(u)
    with pytest.raises(brainx.StateTypeError,
                       match=r"State\(.*name='u'.*before \{'a': float32\[2\], 'tag': 'hello'\}, "
                             r"after \{'a': float32\[2\], 'tag': 'bye'\}"):
        for_loop(step, jnp.ones(3))
    assert_same(before, [u])


def test_cond_that_changes_a_non_array_leaf_names_the_state():
    u = brainx.State([jnp.zeros(2), "a"], name="u")

    def branch():
        u.value = [jnp.ones(2), "b"]

    with pytest.raises(brainx.StateTypeError, match=r"switch changes the type of State\(.*name='u'"):
        switch(1, [lambda: None, branch])
    assert u.value[1] == "a"


def test_a_state_with_a_non_array_leaf_keeps_it_through_a_loop_and_grad():
    m = brainx.State({"a": jnp.zeros(2), "tag": "x"}, name="m")

    def step(x):
        m.value = {"a": m.value["a"] + x, "tag": "x"}
        return m.value["a"].sum()

    ys = for_loop(step, jnp.ones(3))
    np.testing.assert_allclose(ys, [2.0, 4.0, 6.0])
    assert m.value["tag"] == "x"
    g = brainx.transform.grad(lambda x: (m.value["a"] * x).sum(), grad_states=m)(jnp.ones(2))
    assert g["tag"] == "x"
    np.testing.assert_allclose(g["a"], jax.grad(lambda a: (a * jnp.ones(2)).sum())(m.value["a"]))


def test_vmap_in_states_with_a_non_array_leaf_sees_the_value_not_a_wrapper():
    u = brainx.State({"a": jnp.arange(3.0), "tag": "hello"})
    out = vmap(lambda x: u.value["a"] * x, in_states=u)(jnp.ones(3))
    np.testing.assert_allclose(out, jnp.arange(3.0))


def test_branch_outputs_that_differ_are_reported_in_the_users_terms():
    with pytest.raises(TypeError, match=r"true branch returns \(1\.0|returns .*but the false"):
        cond(True, lambda: (1.0, (2.0, 3.0)), lambda: (1.0, (2.0,)))
    with pytest.raises(TypeError, match=r"cond: the true branch returns .*int32.*false branch"):
        cond(True, lambda: jnp.int32(1), lambda: jnp.float32(1.0))


def test_a_loop_carry_that_changes_type_is_reported_in_the_users_terms():
    with pytest.raises(TypeError, match=r"returns a carry of type \(weak float32\[\], weak "
                                        r"float32\[\]\), but the carry it was given has type"):
        scan(lambda c, x: ((c, c), x), 0.0, jnp.ones(3))
    with pytest.raises(TypeError, match=r"body_fun of while_loop returns a carry of type int32"):
        while_loop(lambda c: c.sum() < 3, lambda c: c.astype(jnp.int32), jnp.zeros(2))


# -- jvp's state_tangents --------------------------------------------------------------------

def test_jvp_accepts_a_one_tuple_of_tangents_for_one_state():
    w = brainx.ParamState(jnp.array([2.0, 3.0]))
    f = lambda x: w.value * x
    ref = jax.jvp(lambda w, x: w * x, (w.value, jnp.ones(2)), (jnp.ones(2), jnp.zeros(2)))
    for tangents in (jnp.ones(2), (jnp.ones(2),), [jnp.ones(2)]):
        out, t = jvp(f, (jnp.ones(2),), (jnp.zeros(2),), grad_states=w, state_tangents=tangents)
        np.testing.assert_allclose(t, ref[1])
    out, t = jvp(f, (jnp.ones(2),), (jnp.zeros(2),), grad_states=[w],
                 state_tangents=(jnp.ones(2),))
    np.testing.assert_allclose(t, ref[1])


def test_jvp_one_tuple_is_the_value_when_the_state_holds_a_one_tuple():
    w = brainx.ParamState((jnp.array([2.0, 3.0]),))
    out, t = jvp(lambda x: w.value[0] * x, (jnp.ones(2),), (jnp.zeros(2),), grad_states=w,
                 state_tangents=(jnp.ones(2),))
    np.testing.assert_allclose(t, [1.0, 1.0])


def test_jvp_wrong_tangents_name_the_state_and_the_expected_structure():
    w = brainx.ParamState(jnp.array([2.0, 3.0]), name="w")
    f = lambda x: w.value * x
    with pytest.raises(ValueError, match=r"tangent given for ParamState\(.*name='w'.* is "
                                         r"float32\[3\], but the state holds float32\[2\]"):
        jvp(f, (jnp.ones(2),), (jnp.ones(2),), grad_states=w, state_tangents=jnp.ones(3))
    with pytest.raises(ValueError, match=r"another dtype"):
        jvp(f, (jnp.ones(2),), (jnp.ones(2),), grad_states=w,
            state_tangents=jnp.ones(2, jnp.int32))
    with pytest.raises(ValueError, match=r"structure of grad_states, PyTreeDef\(\[\*, \*\]\)"):
        jvp(f, (jnp.ones(2),), (jnp.ones(2),), grad_states=[w, w.__class__(jnp.ones(()))],
            state_tangents=[jnp.ones(2)])
    assert w.value.tolist() == [2.0, 3.0]


# -- jit's static_argnames -------------------------------------------------------------------

def test_jit_refuses_static_argnames_that_are_not_parameters():
    with pytest.raises(ValueError, match=r"static_argnames \['nope'\] are not parameters"):
        jit(lambda x: x, static_argnames="nope")
    with pytest.raises(ValueError):                        # as jax.jit does
        jax.jit(lambda x: x, static_argnames="nope")
