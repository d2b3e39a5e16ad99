"""Loops outside jit compile once; the progress bar leaves results unchanged."""

import gc
import io
import sys
import weakref

import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.transform import (
    ProgressBar, bounded_while_loop, for_loop, grad, jit, scan, while_loop,
)
from brainx.transform.control.loop_cache import loop_cache_size

from loop_models import (  # noqa: E402 - shared with test_loops.py
    N, CompileCounter, Net, assert_tree_close, inputs, ref_for_loop,
)


# -- compile once ------------------------------------------------------------------------------

@pytest.mark.parametrize("loop", ["for_loop", "scan", "while_loop", "bounded"])
def test_loop_outside_jit_compiles_once(loop):
    net = Net()
    traces = []

    def step(x):
        traces.append(1)
        return net.step(x)

    def body(n):
        step(jnp.ones(N))
        return n + 1

    cond_fun = lambda n: n < 5
    run = {"for_loop": lambda xs: for_loop(step, xs),
           "scan": lambda xs: scan(lambda c, x: (c + step(x), None), 0.0, xs)[0],
           "while_loop": lambda xs: while_loop(cond_fun, body, 0),
           "bounded": lambda xs: bounded_while_loop(cond_fun, body, 0, max_steps=8)}[loop]
    if loop == "scan":   # a stable step function (a fresh lambda per call is a new function)
        scan_step = lambda c, x: (c + step(x), None)
        run = lambda xs: scan(scan_step, 0.0, xs)[0]
    xs, xs2, xs3 = inputs(6), inputs(6, seed=7), inputs(9)
    with CompileCounter() as first:
        out1 = run(xs)
    n_traces = len(traces)
    with CompileCounter() as again:
        out2 = run(xs)
        out3 = run(xs2)
    assert first.count >= 1 and again.count == 0
    assert len(traces) == n_traces          # no retrace either
    assert int(net.count.value) == (18 if loop in ("for_loop", "scan") else 15)
    assert not np.allclose(np.asarray(out1), np.asarray(out3)) or loop in ("while_loop", "bounded")
    del out2
    with CompileCounter() as other_shape:
        run(xs3)
    assert other_shape.count == (1 if loop in ("for_loop", "scan") else 0)


def test_compiled_loop_sees_new_states_and_releases_dead_functions():
    net, xs = Net(), inputs(4)

    def step(x):
        return net.step(x)

    for_loop(step, xs)
    net.v = brainx.HiddenState(jnp.full(N, 0.5), name="v2")   # a re-initialised model
    ys = for_loop(step, xs)
    _, ys_ref = ref_for_loop(net.params(), (jnp.full(N, 0.5), jnp.int32(0)), xs)
    assert_tree_close(ys, ys_ref)

    gc.collect()
    size = loop_cache_size()
    ref = weakref.ref(step)
    del step
    gc.collect()
    assert ref() is None and loop_cache_size() == size - 1
    # bound methods are cached per instance, and die with it
    other = Net(5)
    for_loop(other.step, xs)
    for_loop(other.step, xs)
    assert loop_cache_size() == size
    del other
    gc.collect()
    assert loop_cache_size() == size - 1


# -- progress bar ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["for_loop", "scan", "jit", "grad"])
def test_progress_bar_leaves_results_unchanged_and_shows_progress(kind):
    xs = inputs(10)
    out = io.StringIO()
    bar = ProgressBar(freq=3, file=out, desc="simulating")
    net, ref = Net(), Net()
    if kind == "for_loop":
        got, want = for_loop(net.step, xs, pbar=bar), for_loop(ref.step, xs)
    elif kind == "scan":
        got = scan(net.scan_step, 0.0, xs, pbar=bar)
        want = scan(ref.scan_step, 0.0, xs)
    elif kind == "jit":
        got = jit(lambda xs: for_loop(net.step, xs, pbar=bar))(xs)
        want = for_loop(ref.step, xs)
    else:
        loss = lambda pb: (lambda xs: for_loop(net.step if pb else ref.step, xs, pbar=pb).sum())
        got = grad(loss(bar), grad_states=net.w)(xs)
        want = grad(loss(None), grad_states=ref.w)(xs)
    assert_tree_close((got, net.states()), (want, ref.states()))
    text = out.getvalue()
    assert "simulating" in text and "10/10" in text


def test_progress_bar_true_and_desc_function(capsys):
    net = Net()
    ys = for_loop(net.step, inputs(5), pbar=True)
    assert "5/5" in capsys.readouterr().err
    out = io.StringIO()
    bar = ProgressBar(count=2, file=out, desc=("step {i} v0={v:.3f}", lambda d: {"i": d["i"],
                                                                                 "v": d["y"]}))
    ys2 = for_loop(Net().step, inputs(5), pbar=bar)
    assert_tree_close(ys, ys2)
    assert "step 4 v0=" in out.getvalue() and "5/5" in out.getvalue()


def test_progress_bar_without_tqdm_draws_plain_text(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # `from tqdm.auto import` fails
    out = io.StringIO()
    net, ref = Net(), Net()
    got = for_loop(net.step, inputs(10), pbar=ProgressBar(freq=4, file=out, desc="sim",
                                                          colour="red"))  # tqdm-only option
    assert_tree_close((got, net.states()), (ref_for_loop_states(ref, 10)))
    lines = out.getvalue().splitlines()
    # a file is not a terminal: one line per update (steps 1, 4, 8, 10), no carriage return
    assert [ln.split("|")[-1].split(" [")[0].strip() for ln in lines] == [
        "1/10", "4/10", "8/10", "10/10"]
    assert lines[-1].startswith("sim: 100%|") and "\r" not in out.getvalue()


@pytest.mark.parametrize("n", [5, 8])
def test_progress_bar_of_checkpointed_scan_ends_exactly_at_n(monkeypatch, n):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    out = io.StringIO()
    _, ys = brainx.transform.checkpointed_scan(
        lambda c, x: (c + x, c + x), 0.0, jnp.arange(float(n)), base=2,
        pbar=ProgressBar(freq=1, file=out))
    assert jnp.allclose(ys, jnp.cumsum(jnp.arange(float(n))))
    counts = [ln.split("|")[-1].split(" [")[0].strip() for ln in out.getvalue().splitlines()]
    assert counts == [f"{i}/{n}" for i in range(1, n + 1)]  # no step twice, none past n


def ref_for_loop_states(ref, n):
    ys = for_loop(ref.step, inputs(n))
    return ys, ref.states()


def test_progress_bar_count_follows_brainstate():
    # count=K moves the bar every n // K steps (brainstate's rule); the bar still ends at n
    runner = ProgressBar(count=20).init(50)
    assert (runner.print_freq, runner.remainder) == (2, 0)
    runner = ProgressBar(count=3).init(10)
    assert (runner.print_freq, runner.remainder) == (3, 1)
    assert ProgressBar(count=100).init(4).print_freq == 1  # brainstate: ValueError
    assert ProgressBar(freq=100).init(4).print_freq == 4   # brainstate: ValueError
    assert ProgressBar().init(10).print_freq == 1 and ProgressBar().init(45).print_freq == 2


def test_an_inline_progress_bar_does_not_recompile_the_loop():
    from brainx.transform.control.loop_cache import loop_cache_size
    from brainx.transform import ProgressBar, for_loop

    h = brainx.HiddenState(jnp.zeros(()))

    def step(x):
        h.value = h.value + x
        return h.value

    for_loop(step, jnp.ones(4), pbar=ProgressBar(freq=2))
    n = loop_cache_size()
    for_loop(step, jnp.ones(4), pbar=ProgressBar(freq=2))
    assert loop_cache_size() == n
    assert float(h.value) == 8.0
