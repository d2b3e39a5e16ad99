"""State hooks: order, write transformation and cancellation, errors, global hooks, handles,
hooks inside transforms, and what a program without hooks pays."""

import gc
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.core import Tracer

import brainx
from brainx import transform
from brainx.state.snapshots import TreefyState
from brainx.state import state as state_module
from brainx.state.hook_manager import hooks_active


@pytest.fixture(autouse=True)
def clean_global_hooks():
    registry = brainx.GlobalHookRegistry.instance()
    config = registry.config
    yield
    brainx.clear_state_hooks()
    registry.config = config


def _holds_tracer(value):
    return any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves(value))


# -- order --------------------------------------------------------------------------------
def test_hooks_run_by_priority_then_registration_and_global_first():
    s = brainx.State(jnp.zeros(2))
    order = []
    for name, priority in [("a0", 0), ("b5", 5), ("c0", 0), ("d-1", -1), ("e5", 5)]:
        s.register_hook("read", lambda ctx, n=name: order.append(n), priority=priority)
    brainx.register_state_hook("read", lambda ctx: order.append("global"), priority=-100)
    _ = s.value
    assert order == ["global", "b5", "e5", "a0", "c0", "d-1"]


def test_write_before_hooks_chain_in_priority_order():
    s = brainx.State(jnp.zeros(2))
    s.register_hook("write_before", lambda ctx: setattr(ctx, "transformed_value",
                                                        ctx.transformed_value + 10.0), priority=1)
    s.register_hook("write_before", lambda ctx: setattr(ctx, "transformed_value",
                                                        ctx.transformed_value * 2.0), priority=9)
    seen = []
    s.register_hook("write_after", lambda ctx: seen.append(np.asarray(ctx.value)))
    s.value = jnp.array([1.0, 2.0])
    np.testing.assert_allclose(s.value, [12.0, 14.0])  # (x * 2) + 10, not (x + 10) * 2
    np.testing.assert_allclose(seen[0], [12.0, 14.0])


def test_global_write_before_runs_before_the_states_own():
    s = brainx.State(jnp.zeros(()))
    s.register_hook("write_before", lambda ctx: setattr(ctx, "transformed_value",
                                                        ctx.transformed_value * 3.0), priority=99)
    brainx.register_state_hook("write_before", lambda ctx: setattr(
        ctx, "transformed_value", ctx.transformed_value + 1.0))
    s.value = jnp.asarray(1.0)
    assert float(s.value) == (1.0 + 1.0) * 3.0


# -- cancel and transform ------------------------------------------------------------------
def test_cancelled_write_raises_and_leaves_the_state():
    s = brainx.State(jnp.array([1.0, 2.0]), name="rate")
    after = []

    def positive_only(ctx):
        if bool(jnp.any(ctx.transformed_value < 0)):
            ctx.cancel, ctx.cancel_reason = True, "rates are non-negative"

    s.register_hook("write_before", positive_only, name="positive_only")
    s.register_hook("write_after", lambda ctx: after.append(ctx.value))
    s.value = jnp.array([3.0, 4.0])
    with pytest.raises(brainx.HookCancellationError, match="positive_only.*rate.*non-negative"):
        s.value = jnp.array([3.0, -4.0])
    np.testing.assert_allclose(s.value, [3.0, 4.0])
    assert len(after) == 1


def test_transformed_value_is_checked_like_any_write():
    s = brainx.State(jnp.zeros(2))
    s.register_hook("write_before", lambda ctx: setattr(ctx, "transformed_value",
                                                        brainx.State(1.0)))
    with pytest.raises(brainx.StateTypeError):
        s.value = jnp.ones(2)
    np.testing.assert_allclose(s.value, [0.0, 0.0])


# -- errors under each on_error ----------------------------------------------------------
def _boom(ctx):
    raise ZeroDivisionError("boom")


def test_on_error_log_warns_and_goes_on():
    s = brainx.State(jnp.zeros(2), name="x")
    ran = []
    s.register_hook("write_after", _boom, name="broken", priority=1)
    s.register_hook("write_after", lambda ctx: ran.append(True))
    with pytest.warns(brainx.HookWarning, match="write_after hook 'broken' of State\\(f32\\[2\\], name='x'"):
        s.value = jnp.ones(2)
    np.testing.assert_allclose(s.value, [1.0, 1.0])
    assert ran == [True]


def test_on_error_ignore_is_silent_and_goes_on():
    s = brainx.State(jnp.zeros(2))
    s.hooks.config = brainx.HookConfig(on_error="ignore")
    ran = []
    s.register_hook("read", _boom, priority=1)
    s.register_hook("read", lambda ctx: ran.append(True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _ = s.value
    assert ran == [True]


@pytest.mark.parametrize("hook_type", ["write_before", "write_after"])
def test_on_error_raise_leaves_the_state_as_it_was(hook_type):
    s = brainx.State(jnp.zeros(2), name="w")
    s.hooks.config = brainx.HookConfig(on_error="raise")
    s.register_hook(hook_type, _boom, name="broken")
    with pytest.raises(brainx.HookExecutionError, match="broken.*w.*keeps the value") as info:
        s.value = jnp.ones(2)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    np.testing.assert_allclose(s.value, [0.0, 0.0])


def test_on_error_raise_in_a_restore_hook_puts_the_old_value_back():
    s = brainx.State(jnp.zeros(2))
    s.hooks.config = brainx.HookConfig(on_error="raise")
    s.register_hook("restore", _boom)
    with pytest.raises(brainx.HookExecutionError):
        s.restore_value(jnp.ones(2))
    np.testing.assert_allclose(s.value, [0.0, 0.0])


def test_error_logger_and_disable_on_error():
    s = brainx.State(1.0)
    logged = []
    s.hooks.config = brainx.HookConfig(error_logger=lambda *a: logged.append(a),
                                       disable_on_error=True, max_errors_per_hook=2)
    handle = s.register_hook("read", _boom)
    for _ in range(4):
        _ = s.value
    assert len(logged) == 2 and isinstance(logged[0][1], ZeroDivisionError)
    assert not handle.is_enabled() and not s.has_hooks("read")


def test_bad_registrations_say_what_to_do():
    s = brainx.State(1.0)
    with pytest.raises(brainx.HookRegistrationError, match="read, write_before"):
        s.register_hook("on_read", lambda ctx: None)
    with pytest.raises(brainx.HookRegistrationError, match="callable"):
        s.register_hook("read", 42)
    with pytest.raises(ValueError, match="on_error"):
        brainx.HookConfig(on_error="shout")


# -- global vs per-state -----------------------------------------------------------------
def test_global_hooks_see_every_state_own_hooks_one():
    a, b = brainx.State(1.0, name="a"), brainx.State(2.0, name="b")
    every, own = [], []
    handle = brainx.register_state_hook("read", lambda ctx: every.append(ctx.state_name))
    a.register_hook("read", lambda ctx: own.append(ctx.state_name))
    _ = a.value, b.value
    assert every == ["a", "b"] and own == ["a"]
    assert brainx.has_state_hooks("read") and not brainx.has_state_hooks("write_after")
    assert [h.name for h in brainx.list_state_hooks()] == [handle.name]
    assert a.list_hooks("read") and not b.list_hooks()
    assert brainx.unregister_state_hook(handle) and not brainx.has_state_hooks()


def test_global_init_hooks_see_the_creation_and_its_metadata():
    made = []
    brainx.register_state_hook("init", lambda ctx: made.append(
        (ctx.state_name, ctx.init_metadata["tag"], ctx.init_metadata["unit"],
         float(ctx.value))))
    brainx.ParamState(0.5, name="w", tag="fast", unit="mV")
    assert made == [("w", {"fast"}, "mV", 0.5)]


def test_a_raising_init_hook_leaves_no_state_behind():
    brainx.GlobalHookRegistry.instance().config = brainx.HookConfig(on_error="raise")
    brainx.register_state_hook("init", _boom)
    with brainx.catch_new_states() as caught:
        with pytest.raises(brainx.HookExecutionError):
            brainx.State(1.0)
    assert len(caught) == 0


def test_restore_runs_restore_hooks_not_write_hooks():
    s = brainx.State(jnp.zeros(2))
    log = []
    for kind in ("write_before", "write_after", "restore"):
        s.register_hook(kind, lambda ctx, k=kind: log.append((k, float(ctx.old_value[0]),
                                                              float(ctx.value[0]))))
    s.restore_value(jnp.full(2, 3.0))
    assert log == [("restore", 0.0, 3.0)]


# -- handles -------------------------------------------------------------------------------
def test_handles_disable_enable_remove():
    s = brainx.State(1.0)
    seen = []
    handle = s.register_hook("read", lambda ctx: seen.append(1), name="count")
    handle.disable()
    _ = s.value
    assert seen == [] and "disabled" in repr(handle)
    handle.enable()
    _ = s.value
    assert seen == [1]
    assert handle.remove() and not handle.remove()
    _ = s.value
    assert seen == [1] and s.list_hooks() == []
    with pytest.raises(brainx.HookError, match="count.*removed"):
        handle.enable()


def test_with_blocks_remove_hooks():
    s = brainx.State(1.0)
    seen = []
    with s.register_hook("read", lambda ctx: seen.append("handle")):
        _ = s.value
    with s.temporary_hook("read", lambda ctx: seen.append("temporary")):
        _ = s.value
    _ = s.value
    assert seen == ["handle", "temporary"] and not s.has_hooks()


def test_a_handle_outlives_its_state_safely():
    s = brainx.State(1.0)
    handle = s.register_hook("read", lambda ctx: None)
    del s
    gc.collect()
    assert handle.remove() is False
    with pytest.raises(brainx.HookError, match="garbage collected"):
        handle.disable()


def test_copies_and_snapshots_leave_hooks_behind():
    s = brainx.State(jnp.zeros(2), name="s")
    s.register_hook("read", lambda ctx: None)
    assert s.copy().list_hooks() == [] and s.replace(jnp.ones(2)).list_hooks() == []
    assert TreefyState.from_state(s).get_metadata() == {"_name": "s", "tag": None}  # brainstate's key


# -- re-entry and threads -------------------------------------------------------------------
def test_a_hook_may_use_its_own_state_without_recursing():
    s = brainx.State(jnp.zeros(()))
    reads = []
    s.register_hook("read", lambda ctx: reads.append(float(ctx.state.value)))
    s.register_hook("write_after", lambda ctx: setattr(ctx.state, "value", ctx.value + 1.0))
    s.value = jnp.asarray(1.0)
    assert float(s.value) == 2.0   # the hook's own write ran no hook again
    assert reads == [2.0]          # our read ran the read hook once; its own read, none


def test_hooks_run_in_every_thread():
    s = brainx.State(jnp.zeros(()))
    count, lock = [0], threading.Lock()

    def one(ctx):
        with lock:
            count[0] += 1

    s.register_hook("read", one)
    threads = [threading.Thread(target=lambda: [s.value for _ in range(50)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count[0] == 200


# -- inside transforms ------------------------------------------------------------------
def _log_kinds(state, log):
    for kind in ("read", "write_before", "write_after", "restore"):
        state.register_hook(kind, lambda ctx, k=kind: log.append(
            (k, isinstance(ctx.value, Tracer))))


def test_jit_runs_hooks_once_per_trace_on_tracers_and_none_on_write_back():
    s = brainx.State(jnp.zeros(3))
    log = []
    _log_kinds(s, log)

    @transform.jit
    def step(x):
        s.value = s.value + x
        return x

    step(jnp.ones(3))
    assert log == [("read", True), ("write_before", True), ("write_after", True)]
    assert not _holds_tracer(s._value)
    step(jnp.ones(3))
    step(jnp.ones(3))
    assert len(log) == 3                       # compiled calls run no Python, write-back no hook
    np.testing.assert_allclose(s._value, [3.0, 3.0, 3.0])


def test_a_write_transformation_is_compiled_into_every_call():
    s = brainx.State(jnp.zeros(2))
    s.register_hook("write_before", lambda ctx: setattr(ctx, "transformed_value",
                                                        jnp.clip(ctx.transformed_value, -1, 1)))

    @transform.jit
    def push(x):
        s.value = s.value + x

    inputs = [jnp.array([0.5, -3.0]), jnp.array([0.7, 0.2]), jnp.array([-5.0, 0.5])]
    expected = np.zeros(2)
    for x in inputs:
        push(x)
        expected = np.clip(expected + np.asarray(x), -1, 1)
        np.testing.assert_allclose(s.value, expected, rtol=1e-6)


def test_for_loop_body_hooks_run_once_not_per_iteration():
    s = brainx.State(jnp.zeros(()))
    log = []
    _log_kinds(s, log)

    def body(i):
        s.value = s.value + i

    transform.for_loop(body, jnp.arange(5.0))
    assert log == [("read", True), ("write_before", True), ("write_after", True)]
    assert float(s._value) == 10.0 and not _holds_tracer(s._value)


def test_debug_callback_in_a_hook_sees_every_call():
    s = brainx.State(jnp.zeros(()))
    seen = []
    s.register_hook("write_after", lambda ctx: jax.debug.callback(
        lambda v: seen.append(float(v)), ctx.value))

    @transform.jit
    def tick():
        s.value = s.value + 1.0

    for _ in range(3):
        tick()
    jax.effects_barrier()
    assert seen == [1.0, 2.0, 3.0]


def test_a_hook_writing_another_state_inside_jit_is_written_back():
    s, writes = brainx.State(jnp.zeros(2)), brainx.State(jnp.zeros((), jnp.int32))
    s.register_hook("write_after", lambda ctx: setattr(writes, "value", writes.value + 1))

    @transform.jit
    def step():
        s.value = s.value + 1.0

    step()
    step()
    assert int(writes.value) == 2 and not _holds_tracer(writes._value)


def test_a_raising_hook_inside_jit_leaves_states_untouched():
    s = brainx.State(jnp.zeros(2))
    s.hooks.config = brainx.HookConfig(on_error="raise")
    s.register_hook("write_after", _boom)

    @transform.jit
    def step(x):
        s.value = s.value + x

    with pytest.raises(brainx.HookExecutionError):
        step(jnp.ones(2))
    assert not _holds_tracer(s._value)
    np.testing.assert_allclose(s.value, [0.0, 0.0])


def test_a_hooked_write_under_raw_jax_jit_is_lent_then_refused_on_the_next_read():
    s = brainx.State(jnp.zeros(2))
    log = []
    _log_kinds(s, log)
    jax.jit(lambda x: setattr(s, "value", x))(jnp.ones(2))
    assert ("write_after", True) in log           # inside jit's trace, with its tracer
    with pytest.raises(brainx.TracerLeakError):
        s.value
    assert not _holds_tracer(s._value) and s.value.tolist() == [0.0, 0.0]


# -- the cost for programs without hooks ------------------------------------------------
def test_the_hook_flag_is_off_without_hooks_and_follows_registration():
    gc.collect()
    assert not hooks_active() and state_module._HOOKED is False
    s = brainx.State(1.0)
    handle = s.register_hook("read", lambda ctx: None)
    assert hooks_active() and state_module._HOOKED is True
    handle.remove()
    assert not state_module._HOOKED
    global_handle = brainx.register_state_hook("write_after", lambda ctx: None)
    assert state_module._HOOKED
    global_handle.remove()
    s.register_hook("read", lambda ctx: None)
    del s
    gc.collect()                        # a hooked state that dies takes its hooks along
    assert not state_module._HOOKED


def test_hooks_module_does_not_import_the_manager_module():
    # hooks.py is the lower module: hook_manager imports it, never the reverse
    import ast
    import inspect

    from brainx.state import hooks
    imported = {n.module for n in ast.walk(ast.parse(inspect.getsource(hooks)))
                if isinstance(n, ast.ImportFrom)}
    assert "brainx.state.hook_manager" not in imported
    assert isinstance(brainx.HookManager(), hooks.HookOwner)
    assert isinstance(brainx.GlobalHookRegistry.instance(), hooks.HookOwner)
    manager = brainx.HookManager()
    handle = manager.register_hook("read", lambda ctx: None)
    handle.disable()
    assert not manager.has_hooks("read")
    handle.enable()
    assert manager.has_hooks("read") and handle.remove() and not manager.has_hooks()


def test_a_raising_hook_leaves_the_state_free_to_run_its_hooks_again():
    s = brainx.State(jnp.zeros(2))
    s.hooks.config = brainx.HookConfig(on_error="raise")
    seen = []
    with s.register_hook("write_after", lambda ctx: 1 / 0):
        with pytest.raises(brainx.HookExecutionError):
            s.value = jnp.ones(2)
    np.testing.assert_array_equal(s.value, [0.0, 0.0])  # the old value was put back
    with s.register_hook("read", lambda ctx: seen.append(ctx.value.tolist())):
        _ = s.value  # its hooks run again: the running mark was cleared by the error
    assert seen == [[0.0, 0.0]]


def test_every_hook_type_gets_its_own_context_kind():
    kinds = {}
    s = brainx.State(jnp.zeros(1))
    for hook_type in ("read", "write_before", "write_after", "restore"):
        s.register_hook(hook_type, lambda ctx, t=hook_type: kinds.setdefault(t, type(ctx)))
    with brainx.register_state_hook("init", lambda ctx: kinds.setdefault("init", type(ctx))):
        brainx.State(1.0)
    _ = s.value
    s.value = jnp.ones(1)
    s.restore_value(jnp.zeros(1))
    s.clear_hooks()
    assert kinds == {"read": brainx.ReadHookContext, "write_before": brainx.MutableWriteHookContext,
                     "write_after": brainx.WriteHookContext, "restore": brainx.RestoreHookContext,
                     "init": brainx.InitHookContext}
