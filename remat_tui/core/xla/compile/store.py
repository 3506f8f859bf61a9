"""Provides the store of compile results on disk (Contract 13): what
remat-tui read from XLA for one program (a `Compiled`'s JSON: the peak, where
it goes, the costs), one small JSON file per program key
(`xla.compile.service`'s `Program`), so that a search run again, tomorrow or
under another budget, is answered without compiling.

Where: `$XDG_CACHE_HOME/remat-tui/compiles` where XDG_CACHE_HOME is set, else
`~/.cache/remat-tui/compiles`. Its size is capped (`REMAT_TUI_CACHE_SIZE`,
e.g. `1GiB`; default 256 MiB): past the cap the least recently used entries
go, by file modification time, which a hit refreshes. Executables are never
kept, only numbers: an entry is 1-40 KiB, the breakdown of the peak included.

Writes are atomic (a temporary file renamed over the entry), so processes
sharing the folder (the CLI, the app's compile process, worker processes)
never read half an entry; an entry that cannot be read is a miss, and is
removed.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path

from remat_tui.core.units import count, human_bytes, parse_size
from remat_tui.errors import RematError

FORMAT = 2  # an entry's layout; another is a miss (2: with the collectives)
DEFAULT_LIMIT = 256 * 2**20
LIMIT_ENV = "REMAT_TUI_CACHE_SIZE"
EVICT_TO = 0.9  # past the limit, the oldest entries go until this share of it is left
SUFFIX = ".json"


def cache_folder() -> Path:
    """remat-tui's folder in the user's cache: `$XDG_CACHE_HOME/remat-tui`,
    else `~/.cache/remat-tui`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "remat-tui"


def size_limit() -> int:
    """The store's cap in bytes: REMAT_TUI_CACHE_SIZE, else 256 MiB."""
    text = os.environ.get(LIMIT_ENV)
    if not text:
        return DEFAULT_LIMIT
    try:
        return parse_size(text)
    except RematError as exc:
        raise RematError(f"{LIMIT_ENV}={text!r}: {exc.message}") from None


class Store:
    """Compile results by program key, in `folder`, at most `limit` bytes."""

    def __init__(self, folder: Path | None = None, limit: int | None = None):
        self.folder = Path(folder) if folder is not None else cache_folder() / "compiles"
        self.limit = size_limit() if limit is None else limit
        self._lock = threading.Lock()  # one eviction at a time in this process

    def get(self, key: str) -> dict | None:
        """The entry stored under `key`, or None; a hit is marked recently used."""
        path = self._path(key)
        try:
            with open(path, encoding="utf-8") as f:
                entry = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):  # torn by something other than us: a miss
            _remove(path)
            return None
        if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key:
            return None
        try:
            os.utime(path)
        except OSError:
            pass
        return entry

    def put(self, key: str, entry: dict) -> None:
        """Store `entry` (JSON-able) under `key`, then keep within the limit.
        A folder that cannot be written is no error: nothing is stored."""
        data = json.dumps({**entry, "format": FORMAT, "key": key})
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=".entry-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(data)
            os.replace(temporary, self._path(key))
        except OSError:
            return
        self._keep_within_limit()

    def entries(self) -> list[os.DirEntry]:
        try:
            with os.scandir(self.folder) as it:
                return [e for e in it if e.name.endswith(SUFFIX) and e.is_file()]
        except FileNotFoundError:
            return []

    def summary(self) -> dict:
        """Where it is, how many entries, their bytes, the limit, the oldest
        and newest use."""
        stats = [e.stat() for e in self.entries()]
        times = [s.st_mtime for s in stats]
        return {
            "folder": str(self.folder),
            "entries": len(stats),
            "bytes": sum(s.st_size for s in stats),
            "limit_bytes": self.limit,
            "oldest": _when(min(times)) if times else None,
            "newest": _when(max(times)) if times else None,
        }

    def clear(self) -> int:
        """Remove every entry; returns how many went."""
        gone = 0
        for e in self.entries():
            gone += _remove(Path(e.path))
        return gone

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}{SUFFIX}"

    def _keep_within_limit(self) -> None:
        with self._lock:
            listed = []
            for e in self.entries():
                try:
                    s = e.stat()
                except OSError:
                    continue
                listed.append((s.st_mtime, s.st_size, Path(e.path)))
            total = sum(size for _, size, _ in listed)
            if total <= self.limit:
                return
            for _, size, path in sorted(listed):
                if total <= self.limit * EVICT_TO:
                    break
                if _remove(path):
                    total -= size


def describe(summary: dict) -> str:
    """The summary in words, for `remat-tui cache`."""
    lines = [
        f"compile cache: {summary['folder']}",
        f"  {count(summary['entries'], 'program')}, {human_bytes(summary['bytes'])} "
        f"of {human_bytes(summary['limit_bytes'])} ({LIMIT_ENV} sets the limit)",
    ]
    if summary["entries"]:
        lines.append(f"  last used {summary['newest']}; least recently {summary['oldest']}")
    return "\n".join(lines) + "\n"


def _when(mtime: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(mtime))


def _remove(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except OSError:
        return False
