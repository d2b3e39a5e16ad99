"""brainx.environ: global settings, per-thread contexts, dt and precision."""

import threading

import brainunit as u
import jax
import numpy as np
import pytest

from brainx import environ


@pytest.fixture(autouse=True)
def clean_environ():
    saved = dict(environ._SETTINGS)
    behaviors = dict(environ._BEHAVIORS)
    x64 = jax.config.jax_enable_x64
    yield
    environ._SETTINGS.clear()
    environ._SETTINGS.update(saved)
    environ._BEHAVIORS.clear()
    environ._BEHAVIORS.update(behaviors)
    environ._CONTEXTS.stack.clear()
    jax.config.update("jax_enable_x64", x64)


def test_set_get_and_get_dt():
    environ.set(dt=0.25 * u.ms, answer=42)
    assert environ.get_dt() == 0.25 * u.ms
    assert environ.get("answer") == 42
    assert environ.get("nothing", default=7) == 7
    assert environ.all()["answer"] == 42


def test_unset_key_error_says_how_to_set_it():
    environ._SETTINGS.pop("dt", None)
    with pytest.raises(KeyError, match=r"brainx\.environ\.set\(dt=0\.1 \* u\.ms\)"):
        environ.get_dt()
    with pytest.raises(KeyError, match="membrane"):
        environ.get("tau_m", desc="membrane time constant")


def test_context_nests_and_restores():
    environ.set(dt=0.1 * u.ms)
    with environ.context(dt=0.2 * u.ms) as env:
        assert env["dt"] == 0.2 * u.ms
        with environ.context(dt=0.3 * u.ms, extra="x"):
            assert environ.get_dt() == 0.3 * u.ms
            assert environ.get("extra") == "x"
        assert environ.get_dt() == 0.2 * u.ms
        assert environ.get("extra", None) is None
    assert environ.get_dt() == 0.1 * u.ms


def test_context_restores_after_exception():
    environ.set(dt=0.1 * u.ms)
    with pytest.raises(RuntimeError, match="boom"):
        with environ.context(dt=5.0 * u.ms):
            raise RuntimeError("boom")
    assert environ.get_dt() == 0.1 * u.ms
    assert "dt" not in environ._CONTEXTS.stack


def test_invalid_values_are_refused_and_change_nothing():
    environ.set(dt=0.1 * u.ms)
    with pytest.raises(ValueError, match="dt must be positive"):
        environ.set(dt=-1.0 * u.ms)
    with pytest.raises(ValueError, match="dt must be positive"):
        with environ.context(dt=0.0):
            pass
    with pytest.raises(ValueError, match="precision"):
        environ.set(precision=12)
    assert environ.get_dt() == 0.1 * u.ms
    assert "precision" not in environ._CONTEXTS.stack


def test_contexts_are_per_thread_and_set_is_global():
    environ.set(dt=0.1 * u.ms)
    seen = {}
    entered, release = threading.Event(), threading.Event()

    def worker():
        with environ.context(dt=9.0 * u.ms):
            entered.set()
            release.wait(5)
            seen["worker"] = environ.get_dt()
        seen["worker_after"] = environ.get_dt()

    t = threading.Thread(target=worker)
    t.start()
    entered.wait(5)
    seen["main_during"] = environ.get_dt()   # the worker's context does not leak here
    release.set()
    t.join()
    assert seen == {"worker": 9.0 * u.ms, "worker_after": 0.1 * u.ms,
                    "main_during": 0.1 * u.ms}


def test_precision_switches_x64_and_context_restores_it():
    environ.set(precision=32)
    assert environ.dftype() is np.float32 and not jax.config.jax_enable_x64
    with environ.context(precision=64):
        assert jax.config.jax_enable_x64
        assert environ.dftype() is np.float64 and environ.ditype() is np.int64
        assert environ.get_precision() == 64
    assert not jax.config.jax_enable_x64
    assert environ.get_precision() == 32 and environ.dctype() is np.complex64
    with environ.context(precision="bf16"):
        assert environ.get_precision() == 16


def test_registered_behavior_runs_on_every_change():
    calls = []
    environ.register_default_behavior("gain", calls.append)
    with pytest.raises(ValueError, match="already registered"):
        environ.register_default_behavior("gain", print)
    environ.set(gain=1)
    with environ.context(gain=2):
        pass
    assert calls == [1, 2, 1]


def test_dt_is_read_at_trace_time_by_jit():
    import jax.numpy as jnp
    import brainx

    h = brainx.State(jnp.zeros(()))

    @brainx.transform.jit
    def step():
        h.value = h.value + environ.get_dt() / u.ms

    with environ.context(dt=0.5 * u.ms):
        step()
    assert float(h.value) == 0.5
