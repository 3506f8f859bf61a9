"""write_atomic never loses data: a write that fails part-way leaves the old
file byte for byte and no temporary file; a folder it cannot write in gets
one clear RematError."""

import errno
import os

import pytest

from remat_tui.errors import RematError
from remat_tui.report.write import write_atomic

OLD = "old report\n" * 1000
NEW = "new report, much longer than the old one\n" * 5000


@pytest.fixture
def existing(tmp_path):
    path = tmp_path / "report.html"
    path.write_text(OLD)
    path.chmod(0o640)
    return path


def assert_untouched(path):
    assert path.read_text() == OLD
    assert (path.stat().st_mode & 0o777) == 0o640
    assert os.listdir(path.parent) == [path.name], "a temporary file was left behind"


class HalfWriter:
    """A file object that writes half of what it is given, then fails."""

    def __init__(self, real, exc):
        self.real, self.exc = real, exc

    def write(self, data):
        self.real.write(data[: len(data) // 2])
        self.real.flush()
        raise self.exc

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()


def half_writing_fdopen(monkeypatch, exc):
    real_fdopen = os.fdopen
    written = []

    def fdopen(fd, *args, **kwargs):
        real = real_fdopen(fd, *args, **kwargs)
        written.append(real.name)
        return HalfWriter(real, exc)

    monkeypatch.setattr(os, "fdopen", fdopen)
    return written


def test_disk_full_part_way_leaves_the_old_file(existing, monkeypatch):
    half_writing_fdopen(monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(RematError, match=r"cannot write .*report\.html: No space left on device\."):
        write_atomic(str(existing), NEW)
    assert_untouched(existing)


def test_interrupt_part_way_leaves_the_old_file(existing, monkeypatch):
    half_writing_fdopen(monkeypatch, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):  # not turned into a user error
        write_atomic(str(existing), NEW)
    assert_untouched(existing)


def test_fsync_failure_after_the_data_leaves_the_old_file(existing, monkeypatch):
    synced = []

    def fsync(fd):
        synced.append(os.fstat(fd).st_size)  # the whole new report was written...
        raise OSError(errno.EIO, "Input/output error")  # ...but never reached the disk

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(RematError, match="Input/output error"):
        write_atomic(str(existing), NEW)
    assert synced == [len(NEW)]
    assert_untouched(existing)


def test_an_oserror_without_strerror_still_says_something(existing, monkeypatch):
    def fsync(fd):
        raise OSError("quota exceeded")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(RematError, match=r"quota exceeded\.$"):
        write_atomic(str(existing), NEW)
    assert_untouched(existing)


def test_success_replaces_keeping_the_mode(existing):
    assert write_atomic(str(existing), NEW) == str(existing)
    assert existing.read_text() == NEW
    assert (existing.stat().st_mode & 0o777) == 0o640
    assert os.listdir(existing.parent) == [existing.name]


def test_missing_folder(tmp_path):
    with pytest.raises(RematError, match=r"folder .*nope does not exist\."):
        write_atomic(str(tmp_path / "nope" / "r.json"), "{}")
    assert os.listdir(tmp_path) == []


def test_folder_is_a_file(tmp_path):
    (tmp_path / "notes").write_text("x")
    with pytest.raises(RematError, match=r"notes is a file, not a folder\."):
        write_atomic(str(tmp_path / "notes" / "r.json"), "{}")


def test_path_is_a_folder(tmp_path):
    with pytest.raises(RematError, match="it is a folder; give a file name"):
        write_atomic(str(tmp_path), "{}")


@pytest.mark.parametrize(
    "err,message",
    [
        (errno.EACCES, "no permission to write in folder"),
        (errno.EROFS, "is on a read-only file system"),
    ],
)
def test_folder_refuses_new_files(tmp_path, monkeypatch, err, message):
    import tempfile

    def mkstemp(*args, **kwargs):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    with pytest.raises(RematError, match=message):
        write_atomic(str(tmp_path / "r.json"), "{}")
