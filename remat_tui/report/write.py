"""Provides atomic file writes: a temporary file in the same folder, then rename.

A reader never sees a half-written report, and an existing file is replaced
only once the new one is complete.
"""

from __future__ import annotations

import os
import tempfile

from remat_tui.errors import RematError


def write_atomic(path: str, data: str | bytes) -> str:
    """Write `data` to `path` atomically; returns the absolute path written."""
    path = os.path.abspath(os.path.expanduser(path))
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise RematError(f"cannot write {path}: folder {folder} does not exist.")
    if os.path.isdir(path):
        raise RematError(f"cannot write {path}: it is a folder; give a file name.")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise RematError(f"cannot write {path}: {exc.strerror}.") from None
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
            raise RematError(f"cannot write {path}: {exc.strerror}.") from None
        raise
    return path
