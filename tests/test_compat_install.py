"""``brainx.compat.install_as_brainstate``: ``import brainstate`` gives brainx (in a fresh process)."""

import subprocess
import sys
import textwrap


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=240)


def test_a_brainstate_program_runs_on_brainx_after_install():
    out = _run("""
        import brainx, brainx.compat
        assert not brainx.compat.installed_as_brainstate()
        brainx.compat.install_as_brainstate()
        brainx.compat.install_as_brainstate()            # again: nothing happens
        import brainstate, jax, jax.numpy as jnp
        assert brainstate.State is brainx.State and brainx.compat.installed_as_brainstate()
        import brainstate.transform, brainstate.nn, brainstate.random
        assert brainstate.nn is brainx.nn and brainstate.random is brainx.random
        assert brainstate.transform is brainx.transform
        # public names through private paths, as client libraries import them
        from brainstate.transform._make_jaxpr import StatefulFunction
        from brainstate._state import State, ParamState
        from brainstate._compatible_import import ClosedJaxpr, safe_zip, Primitive, wrap_init
        assert StatefulFunction is brainx.transform.StatefulFunction and State is brainx.State
        assert ClosedJaxpr is jax.extend.core.ClosedJaxpr
        # brainstate's wrap_init(fun, args, kwargs, name): a WrappedFun that JAX can trace
        wrapped = wrap_init(lambda a, b: a * b, (2.0, 3.0), {}, "product")
        assert wrapped.call_wrapped(2.0, 3.0) == 6.0 and "product" in str(wrapped.debug_info)
        try:
            from brainstate.transform._make_jaxpr import _no_such_private_name
        except ImportError as e:
            assert "_no_such_private_name" in str(e)
        else:
            raise AssertionError("a missing private name imported")
        # a brainstate-style training step, against plain JAX
        w = brainstate.ParamState(jnp.array([1.0, -2.0]))
        @brainstate.transform.jit
        def step(x):
            g = brainstate.transform.grad(lambda: jnp.sum((w.value * x) ** 2), grad_states=w)()
            w.value = w.value - 0.1 * g
            return w.value
        x = jnp.array([0.5, 1.5])
        ref = jnp.array([1.0, -2.0]) - 0.1 * jax.grad(lambda v: jnp.sum((v * x) ** 2))(
            jnp.array([1.0, -2.0]))
        assert jnp.allclose(step(x), ref)
        # brainstate's rule: a raw trace's tracer assigned outside every transform raises at
        # the write, the state keeping its value
        v = brainstate.HiddenState(jnp.ones(2))
        try:
            jax.jvp(lambda y: setattr(v, "value", y) or y, (jnp.zeros(2),), (jnp.ones(2),))
        except brainstate.TraceContextError as e:
            assert "HiddenState" in str(e) and "raw JAX transform" in str(e)
        else:
            raise AssertionError("the write of a raw tracer was not refused")
        assert v.value.tolist() == [1.0, 1.0]
        # brainstate goes on after a raw trace left a state holding its tracer (braincell):
        # the next read gives the value from before
        jax.jvp(lambda y: v.restore_value(y) or y, (jnp.zeros(2),), (jnp.ones(2),))
        assert v.value.tolist() == [1.0, 1.0]
        # without install_as_brainstate, brainx lends the state to the raw trace instead
        from brainx.state.lending import set_raw_write_policy
        assert set_raw_write_policy("lend") == "raise"
        out = jax.jit(lambda y: (setattr(v, "value", y * 2), v.value.sum(),
                                 v.restore_value(jnp.ones(2)))[1])(jnp.ones(2))
        assert float(out) == 4.0 and v.value.tolist() == [1.0, 1.0]
        print("ok")
    """)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_install_refuses_when_the_real_brainstate_is_imported():
    out = _run("""
        import sys, types
        sys.modules["brainstate"] = types.ModuleType("brainstate")   # stands for the real one
        import brainx.compat
        try:
            brainx.compat.install_as_brainstate()
        except RuntimeError as e:
            assert "already" in str(e) and "install_as_brainstate" in str(e)
            print("refused")
    """)
    assert out.returncode == 0 and out.stdout.strip() == "refused", out.stderr[-3000:]
