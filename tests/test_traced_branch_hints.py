"""The hint on JAX's error for a Python ``if`` on a traced value names the transform that traced
it and a fix that applies there (issues 42 and 45).

A jitted function's argument can be made static; a loop's step variables cannot (the hint says to
close over the Python value, or to branch with ``jnp.where``); a per-step setting of
``brainx.environ`` is made static with ``set_per_step``. Each fix the message names is applied and
checked against the eager (Python) computation.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import environ, transform


@pytest.fixture
def t_per_step_default():
    yield
    environ.set_per_step("t", None)


def _message(run) -> str:
    with pytest.raises(jax.errors.ConcretizationTypeError) as info:
        run()
    message = str(info.value)
    assert message.count("brainx: ") == 1
    return message


def test_a_branch_on_t_under_jit_names_set_per_step(t_per_step_default):
    def fun():
        return jnp.float32(1.0) if environ.get("t") > 5 else jnp.float32(0.0)

    with environ.context(t=10.0):
        message = _message(transform.jit(fun))
    assert "per-step setting 't'" in message
    assert "brainx.environ.set_per_step('t', False)" in message
    environ.set_per_step("t", False)                  # the fix the message names
    jitted = transform.jit(fun)
    for t in (10.0, 1.0, 7.0):
        with environ.context(t=t):
            assert float(jitted()) == float(fun())


def test_a_branch_on_an_argument_does_not_name_set_per_step():
    message = _message(lambda: transform.jit(lambda x: x if x > 0 else -x)(1.0))
    assert "static_argnums=(i,)" in message and "set_per_step" not in message


def test_a_branch_on_a_for_loop_variable_names_the_loop_not_static_argnums():
    def body(i):
        return i * 2 if i > 1 else i

    message = _message(lambda: transform.for_loop(body, jnp.arange(4)))
    hint = message.split("brainx: ")[1]
    assert hint.startswith("for_loop(body) traces what it passes to body at each step")
    assert "static_argnums" not in hint and "jit(fun)" not in hint
    assert "jnp.where" in hint and "close over" in hint
    fixed = transform.for_loop(lambda i: jnp.where(i > 1, i * 2, i), jnp.arange(4))
    np.testing.assert_array_equal(fixed, [body(i) for i in range(4)])


def test_a_branch_on_a_python_flag_passed_through_xs_is_fixed_by_closing_over_it():
    flags = jnp.asarray([True, False, True])
    message = _message(lambda: transform.for_loop(lambda i, f: i + (1 if f else 0),
                                                  jnp.arange(3), flags))
    assert "close over it" in message
    for flag in (True, False):                        # the fix: the flag is the body's closure
        out = transform.for_loop(lambda i: i + (1 if flag else 0), jnp.arange(3))
        np.testing.assert_array_equal(out, [i + (1 if flag else 0) for i in range(3)])


def test_a_branch_on_t_in_a_loop_body_names_set_per_step(t_per_step_default):
    acc = brainx.HiddenState(jnp.zeros(()))

    def body(i):
        acc.value = acc.value + (1.0 if environ.get("t") > 5 else -1.0)
        return acc.value

    with environ.context(t=10.0):
        message = _message(lambda: transform.for_loop(body, jnp.arange(3)))
    assert message.split("brainx: ")[1].startswith("for_loop(body)")
    assert "brainx.environ.set_per_step('t', False)" in message
    assert float(acc.value) == 0.0                    # nothing written
    environ.set_per_step("t", False)
    for t, sign in ((10.0, 1.0), (1.0, -1.0)):
        acc.value = jnp.zeros(())
        with environ.context(t=t):
            out = transform.for_loop(body, jnp.arange(3))
        np.testing.assert_array_equal(out, sign * np.arange(1.0, 4.0))


def test_a_value_from_a_jit_around_the_loop_names_static_argnums_there():
    def run(x):
        return transform.for_loop(lambda i: i * 2 if x > 0 else i, jnp.arange(3))

    message = _message(lambda: transform.jit(run)(1.0))
    assert "an argument of a jit around the loop" in message and "static_argnums" in message
    fixed = transform.jit(run, static_argnums=0)
    for x in (1.0, -1.0):
        np.testing.assert_array_equal(fixed(x), [i * 2 if x > 0 else i for i in range(3)])


def test_a_while_loop_body_names_the_while_loop():
    message = _message(lambda: transform.while_loop(
        lambda v: v < 3, lambda v: v + 1 if v > 1 else v + 2, 0))
    assert message.split("brainx: ")[1].startswith("while_loop(<lambda>) traces")
    assert "static_argnums" not in message.split("brainx: ")[1]
