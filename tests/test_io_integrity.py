"""brainx.io is all or nothing (state hooks included), and the temporaries of killed saves go."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.io import CheckpointError, load, save, temporaries


def _three(scale):
    return {name: brainx.State(jnp.full(3, scale * (i + 1)), name=name)
            for i, name in enumerate(("a", "b", "c"))}


def _values(states):
    return {k: np.asarray(s.value).tolist() for k, s in states.items()}


@pytest.mark.parametrize("how", ["raise", "cancel", "write_after"])
def test_a_hook_refusing_the_last_write_leaves_every_state_as_it_was(tmp_path, how):
    path = tmp_path / "s.msgpack"
    save(path, _three(10.0))
    target = _three(1.0)
    before = _values(target)
    written = []

    def refuse(ctx):
        if how == "cancel":
            ctx.cancel, ctx.cancel_reason = True, "read-only in this test"
        else:
            raise RuntimeError("refused by the test's hook")

    for name in ("a", "b"):
        target[name].register_hook("write_after", lambda ctx, n=name: written.append(n))
    target["c"].hooks.config = brainx.HookConfig(on_error="raise")   # a hook's error stops the write
    target["c"].register_hook("write_after" if how == "write_after" else "write_before", refuse)
    with pytest.raises(CheckpointError) as e:
        load(path, target)
    assert "writing state 'c' failed" in str(e.value) and "undone" in str(e.value)
    assert written == ["a", "b"]                        # the first two were written, then put back
    assert _values(target) == before
    if how != "cancel":
        assert "refused by the test's hook" in str(e.value)


def test_a_load_that_fails_while_setting_the_environment_puts_the_states_back(tmp_path, monkeypatch):
    path = tmp_path / "e.msgpack"
    brainx.environ.set(io_test_setting=5)
    try:
        save(path, _three(10.0), environ=True)
        brainx.environ.set(io_test_setting=7)
        target = _three(1.0)
        before = _values(target)
        real_set = brainx.environ.set
        calls = []

        def failing_set(**kw):
            calls.append(kw)
            if len(calls) == 2:
                raise RuntimeError("a behaviour of the test refuses it")
            real_set(**kw)

        monkeypatch.setattr(brainx.environ, "set", failing_set)
        with pytest.raises(CheckpointError, match="setting brainx.environ's"):
            load(path, target, environ=True)
        monkeypatch.undo()
        assert _values(target) == before
        assert brainx.environ.get("io_test_setting") == 7
    finally:
        brainx.environ.pop("io_test_setting", None)


def test_loading_into_a_module_before_init_all_states_suggests_it(tmp_path):
    lif = brainx.nn.LIF(4)
    with pytest.raises(TypeError, match=r"brainx\.nn\.init_all_states\(model\)"):
        save(tmp_path / "x.msgpack", lif)
    brainx.nn.init_all_states(lif)
    save(tmp_path / "lif.msgpack", lif)
    with pytest.raises(TypeError, match=r"(?s)no State found in LIF.*init_all_states"):
        load(tmp_path / "lif.msgpack", brainx.nn.LIF(4))

    class Net(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = brainx.nn.Linear(4, 4)
            self.lif = brainx.nn.LIF(4)

    net = Net()
    brainx.nn.init_all_states(net)
    save(tmp_path / "net.msgpack", net)
    with pytest.raises(CheckpointError, match=r"(?s)in the file only: \['lif.V'\].*init_all_states"):
        load(tmp_path / "net.msgpack", Net())


# -- temporaries ---------------------------------------------------------------------------
# The writer loads brainx/io/temporaries.py alone (it needs only the standard library), so the
# subprocess starts in a fraction of a second; brainx.io.save writes through the same atomic_file.
_WRITER = textwrap.dedent("""
    import importlib.util, sys, time
    spec = importlib.util.spec_from_file_location("temporaries", sys.argv[2])
    temporaries = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(temporaries)
    with temporaries.atomic_file(sys.argv[1]) as f:
        f.write(b"half a model")
        f.flush()
        print("writing", flush=True)     # the save stops here, its temporary half-written
        time.sleep(600)
""")


def _temporaries(folder):
    return sorted(n for n in os.listdir(folder) if n.endswith(temporaries.SUFFIX))


def test_a_killed_save_leaves_a_temporary_that_the_next_save_removes(tmp_path):
    path = tmp_path / "model.msgpack"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), temporaries.__file__],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "writing", writer.stderr.read()
        (stuck,) = _temporaries(tmp_path)
        assert stuck.startswith(".model.msgpack.") and f"-{writer.pid}." in stuck
        save(tmp_path / "other.msgpack", {"x": brainx.State(jnp.zeros(2))})
        assert _temporaries(tmp_path) == [stuck]          # its writer is alive: left alone
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert _temporaries(tmp_path) == [stuck] and not path.exists()
    save(path, {"x": brainx.State(jnp.zeros(2))})         # the next save to the folder
    assert _temporaries(tmp_path) == [] and sorted(os.listdir(tmp_path)) == [
        "model.msgpack", "other.msgpack"]
    x = brainx.State(jnp.ones(2))
    load(path, {"x": x})
    assert float(x.value.sum()) == 0.0


def test_temporaries_of_other_hosts_and_of_locked_writers_are_kept(tmp_path):
    fcntl = pytest.importorskip("fcntl")
    other = tmp_path / f".m.msgpack.otherhost-{os.getpid()}.abc123{temporaries.SUFFIX}"
    old_other = tmp_path / f".m.msgpack.otherhost-1.zzz999{temporaries.SUFFIX}"
    locked = tmp_path / f".m.msgpack.otherhost-2.lll111{temporaries.SUFFIX}"
    unrelated = tmp_path / ".m.msgpack.tmp"
    for p in (other, old_other, locked, unrelated):
        p.write_bytes(b"half")
    long_ago = time.time() - 2 * temporaries.OTHER_HOST_AGE_S
    os.utime(old_other, (long_ago, long_ago))
    os.utime(locked, (long_ago, long_ago))
    with open(locked, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)       # another host's writer at work
        removed = temporaries.remove_stale(str(tmp_path))
    assert removed == [old_other.name]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [other.name, locked.name, unrelated.name])


def test_a_failed_save_removes_its_own_temporary_and_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "w.msgpack"
    save(path, {"x": brainx.State(jnp.ones(2))})

    def half_then_full_disk(f, header):
        f.write(b"\x85half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(brainx.io.files.msgpack_stream, "write", half_then_full_disk)
    with pytest.raises(OSError, match="No space"):
        save(path, {"x": brainx.State(jnp.zeros(2))})
    monkeypatch.undo()
    assert _temporaries(tmp_path) == []
    x = brainx.State(jnp.zeros(2))
    load(path, {"x": x})
    assert float(x.value.sum()) == 2.0
