"""Building, caching and loading the native event kernels (``event_kernels.cc``).

The kernels are C++ against the XLA FFI headers that jaxlib ships
(:func:`jax.ffi.include_dir`). :func:`load` compiles them with the system's C++
compiler the first time they are needed, into a cache folder keyed by a hash of
what the library depends on (the source, the flags, jaxlib's version, the
platform: :func:`library_path`), so a second process, or a second environment on
the same jaxlib, loads the library it finds there in milliseconds, with or
without a compiler. It then registers the handler with
:func:`jax.ffi.register_ffi_target` for the CPU.

A cached library is loaded only when it can be trusted
(:mod:`~brainx.nn.connectivity.native.cache_trust`): its folders and the file are
this user's (or root's) and no other user can write them, and its size and SHA-256
are those the build recorded beside it. Otherwise brainx builds a new one, in
place when the file was merely damaged (truncated, edited, no record), in a folder
of the system's temporary one that only this user can write when the cache folder
itself is not trusted; in both cases with one warning naming the file.

Where no compiler is found or the build fails, :func:`load` returns ``None``
and warns once, saying why and how to get the native kernels; the layers then
use brainevent's kernels as before.

==========================  =============================================================
environment variable        effect
==========================  =============================================================
``BRAINX_NATIVE=0``         never build or load the native kernels
``BRAINX_NATIVE_THREADS``   at most this many of XLA's intra-op threads in one kernel call
                            (default: all of them; the delayed delivery of 16384 targets or
                            more and the Poisson counts use them)
``CXX``                     the compiler, with any flags of its own (split as a shell would:
                            ``CXX="g++ -w"``; default: the first of ``c++``, ``g++``, ``clang++``)
``BRAINX_CACHE_DIR``        the cache folder (default ``$XDG_CACHE_HOME/brainx``, else
                            ``~/.cache/brainx``); the libraries go in its ``native/``.
                            Where it cannot be written, a folder of the system's
                            temporary one that only this user can write
==========================  =============================================================

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
import shlex
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

from brainx.nn.connectivity.native import cache_trust

__all__ = ["load", "library_path", "compiler", "registered_targets", "unavailable_reason", "TARGET",
           "DENSE_TARGET", "SOURCE", "SOURCES", "HEADERS"]

SOURCE = pathlib.Path(__file__).with_name("event_kernels.cc")
#: Every C++ source of the library (``event_kernels.cc`` first, then the others of this
#: folder in name order): one shared library holds all the handlers.
SOURCES = (SOURCE, *sorted(p for p in SOURCE.parent.glob("*.cc") if p != SOURCE))
#: The headers the sources include from this folder (in the cache key with the sources).
HEADERS = tuple(sorted(SOURCE.parent.glob("*.h")))
#: The FFI target name of the sparse product (the handler ``BrainxEventCsr``).
TARGET = "brainx_event_csr"
#: The FFI target name of the dense event product (the handler ``BrainxEventDense``).
DENSE_TARGET = "brainx_event_dense"
_SYMBOLS = {TARGET: "BrainxEventCsr", DENSE_TARGET: "BrainxEventDense",
            "brainx_delayed_csr": "BrainxDelayedCsr",
            "brainx_poisson_counts": "BrainxPoissonCounts"}
_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-DNDEBUG")
_LOCK = threading.Lock()
_STATE: dict = {}          # "lib": the loaded library or None, "why": the reason it is None


def compiler() -> Optional[str]:
    """The C++ compiler command to build with, as a shell line: ``$CXX`` (its first word
    found on ``PATH``, the rest kept: ``"g++ -w"``), else the first of c++, g++, clang++ found."""
    chosen = os.environ.get("CXX", "").strip()
    if chosen:
        try:
            words = shlex.split(chosen)
        except ValueError:                    # an unbalanced quote: the build says so
            return chosen
        return shlex.join([shutil.which(words[0]) or words[0], *words[1:]])
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
    for part in (*(src.read_bytes() for src in SOURCES + HEADERS), " ".join(_FLAGS).encode(),
                 jaxlib.__version__.encode(),
                 sys.platform.encode(), platform.machine().encode()):
        key.update(part)
        key.update(b"\0")
    return _cache_root() / key.hexdigest()[:24] / "libbrainx_events.so"


def _private_temporary(path: pathlib.Path) -> pathlib.Path:
    """``path``'s place under a folder of the system's temporary one that only this user
    can write (made with mode 0700; refused if another user owns it or others can write it,
    or another user can write a folder above it)."""
    root = pathlib.Path(tempfile.gettempdir()) / f"brainx-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(root)          # the folder itself: a link another user owns is refused
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or info.st_mode & 0o022):
        raise OSError(f"{root} is not a folder of this user's that only it can write")
    why = cache_trust.untrusted_folder(root)
    if why:
        raise OSError(f"{root} cannot be trusted: {why}")
    return root / "native" / path.parent.name / path.name


def _can_write(folder: pathlib.Path) -> bool:
    """Whether ``folder`` can be made (if missing) and written."""
    try:
        cache_trust.make_folders(folder)
        return os.access(folder, os.W_OK)
    except OSError:
        return False


def _build(cxx: str, target: pathlib.Path) -> pathlib.Path:
    """Compile into a temporary file beside ``target``, record its size and hash, then move
    both in place (the record first: a reader of the new library finds its record).

    Returns ``target``.
    """
    cache_trust.make_folders(target.parent)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    record = pathlib.Path(tmp + ".json")
    try:
        try:
            words = shlex.split(cxx)
        except ValueError as e:
            raise RuntimeError(f"CXX={cxx!r} cannot be split into words: {e}") from None
        cmd = [*words, *_FLAGS, "-I", jax.ffi.include_dir(), *map(str, SOURCES), "-o", tmp]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed:\n{run.stderr.strip()[-2000:]}")
        os.chmod(tmp, 0o755)    # mkstemp made it 0600: others sharing the cache could not load it
        cache_trust.write_record(pathlib.Path(tmp), record)
        os.replace(record, cache_trust.record_path(target))
        os.replace(tmp, target)
    finally:
        for left in (tmp, record):
            if os.path.exists(left):
                os.unlink(left)
    return target


def _locate(path: pathlib.Path) -> Tuple[Optional[pathlib.Path], Optional[pathlib.Path], str]:
    """``(library to load, or None; where to build one, or None; a warning, or "")``.

    The cache path when its folders can be trusted: its library if it is the one recorded,
    else a new build there (a damaged file: a warning) or, where the cache cannot be
    written, in the private temporary folder. An untrusted cache folder: the private
    temporary folder, with a warning.
    """
    note = ""
    why_folder = cache_trust.untrusted_folder(path.parent)
    if why_folder is None:
        why_file = cache_trust.verify(path)
        if why_file is None:
            return path, None, ""
        if os.path.lexists(path):
            note = (f"the cached native library {path} was not loaded: {why_file}; "
                    "building a new one")
        if _can_write(path.parent):
            return None, path, note
    else:
        note = (f"the native library cache {path.parent} is not trusted ({why_folder}); "
                "building into a private temporary folder instead")
    try:
        private = _private_temporary(path)
    except OSError as e:
        return None, None, note + (f"; the temporary folder is refused: {e}" if note else str(e))
    if cache_trust.verify(private) is None:
        return private, None, note
    return None, private, note


def _load_uncached() -> Tuple[Optional[ctypes.CDLL], str, str]:
    """``(library or None, why it is None, a warning about the cache or "")``."""
    if os.environ.get("BRAINX_NATIVE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None, "BRAINX_NATIVE=0 turns them off", ""
    found, target, note = _locate(library_path())
    if found is None:
        if target is None:
            return None, f"no folder to build them in: {note}", ""
        cxx = compiler()
        if cxx is None:
            return None, ("no C++ compiler was found (install one, e.g. `apt install g++`, "
                          "or set CXX)" + (f"; {note}" if note else "")), ""
        try:
            found = _build(cxx, target)
        except (OSError, RuntimeError, subprocess.SubprocessError) as e:
            return None, f"building them with {cxx} failed: {e}" + (f"; {note}" if note else ""), ""
        why = cache_trust.verify(found)        # the file just built, as it lies now
        if why:
            return None, f"the library just built, {found}, cannot be trusted: {why}", ""
    try:
        lib = ctypes.CDLL(str(found))
        for target_name, symbol in _SYMBOLS.items():
            jax.ffi.register_ffi_target(target_name, jax.ffi.pycapsule(getattr(lib, symbol)),
                                        platform="cpu")
    except (OSError, AttributeError) as e:
        return None, f"loading {found} failed: {e}", ""
    return lib, "", note


def load() -> Optional[ctypes.CDLL]:
    """The native kernels' library, built on first use and registered with XLA; ``None``: none.

    Thread-safe and done once per process. When the library cannot be had, warns
    once (a :class:`RuntimeWarning` that says why and what to do) and returns ``None``;
    when a cached library was refused (not trusted, or not the file its build recorded)
    and a new one built, warns once naming it.
    """
    if "lib" not in _STATE:
        with _LOCK:
            if "lib" not in _STATE:
                lib, why, note = _load_uncached()
                _STATE["why"] = why
                _STATE["lib"] = lib
                if note:
                    warnings.warn(f"brainx: {note}. See docs/event-driven.md.", RuntimeWarning,
                                  stacklevel=2)
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
