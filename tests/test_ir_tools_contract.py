"""What brainx's jaxpr tools promise beyond computing the same function (brainstate 0.6.0's contract).

* every pass and ``optimize_jaxpr`` keep the jaxpr's ``DebugInfo`` (JAX warns about a jaxpr
  without one, jax-ml/jax#26480), with and without ``jax_enable_checks``;
* an effectful equation is never evaluated ahead of time nor removed, even inside a ``jit``
  whose inputs are all literals, and ``jit_error_if``'s check survives dead-code elimination;
* ``x - x`` and ``0 * x`` keep the result's shape, and NaN for floats;
* every tool refuses what is not a jaxpr with :class:`~brainx.errors.IRValidationError`;
* ``fn_to_python_code``: arguments at the end that the result does not read are optional.

Results are compared with JAX's own evaluation of the original jaxpr.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.errors import BrainxError, IRError, IRValidationError
from brainx.transform import (
    UnsupportedPrimitiveError, algebraic_simplification, common_subexpression_elimination,
    constant_fold, copy_propagation, dead_code_elimination, eqns_to_closed_jaxpr, eqns_to_jaxpr,
    fn_to_python_code, inline_jit, jaxpr_to_python_code, optimize_jaxpr,
)

PASSES = [constant_fold, algebraic_simplification, copy_propagation,
          common_subexpression_elimination, dead_code_elimination, optimize_jaxpr]


def no_debug_info_warning(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    assert [str(w.message) for w in caught if "DebugInfo" in str(w.message)] == []
    return result


def evaluate(jaxpr, *args):
    closed = jaxpr if hasattr(jaxpr, "consts") else None
    inner = jaxpr.jaxpr if closed is not None else jaxpr
    return [np.asarray(v) for v in jax.core.eval_jaxpr(inner, closed.consts if closed else [], *args)]


def f_with_repeats(x, y):
    a = x * 1.0 + 0.0
    return a + jnp.exp(y) + jnp.exp(y), jnp.cos(x), jnp.cos(x)


@pytest.mark.parametrize("checks", [False, True])
@pytest.mark.parametrize("pass_fn", PASSES, ids=lambda p: p.__name__)
def test_passes_keep_debug_info_without_warnings(pass_fn, checks):
    x, y = jnp.float32(0.5), jnp.float32(2.0)
    closed = jax.make_jaxpr(f_with_repeats)(x, y)
    with jax.enable_checks(checks):
        new_closed = no_debug_info_warning(lambda: pass_fn(closed))
        new_bare = no_debug_info_warning(lambda: pass_fn(closed.jaxpr))
    for new in (new_closed, getattr(new_bare, "jaxpr", new_bare)):
        info = getattr(new, "jaxpr", new).debug_info
        assert info.func_src_info == closed.jaxpr.debug_info.func_src_info
        assert info.arg_names == closed.jaxpr.debug_info.arg_names
    for want, got in zip(evaluate(closed, x, y), evaluate(new_closed, x, y)):
        np.testing.assert_array_equal(got, want)


def test_cse_merges_under_enable_checks():
    closed = jax.make_jaxpr(lambda x, y: jnp.sin(x) + jnp.sin(x) + y)(1.0, 2.0)
    with jax.enable_checks(True):
        new = no_debug_info_warning(lambda: common_subexpression_elimination(closed))
    assert [e.primitive.name for e in new.eqns].count("sin") == 1
    np.testing.assert_array_equal(evaluate(new, 1.0, 2.0), evaluate(closed, 1.0, 2.0))


def test_an_effectful_jit_on_literals_is_not_run_ahead_of_time(capfd):
    @jax.jit
    def noisy(y):
        jax.debug.print("inner={y}", y=y)
        return y + 1.0

    @jax.jit
    def quiet(y):
        return y + 1.0

    x = jnp.float32(1.0)
    closed = jax.make_jaxpr(lambda x: x + noisy(3.0) + quiet(4.0))(x)
    jax.effects_barrier()
    capfd.readouterr()
    new = constant_fold(closed)
    jax.effects_barrier()
    assert capfd.readouterr().out == ""          # folding printed nothing
    calls = [e for e in new.eqns if e.primitive.name in ("jit", "pjit")]
    assert len(calls) >= 1 and any(e.effects for e in calls)
    got = evaluate(new, x)
    jax.effects_barrier()
    assert "inner=3" in capfd.readouterr().out   # the print runs when the jaxpr runs
    np.testing.assert_array_equal(got, evaluate(closed, x))
    assert float(got[0]) == 10.0


@pytest.mark.parametrize("pass_fn", [dead_code_elimination, optimize_jaxpr], ids=lambda p: p.__name__)
def test_dce_keeps_prints_their_inputs_and_error_checks(pass_fn):
    def f(x):
        y = x + 1.0
        jax.debug.print("y={y}", y=y)
        brainx.transform.jit_error_if(x < 0, "negative")
        return x * 2

    closed = jax.make_jaxpr(f)(jnp.float32(1.0))
    new = pass_fn(closed)
    names = [e.primitive.name for e in new.eqns]
    assert "debug_print" in names and "add" in names and "cond" in names
    if pass_fn is dead_code_elimination:
        assert names == [e.primitive.name for e in closed.eqns]


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int32])
@pytest.mark.parametrize("shape", [(), (3,)])
def test_self_subtraction_and_zero_product_keep_shape_and_nan(dtype, shape):
    x = jnp.ones(shape, dtype)
    for fn in (lambda v: v - v, lambda v: jnp.zeros((), dtype) * v):
        closed = jax.make_jaxpr(fn)(x)
        new = algebraic_simplification(closed)
        special = jnp.full(shape, np.inf if dtype == jnp.float32 else 7, dtype)
        want, got = evaluate(closed, special), evaluate(new, special)
        assert got[0].shape == want[0].shape == shape and got[0].dtype == want[0].dtype
        np.testing.assert_array_equal(got[0], want[0])   # nan stays nan
    if dtype == jnp.int32 and shape == ():
        assert "sub" not in [e.primitive.name for e in algebraic_simplification(
            jax.make_jaxpr(lambda v: v - v)(x)).eqns]


def test_every_tool_refuses_what_is_not_a_jaxpr():
    for tool in (*PASSES, inline_jit):
        with pytest.raises(IRValidationError, match=f"{tool.__name__}: Expected Jaxpr or ClosedJaxpr"):
            tool("not a jaxpr")
    closed = jax.make_jaxpr(lambda x: x + 1.0)(1.0)
    with pytest.raises(IRValidationError, match="Invalid optimization"):
        optimize_jaxpr(closed, optimizations=["fold"])
    with pytest.raises(IRValidationError, match="max_iterations"):
        optimize_jaxpr(closed, max_iterations=0)
    with pytest.raises(IRValidationError, match="invars must be jaxpr variables"):
        eqns_to_jaxpr(closed.eqns, invars=[123])
    with pytest.raises(IRValidationError, match="0 consts for 1 constvars"):
        eqns_to_closed_jaxpr(closed.eqns, constvars=list(closed.jaxpr.invars), consts=[])
    # what code written for brainstate or for earlier brainx catches
    assert issubclass(IRValidationError, (TypeError)) and issubclass(IRValidationError, ValueError)
    assert issubclass(UnsupportedPrimitiveError, IRError) and issubclass(IRError, BrainxError)
    assert issubclass(UnsupportedPrimitiveError, NotImplementedError)


def test_generated_code_makes_unread_trailing_arguments_optional():
    def f(x, y, z):
        return x * 2.0 + jax.lax.integer_pow(jnp.float32(2.0), 3)

    args = (jnp.float32(1.5), jnp.float32(2.0), jnp.float32(3.0))
    src = no_debug_info_warning(lambda: fn_to_python_code(f, *args))
    assert src.splitlines()[0] == "def f(a, b=None, c=None):"
    namespace = {"jax": jax}
    exec(src, namespace)
    want = f(*args)
    for call in (args[:1], args[:2], args):
        np.testing.assert_array_equal(namespace["f"](*call), want)

    # a read argument after an unread one keeps both required
    src = fn_to_python_code(lambda x, y: y + 1.0, *args[:2])
    assert src.splitlines()[0] == "def generated_function(a, b):"
    closed = jax.make_jaxpr(lambda x, y: x + 1.0)(*args[:2])
    assert jaxpr_to_python_code(closed, "g").splitlines()[0] == "def g(a, b=None):"


def test_generated_code_reads_pytree_arguments_with_tree_util():
    def f(d, scale=1.0):
        return (d["a"] + d["b"]) * scale

    arg = {"a": jnp.float32(2.0), "b": jnp.float32(3.0)}
    src = fn_to_python_code(f, arg, scale=jnp.float32(2.0))
    assert "jax.tree_util.tree_leaves((args, kwargs))" in src
    namespace = {"jax": jax}
    exec(src, namespace)
    assert float(namespace["f"](arg, scale=jnp.float32(2.0))) == 10.0
