"""brainstate's private jaxpr helpers as brainx serves them (``brainx.compat.private.ir``).

``partial_eval_jaxpr`` / ``constant_fold_jaxpr`` are checked against JAX's own evaluation of
the original jaxpr with the bound inputs given; the registry view against the code brainx
then writes.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jcore

from brainx.compat.private import ir
from brainx.transform import fn_to_python_code


def run(jaxpr, *args):
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    return [np.asarray(v) for v in jax.core.eval_jaxpr(inner, getattr(jaxpr, "consts", []), *args)]


def f(x, y, z):
    return x * y + jnp.sin(z) * 2.0, x + 1.0


ARGS = (jnp.float32(1.5), jnp.float32(-2.0), jnp.float32(0.25))


@pytest.mark.parametrize("bound", [(0,), (1,), (0, 2), (0, 1, 2)])
@pytest.mark.parametrize("keep_invars", [False, True])
def test_partial_eval_computes_what_the_jaxpr_computes(bound, keep_invars):
    closed = jax.make_jaxpr(f)(*ARGS)
    jaxpr = closed.jaxpr
    env = {jaxpr.invars[i]: np.asarray(ARGS[i]) for i in bound}
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # no DebugInfo warning
        with jax.enable_checks(True):
            folded = ir.partial_eval_jaxpr(jaxpr, env, keep_invars=keep_invars)
    rest = [i for i in range(3) if i not in bound]
    assert [jaxpr.invars.index(v) for v in folded.invars] == rest
    names = jaxpr.debug_info.arg_names
    assert folded.debug_info.arg_names == tuple(names[i] for i in rest)
    got = run(folded, *(ARGS[i] for i in rest))
    for g, w in zip(got, run(closed, *ARGS)):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    if len(bound) == 3:
        assert folded.eqns == [] and all(isinstance(v, jcore.Literal) for v in folded.outvars)


def test_constant_fold_drops_unread_inputs_and_keeps_passed_through_ones():
    closed = jax.make_jaxpr(lambda x, y, z: (x * jax.lax.integer_pow(jnp.float32(2.0), 3), z))(
        *ARGS)
    folded = ir.constant_fold_jaxpr(closed.jaxpr)
    assert folded.invars == [closed.jaxpr.invars[0], closed.jaxpr.invars[2]]
    assert [e.primitive.name for e in folded.eqns] == ["mul"]
    np.testing.assert_array_equal(run(folded, ARGS[0], ARGS[2]), run(closed, *ARGS))
    kept = ir.constant_fold_jaxpr(closed.jaxpr, keep_invars=True)
    assert kept.invars == closed.jaxpr.invars


def test_a_closed_call_on_known_inputs_is_folded_into_a_literal():
    inner = jax.make_jaxpr(lambda a, b: a * b + 1.0)(jnp.float32(0.0), jnp.float32(0.0))
    new_var = ir.make_var_factory()
    aval = jax.core.ShapedArray((), np.float32)
    out = new_var(aval)
    lits = [jcore.Literal(np.float32(v), aval) for v in (2.0, 3.0)]
    eqn = jcore.new_jaxpr_eqn(lits, [out], jax._src.core.closed_call_p, {"call_jaxpr": inner}, set())
    outer = jcore.Jaxpr([], [], [out], [eqn], debug_info=inner.jaxpr.debug_info)
    want = run(outer)
    folded = ir.partial_eval_jaxpr(outer, {})
    assert folded.eqns == [] and float(folded.outvars[0].val) == float(want[0]) == 7.0


def test_effectful_and_random_equations_are_never_evaluated(capfd):
    @jax.jit
    def noisy(v):
        jax.debug.print("inner={v}", v=v)
        return v + 1.0

    def g(x):
        key = jax.random.key(0)
        return x + noisy(3.0) + jax.random.uniform(key)

    x = jnp.float32(1.0)
    closed = jax.make_jaxpr(g)(x)
    jax.effects_barrier()
    capfd.readouterr()
    folded = ir.constant_fold_jaxpr(closed.jaxpr)
    jax.effects_barrier()
    assert capfd.readouterr().out == ""
    names = [e.primitive.name for e in folded.eqns]
    assert "random_seed" in names                               # the key is not made now
    assert sum(n in ("jit", "pjit") for n in names) == 2        # nor the print, nor uniform
    np.testing.assert_array_equal(run(folded, x), run(closed, x))


def test_make_var_factory_tries_each_way_to_build_a_var(monkeypatch):
    aval = jax.core.ShapedArray((), np.float32)
    new_var = ir.make_var_factory()
    a, b = new_var(aval), new_var(aval)
    assert isinstance(a, jcore.Var) and a is not b and a.aval == aval

    class CountFirst:                         # Var(count, suffix, aval), as in old JAX
        def __init__(self, count, suffix, aval):
            if not isinstance(count, int):
                raise TypeError("count")
            self.count, self.aval = count, aval

    class OnlySuffix:                         # looks modern, works only as Var(suffix, aval)
        def __init__(self, aval, initial_qdd=None, final_qdd=None):
            if not isinstance(aval, str):
                raise TypeError("no")
            self.aval = initial_qdd

    class Never:
        def __init__(self, aval):
            raise TypeError("never")

    monkeypatch.setattr(ir, "Var", CountFirst)
    new_var = ir.make_var_factory()
    first, second = new_var(aval), new_var(aval)
    assert first.count != second.count and first.aval == aval
    monkeypatch.setattr(ir, "Var", OnlySuffix)
    assert ir.make_var_factory()(aval).aval == aval
    monkeypatch.setattr(ir, "Var", Never)
    with pytest.raises(TypeError):                # (the error of the last way tried)
        ir.make_var_factory()(aval)


def test_identity_collections_tell_equal_objects_apart():
    a, b = [1], [1]
    s = ir.IdentitySet([a, b, a])
    assert len(s) == 2 and a in s and [1] not in s
    s.discard(a)
    assert list(s) == [b] and repr(s).startswith("IdentitySet(")
    m = ir.IdentityMap({"k": 5})
    m[a], m[b] = "x", "y"
    assert (m[a], m[b], len(m)) == ("x", "y", 3) and list(m.items())[1:] == [(a, "x"), (b, "y")]
    del m[a]
    assert a not in m and repr(m).startswith("IdentityMap(")
    with pytest.raises(KeyError):
        m[a]


def test_literal_helpers_and_checks():
    aval = jax.core.ShapedArray((), np.float32)
    assert ir.is_scalar_literal_value(ir.literal_with_dtype(0, aval), 0)
    assert np.asarray(ir.literal_with_dtype(0, aval).val).dtype == np.float32
    assert not ir.is_scalar_literal_value(
        jcore.Literal(np.zeros(2, np.float32), jax.core.ShapedArray((2,), np.float32)), 0)
    closed = jax.make_jaxpr(lambda x: x + 1.0)(1.0)
    jaxpr, consts, was_closed = ir.ensure_jaxpr(closed)
    assert was_closed and consts == list(closed.consts)
    with pytest.raises(ir.IRValidationError, match="Expected Jaxpr or ClosedJaxpr, got int"):
        ir.ensure_jaxpr(42)
    ir.check_all_vars(jaxpr.invars, "invars")
    with pytest.raises(ir.IRValidationError, match="invars .* item 0 is 123"):
        ir.check_all_vars([123], "invars")
    assert ir._canonical_param({"b": [1, 2], "a": None}) == (("a", None), ("b", (1, 2)))


def test_registry_view_writes_and_restores_handlers():
    assert "add" in ir.prim_to_python and callable(ir.prim_to_python["add"])
    assert "rev" in ir.prim_to_python         # brainx writes any jax.lax function
    with pytest.raises(KeyError):
        ir.prim_to_python["no_such_primitive"]
    x = jnp.float32([1.0, 2.0, 3.0])
    flip = ir.register_prim_as("rev")(lambda w, eqn, ops: f"jax.numpy.flip({ops[0]}, axis=0)")
    try:
        assert ir.prim_to_python["rev"] is flip
        src = fn_to_python_code(lambda v: jax.lax.rev(v, (0,)), x)
        assert "jax.numpy.flip(a, axis=0)" in src
        namespace = {"jax": jax}
        exec(src, namespace)
        np.testing.assert_array_equal(namespace["generated_function"](x), x[::-1])
    finally:
        del ir.prim_to_python["rev"]
    src = fn_to_python_code(lambda v: jax.lax.rev(v, (0,)), x)
    assert "flip" not in src
    eqn = jax.make_jaxpr(lambda v: jax.lax.rev(v, (0,)))(x).eqns[0]
    assert ir.normal_fn("jax.lax.rev")(None, eqn, ["a"]) == "jax.lax.rev(a, dimensions=(0,))"
    namespace = {"jax": jax}
    exec(src, namespace)
    np.testing.assert_array_equal(namespace["generated_function"](x), x[::-1])
