"""A crash's torn last WAL record against a WAL cut by damage (``storage.wal_tail``).

Each store here is written by a real process that then dies without closing it
(``os._exit``, what a kill leaves: every completed write in the file, nothing synced at
exit): five synced writes, each answered only after its sync, and one more written
unsynced, as a write in flight when the process dies. Cutting the WAL inside that last
record is what a kill in the middle of RocksDB's write leaves; cutting into a synced one
is damage.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.errors import CorruptData
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.wal_tail import MARK_NAME, SyncedMark, crash_tail, wal_end
from tests.conftest import SmallDisk

VALUE = 50_000  # each record spans blocks: FIRST, MIDDLE and LAST fragments
WRITER = f"""
import os, sys
from pathlib import Path
from compactlog.storage.rocks import Batch, RocksDB
db = RocksDB(Path(sys.argv[1]))
for i in range(5):
    batch = Batch()
    batch.put(b"k%d" % i, bytes([i]) * {VALUE})
    db.write(batch, sync=True)
if sys.argv[2] == "in-flight":
    batch = Batch()
    batch.put(b"k5", b"x" * {VALUE})
    db.write(batch)
os._exit(0)
"""
SYNCED = [b"k%d" % i for i in range(5)]


def crashed_store(path: Path, in_flight: bool = True) -> Path:
    """A store as its process left it when it died (see the module docstring)."""
    mode = "in-flight" if in_flight else "synced"
    subprocess.run([sys.executable, "-c", WRITER, str(path), mode], check=True, timeout=60)
    return path


def newest_wal(store: Path) -> Path:
    return max(store.glob("*.log"), key=lambda p: p.name)


def cut(store: Path, size_less: int) -> None:
    wal = newest_wal(store)
    with open(wal, "r+b") as fh:
        fh.truncate(wal.stat().st_size - size_less)


def keys_of(store: Path) -> list[bytes]:
    db = RocksDB(store)
    try:
        return sorted(k for k, _ in db.scan(b"", b"\xff"))
    finally:
        db.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return crashed_store(tmp_path_factory.mktemp("wal") / "store")


def copy_of(template: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "store"))


def test_the_whole_wal_of_a_crash_ends_whole_and_the_mark_covers_the_synced(
    template: Path,
) -> None:
    assert wal_end(newest_wal(template).read_bytes()).torn == 0
    assert SyncedMark.read(template) == 5  # the sequence of the fifth synced write


def last_record_size(template: Path) -> int:
    data = newest_wal(template).read_bytes()
    return wal_end(data[:-1]).torn + 1


# What is left of the last record: most of it (its LAST fragment cut), a MIDDLE's worth,
# its FIRST's header and sequence (read there), its header and a byte (the sequence told
# from the record before), part of its header: each a write the process was making.
@pytest.mark.parametrize("left", ["all but 1", 30_000, 1_000, 15, 8, 5])
def test_a_crashs_torn_last_record_is_dropped_and_the_store_opens(
    template: Path, tmp_path: Path, left: int | str, caplog: pytest.LogCaptureFixture
) -> None:
    size = last_record_size(template)
    store = copy_of(template, tmp_path)
    cut(store, 1 if left == "all but 1" else size - int(left))
    with caplog.at_level(logging.WARNING, logger="compactlog.storage.rocks"):
        assert keys_of(store) == SYNCED  # every acknowledged write, nothing torn
    (line,) = [r.getMessage() for r in caplog.records if "cut short by a crash" in r.message]
    assert newest_wal(template).name in line and "sequence 6" in line
    assert keys_of(store) == SYNCED  # and again, its WAL now whole


@pytest.mark.parametrize("into", [10, 30_000, VALUE + 100])
def test_a_cut_into_an_acknowledged_record_still_refuses_the_start(
    template: Path, tmp_path: Path, into: int
) -> None:
    store = copy_of(template, tmp_path)
    cut(store, last_record_size(template) + into)
    with pytest.raises(CorruptData, match="is damaged and was not opened"):
        RocksDB(store)


def test_a_cut_into_the_last_record_when_it_was_synced_refuses_the_start(
    tmp_path: Path,
) -> None:
    store = crashed_store(tmp_path / "store", in_flight=False)
    cut(store, 1)  # the fifth synced write: damage, not a crash
    with pytest.raises(CorruptData, match="is damaged and was not opened"):
        RocksDB(store)


def test_an_older_wal_cut_short_is_damage_whatever_the_newest_holds(
    template: Path, tmp_path: Path
) -> None:
    store = copy_of(template, tmp_path)
    cut(store, 1000)
    assert crash_tail(store) is not None
    shutil.copy(newest_wal(template), store / "999999.log")  # a whole WAL after it
    assert crash_tail(store) is None


def test_a_store_without_a_mark_takes_a_torn_tail_one_with_a_bad_mark_does_not(
    template: Path, tmp_path: Path
) -> None:
    store = copy_of(template, tmp_path)
    cut(store, 1000)
    (store / MARK_NAME).unlink()  # a store made before the mark
    assert keys_of(store) == SYNCED
    store = copy_of(template, tmp_path / "bad")
    cut(store, 1000)
    mark = store / MARK_NAME
    mark.write_bytes(mark.read_bytes()[:-1] + b"\x00")  # its CRC fails
    with pytest.raises(CorruptData):
        RocksDB(store)


def test_point_in_time_recovery_is_left_as_the_operator_chose(
    template: Path, tmp_path: Path
) -> None:
    store = copy_of(template, tmp_path)
    cut(store, last_record_size(template) + 10)  # damage, which point-in-time takes
    db = RocksDB(store, "point-in-time")
    assert len(list(db.scan(b"", b"\xff"))) < 5
    db.close()


def test_a_full_disk_fails_the_marks_write_and_no_acknowledged_one(
    small_disk: Callable[[int], SmallDisk], caplog: pytest.LogCaptureFixture
) -> None:
    """ENOSPC at the mark's first write (the WAL's append took the last page): the synced
    writes are stored and answered, the mark is left as it was (empty: nothing partial),
    one line says why, and the mark is written once there is room again."""
    disk = small_disk(8 << 20)
    store = disk.path / "store"
    db = RocksDB(store)
    with open(disk.filler, "ab", buffering=0) as fh:
        while os.statvfs(disk.path).f_bavail > 1:
            fh.write(b"\0" * 4096)
    with caplog.at_level(logging.WARNING, logger="compactlog.storage.rocks"):
        for i in range(3):
            batch = Batch()
            batch.put(b"k%d" % i, b"v")
            db.write(batch, sync=True)  # stored and answered
    failed = [r.getMessage() for r in caplog.records if "synced mark not written" in r.message]
    assert len(failed) == 1 and "No space left on device" in failed[0]  # once, not a sync
    assert (store / MARK_NAME).stat().st_size == 0 and SyncedMark.read(store) == 0
    disk.free()
    batch = Batch()
    batch.put(b"k3", b"v")
    db.write(batch, sync=True)
    assert SyncedMark.read(store) == 4
    db.close()
    assert keys_of(store) == [b"k0", b"k1", b"k2", b"k3"]


def test_a_mark_that_cannot_be_opened_leaves_the_store_serving_and_tells_no_crash(
    template: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The mark's open failing (here a directory in its place: EISDIR, as EACCES or EMFILE
    would): the store opens and writes, one line says why, and a torn tail found later
    is not taken for a crash's, since nothing says what was acknowledged."""
    store = copy_of(template, tmp_path)
    (store / MARK_NAME).unlink()
    (store / MARK_NAME).mkdir()
    with caplog.at_level(logging.WARNING, logger="compactlog.storage.rocks"):
        db = RocksDB(store)
    assert any("synced mark not opened" in r.message for r in caplog.records)
    batch = Batch()
    batch.put(b"k9", b"v")
    db.write(batch, sync=True)
    db.close()
    assert keys_of(store) == [*SYNCED, b"k5", b"k9"]  # k5 whole: the template is not cut
    crashed = crashed_store(tmp_path / "again")
    (crashed / MARK_NAME).unlink()
    (crashed / MARK_NAME).mkdir()
    cut(crashed, 1000)
    with pytest.raises(CorruptData):
        RocksDB(crashed)


def test_the_file_limit_at_the_marks_open_is_logged_and_no_mark_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """EMFILE, caused: the process at its open-file limit when the store opens its mark
    (``RocksDB._open_mark``, which the constructor calls; the store serving on without a
    mark is the directory-in-its-place test above). One line names the cause, no mark
    comes back, and nothing the store holds is touched."""
    db = RocksDB(tmp_path / "store")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held: list[int] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 16, hard))
    try:
        with contextlib.suppress(OSError):
            while True:  # every descriptor the lowered limit leaves
                held.append(os.dup(0))
        with caplog.at_level(logging.WARNING, logger="compactlog.storage.rocks"):
            mark = db._open_mark()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert mark is None
    (line,) = [r.getMessage() for r in caplog.records if "synced mark not opened" in r.message]
    assert "Too many open files" in line
    batch = Batch()
    batch.put(b"k", b"v")
    db.write(batch, sync=True)  # the store (and the mark it opened before) go on
    db.close()
    assert keys_of(tmp_path / "store") == [b"k"] and SyncedMark.read(tmp_path / "store") == 1
