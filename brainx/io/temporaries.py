"""Atomic writes beside the target, with temporary files that a later save can clean up.

:func:`atomic_file` gives a file to write ``path``'s new contents to: a
temporary file in the same folder, renamed over ``path`` once it is complete
and flushed to disk. Readers see the old file or the new one, never half of one.

A save killed in the middle (``kill -9``, a crash, a lost node) cannot remove
its temporary file, so every temporary is named recognisably,
``.<file>.<host>-<pid>.<random>.brainx-save.tmp``, and is locked (``flock``) by
its writer while it is written. Each save first removes, in its folder, the
temporaries no save is writing:

==============================  =============================================
temporary                       removed by the next save to its folder when
==============================  =============================================
written on this host            its process is gone and no one holds its lock
written on another host         no one holds its lock and it is over 60 s old
(shared folder)                 (another host's process cannot be looked up)
==============================  =============================================

Example
-------
>>> import os, tempfile
>>> from brainx.io.temporaries import atomic_file
>>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
>>> with atomic_file(path) as f:
...     _ = f.write(b"data")
>>> open(path, "rb").read(), os.listdir(os.path.dirname(path))
(b'data', ['x.bin'])
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import tempfile
import time
from typing import BinaryIO, Iterator, List

try:
    import fcntl
except ImportError:  # Windows: no flock; only this host's dead processes are recognised
    fcntl = None

__all__ = ["atomic_file", "remove_stale", "SUFFIX", "OTHER_HOST_AGE_S"]

SUFFIX = ".brainx-save.tmp"
OTHER_HOST_AGE_S = 60.0
_NAME = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9_-]*)-(?P<pid>\d+)\.[A-Za-z0-9_]+"
                   + re.escape(SUFFIX) + "$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:64]


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)            # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:        # another user's process
        return True
    return True


def _locked(fd: int) -> bool:
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _stale(full: str, host: str, pid: int) -> bool:
    ours = host == _host()
    if ours and _running(pid):
        return False
    if not ours and (fcntl is None or os.name == "nt"):
        return False
    try:
        fd = os.open(full, os.O_RDONLY)
    except OSError:
        return False
    try:
        if _locked(fd):
            return False
        # another host's writer may not have taken its lock yet, a moment after creating it
        return ours or time.time() - os.fstat(fd).st_mtime > OTHER_HOST_AGE_S
    finally:
        os.close(fd)


def remove_stale(folder: str) -> List[str]:
    """Remove the temporaries of killed saves in ``folder``; return their names."""
    if os.name == "nt":  # os.kill(pid, 0) would end the process there
        return []
    removed = []
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            match = _NAME.match(name)
            if match and _stale(os.path.join(folder, name), match["host"], int(match["pid"])):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))
                    removed.append(name)
    return removed


@contextlib.contextmanager
def atomic_file(path: str) -> Iterator[BinaryIO]:
    """A file to write ``path``'s new contents to; renamed over ``path`` when the block ends.

    On an exception the temporary file is removed and ``path`` is left as it was.
    """
    folder = os.path.dirname(os.path.abspath(path))
    remove_stale(folder)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.{_host()}-{os.getpid()}.",
                               suffix=SUFFIX, dir=folder)
    f = os.fdopen(fd, "wb")
    try:
        with f:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)  # held until closed, after the rename
            yield f
            f.flush()
            os.fsync(f.fileno())
            os.chmod(tmp, os.stat(path).st_mode if os.path.exists(path) else 0o644)
            os.replace(tmp, path)  # atomic: readers see the old file or the new one
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_folder(folder)


def _sync_folder(folder: str) -> None:
    """Flush the rename itself to disk (where the system allows opening a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
