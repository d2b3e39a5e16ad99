"""The native library's build cache: what it loads, what it refuses, and that nothing crashes.

Each case runs in a fresh process with its own cache folder (``BRAINX_CACHE_DIR``) and
temporary folder (``TMPDIR``). The "compiler" is a small script that records its command
line and copies the library this process loaded (so a build takes milliseconds, and the
command line brainx ran can be checked); the library is real, so a loaded one computes the
product, checked against NumPy.
"""

import json
import os
import pathlib
import shlex
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest

from brainx import nn
from brainx.nn.connectivity.native import build, cache_trust

pytestmark = pytest.mark.skipif(not nn.event_backend.has_native(),
                                reason=f"native kernels unavailable: {build.unavailable_reason()}")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import numpy as np, jax.numpy as jnp
    from brainx.nn.connectivity.native import build
    from brainx.nn.connectivity.native.rows import SynapseRows
    from brainx.nn.connectivity.native.product import sparse_product
    lib = build.load()
    y = None
    if lib is not None:
        rows = SynapseRows.fixed(np.array([[0, 2], [1, 2]]), n_post=3)
        y = sparse_product(jnp.array([True, True]), jnp.array([1., 2., 3., 4.]), rows, True)
print(json.dumps({"lib": lib and lib._name, "path": str(build.library_path()),
                  "y": None if y is None else np.asarray(y).tolist(),
                  "warnings": [str(w.message) for w in caught if "brainx" in str(w.message)]}))
"""


@pytest.fixture(scope="module")
def fake_compiler(tmp_path_factory):
    """A "compiler" that records its arguments (one JSON list a line) and copies the library
    this process loaded to its ``-o``."""
    folder = tmp_path_factory.mktemp("compiler")
    log, fake = folder / "compiler.log", folder / "fake-c++"
    fake.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, shutil, sys
        args = sys.argv[1:]
        with open({str(log)!r}, "a") as f:
            f.write(json.dumps(args) + "\\n")
        shutil.copyfile({build.load()._name!r}, args[args.index("-o") + 1])
    """))
    fake.chmod(0o755)
    return fake, log


def _runner(cache, tmp, cxx):
    def run(cxx=cxx) -> dict:
        proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                              cwd=ROOT, timeout=600,
                              env={**os.environ, "JAX_PLATFORMS": "cpu", "CXX": cxx,
                                   "BRAINX_CACHE_DIR": str(cache), "TMPDIR": str(tmp)})
        assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"
        return json.loads(proc.stdout.strip().splitlines()[-1])
    return run


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory, fake_compiler):
    """A cache folder after one process built (and recorded) the library in it."""
    folder = tmp_path_factory.mktemp("built")
    (folder / "tmp").mkdir(mode=0o700)
    out = _runner(folder / "cache", folder / "tmp", str(fake_compiler[0]))()
    assert out["lib"] == out["path"] and out["y"] == Y and out["warnings"] == []
    assert cache_trust.verify(pathlib.Path(out["path"])) is None
    return folder / "cache", os.path.relpath(out["path"], folder / "cache")


Y = [1.0, 3.0, 6.0]      # rows [[0, 2], [1, 2]], weights 1..4, both neurons fired


@pytest.fixture
def place(tmp_path, fake_compiler, built_cache):
    """A copy of the built cache, a private temporary folder, the compiler's log."""
    fake, log = fake_compiler
    shutil.copytree(built_cache[0], tmp_path / "cache", symlinks=True)
    (tmp_path / "tmp").mkdir(mode=0o700)
    start = len(log.read_text().splitlines())

    class Place:
        cache, tmp, compiler = tmp_path / "cache", tmp_path / "tmp", str(fake)
        path = str(tmp_path / "cache" / built_cache[1])
        run = staticmethod(_runner(tmp_path / "cache", tmp_path / "tmp", str(fake)))
        builds = staticmethod(lambda: len(log.read_text().splitlines()) - start)
        last_command = staticmethod(lambda: json.loads(log.read_text().splitlines()[-1]))
    return Place


def test_a_recorded_library_is_loaded_without_a_compiler_or_a_warning(place):
    record = json.loads(open(place.path + ".json").read())
    assert record["size"] == os.path.getsize(place.path) and len(record["sha256"]) == 64
    again = place.run(cxx="/nonexistent/c++")
    assert again["lib"] == place.path and again["y"] == Y and again["warnings"] == []


@pytest.mark.parametrize("damage,why", [
    ("truncate", "size is"), ("flip", "SHA-256"), ("no-record", "no build record"),
    ("empty", "size is 0 bytes")])
def test_a_damaged_library_is_rebuilt_with_one_warning_and_never_crashes(place, damage, why):
    path = place.path
    data = open(path, "rb").read()
    if damage == "truncate":                     # a half-written copy: SIGBUS if loaded
        open(path, "wb").write(data[: len(data) // 2])
    elif damage == "flip":
        mid = len(data) // 2
        open(path, "wb").write(data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:])
    elif damage == "no-record":
        os.unlink(path + ".json")
    else:
        open(path, "wb").close()
    if damage == "truncate":                     # nothing to rebuild with: no crash either
        without = place.run(cxx="/nonexistent/c++")
        assert without["lib"] is None and len(without["warnings"]) == 1
        assert path in without["warnings"][0] and why in without["warnings"][0]
    out = place.run()
    assert out["lib"] == path and out["y"] == Y and place.builds() == 1
    assert len(out["warnings"]) == 1 and path in out["warnings"][0] and why in out["warnings"][0]
    assert cache_trust.verify(pathlib.Path(path)) is None          # trusted from now on


def test_a_record_that_cannot_be_read_is_no_record():
    folder = pathlib.Path(__import__("tempfile").mkdtemp())
    lib = folder / "lib.so"
    lib.write_bytes(b"x" * 10)
    for text in ("{not json", '{"size": 10}', '{"size": "ten", "sha256": 1}', "[]"):
        (folder / "lib.so.json").write_text(text)
        assert "cannot be read" in cache_trust.verify(lib)
    cache_trust.write_record(lib)
    assert cache_trust.verify(lib) is None
    os.chmod(lib, 0o666)
    assert "other users" in cache_trust.verify(lib)
    shutil.rmtree(folder)


@pytest.mark.parametrize("mode", [0o777, 0o775])
def test_a_library_others_could_have_planted_is_not_loaded(place, mode):
    folder = os.path.dirname(place.path)         # a recorded library, size and hash right...
    os.chmod(folder, mode)                       # ... in a folder others can write
    out = place.run()
    assert out["lib"] != place.path and out["lib"].startswith(str(place.tmp))
    assert out["y"] == Y and place.builds() == 1
    assert len(out["warnings"]) == 1 and folder in out["warnings"][0]
    assert "not trusted" in out["warnings"][0]
    if mode == 0o777:
        again = place.run()                      # the private copy is trusted: no new build
        assert again["lib"] == out["lib"] and place.builds() == 1


def test_a_link_to_a_folder_others_can_write_is_not_trusted(place, tmp_path):
    shared = tmp_path / "shared"
    shutil.move(str(place.cache), shared)
    os.chmod(shared, 0o777)
    os.symlink(shared, place.cache)              # the cache folder, by a link
    out = place.run()
    assert out["lib"].startswith(str(place.tmp)) and len(out["warnings"]) == 1
    assert str(shared) in out["warnings"][0]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="only root can give a file to another user")
def test_a_library_owned_by_another_user_is_replaced(place):
    os.chown(place.path, 12345, 12345)
    os.chown(place.path + ".json", 12345, 12345)
    out = place.run()
    assert out["lib"] == place.path and place.builds() == 1
    assert os.stat(place.path).st_uid == os.geteuid()
    assert len(out["warnings"]) == 1 and "another user" in out["warnings"][0]


def test_cxx_with_flags_is_split_as_a_shell_would(place, monkeypatch):
    shutil.rmtree(place.cache)
    old = os.umask(0o002)                        # a umask that would make folders group-writable
    try:
        out = place.run(cxx=f"{place.compiler} -w -DBRAINX_TEST='a b'")
    finally:
        os.umask(old)
    assert out["lib"] == out["path"] and out["y"] == Y and out["warnings"] == []
    assert place.last_command()[:2] == ["-w", "-DBRAINX_TEST=a b"]   # split as a shell would
    for folder in (os.path.dirname(out["path"]), str(place.cache)):   # made 0755, not 0775
        assert stat.S_IMODE(os.stat(folder).st_mode) & 0o022 == 0
    gxx = shutil.which("g++")
    if gxx:
        monkeypatch.setenv("CXX", "g++ -w")
        assert shlex.split(build.compiler()) == [gxx, "-w"]
    monkeypatch.setenv("CXX", "g++ 'unbalanced")
    assert build.compiler() == "g++ 'unbalanced"              # the build says what is wrong
