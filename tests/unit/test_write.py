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


# Anything that is not a regular file is written straight through, never
# replaced: renaming over /dev/null as root once replaced the machine's
# /dev/null with a regular file.


def _no_replacing(monkeypatch):
    """Make any attempt to create a temporary file or rename one fail loudly,
    so a test that writes to a device cannot harm the machine."""

    def refuse(*args, **kwargs):
        raise AssertionError("write_atomic tried to replace a path that is not a regular file")

    import tempfile

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    monkeypatch.setattr(os, "replace", refuse)
    monkeypatch.setattr(os, "rename", refuse)


def test_dev_null_is_written_through_and_stays_a_device(monkeypatch):
    import stat

    _no_replacing(monkeypatch)
    assert write_atomic(os.devnull, NEW) == os.devnull
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_fifo_is_written_through_and_its_reader_gets_the_report(tmp_path, monkeypatch):
    import stat
    import threading

    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    _no_replacing(monkeypatch)
    try:
        write_atomic(str(fifo), NEW)
    finally:
        reader.join(timeout=30)
        if reader.is_alive():  # nothing was written to the FIFO: release its reader
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert received == [NEW]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert os.listdir(tmp_path) == ["report.fifo"]


def test_a_symlink_stays_a_link_and_its_target_gets_the_report(existing):
    link = existing.parent / "latest.html"
    link.symlink_to(existing.name)
    assert write_atomic(str(link), NEW) == str(existing)
    assert link.is_symlink() and os.readlink(link) == existing.name
    assert existing.read_text() == NEW
    assert (existing.stat().st_mode & 0o777) == 0o640
    assert sorted(os.listdir(existing.parent)) == sorted([existing.name, link.name])


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "latest.json"
    link.symlink_to("reports.json")
    write_atomic(str(link), "{}")
    assert link.is_symlink() and (tmp_path / "reports.json").read_text() == "{}"
