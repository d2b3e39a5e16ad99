"""``StatefulFunction(ir_optimizations=...)`` and ``fn_to_python_code`` (brainstate's names)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform as bt


def _model():
    h = brainx.HiddenState(jnp.zeros(3))
    w = brainx.ParamState(jnp.array([1.0, -2.0, 0.5]))

    def step(x):
        y = x * 1.0
        h.value = h.value + jnp.tanh(w.value * y) + jnp.tanh(w.value * y)
        return h.value.sum()

    return h, w, step


def test_ir_optimizations_rewrite_the_trace_and_compute_the_same():
    h, w, step = _model()
    plain = bt.StatefulFunction(step).signature((2.0,), {}).trace.jaxpr
    optimised = bt.StatefulFunction(step, ir_optimizations=("cse", "dce")).signature(
        (2.0,), {}).trace.jaxpr
    assert len(optimised.eqns) < len(plain.eqns)             # the second tanh(w * y) is gone

    sf = bt.StatefulFunction(step, ir_optimizations="all")
    sig = sf.signature((2.0,), {})
    out, new = sf.pure(sig)([h.value, w.value], 2.0)
    want = jnp.zeros(3) + 2 * jnp.tanh(w.value * 2.0)
    np.testing.assert_allclose(new[0], want, rtol=1e-6)
    np.testing.assert_allclose(out, want.sum(), rtol=1e-6)
    assert float(h.value.sum()) == 0.0                     # tracing changed nothing


def test_unknown_ir_optimization_is_refused_when_the_function_is_made():
    with pytest.raises(ValueError, match="Invalid optimization"):
        bt.StatefulFunction(lambda x: x, ir_optimizations=["fold_everything"])


def test_fn_to_python_code_folds_constants_and_names_the_function():
    def scaled(x):
        return x * (2.0 * 3.0) + jnp.sin(x)

    code = bt.fn_to_python_code(scaled, 1.0)
    assert code.splitlines()[0] == "def scaled(a):"
    assert "6.0" in code and "jax.lax.sin" in code
    assert bt.fn_to_python_code(lambda x: x + 1.0, 1.0).startswith("def generated_function(")
    closed = jax.make_jaxpr(scaled)(1.0)
    assert len(code.splitlines()) - 2 <= len(closed.eqns)
