"""``fn_to_python_code`` / ``jaxpr_to_python_code``: the source runs and computes what the function does."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brainx.transform import (UnsupportedPrimitiveError, fn_to_python_code,
                              jaxpr_to_python_code, register_prim_handler)
from brainx.transform.ir import codegen as jaxpr_code


def _generated(fn, *args, **kwargs):
    source = fn_to_python_code(fn, *args, **kwargs)
    namespace = {"jax": jax}
    exec(source, namespace)
    name = getattr(fn, "__name__", "")
    return namespace[name if name.isidentifier() else "generated_function"], source


def _same(got, want):
    got, want = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert jnp.asarray(g).dtype == jnp.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def scan_fn(c, xs, k):
    def body(carry, x):
        a, b = carry
        return (a + x * k, b * 0.5), a - x
    return jax.lax.scan(body, (c, c), xs)


def cond_fn(p, x):
    return jax.lax.cond(p > 0, lambda v: jnp.sin(v) + 1.0, lambda v: v * 2.0, x)


def switch_fn(i, x):
    return jax.lax.switch(i, [lambda v: v + 1.0, lambda v: v * 3.0, lambda v: -v], x)


def while_fn(x, limit):
    return jax.lax.while_loop(lambda c: c[0] < limit, lambda c: (c[0] * 2.0, c[1] + 1), (x, 0))


def jit_fn(x):
    inner = jax.jit(lambda y: (jnp.tanh(y), y ** 3))
    a, b = inner(x)
    return a + b


def array_fn(x, i):
    y = x.at[i].add(3.0)
    return (jnp.sum(y ** 2, axis=0), x @ x.T, x[1:, ::2].reshape(-1), jnp.argmax(x, 1),
            jnp.cumsum(x, 0), x.astype(jnp.int32), jnp.sort(x[0]), jax.nn.relu(x - 5.0),
            jax.lax.dynamic_slice(x, (i, 0), (1, 2)), jnp.concatenate([x, x], 1))


def remat_fn(x):
    return jax.checkpoint(lambda v: jnp.sin(v) * v)(x) + 1.0


def custom_fn(x):
    return jax.nn.softplus(x) + jax.nn.gelu(x)


@pytest.mark.parametrize("fn, args", [
    (scan_fn, (1.0, jnp.arange(4.0), 2.0)),
    (cond_fn, (1.0, 0.3)), (cond_fn, (-1.0, 0.3)),
    (switch_fn, (0, 2.0)), (switch_fn, (2, 2.0)), (switch_fn, (7, 2.0)),
    (while_fn, (1.5, 40.0)),
    (jit_fn, (jnp.linspace(-1, 1, 5),)),
    (array_fn, (jnp.arange(12.0).reshape(3, 4), 1)),
    (remat_fn, (jnp.arange(3.0),)),
    (custom_fn, (jnp.linspace(-2, 2, 5),)),
])
def test_the_generated_code_computes_what_the_function_does(fn, args):
    generated, source = _generated(fn, *args)
    assert "<jaxpr" not in source
    _same(generated(*args), fn(*args))


def test_inner_jaxprs_are_nested_functions_reading_the_outer_variables():
    source = fn_to_python_code(scan_fn, 1.0, jnp.arange(3.0), 2.0)
    lines = source.splitlines()
    assert lines[0] == "def scan_fn(a, b, c):"
    assert "    def fn_1(carry_, x_):" in lines
    body = lines[lines.index("    def fn_1(carry_, x_):") + 1:]
    # the constant k is the outer parameter c, read by the nested function, not passed
    assert re.search(r"= .*\bc\b", "\n".join(body))
    assert any("jax.lax.scan(fn_1, (a, a), (b,), length=3" in line for line in lines)


def test_pytree_arguments_and_keywords():
    def f(d, scale=1.0):
        return {"s": (d["a"] + d["b"]) * scale, "d": d["a"] - d["b"]}
    arg = {"a": jnp.float32(1.0), "b": jnp.float32(2.5)}
    generated, source = _generated(f, arg, scale=3.0)
    assert source.startswith("def f(*args, **kwargs):")
    _same(generated(arg, scale=3.0), f(arg, scale=3.0))


def test_jaxpr_to_python_code_of_a_closed_jaxpr_with_array_constants():
    table = np.array([[1.0, -2.0], [0.5, 4.0]], np.float32)
    closed = jax.make_jaxpr(lambda x: x @ jnp.asarray(table) + jnp.inf)(jnp.ones(2))
    source = jaxpr_to_python_code(closed, "g")
    namespace = {"jax": jax}
    exec(source, namespace)
    _same(namespace["g"](jnp.array([1.0, 2.0])), jnp.array([1.0, 2.0]) @ table + jnp.inf)


def test_an_unknown_primitive_is_named_and_a_handler_can_be_registered(monkeypatch):
    prim = jax.extend.core.Primitive("brainx_test_double")
    prim.def_impl(lambda x: 2 * x)
    prim.def_abstract_eval(lambda x: x)
    f = lambda x: prim.bind(x) + 1.0
    with pytest.raises(UnsupportedPrimitiveError, match="brainx_test_double.*register_prim_handler"):
        fn_to_python_code(f, 1.0)
    monkeypatch.setitem(jaxpr_code._HANDLERS, "_placeholder", None)   # restored after the test
    monkeypatch.delitem(jaxpr_code._HANDLERS, "_placeholder")
    register_prim_handler("brainx_test_double", lambda w, eqn, ops: f"2 * {ops[0]}")
    try:
        generated, source = _generated(f, 1.5)
        assert "2 * a" in source and float(generated(1.5)) == 4.0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            register_prim_handler("brainx_test_double", lambda w, eqn, ops: f"{ops[0]} * 2")
        assert "Overwriting" in str(caught[0].message)
    finally:
        jaxpr_code._HANDLERS.pop("brainx_test_double", None)
