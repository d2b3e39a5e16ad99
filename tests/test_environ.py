"""brainx.environ: global settings, per-thread contexts, dt and precision."""

import threading

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import environ


@pytest.fixture(autouse=True)
def clean_environ():
    env = environ.env_state.GLOBAL_ENV
    saved = dict(env.settings)
    behaviors = dict(env.functions)
    x64 = jax.config.jax_enable_x64
    yield
    env.settings.clear()
    env.settings.update(saved)
    env.functions.clear()
    env.functions.update(behaviors)
    env.contexts.clear()
    jax.config.update("jax_enable_x64", x64)


def test_set_get_and_get_dt():
    environ.set(dt=0.25 * u.ms, answer=42)
    assert environ.get_dt() == 0.25 * u.ms
    assert environ.get("answer") == 42
    assert environ.get("nothing", default=7) == 7
    assert environ.all()["answer"] == 42


def test_unset_key_error_says_how_to_set_it():
    environ.env_state.GLOBAL_ENV.settings.pop("dt", None)
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
    assert "dt" not in environ.env_state.GLOBAL_ENV.contexts


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
    assert "precision" not in environ.env_state.GLOBAL_ENV.contexts


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


# -- brainstate's environ API: reset, pop, all, precision, dtypes, platform, behaviours ----------
import os
import subprocess
import sys

import jax.numpy as jnp


def test_reset_forgets_settings_and_behaviors():
    environ.set(gain=1.5, precision=64)
    environ.register_default_behavior("gain", lambda v: None)
    assert jax.config.jax_enable_x64
    environ.reset()
    assert environ.get("gain", None) is None
    assert environ.list_registered_behaviors() == []
    assert environ.all() == {"precision": 32}
    assert environ.get_precision() == 32 and not jax.config.jax_enable_x64


def test_pop_and_all():
    environ.reset()
    environ.set(a=1, b=2)
    assert environ.all() == {"precision": 32, "a": 1, "b": 2}
    assert environ.pop("a") == 1
    assert environ.get("a", "gone") == "gone"
    assert environ.pop("a", None) is None
    with pytest.raises(KeyError, match="cannot be popped"):
        environ.pop("a")
    with environ.context(b=3) as env:
        assert env == {"precision": 32, "b": 3}
        with pytest.raises(ValueError, match="active in a context"):
            environ.pop("b")
    assert environ.pop("b") == 2


@pytest.mark.parametrize("precision, f, i, ui, c, tol", [
    (64, np.float64, np.int64, np.uint64, np.complex128, (1e-12, np.float64)),
    ("32", np.float32, np.int32, np.uint32, np.complex64, (1e-5, np.float32)),
    (16, np.float16, np.int16, np.uint16, np.complex64, (1e-2, np.float16)),
    ("bf16", jnp.bfloat16, np.int16, np.uint16, np.complex64, (1e-2, np.float16)),
    (8, jnp.float8_e5m2, np.int8, np.uint8, np.complex64, (1e-2, np.float16)),
])
def test_precision_sets_every_default_dtype(precision, f, i, ui, c, tol):
    environ.set_precision(precision)
    assert environ.get("precision") == (int(precision) if precision != "bf16" else "bf16")
    assert environ.get_precision() == {"32": 32, "bf16": 16}.get(precision, precision)
    assert (environ.dftype(), environ.ditype(), environ.dutype(), environ.dctype()) == (f, i, ui, c)
    got = environ.tolerance()
    assert got.dtype == tol[1] and got == np.asarray(tol[0], tol[1])
    assert jax.config.jax_enable_x64 == (precision == 64)
    with pytest.raises(ValueError, match="precision must be one of"):
        environ.set_precision(128)
    assert environ.get_precision() == {"32": 32, "bf16": 16}.get(precision, precision)


def test_conventional_keys():
    assert (environ.I, environ.T, environ.DT, environ.FIT) == ("i", "t", "dt", "fit")
    assert (environ.PRECISION, environ.PLATFORM, environ.HOST_DEVICE_COUNT) == (
        "precision", "platform", "host_device_count")
    with environ.context(**{environ.FIT: True, environ.T: 2.0 * u.ms, environ.I: 7}):
        assert environ.get(environ.FIT) is True
        assert environ.get("t") == 2.0 * u.ms and environ.get("i") == 7
    assert environ.get(environ.FIT, False) is False


def test_behaviors_unregister_and_list():
    calls = []
    environ.register_default_behavior("lr", calls.append)
    environ.register_default_behavior("lr", lambda v: calls.append(-v), replace_if_exist=True)
    assert "lr" in environ.list_registered_behaviors()
    environ.set(lr=2)
    assert environ.unregister_default_behavior("lr") is True
    assert environ.unregister_default_behavior("lr") is False
    environ.set(lr=3)
    assert calls == [-2] and "lr" not in environ.list_registered_behaviors()
    with pytest.raises(TypeError, match="callable"):
        environ.register_default_behavior("lr", 3)


def test_platform_is_jax_backend_and_cannot_change_once_started():
    jnp.zeros(1).block_until_ready()   # backends are running now
    platform = jax.default_backend()
    assert environ.get_platform() == platform == environ.get(environ.PLATFORM)
    environ.set_platform(platform)      # the current one: accepted
    other = "tpu" if platform != "tpu" else "cpu"
    with pytest.raises(RuntimeError, match="already started its backends"):
        environ.set_platform(other)
    with pytest.raises(RuntimeError, match="already started its backends"):
        environ.set(platform=other)
    with pytest.raises(ValueError, match="platform must be one of"):
        environ.set_platform("quantum")
    with pytest.raises(ValueError, match="Cannot set .* in a context"):
        with environ.context(platform="cpu"):
            pass
    assert environ.get_platform() == platform


def test_host_device_count_refused_once_backends_started():
    jnp.zeros(1).block_until_ready()
    n = environ.get_host_device_count()
    assert n == len(jax.devices("cpu")) == environ.get(environ.HOST_DEVICE_COUNT)
    flags = os.environ.get("XLA_FLAGS")
    environ.set_host_device_count(n)    # unchanged: accepted
    with pytest.raises(RuntimeError, match=f"with {n} CPU device"):
        environ.set_host_device_count(n + 1)
    with pytest.raises(RuntimeError, match="before any JAX work"):
        environ.set(host_device_count=n + 2)
    assert os.environ.get("XLA_FLAGS") == flags and environ.get_host_device_count() == n
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="positive integer"):
            environ.set_host_device_count(bad)
    with pytest.raises(ValueError, match="Cannot set .* in a context"):
        with environ.context(host_device_count=2):
            pass


_FRESH = """
from jax._src import xla_bridge
import brainx
import brainx
from brainx import environ
assert not xla_bridge.backends_are_initialized(), "import started a backend"
environ.set_host_device_count(3)
environ.set_platform("cpu")
assert environ.get_platform() == "cpu" and environ.get_host_device_count() == 3
assert not xla_bridge.backends_are_initialized(), "a setter started a backend"
import jax
import jax.numpy as jnp
assert len(jax.devices()) == 3, jax.devices()
try:
    environ.set_host_device_count(2)
except RuntimeError as e:
    print("refused:", e)
print("devices", len(jax.devices()), "XLA_FLAGS", __import__("os").environ["XLA_FLAGS"])
"""


def test_platform_and_device_count_in_a_fresh_process():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    out = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True,
                         env=env, timeout=120, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr
    assert "refused: Cannot set the host device count to 2" in out.stdout
    assert "devices 3 XLA_FLAGS --xla_force_host_platform_device_count=3" in out.stdout


# -- isolated environments (env=) and behaviours that fail --------------------------------
def test_environment_state_is_isolated_from_the_global_one():
    env = environ.EnvironmentState()
    environ.set(precision=64, gain=2.0, env=env)
    assert environ.get("gain", env=env) == 2.0 and environ.get("gain", None) is None
    assert not jax.config.jax_enable_x64          # only the global env drives JAX's flag
    assert environ.dftype(env=env) is np.float64 and environ.dftype() is np.float32
    assert environ.tolerance(env=env).dtype == np.float64
    with environ.context(gain=3.0, env=env):
        assert environ.get("gain", env=env) == 3.0 and environ.all(env=env)["gain"] == 3.0
        assert "gain" not in environ.all()
    assert environ.pop("gain", env=env) == 2.0
    environ.register_default_behavior("gain", print, env=env)
    assert environ.list_registered_behaviors(env=env) == ["gain"]
    assert "gain" not in environ.list_registered_behaviors()
    environ.reset(env=env)
    assert environ.all(env=env) == {"precision": 32} and not env.locks
    with pytest.raises(TypeError, match="EnvironmentState"):
        environ.get("gain", env={"gain": 1})


def test_settings_are_shared_across_threads_contexts_are_not():
    env = environ.EnvironmentState()
    environ.set(shared=1, env=env)
    seen = {}
    with environ.context(private=2, env=env):
        worker = threading.Thread(target=lambda: seen.update(
            shared=environ.get("shared", env=env), private=environ.get("private", None, env=env)))
        worker.start()
        worker.join()
    assert seen == {"shared": 1, "private": None}


def test_failing_behavior_puts_the_old_value_back_and_raises():
    def positive(value):
        if value <= 0:
            raise ValueError(f"must be positive, got {value}")

    environ.set(rate=1.0)
    environ.register_default_behavior("rate", positive)
    with pytest.raises(ValueError, match="must be positive"):
        environ.set(rate=-1.0)
    assert environ.get("rate") == 1.0
    with pytest.raises(ValueError, match="must be positive"):
        with environ.context(rate=-2.0):
            pass
    assert environ.get("rate") == 1.0 and "rate" not in environ.env_state.GLOBAL_ENV.contexts
    with pytest.raises(TypeError, match="string"):
        environ.register_default_behavior(3, positive)


def test_behavior_failing_on_restore_warns_and_the_block_still_exits():
    calls = []

    def fails_on_base(value):
        calls.append(value)
        if value == "base":
            raise RuntimeError("no")

    environ.set(mode_key="inner0")
    environ.register_default_behavior("mode_key", fails_on_base)
    environ.env_state.GLOBAL_ENV.settings["mode_key"] = "base"
    with pytest.warns(RuntimeWarning, match="mode_key"):
        with environ.context(mode_key="inner"):
            pass
    assert calls == ["inner", "base"] and environ.get("mode_key") == "base"


@pytest.mark.parametrize("precision, f, i, u_, c", [
    (64, np.float64, np.int64, np.uint64, np.complex128),
    (32, np.float32, np.int32, np.uint32, np.complex64),
    (16, np.float16, np.int16, np.uint16, np.complex64),
    ("bf16", jax.numpy.bfloat16, np.int16, np.uint16, np.complex64),
    (8, jax.numpy.float8_e5m2, np.int8, np.uint8, np.complex64),
])
def test_dtype_helpers_follow_the_precision(precision, f, i, u_, c):
    assert environ._get_float(precision) is f and environ._get_int(precision) is i
    assert environ._get_uint(precision) is u_ and environ._get_complex(precision) is c
    env = environ.EnvironmentState()
    environ.set_precision(precision, env=env)
    assert (environ.dftype(env=env), environ.ditype(env=env), environ.dutype(env=env),
            environ.dctype(env=env)) == (f, i, u_, c)
    with pytest.raises(ValueError, match="precision must be one of"):
        environ._get_float("nope")


def test_set_refuses_a_traced_value_and_sets_nothing():
    def f(x):
        environ.set(gain=2.0, t=x)
        return x

    for transform_ in (brainx.transform.jit, jax.jit):
        with pytest.raises(TypeError, match=r"set\(t=\.\.\.\) was given a traced value.*context"):
            transform_(f)(jnp.ones(()))
        assert environ.get("t", None) is None and environ.get("gain", None) is None
    with brainx.environ.context(t=1.0):               # what the message says to do instead
        assert float(brainx.transform.jit(lambda x: x * environ.get("t"))(jnp.ones(()))) == 1.0
