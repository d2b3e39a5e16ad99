"""unvmap, jit_error_if, debug_nan / debug_nan_if / breakpoint_if and checkify, against eager runs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.transform import (
    breakpoint_if, check, checkify, debug_nan, debug_nan_if, div_checks, index_checks, jit,
    jit_error_if, nan_checks, scan, unvmap, user_checks, vmap,
)


# -- unvmap ----------------------------------------------------------------------------------

@pytest.mark.parametrize("op, ref", [("any", np.any), ("all", np.all), ("max", np.max)])
def test_unvmap_reduces_over_every_lane(op, ref):
    x = jnp.array([[0.0, 3.0], [1.0, 0.0], [2.0, 0.0]])
    lane = jax.vmap(lambda row: unvmap(row > 0 if op != "max" else row, op=op))(x)
    whole = ref(np.asarray(x) > 0) if op != "max" else ref(np.asarray(x))
    assert lane.tolist() == [whole] * 3
    # nested vmaps, and under brainx.vmap (a per-lane trace batched afterwards), jit, scan
    nested = jax.vmap(jax.vmap(lambda v: unvmap(v > 0 if op != "max" else v, op=op)))(x)
    assert (np.asarray(nested) == whole).all()
    got = vmap(lambda row: unvmap(row > 0 if op != "max" else row, op=op))(x)
    assert got.tolist() == [whole] * 3
    looped = jax.vmap(lambda row: scan(lambda c, v: (c, unvmap(v > 0 if op != "max" else v,
                                                               op=op)), 0, row)[1])(x)
    assert looped.shape == x.shape


def test_unvmap_outside_vmap_is_the_reduction_and_none_gives_the_batch():
    x = jnp.array([0.0, 2.0])
    assert bool(unvmap(x, "any")) and not bool(unvmap(x, "all")) and float(unvmap(x, "max")) == 2
    whole = jax.vmap(lambda v: unvmap(v, "none").sum())(jnp.arange(3.0))
    assert whole.tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(ValueError, match="op must be one of"):
        unvmap(x, "mean")


# -- jit_error_if ---------------------------------------------------------------------------

def test_jit_error_if_eager_raises_the_python_error_at_once():
    with pytest.raises(ValueError, match="bad 3"):
        jit_error_if(True, "bad %d", 3)
    with pytest.raises(ValueError, match="got 4"):
        jit_error_if(jnp.array([False, True]), "got {v}", v=4)
    jit_error_if(False, "never")

    def boom(x):
        raise KeyError(f"custom {x}")

    with pytest.raises(KeyError, match="custom 7"):
        jit_error_if(True, boom, 7)
    with pytest.raises(TypeError, match="message string or a function"):
        jit_error_if(True, 3)


def test_jit_error_if_inside_jit_and_vmap_names_the_failing_lane():
    h = brainx.State(jnp.zeros(()))

    @jit
    def step(x):
        jit_error_if(x < 0, "x must be >= 0, got {x}", x=x)
        h.value = h.value + x
        return jnp.sqrt(x)

    assert float(step(4.0)) == 2.0 and float(h.value) == 4.0
    with pytest.raises(Exception, match="x must be >= 0, got -1.0"):
        step(-1.0)
    lanes = vmap(step, out_states=h)
    with pytest.raises(Exception, match="got -2.0"):  # the first lane where it holds
        lanes(jnp.array([1.0, -2.0, -3.0]))
    assert float(h.value) == 4.0  # nothing written
    assert lanes(jnp.array([1.0, 4.0])).tolist() == [1.0, 2.0]
    assert h.value.tolist() == [5.0, 8.0]


# -- debug_nan --------------------------------------------------------------------------------

def test_debug_nan_names_primitive_line_and_state_and_changes_nothing():
    w = brainx.ParamState(jnp.array([1.0, -1.0]))
    h = brainx.State(jnp.zeros(2))

    def f(x):
        h.value = jnp.log(w.value * x)
        return h.value.sum()

    debug_nan(lambda x: jnp.log(x), jnp.array([1.0, 2.0]))  # clean: nothing
    with pytest.raises(RuntimeError) as info:
        debug_nan(f, 2.0, phase="forward")
    msg = str(info.value)
    assert "[forward]: NaN/Inf detected" in msg and "Introduced by primitive `log`" in msg
    # brainstate's section names, with the user's line (not a JAX or brainx frame)
    assert 'Source location: File "' in msg and "test_transform_checks.py" in msg
    assert "Contaminated outputs:" in msg
    assert f"the new value of {h!r}" in msg and "1 NaN" in msg
    assert h.value.tolist() == [0.0, 0.0]


def test_debug_nan_ignores_a_nan_that_does_not_reach_the_outputs():
    def safe(x):
        return jnp.where(x > 0, jnp.log(x), 0.0)

    debug_nan(safe, jnp.array([-1.0, 2.0]))


def test_debug_nan_reports_an_inf_no_primitive_made_and_a_division():
    with pytest.raises(RuntimeError) as info:  # exp overflow: checkify records nothing
        debug_nan(jnp.exp, jnp.array([1000.0, 0.0]))
    msg = str(info.value)
    assert "NaN/Inf detected" in msg and "Source location: unknown" in msg
    assert "the return value: shape (2,), 0 NaN, 1 Inf" in msg
    with pytest.raises(RuntimeError, match="division by zero") as info:
        debug_nan(lambda x: 1.0 / x, jnp.array([0.0, 2.0]))
    assert "Source location: File" in str(info.value)


def test_debug_nan_in_jit_and_debug_nan_if():
    @jit
    def g(x):
        debug_nan(jnp.log, x)
        return x * 2

    assert float(g(1.0)) == 2.0
    with pytest.raises(Exception, match="primitive `log`"):
        g(-1.0)
    debug_nan_if(False, jnp.log, jnp.array(-1.0))
    with pytest.raises(RuntimeError, match="log"):
        debug_nan_if(True, jnp.log, jnp.array(-1.0))

    @jit
    def h(x):
        debug_nan_if(x < 0, jnp.log, x)
        return x

    assert float(h(3.0)) == 3.0
    with pytest.raises(Exception, match="NaN"):
        h(-3.0)


def test_breakpoint_if_calls_the_breakpoint_only_when_true(monkeypatch):
    seen = []
    monkeypatch.setattr(jax.debug, "breakpoint",
                        lambda **kw: jax.debug.callback(lambda: seen.append(kw), ordered=True))
    breakpoint_if(jnp.array(False), num_frames=1)
    assert seen == []
    breakpoint_if(jnp.array(True), num_frames=1)
    jax.effects_barrier()
    assert seen == [{"num_frames": 1}]
    jax.vmap(lambda p: breakpoint_if(p))(jnp.array([False, True]))
    jax.effects_barrier()
    assert len(seen) == 2  # once for the batch, not once per lane


# -- checkify ---------------------------------------------------------------------------------

def test_checkify_with_states_matches_the_eager_run():
    total = brainx.State(jnp.zeros(()))

    def add(x):
        check(x > 0, "x must be positive, got {x}", x=x)
        total.value = total.value + x
        return total.value

    err, out = checkify(add)(2.0)
    assert err.get() is None and float(out) == 2.0 and float(total.value) == 2.0
    err, out = jit(checkify(add))(-1.0)
    assert err.get() == "x must be positive, got -1.0 (`check` failed)"
    assert float(out) == 1.0 and float(total.value) == 1.0  # written, as after a plain call
    with pytest.raises(Exception, match="x must be positive"):
        err.throw()


@pytest.mark.parametrize("errors, fn, arg, expect", [
    (nan_checks, jnp.log, -1.0, "nan generated by primitive: log"),
    (div_checks, lambda x: 1 // x, 0, "division by zero"),
    (index_checks, lambda i: jnp.arange(3)[i], 5, "out-of-bounds"),
])
def test_checkify_error_sets(errors, fn, arg, expect):
    assert expect in checkify(fn, errors=errors)(arg)[0].get()
    assert checkify(fn, errors=user_checks)(arg)[0].get() is None


def test_jit_error_if_formats_brace_messages_and_plain_ones():
    with pytest.raises(ValueError, match="bad value 5"):
        jit_error_if(True, "bad value {}", jnp.asarray(5))
    with pytest.raises(ValueError, match="1 vs 2"):
        jit_error_if(jnp.asarray(True), "{} vs {}", 1, 2)
    with pytest.raises(ValueError, match="^plain message$"):
        jit_error_if(True, "plain message")


def test_has_nan_or_inf_checks_inexact_leaves_only_and_both_complex_parts():
    from brainx.transform.control.nan_debug import has_nan_or_inf

    nan = float("nan")
    assert not bool(has_nan_or_inf({"i": jnp.array([1, 2]), "b": jnp.array([True])}))
    assert not bool(has_nan_or_inf({"i": jnp.array([7]), "f": jnp.array([1.0, 2.0])}))
    assert bool(has_nan_or_inf({"i": jnp.array([7]), "f": jnp.array([1.0, nan])}))
    assert not bool(has_nan_or_inf(jnp.array([1.0 + 2.0j])))
    assert bool(has_nan_or_inf(jnp.array([complex(nan, 1.0)])))
    assert bool(has_nan_or_inf(jnp.array([complex(1.0, float("inf"))])))
    assert bool(jit(has_nan_or_inf)(jnp.array([complex(1.0, nan)])))
