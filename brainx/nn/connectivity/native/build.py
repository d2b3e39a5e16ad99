"""Building, caching and loading the native event kernels (``event_kernels.cc``).

The kernels are C++ against the XLA FFI headers that jaxlib ships
(:func:`jax.ffi.include_dir`). :func:`load` compiles them with the system's C++
compiler the first time they are needed, into a cache folder keyed by a hash of
what the library depends on (the source, the flags, jaxlib's version, the
platform: :func:`library_path`), so a second process, or a second environment on
the same jaxlib, loads the library it finds there in milliseconds, with or
without a compiler. It then registers the handler with
:func:`jax.ffi.register_ffi_target` for the CPU.

Where no compiler is found or the build fails, :func:`load` returns ``None``
and warns once, saying why and how to get the native kernels; the layers then
use brainevent's kernels as before.

========================  =============================================================
environment variable      effect
========================  =============================================================
``BRAINX_NATIVE=0``       never build or load the native kernels
``CXX``                   the compiler (default: the first of ``c++``, ``g++``, ``clang++``)
``BRAINX_CACHE_DIR``      the cache folder (default ``$XDG_CACHE_HOME/brainx``, else
                          ``~/.cache/brainx``); the libraries go in its ``native/``.
                          Where it cannot be written, a folder of the system's
                          temporary one that only this user can write
========================  =============================================================

Examples
--------
>>> from brainx.nn.connectivity.native import build
>>> build.load() is None or build.TARGET in build.registered_targets()
True
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import pathlib
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import warnings
from typing import Optional, Tuple

import jax
import jaxlib

__all__ = ["load", "library_path", "compiler", "registered_targets", "unavailable_reason", "TARGET",
           "DENSE_TARGET", "SOURCE", "SOURCES"]

SOURCE = pathlib.Path(__file__).with_name("event_kernels.cc")
#: Every C++ source of the library (``event_kernels.cc`` first, then the others of this
#: folder in name order): one shared library holds all the handlers.
SOURCES = (SOURCE, *sorted(p for p in SOURCE.parent.glob("*.cc") if p != SOURCE))
#: The FFI target name of the sparse product (the handler ``BrainxEventCsr``).
TARGET = "brainx_event_csr"
#: The FFI target name of the dense event product (the handler ``BrainxEventDense``).
DENSE_TARGET = "brainx_event_dense"
_SYMBOLS = {TARGET: "BrainxEventCsr", DENSE_TARGET: "BrainxEventDense",
            "brainx_delayed_csr": "BrainxDelayedCsr"}
_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-DNDEBUG")
_LOCK = threading.Lock()
_STATE: dict = {}          # "lib": the loaded library or None, "why": the reason it is None


def compiler() -> Optional[str]:
    """The C++ compiler to build with: ``$CXX``, else the first of c++, g++, clang++ found."""
    chosen = os.environ.get("CXX")
    if chosen:
        return shutil.which(chosen) or chosen
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _cache_root() -> pathlib.Path:
    root = os.environ.get("BRAINX_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "brainx")
    return pathlib.Path(root) / "native"


def library_path() -> pathlib.Path:
    """Where this source's library for this jaxlib lives in the cache (built or not).

    The folder is named by a hash of what the library's contents depend on: the
    source, the flags, jaxlib's version (its FFI headers) and the platform. Not the
    compiler: any C++17 compiler builds the same handler, and a library built once
    stays usable where no compiler is left (a container, another environment on the
    same jaxlib).
    """
    key = hashlib.sha256()
    for part in (*(src.read_bytes() for src in SOURCES), " ".join(_FLAGS).encode(),
                 jaxlib.__version__.encode(),
                 sys.platform.encode(), platform.machine().encode()):
        key.update(part)
        key.update(b"\0")
    return _cache_root() / key.hexdigest()[:24] / "libbrainx_events.so"


def _private_temporary(path: pathlib.Path) -> pathlib.Path:
    """``path``'s place under a folder of the system's temporary one that only this user
    can write (made with mode 0700; refused if another user owns it or others can write it)."""
    root = pathlib.Path(tempfile.gettempdir()) / f"brainx-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(root)          # the folder itself: a link another user owns is refused
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or info.st_mode & 0o022):
        raise OSError(f"{root} is not a folder of this user's that only it can write")
    return root / "native" / path.parent.name / path.name


def _writable_target(path: pathlib.Path) -> pathlib.Path:
    """``path`` if its folder can be made; else its place in a private temporary folder."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if os.access(path.parent, os.W_OK):
            return path
    except OSError:
        pass
    return _private_temporary(path)


def _build(cxx: str, target: pathlib.Path) -> pathlib.Path:
    """Compile into a temporary file beside ``target``, then move it in place (atomic).

    Returns where it went (``target``, or a private temporary folder when the cache
    folder cannot be written: a read-only home).
    """
    target = _writable_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        cmd = [cxx, *_FLAGS, "-I", jax.ffi.include_dir(), *map(str, SOURCES), "-o", tmp]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{run.stderr.strip()[-2000:]}")
        os.chmod(tmp, 0o755)    # mkstemp made it 0600: others sharing the cache could not load it
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _find_built(path: pathlib.Path) -> Optional[pathlib.Path]:
    """The library, in the cache or (where the cache cannot be written) in the private
    temporary folder; ``None`` if it was never built."""
    if path.exists():
        return path
    try:
        target = _writable_target(path)      # elsewhere only when the cache cannot be written
    except OSError:                          # ... and the temporary folder is refused
        return None
    return target if target != path and target.exists() else None


def _load_uncached() -> Tuple[Optional[ctypes.CDLL], str]:
    if os.environ.get("BRAINX_NATIVE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None, "BRAINX_NATIVE=0 turns them off"
    path = library_path()
    found = _find_built(path)
    if found is None:
        cxx = compiler()
        if cxx is None:
            return None, ("no C++ compiler was found (install one, e.g. `apt install g++`, "
                          "or set CXX)")
        try:
            found = _build(cxx, path)
        except (OSError, RuntimeError, subprocess.SubprocessError) as e:
            return None, f"building them with {cxx} failed: {e}"
    try:
        lib = ctypes.CDLL(str(found))
        for target, symbol in _SYMBOLS.items():
            jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(lib, symbol)),
                                        platform="cpu")
    except (OSError, AttributeError) as e:
        return None, f"loading {found} failed: {e}"
    return lib, ""


def load() -> Optional[ctypes.CDLL]:
    """The native kernels' library, built on first use and registered with XLA; ``None``: none.

    Thread-safe and done once per process. When the library cannot be had, warns
    once (a :class:`RuntimeWarning` that says why and what to do) and returns ``None``.
    """
    if "lib" not in _STATE:
        with _LOCK:
            if "lib" not in _STATE:
                lib, why = _load_uncached()
                _STATE["why"] = why
                _STATE["lib"] = lib
                if lib is None and not why.startswith("BRAINX_NATIVE=0"):
                    warnings.warn(
                        f"brainx: the native event kernels are not available: {why}. The "
                        "event-driven layers use brainevent's kernels instead, which cost tens "
                        "of microseconds more per call on CPU. See docs/event-driven.md.",
                        RuntimeWarning, stacklevel=2)
    return _STATE["lib"]


def unavailable_reason() -> str:
    """Why :func:`load` returned ``None`` (``""`` when the kernels are loaded or not tried)."""
    return _STATE.get("why", "")


def registered_targets() -> Tuple[str, ...]:
    """The FFI targets this module registered (none before a successful :func:`load`)."""
    return tuple(_SYMBOLS) if _STATE.get("lib") is not None else ()
