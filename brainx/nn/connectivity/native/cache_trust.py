"""Whether a cached native library may be loaded: who can write it, and what the build recorded.

Loading a shared library runs its code in this process, and mapping a file that is
shorter than its headers say kills the process with SIGBUS. So :mod:`build` loads a
cached library only when both of these hold, and builds a new one otherwise:

* **Only this user (or root) can have put it there.** The file and every folder
  above it are owned by this user or by root, and no other user can write them
  (no group or world write bit; a world-writable folder with the sticky bit, owned
  by root, such as ``/tmp``, is allowed: others cannot rename or delete what is in
  it). Links in the path are followed and the folders they lead to checked too.
* **It is the file the build wrote.** At build time a record is written beside
  the library (``<name>.json``: its size and SHA-256); a library is loaded only
  when its size and hash match that record. A truncated, half-copied or edited
  file (or one with no record) is never handed to the dynamic loader.

Examples
--------
>>> import pathlib, tempfile
>>> from brainx.nn.connectivity.native import cache_trust
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> lib = folder / "libdemo.so"
>>> _ = lib.write_bytes(b"not really a library")
>>> cache_trust.verify(lib)                 # no record yet
'it has no build record (libdemo.so.json)'
>>> cache_trust.write_record(lib)
>>> cache_trust.verify(lib) is None
True
>>> _ = lib.write_bytes(b"not really")      # truncated
>>> cache_trust.verify(lib)
'its size is 10 bytes, the build recorded 20'
>>> import shutil; shutil.rmtree(folder)
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import stat
from typing import Optional

__all__ = ["untrusted_folder", "verify", "write_record", "record_path", "make_folders"]

_RECORD_LIMIT = 4096            # bytes: a record is two fields


def _owner_ok(info: os.stat_result) -> bool:
    if not hasattr(os, "geteuid"):              # no owners to check (Windows)
        return True
    return info.st_uid in (os.geteuid(), 0)


def _describe(path: pathlib.Path, info: os.stat_result) -> Optional[str]:
    """Why ``path`` (already ``lstat``-ed) lets another user change what is below it."""
    if not _owner_ok(info):
        return f"{path} is owned by another user (uid {info.st_uid})"
    if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX and info.st_uid == 0:
        return None                              # /tmp: others cannot replace our entries
    if info.st_mode & 0o022:
        return f"{path} can be written by other users (mode {stat.filemode(info.st_mode)})"
    return None


def _chain(path: pathlib.Path) -> Optional[str]:
    """The first folder of ``path`` and its ancestors (as written) that another user can write."""
    for folder in (path, *path.parents):
        try:
            info = os.lstat(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue                             # made later, by us (or never: the build says)
        if stat.S_ISLNK(info.st_mode):           # the link itself: who may replace it is
            if not _owner_ok(info):              # its folder's business, checked next
                return f"{folder} is a link owned by another user (uid {info.st_uid})"
            continue
        why = _describe(folder, info)
        if why:
            return why
    return None


def untrusted_folder(folder: pathlib.Path) -> Optional[str]:
    """Why a library in ``folder`` could have been put there by another user; ``None``: it
    could not (the folders that do not exist yet are not checked: the build makes them)."""
    folder = pathlib.Path(os.path.abspath(folder))
    return _chain(folder) or _chain(pathlib.Path(os.path.realpath(folder)))


def record_path(library: pathlib.Path) -> pathlib.Path:
    """Where the build record of ``library`` lives: beside it, ``<name>.json``."""
    return library.with_name(library.name + ".json")


def _digest(path: pathlib.Path) -> tuple:
    sha = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
            size += len(block)
    return size, sha.hexdigest()


def write_record(library: pathlib.Path, record: Optional[pathlib.Path] = None) -> None:
    """Write ``library``'s size and SHA-256 to ``record`` (default :func:`record_path`),
    through a temporary file renamed into place."""
    record = record_path(library) if record is None else record
    size, sha = _digest(library)
    tmp = record.with_name(f".{record.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"size": size, "sha256": sha}))
    os.chmod(tmp, 0o644)
    os.replace(tmp, record)


def verify(library: pathlib.Path) -> Optional[str]:
    """Why ``library`` is not the file its build recorded (``None``: it is).

    Checks that the library and its record are plain files that only this user or root
    can write, then the library's size, then its SHA-256.
    """
    record = record_path(library)
    for path in (library, record):
        try:
            info = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return f"it has no build record ({record.name})" if path == record else \
                "it does not exist"
        if not stat.S_ISREG(info.st_mode):
            return f"{path} is not a plain file"
        why = _describe(path, info)
        if why:
            return why
    try:
        with open(record, "rb") as f:
            fields = json.loads(f.read(_RECORD_LIMIT).decode())
        size, sha = int(fields["size"]), str(fields["sha256"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"its build record {record} cannot be read ({type(e).__name__})"
    actual = os.stat(library).st_size
    if actual != size:
        return f"its size is {actual} bytes, the build recorded {size}"
    if _digest(library)[1] != sha:
        return "its SHA-256 differs from the one the build recorded"
    return None


def make_folders(folder: pathlib.Path) -> None:
    """Make ``folder`` and its missing parents, writable by this user only (mode 0755 whatever
    the umask: a group-writable cache folder would not be trusted next time)."""
    missing = []
    for path in (folder, *folder.parents):
        if os.path.lexists(path):
            break
        missing.append(path)
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o755)
        except FileExistsError:                  # another process made it meanwhile
            continue
        os.chmod(path, 0o755)
