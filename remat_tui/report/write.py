"""Provides safe file writes: atomic for files, straight through for the rest.

A regular file (or a path that does not exist yet) is written atomically: a
temporary file in the same folder, then a rename, so a reader never sees a
half-written report, and a write that fails part-way (a full disk, an I/O
error, Ctrl+C) leaves the old file as it was and removes the temporary file.

Anything else at the path (a device such as /dev/null, a FIFO, a socket,
/dev/stdout) is opened and written straight through, as a shell's `>` does.
Renaming over it would replace it: run as root, `-o /dev/null` once turned
the machine's /dev/null into a regular file. A symlink is followed, and the
file it points to is written, so the link stays a link.
"""

from __future__ import annotations

import errno
import os
import stat
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
    """Write `data` to `path`: atomically where `path` is a regular file or
    does not exist, straight through where it is anything else (a device, a
    FIFO); returns the absolute path written (a symlink's target)."""
    given = os.path.abspath(os.path.expanduser(path))
    # A symlink's target is what a user means to write; renaming over the link
    # would replace the link with a file.
    path = os.path.realpath(given)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None  # nothing there yet: the folder checks below say what is wrong
    except OSError as exc:
        raise RematError(f"cannot write {given}: {_why(exc, os.path.dirname(path))}.") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise RematError(f"cannot write {given}: it is a folder; give a file name.")
    if mode is not None and not stat.S_ISREG(mode):
        return _write_through(given, path, payload)
    return _write_replacing(given, path, payload, exists=mode is not None)


def _write_through(given: str, path: str, payload: bytes) -> str:
    """Write to a device, FIFO or socket as it is: never create, truncate
    by rename, or remove anything there."""
    try:
        with open(path, "wb") as out:
            out.write(payload)
            out.flush()
    except OSError as exc:
        raise RematError(f"cannot write {given}: {_why(exc, os.path.dirname(path))}.") from None
    return path


def _write_replacing(given: str, path: str, payload: bytes, exists: bool) -> str:
    """The atomic write of a regular file: a temporary file, then a rename."""
    folder = os.path.dirname(path)
    if not os.path.exists(folder):
        raise RematError(f"cannot write {given}: folder {folder} does not exist.")
    if not os.path.isdir(folder):
        raise RematError(f"cannot write {given}: {folder} is a file, not a folder.")
    if exists and not os.access(path, os.W_OK):
        raise RematError(f"cannot write {given}: the file is read-only.")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise RematError(f"cannot write {given}: {_why(exc, folder)}.") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        if exists:
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
            raise RematError(f"cannot write {given}: {_why(exc, folder)}.") from None
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
