"""Precision starts from JAX's x64 setting at import (brainstate 0.6), and x64 across threads' contexts.

JAX's ``jax_enable_x64`` flag is process-wide, so each import scenario runs in
a fresh Python process.
"""

import json
import os
import subprocess
import sys
import textwrap
import threading

import jax
import pytest

from brainx import environ

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REPORT = textwrap.dedent("""
    import json, jax, jax.numpy as jnp, numpy as np
    import brainx
    def report(**extra):
        print(json.dumps(dict(x64=bool(jax.config.jax_enable_x64),
                              precision=brainx.environ.get_precision(),
                              dftype=np.dtype(brainx.environ.dftype()).name,
                              ditype=np.dtype(brainx.environ.ditype()).name,
                              array=jnp.asarray(1.0).dtype.name, **extra)))
""")
X64_ON = "import jax\njax.config.update('jax_enable_x64', True)"


def run(before_import: str = "", after: str = "report()", x64_env=None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    if x64_env is not None:
        env["JAX_ENABLE_X64"] = x64_env
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    code = "\n".join([textwrap.dedent(before_import), REPORT, textwrap.dedent(after)])
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_default_import_is_32_bits_and_leaves_jax_alone():
    r = run()
    assert r == dict(x64=False, precision=32, dftype="float32", ditype="int32", array="float32")


@pytest.mark.parametrize("how", ["config", "env_var"])
def test_x64_enabled_before_import_is_kept(how):
    r = run(X64_ON) if how == "config" else run(x64_env="1")
    assert r == dict(x64=True, precision=64, dftype="float64", ditype="int64", array="float64")


def test_config_update_wins_over_the_env_var():
    r = run("import jax\njax.config.update('jax_enable_x64', False)", x64_env="1")
    assert (r["x64"], r["precision"], r["dftype"]) == (False, 32, "float32")


def test_set_context_reset_and_pop_come_back_to_the_import_precision():
    r = run(X64_ON, after="""
        from brainx import environ
        environ.set(precision=32)
        after_set = (bool(jax.config.jax_enable_x64), np.dtype(environ.dftype()).name)
        environ.reset()
        after_reset = environ.get_precision()
        with environ.context(precision=32):
            inside = bool(jax.config.jax_enable_x64)
        environ.set(precision=16)
        environ.pop("precision")
        popped = environ.get_precision()
        fresh = environ.get_precision(env=environ.EnvironmentState())
        import threading
        seen = []
        worker = threading.Thread(target=lambda: seen.append(environ.get_precision()))
        worker.start(); worker.join()
        report(after_set=after_set, after_reset=after_reset, inside=inside, popped=popped,
               fresh=fresh, thread=seen[0])
    """)
    assert r["after_set"] == [False, "float32"]
    assert r["after_reset"] == 64 and r["inside"] is False
    assert r["popped"] == r["fresh"] == r["thread"] == 64
    assert r["x64"] is True and r["precision"] == 64


def test_overlapping_precision_contexts_in_two_threads():
    """One thread leaving its context(precision=64) keeps x64 on for another still inside its own."""
    environ.set(precision=32)
    a_in, a_may_leave = threading.Event(), threading.Event()
    seen = {}

    def a():
        with environ.context(precision=64):
            a_in.set()
            a_may_leave.wait(10)

    def b():
        a_in.wait(10)
        with environ.context(precision=64):
            a_may_leave.set()
            first.join(10)                      # a has left its block
            seen["x64 in b"] = jax.config.jax_enable_x64
            seen["b's dtype"] = environ.dftype()

    first, second = threading.Thread(target=a), threading.Thread(target=b)
    first.start(), second.start()
    second.join(20)
    assert seen == {"x64 in b": True, "b's dtype": jax.numpy.float64}
    assert jax.config.jax_enable_x64 is False and environ.get_precision() == 32


def test_settings_are_shared_and_contexts_are_per_thread():
    from concurrent.futures import ThreadPoolExecutor
    environ.set(gain=0.1)
    try:
        with environ.context(gain=0.5), ThreadPoolExecutor(1) as pool:
            other = pool.submit(environ.get, "gain").result()
            assert environ.get("gain") == 0.5
        assert other == 0.1
        with ThreadPoolExecutor(1) as pool:
            pool.submit(environ.set, gain=0.7).result()
        assert environ.get("gain") == 0.7           # a worker's set() is seen by the main thread
    finally:
        environ.pop("gain")


def test_popping_an_unset_precision_gives_the_import_precision_and_keeps_it():
    """brainstate 0.6's fresh environments hold the import precision, so popping it returns it;
    brainx keeps it as the built-in default, and popping an unset one gives that default."""
    env = environ.EnvironmentState()
    assert environ.pop("precision", env=env) == environ.INITIAL_PRECISION
    assert environ.get_precision(env=env) == environ.INITIAL_PRECISION   # still in force
    environ.set(precision=16, env=env)
    assert environ.pop("precision", env=env) == 16                       # a set one: as before
    assert environ.pop("precision", None, env=env) is None               # a default still wins
    with pytest.raises(KeyError, match="'gain' not found"):
        environ.pop("gain", env=env)                                     # no built-in default


def test_pop_of_the_unset_global_precision_under_x64_reports_64():
    r = run(X64_ON, after="""
        from brainx import environ
        popped_value = environ.pop("precision")
        report(popped_value=popped_value, after=environ.get_precision())
    """)
    assert r["popped_value"] == r["after"] == r["precision"] == 64 and r["x64"] is True
