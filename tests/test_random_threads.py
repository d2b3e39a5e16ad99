"""The default generator under threads: a key per thread, no repeated draws, no tracers."""

import subprocess
import sys
import threading

import jax
import numpy as np

import brainx
from brainx import transform


def _run_threads(target, n):
    errors = []

    def guarded(i):
        try:
            target(i)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors


def test_threads_never_repeat_a_draw_nor_see_a_tracer():
    brainx.random.seed(0)
    step = transform.jit(lambda: brainx.random.normal(size=4))
    draws = {}

    def work(i):
        jitted = [np.asarray(step()) for _ in range(200)]
        eager = [np.asarray(brainx.random.normal(size=4)) for _ in range(20)]
        draws[i] = np.stack(jitted + eager)

    _run_threads(work, 4)
    every = np.concatenate(list(draws.values()))
    assert len({tuple(row) for row in every}) == len(every)
    assert not isinstance(brainx.random.DEFAULT._value, jax.core.Tracer)


def test_seeding_inside_a_thread_gives_a_reproducible_stream():
    def stream(seed):
        out = []

        def work(_):
            brainx.random.seed(seed)
            out.append(np.asarray(brainx.random.uniform(size=5)))

        _run_threads(work, 1)
        return out[0]

    main_before = brainx.random.get_key()
    np.testing.assert_array_equal(stream(3), stream(3))
    assert not np.array_equal(stream(3), stream(4))
    np.testing.assert_array_equal(brainx.random.get_key_data(), jax.random.key_data(main_before))  # main thread untouched


def test_import_touches_no_jax_backend():
    code = ("import brainx, jax\n"
            "jax.config.update('jax_num_cpu_devices', 4)\n"
            "print(len(jax.devices()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "4"
