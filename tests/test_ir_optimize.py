"""IR optimisation passes (``brainx.transform.optimize_jaxpr`` and friends, issue 20).

Every pass must compute exactly the same function (compared bit for bit, NaN and
the sign of zero included, by ``jax.core.eval_jaxpr`` on the original and the
rewritten jaxpr), keep the interface (the very ``invars``/``outvars``/``constvars``
objects, the effects), pass ``check_jaxpr``, and never drop, merge or reorder an
effectful equation or a callback.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from jax.experimental import io_callback
from jax.extend import core as jcore

import brainx
from brainx.transform import (
    algebraic_simplification, common_subexpression_elimination, constant_fold, copy_propagation,
    dead_code_elimination, optimize_jaxpr,
)

PASSES = {
    "constant_fold": constant_fold, "algebraic_simplification": algebraic_simplification,
    "copy_propagation": copy_propagation, "cse": common_subexpression_elimination,
    "dce": dead_code_elimination, "optimize_jaxpr": optimize_jaxpr,
}
SPECIALS = np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 3e38], np.float32)


# ----------------------------------------------------------------------------- helpers

def identical(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    if jnp.issubdtype(a.dtype, jnp.floating) and a.dtype.kind != "f":   # bfloat16: kind 'V'
        a, b = a.astype(np.float32), b.astype(np.float32)
    if a.dtype.kind in "fc":
        assert np.array_equal(a, b, equal_nan=True), (a, b)
        assert np.array_equal(np.signbit(np.real(a)), np.signbit(np.real(b))), (a, b)
        assert np.array_equal(np.signbit(np.imag(a)), np.signbit(np.imag(b))), (a, b)
    else:
        assert np.array_equal(a, b), (a, b)


def all_eqns(jaxpr):
    """Every equation, nested jaxprs included, depth first."""
    out = []
    for eqn in jaxpr.eqns:
        out.append(eqn)
        for sub in _subs(eqn):
            out.extend(all_eqns(sub))
    return out


def _subs(eqn):
    for v in eqn.params.values():
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, jcore.ClosedJaxpr):
                yield x.jaxpr
            elif isinstance(x, jcore.Jaxpr):
                yield x


def effect_trace(jaxpr):
    """The effectful equations and callbacks in order: (primitive, params repr)."""
    return [(e.primitive.name, repr(sorted(e.params.items(), key=lambda kv: kv[0])))
            for e in all_eqns(jaxpr) if e.effects or "callback" in e.primitive.name]


def check(closed, args, pass_fn=optimize_jaxpr, **kw):
    """Run ``pass_fn`` on ``closed`` and check the result against it; return the result."""
    new = pass_fn(closed, **kw)
    assert type(new) is type(closed)
    old_j = closed.jaxpr
    new_j = new.jaxpr
    jcore.check_jaxpr(new_j)
    assert new_j.invars == old_j.invars and new_j.constvars == old_j.constvars
    assert len(new_j.outvars) == len(old_j.outvars)
    assert all(a is b for a, b in zip(new_j.outvars, old_j.outvars))
    assert new_j.effects == old_j.effects
    assert effect_trace(new_j) == effect_trace(old_j)
    want = jax.core.eval_jaxpr(old_j, closed.consts, *args)
    got = jax.core.eval_jaxpr(new_j, new.consts, *args)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        if jnp.issubdtype(w.dtype, jax.dtypes.extended):
            w, g = jax.random.key_data(w), jax.random.key_data(g)
        identical(w, g)
    return new


def names(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


def floats(shape=(8,), seed=0):
    x = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    x.flat[: len(SPECIALS)] = SPECIALS[: x.size]
    return jnp.asarray(x)


# ----------------------------------------------------------------------------- each pass

def test_cse_merges_repeats_and_keeps_outputs():
    def f(x, y):
        a = jnp.sin(x) * y
        b = jnp.sin(x) * y          # a repeat of a
        return a + b, b, jnp.cos(x), jnp.cos(x)
    closed = jax.make_jaxpr(f)(floats(), floats(seed=1))
    new = check(closed, (floats(), floats(seed=1)), common_subexpression_elimination)
    assert names(new).count("sin") == 1 and names(new).count("cos") == 1
    assert names(new).count("mul") == 1
    # a merged output is defined by an identity at the end
    assert names(new)[-2:] == ["convert_element_type", "convert_element_type"]
    again = common_subexpression_elimination(new)
    assert names(again) == names(new)


def test_cse_respects_parameters_and_literals():
    def f(x):
        return (jnp.sum(x, 0), jnp.sum(x, 1), x + 1.0, x + 2.0, x + 1.0,
                x.astype(jnp.int32), x.astype(jnp.int16))
    x = floats((4, 2))
    new = check(jax.make_jaxpr(f)(x), (x,), common_subexpression_elimination)
    assert names(new).count("reduce_sum") == 2 and names(new).count("add") == 2
    assert names(new).count("convert_element_type") == 3  # two casts and an identity


def test_algebraic_identities_that_hold_exactly():
    def f(x):
        a = x * 1.0
        b = 1.0 * a
        c = b / 1.0
        d = c - 0.0
        e = d + (-0.0)
        return jax.lax.integer_pow(e, 1) + x
    x = floats()
    new = check(jax.make_jaxpr(f)(x), (x,), algebraic_simplification)
    assert names(new) == ["add"]


@pytest.mark.parametrize("fn", [
    lambda x: x + 0.0,          # -0.0 + 0.0 is +0.0
    lambda x: 0.0 + x,
    lambda x: x - (-0.0),       # -0.0 - -0.0 is +0.0
    lambda x: x * 0.0,          # inf * 0 is nan
    lambda x: 0.0 * x,
    lambda x: x - x,            # inf - inf is nan
    lambda x: 0.0 / x,          # 0 / 0 is nan
    lambda x: x * 2.0,
])
def test_algebraic_leaves_float_rewrites_that_would_change_results(fn):
    x = floats()
    closed = jax.make_jaxpr(fn)(x)
    new = check(closed, (x,), optimize_jaxpr)
    assert names(new) == names(closed)


@pytest.mark.parametrize("fn", [lambda z: z * jnp.complex64(1), lambda z: jnp.complex64(1) * z,
                                lambda z: z / jnp.complex64(1)])
def test_algebraic_leaves_complex_times_one(fn):
    # (a + bi)(1 + 0i) = (a - 0b) + (0a + b)i: an infinite part makes a nan, -0.0 turns +0.0
    z = jnp.array([complex(np.inf, 0.0), complex(1.0, np.inf), complex(-0.0, -0.0), 2 - 3j],
                  jnp.complex64)
    closed = jax.make_jaxpr(fn)(z)
    new = check(closed, (z,), optimize_jaxpr)
    assert names(new) == names(closed)


def test_algebraic_on_bfloat16():
    x = floats().astype(jnp.bfloat16)
    closed = jax.make_jaxpr(lambda x: jnp.tanh(x * jnp.bfloat16(1)) + jnp.bfloat16(-0.0))(x)
    # the output is pinned by an identity convert_element_type
    assert names(check(closed, (x,), algebraic_simplification)) == ["tanh", "convert_element_type"]
    closed = jax.make_jaxpr(lambda x: x + jnp.bfloat16(0.0))(x)   # +0.0 stays, as for float32
    assert names(check(closed, (x,), algebraic_simplification)) == ["add"]


def test_collectives_are_not_evaluated_ahead_of_time():
    mesh = jax.make_mesh((1,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))

    def body(x):
        return x + jax.lax.psum(jnp.float32(1.5), "i") + jax.lax.axis_index("i")

    fn = jax.shard_map(body, mesh=mesh, in_specs=jax.P("i"), out_specs=jax.P("i"),
                       check_vma=False)
    x = floats((4,))
    new = check(jax.make_jaxpr(fn)(x), (x,), optimize_jaxpr)
    inner = [e.primitive.name for e in all_eqns(new.jaxpr)]
    assert "psum" in inner and "axis_index" in inner


def test_algebraic_on_integers():
    def f(i, j):
        return i + 0, 0 + i, i * 1, i * 0, i - i, j * 0, i - 0, i // 1
    i, j = jnp.int32(7), jnp.arange(3, dtype=jnp.int32)
    closed = jax.make_jaxpr(f)(i, j)
    new = check(closed, (i, j), algebraic_simplification)
    assert "add" not in names(new) and "sub" not in names(new)
    assert names(new).count("mul") == 1  # j * 0 is an array: not turned into a scalar literal
    for fn in (jnp.add, jnp.subtract, jnp.multiply):
        check(jax.make_jaxpr(lambda b: fn(b, True) if fn is not jnp.subtract else b)(
            jnp.array([True, False])), (jnp.array([True, False]),), optimize_jaxpr)


def test_algebraic_keeps_types():
    # weakly typed operand, strongly typed result: not replaced by the operand
    closed = jax.make_jaxpr(lambda x: jnp.float32(1.0) * x)(1.0)
    check(closed, (1.0,), algebraic_simplification)
    # broadcasting: the result is larger than the operand
    closed = jax.make_jaxpr(lambda x, y: jnp.ones_like(y) * x)(jnp.float32(2.0), jnp.ones(3))
    check(closed, (jnp.float32(2.0), jnp.ones(3)), optimize_jaxpr)


def test_constant_fold():
    def f(x):
        c = jnp.exp(jnp.float32(2.0)) * jnp.sin(jnp.float32(1.0))
        k = jnp.int32(3) * jnp.int32(4) + jnp.int32(1)
        return x * c + k.astype(jnp.float32), jnp.float32(2.0) * jnp.float32(3.0)
    x = floats()
    closed = jax.make_jaxpr(f)(x)
    new = check(closed, (x,), constant_fold)
    assert names(new) == ["mul", "add", "convert_element_type"]
    assert constant_fold(new) is new  # nothing left to fold: the same object back


def test_constant_fold_leaves_arrays_and_keys():
    def f(x):
        big = jnp.arange(4.0) * 2.0                       # an array: stays computed
        key = jax.random.key(3)                            # a key: extended dtype
        return x + big + jax.random.uniform(key, (4,))
    x = floats((4,))
    closed = jax.make_jaxpr(f)(x)
    new = check(closed, (x,), optimize_jaxpr)
    assert "random_bits" in [e.primitive.name for e in all_eqns(new.jaxpr)]


def test_dead_code():
    def f(x):
        _ = jnp.sin(x) * 999.0
        _ = jax.jit(lambda y: y * 2.0)(x)
        return x + 1.0
    x = floats()
    new = check(jax.make_jaxpr(f)(x), (x,), dead_code_elimination)
    assert names(new) == ["add"]


def test_copy_propagation():
    def f(x):
        a = jnp.array(x, copy=True)
        b = jax.device_put(a)
        c = b.astype(jnp.float32)
        return c + 1.0, jnp.array(x, copy=True), x.astype(jnp.int32)
    x = floats()
    closed = jax.make_jaxpr(f)(x)
    new = check(closed, (x,), copy_propagation)
    assert names(new) == ["add", "copy", "convert_element_type"]


def test_an_output_replaced_by_an_input():
    closed = jax.make_jaxpr(lambda x: (x * 1.0, x))(floats())
    new = check(closed, (floats(),))
    assert names(new) == ["convert_element_type"]
    assert optimize_jaxpr(new) is new


def test_dropped_results_and_literal_outputs():
    closed = jax.make_jaxpr(lambda x: (jnp.sin(x), jnp.sin(x)))(1.0)
    e0, e1 = closed.jaxpr.eqns
    dropped = closed.jaxpr.replace(
        eqns=[e0.replace(outvars=[jcore.DropVar(e0.outvars[0].aval)]), e1], outvars=[e1.outvars[0]])
    for fn in PASSES.values():
        new = fn(dropped)
        jcore.check_jaxpr(new)
        identical(jax.core.eval_jaxpr(new, (), 0.5)[0], jnp.sin(jnp.float32(0.5)))
    assert [e.primitive.name for e in optimize_jaxpr(dropped).eqns] == ["sin"]
    closed = jax.make_jaxpr(lambda x: (x * 1.0, 2.0, jnp.int32(3)))(1.0)
    assert any(isinstance(v, jcore.Literal) for v in closed.jaxpr.outvars)
    check(closed, (jnp.float32(-0.0),))


# ----------------------------------------------------------------------------- nested jaxprs

def test_nested_jaxprs_are_optimised_and_stay_valid():
    def body(c, x):
        y = x * 1.0
        _ = jnp.sin(y)                  # dead
        return c + y * 1.0, jnp.cos(y) + jnp.cos(y)

    def f(x):
        y = jax.jit(lambda a: a * 1.0 + jnp.sin(a) + jnp.sin(a))(x)
        c, ys = jax.lax.scan(body, jnp.float32(0.0), y)
        z = jax.lax.cond(c > 0, lambda a: a * 1.0 - 0.0, lambda a: jnp.exp(a) * jnp.exp(a), ys)
        w = jax.lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 1.0 + 1.0), (0, c))
        r = jax.checkpoint(lambda a: jnp.tanh(a) * jnp.tanh(a))(z)
        return z, w[1], r
    x = floats()
    closed = jax.make_jaxpr(f)(x)
    new = check(closed, (x,))
    assert len(all_eqns(new.jaxpr)) < len(all_eqns(closed.jaxpr))
    for name in ("scan", "cond", "while", "jit", "remat2"):
        assert name in names(new)
    assert not any(e.primitive.name == "mul" and any(
        isinstance(v, jcore.Literal) and float(np.asarray(v.val)) == 1.0 for v in e.invars)
        for e in all_eqns(new.jaxpr))
    # jit of the optimised jaxpr agrees with the original
    want = jax.jit(jcore.jaxpr_as_fun(closed))(x)
    got = jax.jit(jcore.jaxpr_as_fun(new))(x)
    for w, g in zip(want, got):
        np.testing.assert_allclose(w, g, rtol=1e-6)


def test_custom_derivatives_survive():
    @jax.custom_vjp
    def clip_grad(x):
        return x * 1.0 + jnp.sin(x) - jnp.sin(x)

    clip_grad.defvjp(lambda x: (clip_grad(x), None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))

    def f(x):
        return jnp.sum(jax.nn.relu(x) * 1.0 + jax.nn.softplus(x) + clip_grad(x) * 3.0)
    x = jnp.linspace(-2.0, 2.0, 8)
    closed = jax.make_jaxpr(f)(x)
    new = check(closed, (x,))
    grad_old = jax.grad(lambda v: jcore.jaxpr_as_fun(closed)(v)[0])(x)
    grad_new = jax.grad(lambda v: jcore.jaxpr_as_fun(new)(v)[0])(x)
    identical(grad_old, grad_new)


def test_shared_nested_jaxpr_stays_shared():
    g = jax.jit(lambda a: a * 1.0 + 1.0)
    closed = jax.make_jaxpr(lambda x: g(x) + g(x * 2.0))(floats())
    inner = [e.params["jaxpr"] for e in closed.jaxpr.eqns if e.primitive.name == "jit"]
    assert inner[0] is inner[1]
    new = check(closed, (floats(),))
    inner = [e.params["jaxpr"] for e in new.jaxpr.eqns if e.primitive.name == "jit"]
    assert len(inner) == 2 and inner[0] is inner[1] and len(inner[0].jaxpr.eqns) == 1


# ----------------------------------------------------------------------------- effects and randomness

def test_effects_are_never_removed_merged_or_reordered(capfd):
    def f(x):
        a = jnp.sin(x)
        jax.debug.print("first {}", a)
        jax.debug.print("first {}", a)             # the same print twice: both stay
        jax.debug.callback(lambda v: None, x * 1.0)
        jax.debug.print("second {}", jnp.sin(x))
        _ = jax.lax.scan(lambda c, v: (jax.debug.print("in scan {}", v) or c, None), 0.0, x)
        return x * 1.0
    x = jnp.arange(2.0)
    closed = jax.make_jaxpr(f)(x)
    new = check(closed, (x,))
    jax.effects_barrier()
    capfd.readouterr()
    jax.core.eval_jaxpr(closed.jaxpr, closed.consts, x)
    jax.effects_barrier()
    want = capfd.readouterr().out
    jax.core.eval_jaxpr(new.jaxpr, new.consts, x)
    jax.effects_barrier()
    assert capfd.readouterr().out == want
    assert want.count("first") == 2 and want.count("in scan") == 2


def test_callbacks_are_never_removed_or_merged():
    calls = []

    def host(v):
        calls.append(1)
        return np.asarray(v)

    def f(x):
        shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
        a = jax.pure_callback(host, shape, x)
        b = jax.pure_callback(host, shape, x)         # a twin: not merged
        _ = jax.pure_callback(host, shape, x)         # unused: not removed
        io_callback(host, shape, x, ordered=True)
        return a + b
    x = jnp.arange(3.0)
    closed = jax.make_jaxpr(f)(x)
    new = check(closed, (x,))
    calls.clear()
    jax.core.eval_jaxpr(new.jaxpr, new.consts, x)
    assert len(calls) == 4


def test_random_key_operations():
    def f(key, x):
        k1, k2 = jax.random.split(key)
        a = jax.random.normal(k1, x.shape) * 1.0
        b = jax.random.normal(k1, x.shape)            # the same key: the same numbers
        c = jax.random.uniform(k2, x.shape)
        return a + b + c + x, jax.random.split(k2)[0], jax.random.bits(jax.random.key(0), (2,))
    key, x = jax.random.key(1), floats()
    closed = jax.make_jaxpr(f)(key, x)
    check(closed, (key, x))
    raw = jax.random.PRNGKey(2)
    closed = jax.make_jaxpr(lambda k: jax.random.normal(k, (3,)) + jax.random.normal(k, (3,)))(raw)
    check(closed, (raw,))


# ----------------------------------------------------------------------------- optimize_jaxpr

def test_optimize_jaxpr_takes_jaxpr_and_closed_jaxpr():
    def f(x):
        a = x + 1.0
        _ = x * 999.0
        return a * 1.0 + (x + 1.0), jnp.array([1.0, 2.0]) * x[:2]
    x = floats()
    closed = jax.make_jaxpr(f)(x)
    assert closed.jaxpr.constvars  # the array constant is a constvar
    new = check(closed, (x,))
    open_new = optimize_jaxpr(closed.jaxpr)
    assert isinstance(open_new, jcore.Jaxpr)
    assert [e.primitive.name for e in open_new.eqns] == names(new)
    for fn in PASSES.values():
        assert isinstance(fn(closed.jaxpr), jcore.Jaxpr)
        assert isinstance(fn(closed), jcore.ClosedJaxpr)


def test_optimize_jaxpr_options(capsys):
    def f(x):
        a = jnp.sin(x) * 1.0
        return a + jnp.sin(x) + jnp.exp(jnp.float32(1.0))
    x = floats()
    closed = jax.make_jaxpr(f)(x)
    only_dce = check(closed, (x,), optimize_jaxpr, optimizations=["dce"])
    assert names(only_dce) == names(closed)
    full = check(closed, (x,), optimize_jaxpr, optimizations="all", verbose=True)
    text = capsys.readouterr().out
    assert "fixed point" in text and f"{len(closed.eqns)} -> {len(full.eqns)}" in text
    named = optimize_jaxpr(closed, optimizations=["constant_fold", "common_subexpression_elimination",
                                                  "algebraic_simplification", "dead_code_elimination"])
    assert names(named) == names(full)
    one = optimize_jaxpr(closed, max_iterations=1, optimizations=["cse"])
    assert len(one.eqns) < len(closed.eqns)
    assert optimize_jaxpr(full) is full
    with pytest.raises(ValueError, match="Invalid optimization"):
        optimize_jaxpr(closed, optimizations=["fold"])
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_iterations"):
            optimize_jaxpr(closed, max_iterations=bad)
    with pytest.raises(TypeError):
        optimize_jaxpr(lambda x: x)
    with pytest.raises(TypeError):
        constant_fold("not a jaxpr")


def test_notebook_example_and_brainx_make_jaxpr():
    def wasteful(x):
        a = x + 1.0
        _ = x * 999.0
        scaled = a * 1.0
        return scaled + a
    x = jnp.array([1.0, 2.0])
    closed, _ = brainx.transform.make_jaxpr(wasteful)(x)
    new = check(closed, (x,), optimize_jaxpr, optimizations=["dce", "algebraic_simplification", "cse"])
    assert (len(closed.jaxpr.eqns), len(new.jaxpr.eqns)) == (4, 2)

    counter = brainx.State(jnp.array(1.0))

    def stateful(v):
        counter.value = counter.value * 1.0 + v
        return counter.value * 2 + jnp.sin(counter.value) - jnp.sin(counter.value)
    closed, states = brainx.transform.make_jaxpr(stateful)(jnp.array(1.0))
    check(closed, (jnp.array(1.5), jnp.array(0.5)))


def test_gradient_jaxpr():
    def loss(w, x):
        h = jnp.tanh(x @ w) * 1.0
        return jnp.sum(h * h) + jnp.sum(jnp.tanh(x @ w))
    w, x = floats((3, 2)), floats((4, 3), seed=2)
    w = jnp.nan_to_num(w, posinf=1.0, neginf=-1.0, nan=0.5)
    closed = jax.make_jaxpr(jax.value_and_grad(loss))(w, x)
    new = check(closed, (w, x))
    assert len(new.eqns) < len(closed.eqns)


# ----------------------------------------------------------------------------- random programs

LITERALS = [0.0, -0.0, 1.0, 2.0, 0.5]
UNARY = ["sin", "exp", "neg", "abs", "tanh", "copy", "astype", "pow1"]
BINARY = ["add", "sub", "mul", "div", "max"]


@st.composite
def programs(draw):
    n_ops = draw(st.integers(1, 12))
    ops = []
    for i in range(n_ops):
        n_vals = 2 + i
        kind = draw(st.sampled_from(["unary", "binary", "binary", "lit"]))
        if kind == "unary":
            ops.append(("u", draw(st.sampled_from(UNARY)), draw(st.integers(0, n_vals - 1))))
        elif kind == "binary":
            first = draw(st.integers(0, n_vals - 1))
            second = draw(st.one_of(st.just(first), st.integers(0, n_vals - 1)))
            ops.append(("b", draw(st.sampled_from(BINARY)), first, second))
        else:
            ops.append(("l", draw(st.sampled_from(BINARY)), draw(st.integers(0, n_vals - 1)),
                        draw(st.sampled_from(LITERALS)), draw(st.booleans())))
    n_total = 2 + n_ops
    outs = draw(st.lists(st.integers(0, n_total - 1), min_size=1, max_size=3))
    return ops, outs


def build(program, dtype):
    ops, outs = program
    fns = {"add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "max": jnp.maximum,
           "div": jnp.divide if dtype == jnp.float32 else jnp.floor_divide}

    def unary(name, v):
        if dtype != jnp.float32 and name in ("sin", "exp", "tanh"):
            return v * 3
        return {"sin": jnp.sin, "exp": jnp.exp, "neg": jnp.negative, "abs": jnp.abs,
                "tanh": jnp.tanh, "copy": lambda a: jnp.array(a, copy=True),
                "astype": lambda a: a.astype(dtype),
                "pow1": lambda a: jax.lax.integer_pow(a, 1)}[name](v)

    def f(x, y):
        vals = [x, y]
        for op in ops:
            if op[0] == "u":
                vals.append(unary(op[1], vals[op[2]]))
            elif op[0] == "b":
                vals.append(fns[op[1]](vals[op[2]], vals[op[3]]))
            else:
                lit = dtype(op[3]) if dtype == jnp.float32 else int(op[3])
                a, b = (vals[op[2]], lit) if op[4] else (lit, vals[op[2]])
                vals.append(fns[op[1]](a, b))
        return [vals[i] for i in outs]
    return f


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 3))
def test_random_float_programs(program, seed):
    x, y = floats(seed=seed), floats(seed=seed + 10)[::-1]
    closed = jax.make_jaxpr(build(program, jnp.float32))(x, y)
    for pass_fn in PASSES.values():
        check(closed, (x, y), pass_fn)


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 3))
def test_random_int_programs(program, seed):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.integers(-5, 6, size=()), jnp.int32)
    y = jnp.asarray(rng.integers(1, 6, size=()), jnp.int32)
    closed = jax.make_jaxpr(build(program, jnp.int32))(x, y)
    for pass_fn in PASSES.values():
        check(closed, (x, y), pass_fn)
