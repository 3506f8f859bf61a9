"""Provides atomic file writes: a temporary file in the same folder, then rename.

A reader never sees a half-written report, and an existing file is replaced
only once the new one is complete and on disk: a write that fails part-way
(a full disk, an I/O error, Ctrl+C) leaves the old file as it was and removes
the temporary file.
"""

from __future__ import annotations

import errno
import os
import tempfile

from remat_tui.errors import RematError


def _why(exc: OSError, folder: str) -> str:
    """The reason a write failed, in words a user can act on."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to write in folder {folder}"
    if exc.errno == errno.EROFS:
        return f"folder {folder} is on a read-only file system"
    return exc.strerror or str(exc)


def write_atomic(path: str, data: str | bytes) -> str:
    """Write `data` to `path` atomically; returns the absolute path written."""
    path = os.path.abspath(os.path.expanduser(path))
    folder = os.path.dirname(path)
    if not os.path.exists(folder):
        raise RematError(f"cannot write {path}: folder {folder} does not exist.")
    if not os.path.isdir(folder):
        raise RematError(f"cannot write {path}: {folder} is a file, not a folder.")
    if os.path.isdir(path):
        raise RematError(f"cannot write {path}: it is a folder; give a file name.")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise RematError(f"cannot write {path}: the file is read-only.")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise RematError(f"cannot write {path}: {_why(exc, folder)}.") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise RematError(f"cannot write {path}: {_why(exc, folder)}.") from None
        raise
    _sync_folder(folder)
    return path


def _sync_folder(folder: str) -> None:
    """Make the rename itself durable (best effort: not every system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
